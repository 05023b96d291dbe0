"""Prompt-cache figures through the agent, and the cache-aware policy, against the offline server with
its prefix cache simulated; the agent's and the server's clock are one injected clock (never slept)."""

from __future__ import annotations

import pytest

from xun.base.errors import SessionFormatError
from xun.base.events import ToolResultsReclaimed
from xun.compact.breakdown import PLACEHOLDER_HEAD
from xun.compact.policy import PAYBACK_CALLS, CacheAwareCompactor, compactor_from_config
from xun.context.conversation import Conversation
from xun.context.messages import RawOpenAIMessage, UserMessage

from .helpers import make_agent, write_files

TTL = 300.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def cached_agent(factory, tmp_path, profile="openai", **settings):
    clock = Clock()
    server = factory(profile=profile, cache_ttl=TTL, clock=clock)
    agent, rec = make_agent(server, tmp_path, cache__ttl_seconds=TTL, **settings)
    agent.compactor = compactor_from_config(agent.config)
    agent.clock = clock
    return server, agent, rec, clock


def server_usages(rec):
    return [e for e in rec.of("usage") if e.source == "server"]


@pytest.mark.parametrize("profile", ["openai", "vllm", "deepseek", "llamacpp-server"])
async def test_cache_figures_from_every_server_shape(offline_server_factory, tmp_path, profile):
    write_files(tmp_path, 3)
    server, agent, rec, clock = cached_agent(offline_server_factory, tmp_path, profile)
    await agent.run("please read f1.py")
    clock.now += 10
    await agent.run("please read f2.py")
    reported = [e.cached_tokens for e in server_usages(rec)]
    assert reported == server.cached_sizes[-len(reported) :]  # every call's figure, as the server sent it
    assert server.cached_sizes[0] == 0 and all(n > 0 for n in reported[1:])  # (a calibration probe may come first)
    record = agent.conversation.prompt_cache
    assert record.last_cached == server.cached_sizes[-1] and record.last_prompt == server.prompt_sizes[-1]
    assert record.cached_tokens == sum(reported) and record.known_calls == len(reported)
    assert 0 < record.last_hit_share <= 1


async def test_a_server_that_says_nothing_leaves_the_figure_unknown(offline_server_factory, tmp_path):
    write_files(tmp_path, 2)
    for profile, ttl in (("llamacpp", TTL), ("openai", None)):  # llama-cpp-python; a server without a cache figure
        server = offline_server_factory(profile=profile, cache_ttl=ttl)
        agent, rec = make_agent(server, tmp_path)
        await agent.run("please read f1.py")
        await agent.run("please read f2.py")
        assert all(e.cached_tokens is None for e in rec.of("usage"))
        record = agent.conversation.prompt_cache
        assert record.last_cached is None and record.known_calls == 0 and record.last_hit_share is None
        assert record.last_call_at is not None


async def test_the_cache_record_survives_save_and_resume(offline_server_factory, tmp_path):
    write_files(tmp_path, 3)
    server, agent, rec, clock = cached_agent(offline_server_factory, tmp_path)
    for i in (1, 2, 3):
        clock.now += 5
        await agent.run(f"please read f{i}.py")
    path = tmp_path / "s.json"
    agent.conversation.dump(path)
    loaded = Conversation().load(path).prompt_cache
    assert loaded == agent.conversation.prompt_cache and loaded.last_call_at == clock.now
    text = path.read_text().replace('"cached_tokens":', '"cached_tokens":-', 1)
    with pytest.raises(SessionFormatError, match="prompt_cache.cached_tokens"):
        Conversation().loads(text)


async def fill(agent, clock, files):
    for i in files:
        clock.now += 10
        await agent.run(f"please read f{i}.py")


async def test_the_low_water_mark_triggers_exactly_over_the_threshold(offline_server_factory, tmp_path):
    write_files(tmp_path, 10, lines=120)
    # cached input as free as it gets: no reclaim below the threshold ever pays for its broken prefix
    server, agent, rec, clock = cached_agent(
        offline_server_factory,
        tmp_path,
        auto_compact__policy="cache-aware",
        auto_compact__low_water=0.5,
        auto_compact__toolcall_keep_max=6,
        cache__cached_discount=0.0,
    )
    await fill(agent, clock, range(1, 9))
    assert isinstance(agent.compactor, CacheAwareCompactor)
    tokens = agent.request_tokens()
    agent.config.auto_compact.token_threshold = tokens  # at the threshold: nothing happens
    await agent.compactor.auto_compact(agent)
    assert not rec.of("tool_results_reclaimed")
    agent.config.auto_compact.token_threshold = tokens - 1  # one token over: a reclaim to the low-water mark
    await agent.compactor.auto_compact(agent)
    reclaim = rec.of("tool_results_reclaimed")[-1]
    assert reclaim.count > 0 and reclaim.tokens_after <= 0.5 * (tokens - 1)
    assert not rec.of("summary_started")
    # the seed, on the same conversation, keeps its 6 results and stops just under the threshold
    seed_server, seed, seed_rec, seed_clock = cached_agent(
        offline_server_factory, tmp_path / "seed", auto_compact__policy="escalation", auto_compact__toolcall_keep_max=6
    )
    (tmp_path / "seed").mkdir(exist_ok=True)
    write_files(tmp_path / "seed", 10, lines=120)
    await fill(seed, seed_clock, range(1, 9))
    seed.config.auto_compact.token_threshold = seed.request_tokens() - 1
    await seed.compactor.auto_compact(seed)
    seed_reclaim = seed_rec.of("tool_results_reclaimed")[-1]
    assert seed_reclaim.tokens_after > 0.5 * seed.config.auto_compact.token_threshold
    assert seed_reclaim.count < reclaim.count


