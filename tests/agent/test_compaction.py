"""Automatic and manual compaction through the agent, against the offline server."""

import json
import re

from xun.agent.loop import Agent
from xun.compact.policy import ESCALATION_RATIO, AutoCompactor
from xun.compact.summary import compact_conversation
from xun.context.conversation import Conversation
from xun.context.offload import read_offload_log

from .helpers import make_agent, write_files


class RecordingAgent(Agent):
    """Keeps the helper agents it makes, so tests can look at what the summarizer was given."""

    children: list[Agent] = []

    @classmethod
    def inherit(cls, agent, **kwargs):
        child = super().inherit(agent, **kwargs)
        cls.children.append(child)
        return child


async def read_many(agent, start, stop):
    for i in range(start, stop):
        await agent.run(f"please read f{i}.py")


async def test_reclaim_then_escalation_then_summary(offline_server, tmp_path):
    write_files(tmp_path, 40)
    agent, rec = make_agent(
        offline_server,
        tmp_path,
        auto_compact__token_threshold=6000,
        auto_compact__toolcall_keep_max=2,
        auto_compact__summary_keep_max=6,
    )
    await read_many(agent, 1, 40)
    kinds = [e.type for e in rec.events if e.type in ("tool_results_reclaimed", "summary_started", "summary_finished")]
    assert kinds[0] == "tool_results_reclaimed"
    first_reclaim = rec.of("tool_results_reclaimed")[0]
    assert first_reclaim.count > 0 and first_reclaim.tokens_after < first_reclaim.tokens_before
    assert "summary_finished" in kinds
    # escalation: a summary comes after at most escalation_rounds (2) cheap rounds over the threshold since
    # the last summary (the cache-aware policy's early reclaims, below it, are no such round)
    rounds = 0
    for event in rec.events:
        if event.type == "tool_results_reclaimed" and event.trigger == "auto":
            rounds += 1
        elif event.type == "summary_started":
            assert rounds <= 2
            rounds = 0
    assert any(e.trigger == "auto" for e in rec.of("tool_results_reclaimed"))
    finished = rec.of("summary_finished")[0]
    assert finished.status == "compacted" and finished.trigger == "auto"
    assert finished.tokens_after < finished.tokens_before and finished.offload_path
    assert agent.conversation.compaction_counter.summary_rounds >= 1
    # the log of the session holds every compaction, and survives a save and load
    path = tmp_path / "s.json"
    agent.conversation.dump(path)
    log = Conversation().load(path).compaction_log
    assert [r["type"] for r in log] == [
        e.type
        for e in rec.events
        if e.type in ("tool_results_reclaimed", "summary_finished", "compaction_failed", "compaction_skipped")
    ]


async def test_below_the_threshold_nothing_happens(offline_server, tmp_path):
    write_files(tmp_path, 3)
    agent, rec = make_agent(offline_server, tmp_path)
    await read_many(agent, 1, 4)
    assert not agent.conversation.compaction_log


async def test_reclaim_alone_when_it_is_enough(offline_server, tmp_path):
    write_files(tmp_path, 12, lines=200)
    agent, rec = make_agent(offline_server, tmp_path, auto_compact__toolcall_keep_max=1)
    await read_many(agent, 1, 4)
    tokens = agent.conversation.total_tokens
    agent.config.auto_compact.token_threshold = int(tokens * 0.9)
    await agent.run("please read f5.py")
    reclaim = rec.of("tool_results_reclaimed")[0]
    assert reclaim.tokens_after <= agent.config.auto_compact.token_threshold * ESCALATION_RATIO
    assert not rec.of("summary_started")


async def test_summarizer_gets_no_tools_and_no_persistent_sections(offline_server, tmp_path):
    write_files(tmp_path, 20)
    (tmp_path / "AGENTS.md").write_text("Never delete files.")
    RecordingAgent.children = []
    agent, rec = make_agent(offline_server, tmp_path, agent_class=RecordingAgent)
    await read_many(agent, 1, 10)
    result = await compact_conversation(agent, keep_recent=4, instructions="keep file names")
    assert result.compacted
    helper = RecordingAgent.children[-1]
    assert helper.toolbox.schemas() == []
    assert helper.config.auto_compact.enabled is False and helper.config.auto_confirm is True
    system = helper.conversation.messages[0]
    assert system.persist_sections == {} and "Never delete files." not in json.dumps(
        helper.conversation.completion_params()
    )
    request = helper.conversation.messages[-2].text
    assert "system_context" in request and "pending_tasks" in request and "Focus: keep file names" in request
    assert agent.on_event is not helper.on_event


