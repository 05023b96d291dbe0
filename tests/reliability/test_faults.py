"""Server faults against the agent: every kind the offline server injects, on one attempt and on all.

A transient fault is retried (bounded, with capped exponential backoff and jitter) and leaves nothing
behind; a fault on every attempt ends the turn with a clear error, the user's message kept as the last
message of the session, no assistant message added, and the session saved and loadable. A failure
while summarising changes nothing, is logged, trips the circuit breaker after three in a row, and no
compaction ever loops (summary requests are counted at the server).
"""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xun.agent.loop import Agent
from xun.compact.policy import MAX_CONSECUTIVE_FAILURES, AutoCompactor
from xun.compact.summary import compact_conversation
from xun.agent.config import RetrySettings
from xun.context.conversation import Conversation
from xun.context.messages import UserMessage

from .helpers import assistant_messages, make_agent, write_files

# kind -> the words the final error names it by (after "the model call failed after N attempts: ")
FAULTS = {
    "500": "HTTP 500",
    "429:0": "HTTP 429",
    "disconnect": "APIConnectionError",
    "malformed": "malformed stream",
    "truncate": "ended before the reply was complete",
    "empty": "empty reply",
    "stall:5": "APITimeoutError",
    "timeout:5": "APITimeoutError",
}
SHORT_TIMEOUT = 0.4  # provider.timeout for these tests: a stall or timeout fault fails fast


def timeout_for(fault: str) -> float:
    """For one fault then a good attempt: under the 5 s the fault waits where it is a wait, and long enough
    that the good attempt is not timed out too on a loaded machine (at 0.4 s it was, once: two retries)."""
    return 2.0 if fault.startswith(("stall", "timeout")) else 30.0


def saved_and_loaded(agent, store) -> Conversation:
    path = store.save(agent.conversation)
    loaded = store.load(agent.conversation.conversation_id)
    assert loaded.completion_params() == agent.conversation.completion_params()
    assert path.stat().st_mode & 0o777 == 0o600
    return loaded


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_one_fault_is_retried_and_leaves_nothing_behind(offline_server_factory, tmp_path, fault):
    server = offline_server_factory(faults=f"{fault}@1")
    agent, rec, store = make_agent(server, tmp_path, provider__timeout=timeout_for(fault))
    finished = await agent.run("hello there")
    assert finished.status == "ok", rec.of("error")
    [retry] = rec.of("retry")
    assert retry.attempt == 1 and retry.attempts == 3 and 0 < retry.delay <= agent.config.retry.backoff_max
    assert server.request_count == 2
    assert len(assistant_messages(agent.conversation)) == 1  # the broken attempt's partial reply was dropped
    assert len(rec.of("assistant_message")) == 1
    loaded = saved_and_loaded(agent, store)
    assert [m.role for m in loaded.messages] == ["system", "user", "assistant"]


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_fault_on_every_attempt_is_a_clear_error_and_keeps_the_message(offline_server_factory, tmp_path, fault):
    server = offline_server_factory(faults=f"{fault}@1-20")
    # a wait fails at the short timeout; an answer at once is waited for long enough that no attempt times out
    # before it reaches a loaded server (at 0.4 s one did: three attempts, two requests)
    timeout = SHORT_TIMEOUT if fault.startswith(("stall", "timeout")) else 5.0
    agent, rec, store = make_agent(server, tmp_path, provider__timeout=timeout, retry__attempts=3)
    started = time.monotonic()
    finished = await agent.run("are you there?")
    elapsed = time.monotonic() - started
    assert finished.status == "error"
    assert finished.error.startswith("the model call failed after 3 attempts: ") and FAULTS[fault] in finished.error
    [error] = rec.of("error")
    assert error.message == finished.error
    assert server.request_count == 3  # bounded: exactly the configured attempts
    retries = rec.of("retry")
    assert [r.attempt for r in retries] == [1, 2]
    assert all(0 < r.delay <= agent.config.retry.backoff_max for r in retries)
    # three waits of at most the timeout each, plus the backoff: nothing hangs
    assert elapsed < 3 * timeout + 2 * agent.config.retry.backoff_max + 3
    assert agent.conversation.messages[-1] == UserMessage("are you there?")
    assert assistant_messages(agent.conversation) == []
    loaded = saved_and_loaded(agent, store)
    assert loaded.messages[-1] == UserMessage("are you there?")
    # the next turn works, and the message was not sent twice into the history
    server.faults = type(server.faults).parse(None)
    assert (await agent.run("and now?")).status == "ok"
    users = [m.text for m in agent.conversation.messages if isinstance(m, UserMessage)]
    assert users == ["are you there?", "and now?"]


