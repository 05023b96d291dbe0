"""Tier 1 reclaims the large arguments of old calls (write_file content, long commands) as well as results:
valid JSON placeholders, the originals archived, restorable, saved with the session, offloaded."""

from __future__ import annotations

import json

import pytest

from xun.compact.breakdown import CALL_PLACEHOLDERS, TOOL_CALLS, context_breakdown, first_tool_result, reclaim_preview
from xun.context.conversation import Conversation
from xun.context.offload import read_offload_log
from xun.context.reclaimed import ARGUMENTS, ARGUMENTS_RECLAIM_AT

from .builders import assistant_call, fresh_length

CONTENT = 3_000


def content_of(i: int) -> str:
    return f"# step {i}\n" + "".join(f"line {i}.{n} of the file\n" for n in range(200))[:CONTENT]


def write_turn(rounds: int = 80) -> Conversation:
    """One prompt, then `rounds` write_file calls of about 3,000 characters each with their short results."""
    c = Conversation()
    c.set_system_message_content("You write files.")
    c.add_user_message(f"write the files step0 to step{rounds - 1}")
    for i in range(rounds):
        assistant_call(c, (f"call_{i}", "write_file", {"path": f"out/step{i}.txt", "content": content_of(i)}))
        c.add_tool_result(f"call_{i}", f"wrote {len(content_of(i)):,} characters to out/step{i}.txt")
    return c


def arguments_of(c: Conversation, call_id: str) -> str:
    for m in c.messages:
        for call in getattr(m, "raw", {}).get("tool_calls") or ():
            if call["id"] == call_id:
                return call["function"]["arguments"]
    raise KeyError(call_id)


def test_old_rounds_arguments_become_valid_json_placeholders_and_the_originals_are_kept():
    c = write_turn(80)
    originals = {f"call_{i}": arguments_of(c, f"call_{i}") for i in range(80)}
    before = c.estimated_message_length()
    result = c.reclaim_tool_results(keep_max=4)
    assert result.arguments_count == 76 and result.reclaimed_count == 76  # the short results stay
    assert result.reclaimed_ids == tuple(f"call_{i}:arguments" for i in range(76))
    for i in range(76):
        shown = arguments_of(c, f"call_{i}")
        parsed = json.loads(shown)  # valid JSON: servers reject anything else
        assert parsed["path"] == f"out/step{i}.txt"  # short fields word for word: the model still sees what it did
        assert parsed["content"].startswith(f"# step {i}\n")
        assert parsed["content"].endswith(f"[Compacted, ID: call_{i}:arguments. {len(content_of(i)):,} chars]")
        assert len(shown) < 200
        assert c.reclaimed_original(f"call_{i}:arguments") == originals[f"call_{i}"]
        record = c.reclaimed_results[f"call_{i}:arguments"]
        assert (record.kind, record.call_id, record.tool_name, record.chars) == (
            ARGUMENTS,
            f"call_{i}",
            "write_file",
            len(originals[f"call_{i}"]),
        )
    for i in range(76, 80):  # the newest rounds, the round at work among them, are untouched
        assert arguments_of(c, f"call_{i}") == originals[f"call_{i}"]
    after = c.estimated_message_length()
    assert after == fresh_length(c)
    saved = sum(len(originals[f"call_{i}"]) - len(arguments_of(c, f"call_{i}")) for i in range(76))
    assert before - after == saved > 76 * 2_800
    assert result.length_before == before and result.length_after == after
    assert c.estimated_tokens() < 0.12 * before * c.tokens_per_char + 1_000


def test_the_round_at_work_keeps_its_arguments_even_keeping_no_result_and_loses_them_once_done():
    c = write_turn(3)
    c.reclaim_tool_results(keep_max=0)
    assert json.loads(arguments_of(c, "call_2"))["content"] == content_of(2)  # the round at work
    assert "[Compacted" in arguments_of(c, "call_1")
    assistant_call(c, ("call_3", "write_file", {"path": "out/step3.txt", "content": content_of(3)}))
    c.add_tool_result("call_3", "wrote it")
    c.reclaim_tool_results(keep_max=0)  # call_2's round is done now: the next reclaim takes its arguments
    assert "[Compacted" in arguments_of(c, "call_2") and json.loads(arguments_of(c, "call_3"))["content"] == content_of(
        3
    )
    c.add_agent_message({"role": "assistant", "content": "all written"})  # the turn ends: no round at work
    c.reclaim_tool_results(keep_max=0)
    assert "[Compacted" in arguments_of(c, "call_3")
    assert c.estimated_message_length() == fresh_length(c)


def test_short_arguments_and_parallel_calls():
    c = Conversation()
    c.add_user_message("go")
    long_command = "python3 - <<'EOF'\n" + "print('x')\n" * 80 + "EOF"
    assistant_call(
        c,
        ("a", "read_file", {"path": "src/a.py"}),
        ("b", "run_command", {"command": long_command}),
        ("c", "write_file", {"path": "b.txt", "content": "y" * (ARGUMENTS_RECLAIM_AT - 40)}),
    )
    for call_id in "abc":
        c.add_tool_result(call_id, "ok")
    assistant_call(c, ("d", "read_file", {"path": "src/d.py"}))
    c.add_tool_result("d", "ok")
    result = c.reclaim_tool_results(keep_max=1)
    assert result.reclaimed_ids == ("b:arguments",)
    assert json.loads(arguments_of(c, "a")) == {"path": "src/a.py"}
    command = json.loads(arguments_of(c, "b"))["command"]
    assert command.startswith("python3 - <<'EOF'\nprint('x')") and "[Compacted, ID: b:arguments." in command
    assert json.loads(arguments_of(c, "c"))["content"] == "y" * (ARGUMENTS_RECLAIM_AT - 40)  # under the threshold


