"""Tier 2: summaries, the cut point, and the offload of the originals."""

import asyncio
import os

import pytest

from xun.context.compaction_results import SummaryCompactResult
from xun.context.conversation import Conversation, StalePlanError
from xun.context.messages import COMPACTED_SYSTEM_PROMPT, RawOpenAIMessage, SystemPrompt, UserMessage
from xun.context.offload import HEADING, read_offload_log

from .builders import assistant_call, fresh_length, long_conversation, tool_round

Status = SummaryCompactResult.Status


def roles(messages):
    return [m.role for m in messages]


def small_session():
    c = Conversation()
    c.set_system_message_content("role")
    c.add_user_message("u1")
    assistant_call(c, ("c1", "read_file", {"path": "a"}), ("c2", "read_file", {"path": "b"}))
    c.add_tool_result("c1", "one" * 50)
    c.add_tool_result("c2", "two" * 50)
    assistant_call(c, ("c3", "list_directory", {"path": "."}))
    c.add_tool_result("c3", "three" * 50)
    c.add_agent_message({"role": "assistant", "content": "done" * 30})
    return c  # sys u1 a(c1,c2) t1 t2 a(c3) t3 a


def test_cut_at_last_user_message_when_its_tail_fits():
    c = small_session()
    c.add_user_message("u2")
    c.add_agent_message({"role": "assistant", "content": "reply"})
    plan = c.plan_compaction(keep_recent=4)
    assert plan.cut_index == 8 and plan.carried_user is None
    assert roles(plan.kept) == ["user", "assistant"]
    assert roles(plan.condensed)[0] == "system"


@pytest.mark.parametrize("keep, cut", [(3, 5), (4, 5), (5, 5), (6, 2)])
def test_cut_never_opens_on_a_tool_result_and_carries_the_user_message(keep, cut):
    c = small_session()
    plan = c.plan_compaction(keep_recent=keep)
    assert plan.cut_index == cut
    assert plan.carried_user == UserMessage("u1")
    assert plan.kept[0] == UserMessage("u1")
    assert plan.kept[1].role == "assistant"
    assert plan.kept[1:] == list(c.messages[cut:])


def test_nothing_to_condense_changes_nothing():
    c = Conversation()
    c.set_system_message_content("role")
    c.add_user_message("only")
    c.total_tokens = 50
    before = c.completion_params()
    result = c.compact(lambda msgs: pytest.fail("must not summarise"), keep_recent=16)
    assert result.status is Status.NOTHING_TO_CONDENSE and not result.compacted
    assert c.completion_params() == before and c.total_tokens == 50


@pytest.mark.parametrize("summary", [None, "", "   "])
def test_failed_summary_changes_nothing(summary):
    c = long_conversation(rounds=20)
    c.reclaim_tool_results(keep_max=3)
    c.total_tokens = 1234
    before = (c.completion_params(), c.total_tokens, c.compaction_counter.to_json(), len(c.reclaimed_results))
    result = c.compact(lambda msgs: summary, keep_recent=4)
    assert result.status is Status.SUMMARIZE_FAILED
    assert (c.completion_params(), c.total_tokens, c.compaction_counter.to_json(), len(c.reclaimed_results)) == before
    assert c.summarizations == []


def test_success_sets_summary_tokens_and_counters():
    c = long_conversation(rounds=20)
    c.set_persistent_section("AGENTS.md", "Always run the tests.")
    c.reclaim_tool_results(keep_max=4)
    c.reclaim_tool_results(keep_max=4)
    c.total_tokens = 150_000
    seen = []
    result = c.compact(lambda msgs: seen.extend(msgs) or "## overview\nwork so far", keep_recent=6)
    assert result.compacted and result.condensed_count > 0
    assert isinstance(seen[0], SystemPrompt)
    system = c.messages[0]
    assert system.is_compressed and system.content == "## overview\nwork so far"
    assert c.total_tokens is None
    assert c.compaction_counter.summary_rounds == 1 and c.compaction_counter.tool_rounds == 0
    content = c.completion_params()[0]["content"]
    assert content == (
        "You are a careful assistant.\n\n"
        + COMPACTED_SYSTEM_PROMPT.format(summary="## overview\nwork so far")
        + "\n\nAlways run the tests."
    )
    assert c.estimated_message_length() == fresh_length(c)
    assert 0 < result.reclaimed_fraction < 1
    assert c.messages[1] == UserMessage("now part 19")


def test_role_prompt_survives_many_summaries_word_for_word():
    c = long_conversation(rounds=5, system="You are xun's reviewer. Be terse.")
    for n in range(4):
        for i in range(10):
            tool_round(c, 100 * n + i)
        c.add_user_message(f"round {n}")
        assert c.compact(lambda msgs: f"summary {n}", keep_recent=3).compacted
        assert c.completion_params()[0]["content"].startswith("You are xun's reviewer. Be terse.\n\n")
    c.set_system_message_content("A new role.")
    assert c.messages[0].content == "summary 3"  # a new role keeps the summary
    assert c.completion_params()[0]["content"].startswith("A new role.\n\n")