@pytest.mark.parametrize("fault", ["500", "disconnect", "truncate", "stall:5"])
async def test_a_fault_inside_a_tool_loop_duplicates_nothing(offline_server_factory, tmp_path, fault):
    write_files(tmp_path, 2)
    server = offline_server_factory(faults=f"{fault}@2")  # the call after the tool results
    agent, rec, store = make_agent(server, tmp_path, provider__timeout=SHORT_TIMEOUT)
    finished = await agent.run("read f1.py and f2.py")
    assert finished.status == "ok" and len(rec.of("retry")) == 1
    roles = [m.role for m in agent.conversation.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert len(rec.of("tool_call_finished")) == 2  # the tools ran once; only the model call was retried
    saved_and_loaded(agent, store)


async def test_a_turn_that_fails_after_its_tools_keeps_a_valid_history(offline_server_factory, tmp_path):
    write_files(tmp_path, 1)
    server = offline_server_factory(faults="500@2-10")
    agent, rec, store = make_agent(server, tmp_path, retry__attempts=2)
    finished = await agent.run("read f1.py")
    assert finished.status == "error" and "after 2 attempts" in finished.error
    roles = [m.role for m in agent.conversation.messages]
    assert roles == ["system", "user", "assistant", "tool"]  # every call answered, nothing half-written
    loaded = saved_and_loaded(agent, store)
    server.faults = type(server.faults).parse(None)
    resumed, _, _ = make_agent(server, tmp_path)
    resumed.conversation = loaded
    assert (await resumed.execute()).status == "ok"  # /retry: the history is valid for the server


# ------------------------------------------------------------------------------------ backoff and jitter


@settings(max_examples=300, deadline=None)
@given(
    base=st.floats(0.001, 5),
    spread=st.floats(1, 100),
    retry=st.integers(1, 200),
    draw=st.floats(0, 1),
)
def test_retry_delay_is_capped_exponential_with_jitter(base, spread, retry, draw):
    settings_ = RetrySettings(backoff_base=base, backoff_max=base * spread)
    ceiling = min(settings_.backoff_max, base * 2 ** min(retry - 1, 60))
    delay = settings_.delay(retry, rand=lambda: draw)
    assert ceiling / 2 <= delay <= ceiling <= settings_.backoff_max
    assert delay == pytest.approx(ceiling * (0.5 + 0.5 * draw))


def test_retry_delays_are_jittered():
    retry = RetrySettings(backoff_base=1.0, backoff_max=8.0)
    rng = random.Random(8)
    for number in (1, 2, 3, 4, 10):
        delays = [retry.delay(number, rand=rng.random) for _ in range(200)]
        ceiling = min(8.0, 2.0 ** (number - 1))
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) == len(delays)  # no two clients that failed together wait the same
        assert max(delays) - min(delays) > ceiling / 4  # spread over the band, not clustered
    assert retry.delay(1, rand=lambda: 0.0) < retry.delay(1, rand=lambda: 1.0)


async def test_the_agent_sleeps_the_delays_it_reports(offline_server_factory, tmp_path):
    server = offline_server_factory(faults="500@1-3")
    agent, rec, _ = make_agent(server, tmp_path, retry__attempts=4, retry__backoff_base=0.05, retry__backoff_max=0.1)
    started = time.monotonic()
    assert (await agent.run("hi")).status == "ok"
    delays = [r.delay for r in rec.of("retry")]
    assert len(delays) == 3
    assert 0.025 <= delays[0] <= 0.05 and all(0.05 <= d <= 0.1 for d in delays[1:])
    assert time.monotonic() - started >= sum(delays) - 0.01