async def test_role_prompt_and_agents_md_survive_summaries(offline_server, tmp_path):
    write_files(tmp_path, 30)
    (tmp_path / "AGENTS.md").write_text("Never delete files.")
    agent, rec = make_agent(offline_server, tmp_path)
    for block in range(3):
        await read_many(agent, 1 + block * 8, 9 + block * 8)
        assert (await compact_conversation(agent, keep_recent=3)).compacted
        system = agent.conversation.completion_params()[0]["content"]
        assert system.startswith("You are the test agent.\n\n")
        assert "Never delete files." in system and "## pending_tasks" in system
    assert agent.conversation.compaction_counter.summary_rounds == 3
    sections = read_offload_log(tmp_path / ".xun" / "conversation_history" / f"{agent.conversation.conversation_id}.md")
    assert len(sections) == 3
    humans = [e.text for s in sections for e in s.entries if e.speaker == "Human"]
    assert "please read f1.py" in humans and "please read f17.py" in humans


async def test_the_summary_carries_earlier_summaries_forward(offline_server, tmp_path):
    write_files(tmp_path, 20)
    agent, rec = make_agent(offline_server, tmp_path)
    await read_many(agent, 1, 8)
    await compact_conversation(agent, keep_recent=2)
    await read_many(agent, 8, 16)
    await compact_conversation(agent, keep_recent=2)
    summary = agent.conversation.messages[0].content
    assert "f1.py" in summary and "f12.py" in summary


async def test_context_overflow_summarises_and_retries_once(offline_server_factory, tmp_path):
    write_files(tmp_path, 20)
    server = offline_server_factory(context_window=4000)
    agent, rec = make_agent(server, tmp_path, auto_compact__summary_keep_max=4)
    await read_many(agent, 1, 20)
    emergency = [e for e in rec.of("summary_finished") if e.trigger == "emergency"]
    assert emergency, rec.types()
    assert any("too long" in w.message for w in rec.of("warning"))
    assert rec.of("turn_finished")[-1].status == "ok"


class UnreachableSummarizerAgent(Agent):
    """Its summaries go to a server that refuses connections: every automatic summary fails."""

    @classmethod
    def inherit(cls, agent, **kwargs):
        child = super().inherit(agent, **kwargs)
        child.config.provider.base_url = "http://127.0.0.1:9/v1"
        child._client = None
        return child


async def test_three_failed_summaries_pause_the_models_summaries_then_it_tries_again(offline_server, tmp_path):
    """Three failures in a row switched automatic compaction off for the session, and a long turn then ran
    into the window with nothing to save it: now they pause the model's summaries for PAUSE_CALLS model
    calls, then it tries again, and each failure after that doubles the pause. The pause stops the model's
    summaries only: reclaims go on, and a summary due meanwhile is xun's own, written with no request."""
    from xun.compact.policy import PAUSE_CALLS

    write_files(tmp_path, 30)
    agent, rec = make_agent(
        offline_server,
        tmp_path,
        agent_class=UnreachableSummarizerAgent,
        auto_compact__token_threshold=2000,
        auto_compact__escalation_rounds=0,
        retry__attempts=1,
    )
    await read_many(agent, 1, 30)
    kinds = [
        e.type if e.type != "summary_finished" else f"summary by {e.method}"
        for e in rec.events
        if e.type in ("compaction_failed", "summary_finished", "tool_results_reclaimed", "assistant_message")
        or (e.type == "warning" and "pauses" in e.message)
    ]
    first = kinds.index("warning")
    assert kinds[:first].count("compaction_failed") == 3
    after = kinds[first + 2 :]  # (+1: the call whose compaction failed)
    calls = [i for i, kind in enumerate(after) if kind == "assistant_message"]
    pause = after[: calls[PAUSE_CALLS - 1]]
    assert "compaction_failed" not in pause, pause  # no model was asked during the pause...
    assert "tool_results_reclaimed" in pause and "summary by extractive" in pause  # ...but compaction went on
    assert "summary by model" not in kinds
    assert after.index("compaction_failed") > calls[PAUSE_CALLS - 1]  # ...then it tries again
    pauses = [w.message for w in rec.of("warning") if "pauses" in w.message]
    assert f"next {PAUSE_CALLS} model calls" in pauses[0] and f"next {2 * PAUSE_CALLS} model calls" in pauses[1]
    assert isinstance(agent.compactor, AutoCompactor) and agent.compactor.consecutive_failures >= 4
    assert all("Summary failed" in f.reason for f in rec.of("compaction_failed"))
    own = rec.of("summary_finished")  # all of them xun's own (no "summary by model" above)
    assert all("paused" in s.own_because for s in own), {s.own_because for s in own}
    assert rec.of("turn_finished")[-1].status == "ok"  # the agent went on all along