async def test_the_idle_rule_reclaims_exactly_after_the_time_to_live(offline_server_factory, tmp_path):
    write_files(tmp_path, 10)
    server, agent, rec, clock = cached_agent(
        offline_server_factory, tmp_path, auto_compact__policy="cache-aware", auto_compact__toolcall_keep_max=2
    )
    await fill(agent, clock, range(1, 6))
    assert agent.request_tokens() < agent.threshold and not rec.of("tool_results_reclaimed")
    rounds = agent.conversation.compaction_counter.tool_rounds
    clock.now = agent.conversation.prompt_cache.last_call_at + TTL  # exactly the time to live: still warm
    await agent.compactor.auto_compact(agent)
    assert not rec.of("tool_results_reclaimed")
    clock.now += 1  # one second more: the cache has gone cold, so the prefix is paid in full anyway
    sent = len(server.prompt_sizes)
    await agent.run("please read f6.py")
    idle = rec.of("tool_results_reclaimed")
    assert [e.trigger for e in idle] == ["idle"] and idle[0].count == 3  # all but the newest 2 results
    assert server.cached_sizes[sent] == 0  # and the server did send that call uncached
    assert agent.conversation.compaction_counter.tool_rounds == rounds  # not a step towards a summary
    assert not rec.of("summary_started")  # the reclaim reached the low-water mark: no summary


@pytest.mark.parametrize("mode", ["auto", "ask", "off"])
async def test_the_idle_rule_summarises_when_the_reclaim_leaves_the_context_above_the_low_water_mark(
    offline_server_factory, tmp_path, mode
):
    write_files(tmp_path, 10)
    server, agent, rec, clock = cached_agent(
        offline_server_factory,
        tmp_path,
        auto_compact__policy="cache-aware",
        auto_compact__mode=mode,
        auto_compact__toolcall_keep_max=2,
        auto_compact__low_water=0.1,
        cache__cached_discount=0.0,
    )  # no early reclaim ever pays: only the idle rule acts
    await fill(agent, clock, range(1, 8))
    agent.config.auto_compact.token_threshold = agent.request_tokens() + 1  # under it: only the idle rule can act
    clock.now = agent.conversation.prompt_cache.last_call_at + TTL
    await agent.compactor.auto_compact(agent)
    assert not rec.of("tool_results_reclaimed") and not rec.of("summary_started")
    clock.now += 1
    sent = len(server.prompt_sizes)
    await agent.run("please read f8.py")
    assert [e.trigger for e in rec.of("tool_results_reclaimed")] == ["idle"]
    summary = rec.of("summary_finished")
    if mode != "auto":  # not needed yet: nobody is asked for it, and "off" is off
        assert not rec.of("summary_started") and not rec.of("compaction_skipped")
        return
    assert [e.trigger for e in summary] == ["idle"] and summary[0].tokens_after < summary[0].tokens_before
    assert server.cached_sizes[sent] == 0  # the summary request, at a cold cache like everything then


def current_turn_results_intact(agent) -> bool:
    messages = agent.conversation.messages
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    return all(
        not str(m.raw.get("content", "")).startswith(PLACEHOLDER_HEAD)
        for m in messages[last_user:]
        if isinstance(m, RawOpenAIMessage) and m.raw.get("role") == "tool"
    )


async def test_an_early_reclaim_runs_exactly_above_the_low_water_mark_and_pays_for_itself(
    offline_server_factory, tmp_path
):
    write_files(tmp_path, 10, lines=120)
    server, agent, rec, clock = cached_agent(
        offline_server_factory,
        tmp_path,
        auto_compact__policy="cache-aware",
        auto_compact__low_water=0.5,
        auto_compact__toolcall_keep_max=6,
    )
    await fill(agent, clock, range(1, 9))  # a threshold far above: nothing happens
    assert not rec.of("tool_results_reclaimed")
    tokens = agent.request_tokens()
    assert agent.compactor.paying_keep(agent) is not None  # a reclaim now would pay
    agent.config.auto_compact.token_threshold = 2 * tokens  # exactly at the low-water mark: nothing happens
    await agent.compactor.auto_compact(agent)
    assert not rec.of("tool_results_reclaimed")
    agent.config.auto_compact.token_threshold = 2 * tokens - 2  # one token above it
    await agent.compactor.auto_compact(agent)
    [early] = rec.of("tool_results_reclaimed")
    assert early.trigger == "early" and early.count > 0 and early.tokens_before == tokens
    d = agent.config.cache.cached_discount
    assert d * early.saved_per_call * PAYBACK_CALLS > (1 - d) * early.cache_miss_tokens  # it pays within the horizon
    assert agent.compactor.paying_keep(agent) is None  # and once done, nothing more pays now
    clock.now += 10
    sent = len(server.prompt_sizes)
    await agent.run("please read f9.py")
    uncached = server.prompt_sizes[sent] - server.cached_sizes[sent]
    assert abs(early.cache_miss_tokens - uncached) <= 0.1 * uncached + 30  # the break the server then reports