async def test_a_rate_limit_waits_at_least_what_the_server_asks_within_the_cap(offline_server_factory, tmp_path):
    server = offline_server_factory(faults="429:0.3@1")
    agent, rec, _ = make_agent(server, tmp_path, retry__backoff_base=0.01, retry__backoff_max=1.0)
    started = time.monotonic()
    assert (await agent.run("hi")).status == "ok"
    [retry] = rec.of("retry")
    assert 0.3 <= retry.delay <= 1.0 and time.monotonic() - started >= 0.3


async def test_a_rate_limit_asking_for_longer_than_the_cap_waits_the_cap(offline_server_factory, tmp_path):
    server = offline_server_factory(faults="429:30@1")
    agent, rec, _ = make_agent(server, tmp_path, retry__backoff_base=0.01, retry__backoff_max=0.2)
    assert (await agent.run("hi")).status == "ok"
    [retry] = rec.of("retry")
    assert retry.delay <= 0.2


# ------------------------------------------------------------------------------- failures while summarising


class SummarizerOn(Agent):
    """An agent whose summarizer (its `inherit` child) talks to another server: `summary_server`."""

    summary_server = None

    @classmethod
    def inherit(cls, agent, **kwargs):
        child = super().inherit(agent, **kwargs)
        child.config.provider.base_url = cls.summary_server.base_url
        child._client = None
        return child


def summarizer_on(server) -> type[Agent]:
    return type("SummarizerOnServer", (SummarizerOn,), {"summary_server": server})


def state_of(conversation: Conversation) -> tuple:
    return (
        conversation.completion_params(),
        conversation.total_tokens,
        conversation.compaction_counter.to_json(),
        len(conversation.summarizations),
        len(conversation.kept_originals),
        dict(conversation.reclaimed_results),
    )


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_failed_summary_changes_nothing_and_is_logged(offline_server, offline_server_factory, tmp_path, fault):
    write_files(tmp_path, 4)
    broken = offline_server_factory(faults=f"{fault}@1-20")
    agent, rec, store = make_agent(
        offline_server, tmp_path, agent_class=summarizer_on(broken), provider__timeout=SHORT_TIMEOUT, retry__attempts=2
    )
    for i in range(1, 5):
        await agent.run(f"read f{i}.py")
    before = state_of(agent.conversation)
    log_before = len(agent.conversation.compaction_log)
    result = await compact_conversation(agent, keep_recent=2)
    assert result.status.value == "summarize_failed" and FAULTS[fault] in result.message
    assert state_of(agent.conversation) == before
    assert broken.request_count == 2  # the summarizer's own attempts, bounded by retry.attempts
    new = agent.conversation.compaction_log[log_before:]
    assert [r["type"] for r in new] == ["compaction_failed"] and FAULTS[fault] in new[0]["reason"]
    assert not (tmp_path / ".xun" / "conversation_history").exists()  # nothing offloaded
    loaded = store.load(store.save(agent.conversation).stem)
    assert loaded.compaction_log[-1]["type"] == "compaction_failed"
    assert (await agent.run("still there?")).status == "ok"


async def test_three_failed_summaries_in_a_row_pause_automatic_compaction(
    offline_server, offline_server_factory, tmp_path
):
    write_files(tmp_path, 30)
    broken = offline_server_factory(faults="500@1-1000")
    agent, rec, store = make_agent(
        offline_server,
        tmp_path,
        agent_class=summarizer_on(broken),
        retry__attempts=2,
        auto_compact__token_threshold=1500,
        auto_compact__escalation_rounds=0,
    )
    for i in range(1, 25):
        assert (await agent.run(f"please read f{i}.py")).status == "ok"  # every turn goes on
    failed = rec.of("compaction_failed")
    # three in a row, a pause of PAUSE_CALLS model calls, one more, a pause twice as long: 48 calls hold 4 or 5
    assert MAX_CONSECUTIVE_FAILURES < len(failed) <= MAX_CONSECUTIVE_FAILURES + 2
    assert broken.request_count == len(failed) * 2  # no loop: attempts per summary, then a pause
    assert isinstance(agent.compactor, AutoCompactor) and agent.compactor.paused
    notice = [w for w in rec.of("warning") if "pauses" in w.message][0]
    assert "/compact" in notice.message and "tries again" in notice.message
    log = store.load(store.save(agent.conversation).stem).compaction_log
    assert [r["type"] for r in log].count("compaction_failed") == len(failed)
    # a summary by hand works once the summarizer is back, and it ends the pause
    broken.faults = type(broken.faults).parse(None)
    assert (await compact_conversation(agent, keep_recent=4)).compacted
    await agent.run("please read f25.py")
    assert not agent.compactor.paused