def test_messages_appended_after_planning_are_kept_and_edits_make_the_plan_stale():
    c = long_conversation(rounds=10)
    plan = c.plan_compaction(keep_recent=4)
    c.add_user_message("typed while summarising")
    c.apply_compaction(plan, "sum")
    assert c.messages[-1] == UserMessage("typed while summarising")
    plan = c.plan_compaction(keep_recent=2)
    c.messages.insert(2, UserMessage("edit"))
    with pytest.raises(StalePlanError):
        c.apply_compaction(plan, "sum")


def test_plan_changes_nothing_and_estimates_after():
    c = long_conversation(rounds=12)
    before = c.completion_params()
    plan = c.plan_compaction(keep_recent=5)
    assert c.completion_params() == before
    kept_length = sum(
        len(m.raw.get("content") or "") + sum(len(t["function"]["arguments"]) for t in m.raw.get("tool_calls", []))
        if isinstance(m, RawOpenAIMessage)
        else len(m.text)
        for m in plan.kept
    )
    system_length = len(c.completion_params()[0]["content"])
    assert plan.estimated_length_after == system_length + kept_length
    assert plan.estimated_length_before == c.estimated_message_length()


def test_acompact_with_an_async_summarizer():
    c = long_conversation(rounds=10)

    async def summarize(msgs):
        await asyncio.sleep(0)
        return f"{len(msgs)} condensed"

    result = asyncio.run(c.acompact(summarize, keep_recent=4))
    assert result.compacted and c.messages[0].content.endswith("condensed")


def test_originals_go_to_the_offload_log_first(tmp_path):
    c = long_conversation(rounds=10)
    c.offload_dir = tmp_path / "history"
    c.reclaim_tool_results(keep_max=2)
    originals = {
        m.raw["tool_call_id"]: c.reclaimed_original(m.raw["tool_call_id"])
        for m in c.messages
        if m.role == "tool" and c.reclaimed_original(m.raw["tool_call_id"])
    }
    condensed_users = [m.text for m in c.plan_compaction(keep_recent=3).condensed if isinstance(m, UserMessage)]
    result = c.compact(lambda msgs: "first summary", keep_recent=3)
    path = tmp_path / "history" / f"{c.conversation_id}.md"
    assert result.offload_path == str(path) and result.warning is None
    assert os.stat(path).st_mode & 0o777 == 0o600
    text = path.read_text()
    assert text.startswith(HEADING) and "Human: please analyse the repository" in text
    sections = read_offload_log(path)
    assert len(sections) == 1 and sections[0].conversation_id == c.conversation_id
    entries = sections[0].entries
    assert [e.text for e in entries if e.speaker == "Human"] == condensed_users
    tool_texts = {e.detail.split("id ")[1].split(",")[0]: e.text for e in entries if e.speaker == "Tool"}
    for call_id, original in originals.items():
        if call_id in tool_texts:
            assert tool_texts[call_id] == original  # the original, not the placeholder
    calls = [e for e in entries if e.speaker == "AI tool call"]
    assert calls and calls[0].detail == "read_file, id call_0" and calls[0].text == '{"path": "src/f0.py"}'
    event = c.summarizations[0]
    assert (event.summary_message, event.file_path, event.cutoff_index) == (
        "first summary",
        str(path),
        result.condensed_count + 1,
    )

    for i in range(10):
        tool_round(c, 50 + i)
    c.add_user_message("next")
    c.compact(lambda msgs: "second summary", keep_recent=3)
    sections = read_offload_log(path)
    assert len(sections) == 2
    assert "first summary" not in path.read_text()  # an earlier summary is not archived again


def test_log_that_cannot_be_written_keeps_originals_in_the_session(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    c = long_conversation(rounds=10)
    c.offload_dir = blocker / "history"
    result = c.compact(lambda msgs: "sum", keep_recent=3)
    assert result.compacted and result.offload_path is None
    assert "could not write the offload log" in result.warning
    kept = c.kept_originals[0]["messages"]
    assert kept[0] == UserMessage("please analyse the repository")
    back = Conversation().loads(c.dumps())
    assert back.kept_originals[0]["messages"] == kept


def test_an_unwritable_offload_log_keeps_originals_in_the_session(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    c = long_conversation(rounds=10)
    c.offload_dir = tmp_path
    # the log's name links to /dev/full; xun does not follow links in its own folder (issue 13, item 5),
    # so the log cannot be written (a really full disk is tested in tests/reliability/test_bad_files.py)
    (tmp_path / f"{c.conversation_id}.md").symlink_to("/dev/full")
    result = c.compact(lambda msgs: "sum", keep_recent=3)
    assert result.compacted and "symbolic link" in result.warning
    assert len(c.kept_originals) == 1
