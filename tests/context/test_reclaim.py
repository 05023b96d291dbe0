"""Tier 1: old tool results become recoverable placeholders."""

import pytest

from xun.context.conversation import PLACEHOLDER, Conversation

from .builders import assistant_call, fresh_length, long_conversation, tool_round


def placeholder(call_id: str) -> str:
    return (
        f"[Compacted, ID: {call_id}. If this content is still needed, call "
        "extract_compacted_tool_result with this ID or re-run the tool.]"
    )


def tool_contents(c: Conversation) -> dict[str, str]:
    return {m.raw["tool_call_id"]: m.raw["content"] for m in c.messages if m.role == "tool"}


def test_placeholder_text_is_exactly_the_seeds():
    assert PLACEHOLDER.format(id="abc") == placeholder("abc")


def test_all_but_newest_keep_max_are_replaced_and_originals_kept():
    c = long_conversation(rounds=20)
    originals = tool_contents(c)
    result = c.reclaim_tool_results(keep_max=12)
    after = tool_contents(c)
    ids = list(originals)
    assert result.reclaimed_count == 8
    assert list(result.reclaimed_ids) == ids[:8]
    for call_id in ids[:8]:
        assert after[call_id] == placeholder(call_id)
        assert c.reclaimed_original(call_id) == originals[call_id]
    for call_id in ids[8:]:
        assert after[call_id] == originals[call_id]
    assert 0 < result.reclaimed_fraction < 1
    assert result.reclaimed_fraction == pytest.approx(
        (result.length_before - result.length_after) / result.length_before
    )
    assert c.estimated_message_length() == fresh_length(c)
    assert c.compaction_counter.tool_rounds == 1


def test_only_replaced_when_shorter():
    c = Conversation()
    c.add_user_message("go")
    for i, text in enumerate(["short", "y" * 500]):
        assistant_call(c, (f"c{i}", "run_command", {"command": "ls"}))
        c.add_tool_result(f"c{i}", text)
    result = c.reclaim_tool_results(keep_max=0)
    assert result.reclaimed_ids == ("c1",)
    assert tool_contents(c)["c0"] == "short"


def test_repeat_reclaims_nothing_new_but_counts_a_round():
    c = long_conversation(rounds=20)
    c.reclaim_tool_results(keep_max=4)
    again = c.reclaim_tool_results(keep_max=4)
    assert again.reclaimed_count == 0 and again.reclaimed_fraction == 0
    assert c.compaction_counter.tool_rounds == 2
    tool_round(c, 100)
    third = c.reclaim_tool_results(keep_max=4)
    assert third.reclaimed_count == 1  # the one pushed out of the newest four
    assert c.estimated_message_length() == fresh_length(c)


def test_reclaim_sees_edits_made_directly_to_the_list():
    c = long_conversation(rounds=10)
    c.reclaim_tool_results(keep_max=2)
    # an old placeholder replaced by hand with a long result again: the next reclaim must catch it
    index = next(i for i, m in enumerate(c.messages) if m.role == "tool")
    call_id = c.messages[index].raw["tool_call_id"]
    from xun.context.messages import RawOpenAIMessage

    c.messages[index] = RawOpenAIMessage({"role": "tool", "tool_call_id": "hand", "content": "z" * 900})
    result = c.reclaim_tool_results(keep_max=2)
    assert result.reclaimed_ids == ("hand",)
    assert c.reclaimed_original(call_id) is not None


def test_parallel_results_and_keep_zero():
    c = Conversation()
    c.add_user_message("read both")
    assistant_call(c, ("a", "read_file", {"path": "a"}), ("b", "read_file", {"path": "b"}))
    c.add_tool_result("a", "A" * 300)
    c.add_tool_result("b", "B" * 300)
    result = c.reclaim_tool_results(keep_max=1)
    assert result.reclaimed_ids == ("a",)
    record = c.reclaimed_results["a"]
    assert (record.tool_name, record.chars) == ("read_file", 300) and '"path": "a"' in record.arguments
    assert c.reclaim_tool_results(keep_max=0).reclaimed_ids == ("b",)


def test_assistant_messages_are_never_touched():
    c = long_conversation(rounds=15)
    before = [m for m in c.messages if m.role != "tool"]
    c.reclaim_tool_results(keep_max=0)
    assert [m for m in c.messages if m.role != "tool"] == before


def test_restore_puts_the_original_back_and_keeps_it():
    c = long_conversation(rounds=10)
    originals = tool_contents(c)
    c.reclaim_tool_results(keep_max=2)
    c.restore_tool_result("call_0")
    assert tool_contents(c)["call_0"] == originals["call_0"]
    assert c.reclaimed_original("call_0") is None
    assert c.reclaim_tool_results(keep_max=2).reclaimed_count == 0  # a restored result stays until asked
    assert c.estimated_message_length() == fresh_length(c)
    with pytest.raises(KeyError):
        c.restore_tool_result("never")


def test_restore_after_summary_explains_why_not():
    c = long_conversation(rounds=10)
    c.reclaim_tool_results(keep_max=2)
    c.compact(lambda msgs: "sum", keep_recent=3)
    assert c.reclaimed_original("call_0") is not None  # survives the summary
    with pytest.raises(ValueError, match="summarised away"):
        c.restore_tool_result("call_0")


def test_negative_keep_is_refused():
    with pytest.raises(ValueError):
        Conversation().reclaim_tool_results(keep_max=-1)


def test_a_summary_decodes_only_the_originals_of_the_messages_it_offloads(tmp_path, monkeypatch):
    """The archive keeps every reclaimed original of the session; decoding them all for each summary's
    offload made every summary cost more the longer the session ran (issue 23's long turns). The offload
    log still gets the originals of what leaves."""
    from xun.context import reclaimed

    c = Conversation(offload_dir=tmp_path)
    c.set_system_message_content("You are a careful assistant.")
    for turn in range(6):
        c.add_user_message(f"turn {turn}: read the files")
        for i in range(turn * 10, turn * 10 + 10):
            tool_round(c, i, size=800)
        c.add_agent_message({"role": "assistant", "content": f"done with turn {turn}"})
        c.reclaim_tool_results(keep_max=0)
        if turn < 5:
            assert c.compact(lambda messages: "## Summary\n- earlier turns", keep_recent=2).status.name == "COMPACTED"
    assert len(c.reclaimed_results) == 60
    decoded: list[str] = []
    real = reclaimed._entry_original
    monkeypatch.setattr(reclaimed, "_entry_original", lambda entry: decoded.append(entry) or real(entry))
    result = c.compact(lambda messages: "## Summary\n- all turns", keep_recent=2)
    assert result.status.name == "COMPACTED"
    assert 0 < len(decoded) <= 10, f"{len(decoded)} originals decoded for 10 leaving results"
    log = (tmp_path / f"{c.conversation_id}.md").read_text()
    assert log.count("reclaimed earlier") == 60 and "contents of file 59" in log