async def test_a_success_after_two_failures_resets_the_breaker(offline_server, offline_server_factory, tmp_path):
    write_files(tmp_path, 30)
    flaky = offline_server_factory(faults="500@1-2")  # the first two summaries fail, the rest succeed
    agent, rec, _ = make_agent(
        offline_server,
        tmp_path,
        agent_class=summarizer_on(flaky),
        retry__attempts=1,
        auto_compact__token_threshold=3000,
        auto_compact__toolcall_keep_max=3,
        auto_compact__summary_keep_max=6,
        auto_compact__escalation_rounds=0,
    )
    failures_at_success = []

    def watch(event):
        rec(event)
        if event.type == "summary_finished":
            failures_at_success.append(agent.compactor.consecutive_failures)

    agent.on_event = watch
    for i in range(1, 25):
        await agent.run(f"please read f{i}.py")
    assert failures_at_success[0] == 2  # two failures counted before the first success...
    assert len(rec.of("compaction_failed")) == 2 and len(failures_at_success) >= 2
    assert not agent.compactor.paused  # ...and the success cleared them


async def test_summaries_never_loop(offline_server, offline_server_factory, tmp_path):
    """Every summary is one request at the summarizer's server, and one model call triggers at most
    1 + max_retries of them."""
    write_files(tmp_path, 30)
    summarizer = offline_server_factory()
    agent, rec, _ = make_agent(
        offline_server,
        tmp_path,
        agent_class=summarizer_on(summarizer),
        auto_compact__token_threshold=1500,
        auto_compact__summary_keep_max=4,
    )
    per_call, current = [], 0
    original = agent.emit

    async def counting(event):
        nonlocal current
        if event.type == "summary_started":
            current += 1
        elif event.type == "usage" and event.prompt_tokens is not None:
            per_call.append(current)
            current = 0
        await original(event)

    agent.emit = counting
    for i in range(1, 25):
        await agent.run(f"please read f{i}.py")
    started = rec.of("summary_started")
    assert started and summarizer.request_count == len(started) == len(rec.of("summary_finished"))
    assert max(per_call) <= 1 + agent.compactor.max_retries


async def test_an_overflow_with_a_broken_summarizer_is_saved_by_xuns_own_summary(offline_server_factory, tmp_path):
    """The server refuses a request as too long while every summary request fails: the window guard
    writes xun's own summary instead of ending the turn (it ended every other turn with an error)."""
    write_files(tmp_path, 6)
    main = offline_server_factory(context_window=2500)
    broken = offline_server_factory(faults="500@1-100")
    agent, rec, store = make_agent(
        main, tmp_path, agent_class=summarizer_on(broken), retry__attempts=1, auto_compact__token_threshold=100_000
    )
    statuses = [(await agent.run(f"read f{i}.py")).status for i in range(1, 7)]
    assert statuses == ["ok"] * 6, [e.message for e in rec.of("error")]
    assert any("context is too long" in w.message for w in rec.of("warning"))  # the server's refusal, once
    [emergency] = [s for s in rec.of("summary_finished") if s.trigger == "emergency"]
    assert emergency.method == "extractive" and "the model's summary failed" in emergency.own_because
    assert "500" in emergency.own_because
    assert 0 < broken.request_count <= len(rec.of("summary_started"))  # one request a summary at most: no loop
    loaded = saved_and_loaded(agent, store)
    assert any(r.get("own_because") for r in loaded.compaction_log)  # xun's own summaries are on record as such