async def test_a_summary_longer_than_what_it_replaces_is_rejected(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path)
    await agent.run("hi")
    before = agent.conversation.completion_params()
    result = await compact_conversation(agent, keep_recent=0)
    assert result.status.value == "summarize_failed" and "shorter" in result.message
    assert agent.conversation.completion_params() == before


async def test_manual_reclaim_and_restore_are_events(offline_server, tmp_path):
    write_files(tmp_path, 5)
    agent, rec = make_agent(offline_server, tmp_path)
    await read_many(agent, 1, 6)
    result = await agent.reclaim_tool_results(keep_max=1)
    assert result.reclaimed_count == 4
    event = rec.of("tool_results_reclaimed")[-1]
    assert event.trigger == "manual" and event.count == 4 and set(event.ids) == set(result.reclaimed_ids)
    await agent.restore_tool_result(result.reclaimed_ids[0])
    restored = rec.of("tool_result_restored")[-1]
    assert restored.tokens_after > restored.tokens_before
    assert [r["type"] for r in agent.conversation.compaction_log] == ["tool_results_reclaimed", "tool_result_restored"]


async def test_model_recovers_a_reclaimed_result_with_the_tool(offline_server, tmp_path):
    write_files(tmp_path, 3)
    agent, rec = make_agent(offline_server, tmp_path)
    await read_many(agent, 1, 4)
    result = await agent.reclaim_tool_results(keep_max=0)
    target = result.reclaimed_ids[0]
    await agent.run(f"recover the compacted result {target}")
    call = rec.of("tool_call_finished")[-1]
    assert call.name == "extract_compacted_tool_result" and not call.is_error
    assert "line 0 of file 1" in agent.conversation.messages[-2].raw["content"]


async def test_ask_mode_without_anyone_to_ask_proceeds_and_says_so(offline_server, tmp_path):
    write_files(tmp_path, 20)
    agent, rec = make_agent(offline_server, tmp_path, auto_compact__token_threshold=3000)
    agent.config.auto_compact.mode = "ask"
    await read_many(agent, 1, 12)
    assert rec.of("summary_finished")
    assert any("'ask'" in i.message for i in rec.of("info"))


async def test_ask_mode_declined_skips_the_summary(offline_server, tmp_path):
    write_files(tmp_path, 20)
    agent, rec = make_agent(offline_server, tmp_path, auto_compact__token_threshold=3000)
    agent.config.auto_compact.mode = "ask"

    async def decline(agent):
        return False

    agent.consent = decline
    await read_many(agent, 1, 12)
    assert not rec.of("summary_started") and rec.of("compaction_skipped")


