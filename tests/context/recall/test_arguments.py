"""Reclaimed call arguments in the history index: found by their words at once, forgotten when restored,
found once (as the reclaimed original) after a summary offloads them, and rebuilt the same."""

from __future__ import annotations

import json

from .conftest import all_rows


def write_round(c, i: int, word: str) -> None:
    content = f"file {i} about the {word} module\n" + "body line\n" * 300
    c.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_w{i}",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": f"src/w{i}.py", "content": content}),
                    },
                }
            ],
        }
    )
    c.add_tool_result(f"call_w{i}", f"wrote src/w{i}.py")


def writing_session(c, words=("quokka", "narwhal", "axolotl", "pangolin")):
    c.set_system_message_content("You are the test agent.")
    c.add_user_message("write the modules")
    for i, word in enumerate(words):
        write_round(c, i, word)
    c.add_agent_message({"role": "assistant", "content": "written"})
    return c


def test_reclaimed_arguments_are_found_by_their_words_and_restorable_by_their_id(store):
    c = writing_session(store.new())
    result = c.reclaim_tool_results(keep_max=1)
    assert result.arguments_count == 3 and c.recall_warnings == []
    hits = store.recall_index.search("narwhal")
    assert [(h.source, h.role, h.tool, h.tool_call_id) for h in hits] == [
        ("reclaimed", "tool_call", "write_file", "call_w1:arguments")
    ]
    entry = store.recall_index.entry(hits[0].id)
    assert entry.text == c.reclaimed_original("call_w1:arguments") and entry.speaker == "AI tool call"
    assert entry.arguments == ""  # the text is the arguments themselves
    assert json.loads(entry.text)["content"].startswith("file 1 about the narwhal module")
    assert store.recall_index.search("pangolin") == []  # the newest call's arguments are still in the context
    c.restore_tool_result(hits[0].tool_call_id)  # what the recall screen's Ctrl+R restores
    assert store.recall_index.search("narwhal") == []
    assert "narwhal" in c.messages[4].raw["tool_calls"][0]["function"]["arguments"]


def test_arguments_reclaimed_then_summarised_are_one_match_and_rebuilt_the_same(store):
    c = writing_session(store.new())
    c.reclaim_tool_results(keep_max=0)
    c.add_user_message("next")
    c.add_agent_message({"role": "assistant", "content": "ok"})
    assert c.compact(lambda messages: "modules written", keep_recent=2).compacted
    rows = [r for r in all_rows(store.recall_index) if "quokka" in r[11]]
    assert sorted((r[1], r[4], r[9]) for r in rows) == [
        ("offload", "tool_call", "write_file, id call_w0, reclaimed earlier"),
        ("reclaimed", "tool_call", ""),
    ]
    assert rows[0][11] == rows[1][11]  # the log holds the original arguments, not the placeholder
    hits = store.recall_index.search("quokka")
    assert [(h.source, h.tool_call_id) for h in hits] == [("reclaimed", "call_w0:arguments")]
    store.save(c)
    before = all_rows(store.recall_index)
    store.recall_index.rebuild()
    assert all_rows(store.recall_index) == before
    c.clear()  # the reclaimed original is gone: the log's copy is the match now
    assert [(h.source, h.tool_call_id) for h in store.recall_index.search("quokka")] == [("offload", "call_w0")]