def test_arguments_that_are_not_an_object_still_become_valid_json():
    c = Conversation()
    c.add_user_message("go")
    c.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "odd", "arguments": "not json " * 100}}
            ],
        }
    )
    c.add_tool_result("x", "[Error] the arguments are not JSON")
    c.add_agent_message({"role": "assistant", "content": "done"})
    c.reclaim_tool_results(keep_max=0)
    assert json.loads(arguments_of(c, "x")) == {"arguments": "[Compacted, ID: x:arguments. 900 chars]"}
    assert c.reclaimed_original("x:arguments") == "not json " * 100


def test_restore_puts_the_arguments_back_and_they_stay():
    c = write_turn(10)
    original = arguments_of(c, "call_3")
    c.reclaim_tool_results(keep_max=2)
    reclaimed = c.estimated_message_length()
    assert "call_3:arguments" in c.reclaimed_in_context()
    c.restore_tool_result("call_3:arguments")
    assert arguments_of(c, "call_3") == original
    assert (
        c.estimated_message_length()
        == fresh_length(c)
        == reclaimed
        + len(original)
        - len(
            json.dumps(
                {
                    "path": "out/step3.txt",
                    "content": content_of(3)[:40] + f"…[Compacted, ID: call_3:arguments. {len(content_of(3)):,} chars]",
                },
                ensure_ascii=False,
            )
        )
    )
    assert "call_3:arguments" not in c.reclaimed_results and "call_3:arguments" not in c.reclaimed_in_context()
    again = c.reclaim_tool_results(keep_max=0)
    assert "call_3:arguments" not in again.reclaimed_ids and arguments_of(c, "call_3") == original  # pinned
    with pytest.raises(KeyError):
        c.restore_tool_result("call_3:arguments")


def test_the_session_keeps_reclaimed_arguments_and_old_files_still_load():
    c = write_turn(12)
    c.reclaim_tool_results(keep_max=2)
    c.restore_tool_result("call_1:arguments")
    text = c.dumps()
    loaded = Conversation().loads(text)
    assert loaded.completion_params() == c.completion_params()
    assert loaded.reclaimed_results["call_5:arguments"] == c.reclaimed_results["call_5:arguments"]
    assert loaded.reclaimed_results["call_5:arguments"].kind == ARGUMENTS
    assert loaded.estimated_message_length() == c.estimated_message_length()
    loaded.restore_tool_result("call_5:arguments")
    assert json.loads(arguments_of(loaded, "call_5"))["content"] == content_of(5)
    assert "call_1:arguments" not in loaded.reclaim_tool_results(keep_max=0).reclaimed_ids  # the pin was saved too
    data = json.loads(text)  # a format 2 file with no arguments entries reads as before (no "kind": a result)
    assert all(("kind" in entry) == key.endswith(":arguments") for key, entry in data["compacted_toolcalls"].items())


def test_a_summary_offloads_the_original_arguments():
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        c = Conversation(offload_dir=folder)
        c.set_system_message_content("You write files.")
        for turn in range(2):
            c.add_user_message(f"turn {turn}")
            for i in range(turn * 5, turn * 5 + 5):
                assistant_call(c, (f"call_{i}", "write_file", {"path": f"out/step{i}.txt", "content": content_of(i)}))
                c.add_tool_result(f"call_{i}", "wrote it")
            c.add_agent_message({"role": "assistant", "content": f"turn {turn} done"})
        c.reclaim_tool_results(keep_max=2)
        assert "[Compacted" in arguments_of(c, "call_0")
        result = c.compact(lambda messages: "the files were written", keep_recent=4)
        assert result.compacted
        entries = read_offload_log(result.offload_path)[0].entries
        calls = {e.detail: e.text for e in entries if e.speaker == "AI tool call"}
        assert calls["write_file, id call_0, reclaimed earlier"] == json.dumps(
            {"path": "out/step0.txt", "content": content_of(0)}
        )
        assert c.reclaimed_original("call_0:arguments") is not None  # still readable by id
        assert "call_0:arguments" not in c.reclaimed_in_context()
        with pytest.raises(ValueError, match="summarised away"):
            c.restore_tool_result("call_0:arguments")


def test_preview_and_breakdown_count_the_arguments_a_reclaim_replaces():
    c = write_turn(20)
    preview = reclaim_preview(c, keep_max=4)
    assert preview.arguments == 16 and preview.results == 0
    before = c.estimated_message_length()
    assert first_tool_result(c, preview.ids) == 2  # the first call's message: where the prompt changes
    result = c.reclaim_tool_results(keep_max=4)
    assert preview.ids == result.reclaimed_ids
    assert preview.chars_saved == before - c.estimated_message_length()
    assert reclaim_preview(c, keep_max=4).count == 0
    parts = context_breakdown(c, threshold=10_000)
    placeholders, calls = parts.part(CALL_PLACEHOLDERS), parts.part(TOOL_CALLS)
    assert placeholders is not None and placeholders.count == 16 and calls is not None and calls.count == 4
    assert sum(p.chars for p in parts.parts) == c.estimated_message_length()