def test_a_summary_request_is_sized_as_the_summarizers_preflight_sizes_it():
    """800 condensed messages: sized at 4 tokens a message of framing, a 200-turn session's summary request
    fit the window by compaction's count and not by the summarizer's own preflight (5 a message), which
    refused it, and the turn died with "compaction could not bring it under" (bench_retention.py)."""
    from xun.compact.summary import _tokens
    from xun.context.messages import message_length

    helper = Conversation()
    for turn in range(200):
        helper.add_user_message(f"turn {turn}: look at module_{turn}.py")
        helper.add_agent_message({"role": "assistant", "content": f"module_{turn}.py computes 29 values."})
    messages = list(helper.messages)
    assert (
        _tokens(sum(message_length(m) for m in messages), helper.tokens_per_char, len(messages))
        == helper.estimated_tokens()
    )


def test_the_extractive_summary_keeps_the_users_rules_when_old_prompts_are_shed():
    """bench_retention.py: 7 of 12 "never …" constraints were out of the context after an extractive summary."""
    from xun.compact.extractive import extractive_summary
    from xun.context.messages import UserMessage

    messages = []
    for turn in range(120):
        rule = f"; never edit the folder vendor_q{turn}c (it is generated)" if turn % 10 == 0 else ""
        messages.append(
            UserMessage(f"turn {turn}: look at module_{turn}.py and tell me what each function returns{rule}")
        )
    text = extractive_summary(messages, reason="a test", offload_hint="the log", max_chars=3000)
    assert len(text) <= 3000
    assert "turn 0:" not in text  # old prompts were shed ...
    for turn in range(0, 120, 10):  # ... and every rule is still there
        assert f"vendor_q{turn}c" in text


async def test_a_skip_logged_under_the_threshold_says_why_a_summary_was_tried(offline_server, tmp_path):
    """The escalation asks for a summary after enough reclaim rounds, even when the reclaim brought the
    context under the threshold: a skip then says so, with the figure that set it off (trial 2, finding 4:
    "about 1,829 tokens" under a threshold of 3,000 read as a compaction for no reason)."""
    for i in range(1, 7):
        (tmp_path / f"f{i}.py").write_text(
            "".join(f"line {j} of file {i}: the quick brown fox jumps over the lazy dog\n" for j in range(60))
        )
    agent, rec = make_agent(offline_server, tmp_path, auto_compact__token_threshold=3000)
    for i in range(1, 7):
        await agent.run(f"read f{i}.py")
    skips = [e.reason for e in rec.of("compaction_skipped")]
    under = [reason for reason in skips if "a summary was also due" in reason]
    assert under, skips
    for reason in under:
        before, after = (int(n.replace(",", "")) for n in re.findall(r"about ([\d,]+)", reason)[:2])
        assert before > 3000 >= after and "over the threshold of 3,000" in reason
        assert "escalation_rounds" in reason


async def test_with_a_small_threshold_no_summary_is_asked_for_twice_with_the_same_limit(offline_server, tmp_path):
    """Newcomer trial (issue 25, finding 20): with the threshold at 2,500 (the README suggests a low one to
    see compaction), every summary was cut off at its `max_tokens` twice (the prompt said 1024 tokens, the
    request allowed 445), then xun wrote its own: two wasted calls a compaction, the log full of
    "rejected" rows. The prompt states the request's limit, the limit leaves the threshold room, and a
    summary cut off at its limit is asked for again only with a larger one. (The offline model, like many
    models, does not follow the stated limit: xun must cope with that.)"""
    RecordingAgent.children = []
    agent, rec = make_agent(
        offline_server, tmp_path, agent_class=RecordingAgent, auto_confirm=True, auto_compact__token_threshold=2500
    )
    finished = await agent.run("append the numbers 1 to 60 to steps.txt", max_iterations=120)
    assert finished.status == "ok"
    assert (tmp_path / "steps.txt").read_text().split() == [str(n) for n in range(1, 61)]
    summaries = rec.of("summary_finished")
    assert summaries
    for helper in RecordingAgent.children:
        assert f"Stay under {helper.reply_budget:,} tokens." in helper.conversation.messages[-2].text
    cut = [r for r in rec.of("summary_rejected") if "token limit" in r.reason]
    assert len(cut) <= len(summaries), [r.reason for r in cut]  # at most one cut-off request a compaction
    assert all("asking again with" in r.reason or r.next == "extractive" for r in cut)
    assert all(s.tokens_after <= ESCALATION_RATIO * 2500 for s in summaries)