async def test_early_reclaims_spare_the_current_turn_and_are_no_step_towards_a_summary(
    offline_server_factory, tmp_path
):
    write_files(tmp_path, 40)
    server, agent, rec, clock = cached_agent(
        offline_server_factory,
        tmp_path,
        auto_compact__policy="cache-aware",
        auto_compact__token_threshold=8000,
        auto_compact__toolcall_keep_max=12,
    )
    seen = []
    record = agent.on_event

    def watch(event):
        record(event)
        if event.type == "tool_results_reclaimed" and event.trigger == "early":
            seen.append((current_turn_results_intact(agent), agent.conversation.compaction_counter.tool_rounds))

    agent.on_event = watch
    for i in range(1, 30):
        clock.now += 10
        await agent.run(f"read f{i}.py and f{i + 1}.py")
    assert len(seen) >= 3 and all(intact for intact, _ in seen)
    assert all(rounds == 0 for _, rounds in seen) or rec.of("summary_finished")


async def test_no_early_reclaim_when_cached_input_costs_nothing(offline_server_factory, tmp_path):
    write_files(tmp_path, 40)
    server, agent, rec, clock = cached_agent(
        offline_server_factory,
        tmp_path,
        auto_compact__policy="cache-aware",
        auto_compact__token_threshold=8000,
        cache__cached_discount=0.0,
    )
    for i in range(1, 20):
        clock.now += 10
        await agent.run(f"read f{i}.py and f{i + 1}.py")
    assert rec.of("tool_results_reclaimed") and not [
        e for e in rec.of("tool_results_reclaimed") if e.trigger == "early"
    ]


def test_the_cache_aware_policy_is_the_default():
    from xun.agent.config import XunConfig

    assert isinstance(compactor_from_config(XunConfig()), CacheAwareCompactor)


async def test_the_seed_policy_has_no_idle_rule(offline_server_factory, tmp_path):
    write_files(tmp_path, 6)
    server, agent, rec, clock = cached_agent(
        offline_server_factory, tmp_path, auto_compact__policy="escalation", auto_compact__toolcall_keep_max=2
    )
    await fill(agent, clock, range(1, 5))
    clock.now += 10 * TTL
    await agent.run("please read f5.py")
    assert not rec.of("tool_results_reclaimed")


async def test_the_logged_cache_cost_is_what_the_server_then_reports(offline_server_factory, tmp_path):
    write_files(tmp_path, 40)
    server, agent, rec, clock = cached_agent(
        offline_server_factory,
        tmp_path,
        auto_compact__policy="cache-aware",
        auto_compact__token_threshold=6000,
        auto_compact__toolcall_keep_max=4,
    )
    next_request: dict[int, int] = {}
    record = agent.on_event

    def watch(event):
        record(event)
        if event.type in ("tool_results_reclaimed", "summary_finished") and event.cache_miss_tokens is not None:
            next_request[len(rec.events) - 1] = len(server.prompt_sizes)

    agent.on_event = watch
    await fill(agent, clock, range(1, 40))
    checked = {"tool_results_reclaimed": 0, "summary_finished": 0}
    events = rec.events
    changes = ("tool_results_reclaimed", "summary_started", "summary_finished")
    for position, index in next_request.items():
        event = events[position]
        call = next(
            q for q in range(position + 1, len(events)) if events[q].type == "usage" and events[q].source == "server"
        )
        if any(e.type in changes for e in events[position + 1 : call]):
            continue  # another change before the same call: that call pays for both
        uncached = server.prompt_sizes[index] - server.cached_sizes[index]
        assert abs(event.cache_miss_tokens - uncached) <= 0.1 * uncached, (event, uncached)
        assert event.saved_per_call == event.tokens_before - event.tokens_after
        checked[event.type] += 1
    assert checked["tool_results_reclaimed"] >= 2 and checked["summary_finished"] >= 1
    saved = Conversation()
    agent.conversation.dump(tmp_path / "s.json")
    rows = [r for r in saved.load(tmp_path / "s.json").compaction_log if r["type"] == "tool_results_reclaimed"]
    assert rows and all(isinstance(r["cache_miss_tokens"], int) for r in rows if r["count"])


def test_events_without_a_change_carry_no_cache_cost():
    assert ToolResultsReclaimed(count=0).to_json()["cache_miss_tokens"] is None
