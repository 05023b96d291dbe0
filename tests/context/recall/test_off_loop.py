"""The index writes of the agent's async paths run in a worker thread, so the event loop (and a front end
on it) keeps running during a large reclaim; the synchronous API still writes inline; order, warnings
and cancellation behave as when the write was part of the step."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agent.helpers import Recorder, make_agent, write_files  # tests/ is on sys.path (rootdir-relative packages)
from xun.agent.loop import Agent
from xun.compact.summary import compact_conversation
from xun.agent.config import XunConfig
from xun.context.offload import read_offload_log
from xun.context.recall import RecallIndex

from .conftest import all_rows, busy_session

GUARD = 30.0
"""Seconds a gated write waits before giving up: a guard against hanging, never reached when it passes."""


def bare_agent(conversation, workdir) -> tuple[Agent, Recorder]:
    recorder = Recorder()
    return Agent(XunConfig(), conversation=conversation, workdir=workdir, on_event=recorder, environ={}), recorder


def record_threads(monkeypatch) -> list[tuple[str, int]]:
    """Which thread ran each index write of the engine: (method, thread id), in order."""
    calls: list[tuple[str, int]] = []
    for name in ("index_reclaimed", "index_offload", "forget_reclaimed"):
        real = getattr(RecallIndex, name)

        def wrapper(self, *args, _real=real, _name=name, **kwargs):
            calls.append((_name, threading.get_ident()))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(RecallIndex, name, wrapper)
    return calls


async def test_a_large_reclaim_lets_the_event_loop_run_while_the_index_is_written(store, monkeypatch):
    c = busy_session(store.new(), "big", rounds=400)
    agent, recorder = bare_agent(c, store.workdir)
    loop_thread = threading.get_ident()
    ticks = 0
    seen: dict[str, int] = {}
    real = RecallIndex.index_reclaimed

    def index_reclaimed(self, session, results):
        seen["thread"] = threading.get_ident()
        start = ticks
        if seen["thread"] != loop_thread:  # the loop is free: it must run the ticker while this write waits
            deadline = time.monotonic() + GUARD
            while ticks < start + 3 and time.monotonic() < deadline:
                time.sleep(0.001)
        out = real(self, session, results)
        seen["ticks"] = ticks - start
        return out

    monkeypatch.setattr(RecallIndex, "index_reclaimed", index_reclaimed)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        result = await agent.reclaim_tool_results(keep_max=2)
    finally:
        ticking.cancel()
    assert seen["thread"] != loop_thread  # the SQLite work ran in another thread ...
    assert seen["ticks"] >= 3  # ... and the event loop went on meanwhile
    assert result.reclaimed_count == 398
    assert store.recall_index.stats().reclaimed == 398  # written before the reclaim returned
    assert [h.tool_call_id for h in store.recall_index.search("markerbig17")] == ["call_big_17"]
    assert recorder.of("tool_results_reclaimed")[0].count == 398 and not recorder.of("warning")


async def test_every_async_path_writes_off_the_loop_and_the_log_and_index_agree(
    offline_server, store, workdir, monkeypatch
):
    write_files(workdir, 5)
    agent, recorder = make_agent(offline_server, workdir)
    agent.conversation.recall_index = store.recall_index
    for i in range(1, 6):
        await agent.run(f"please read f{i}.py")
    calls = record_threads(monkeypatch)
    reclaimed = await agent.reclaim_tool_results(keep_max=1)
    restored = reclaimed.reclaimed_ids[0]
    await agent.restore_tool_result(restored)
    summary = await compact_conversation(agent, keep_recent=2)
    assert summary.compacted and summary.warning is None and not recorder.of("warning")
    assert [name for name, _ in calls] == ["index_reclaimed", "forget_reclaimed", "index_offload"]
    assert threading.get_ident() not in {thread for _, thread in calls}
    logged = sorted(e.text for s in read_offload_log(summary.offload_path) for e in s.entries)
    assert sorted(r[11] for r in all_rows(store.recall_index) if r[1] == "offload") == logged
    assert store.recall_index.stats().reclaimed == len(agent.conversation.reclaimed_results)


def test_the_synchronous_api_still_writes_inline(store, monkeypatch):
    calls = record_threads(monkeypatch)
    c = busy_session(store.new(), "s", rounds=6)
    c.reclaim_tool_results(keep_max=1)
    assert store.recall_index.stats().reclaimed == 5
    c.restore_tool_result("call_s_2")
    assert store.recall_index.stats().reclaimed == 4
    result = c.compact(lambda messages: "S", keep_recent=4)
    assert result.compacted and store.recall_index.stats().offloaded > 0
    c.clear()
    assert store.recall_index.stats().reclaimed == 0
    # what /clear drops is offloaded (and indexed) before the reclaimed originals are forgotten
    assert [name for name, _ in calls] == [
        "index_reclaimed",
        "forget_reclaimed",
        "index_offload",
        "index_offload",
        "forget_reclaimed",
    ]
    assert {thread for _, thread in calls} == {threading.get_ident()}


async def test_a_restore_never_overtakes_the_reclaim_still_being_written(store, monkeypatch):
    c = busy_session(store.new(), "o", rounds=6)
    order: list[str] = []
    started, release = threading.Event(), threading.Event()
    real_index, real_forget = RecallIndex.index_reclaimed, RecallIndex.forget_reclaimed

    def index_reclaimed(self, session, results):
        started.set()
        release.wait(GUARD)
        out = real_index(self, session, results)
        order.append("index")
        return out

    def forget_reclaimed(self, session, ids=None):
        out = real_forget(self, session, ids)
        order.append("forget")
        return out

    monkeypatch.setattr(RecallIndex, "index_reclaimed", index_reclaimed)
    monkeypatch.setattr(RecallIndex, "forget_reclaimed", forget_reclaimed)
    reclaim = asyncio.create_task(c.areclaim_tool_results(keep_max=1))
    while not started.is_set():
        await asyncio.sleep(0.001)
    assert "call_o_2" in c.reclaimed_results  # the conversation changed already; the index is being written
    restore = asyncio.create_task(c.arestore_tool_result("call_o_2"))
    for _ in range(20):  # give a restore that would not wait its turn the time to overtake
        if restore.done():
            break
        await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(reclaim, restore)
    assert order == ["index", "forget"]
    assert store.recall_index.search("markero2") == [] and store.recall_index.stats().reclaimed == 4
    assert c.recall_warnings == []


async def test_a_cancel_during_the_write_lands_after_the_reclaim_is_complete_and_reported(store, monkeypatch):
    c = busy_session(store.new(), "k", rounds=6)
    agent, recorder = bare_agent(c, store.workdir)
    started, release = threading.Event(), threading.Event()
    real = RecallIndex.index_reclaimed

    def index_reclaimed(self, session, results):
        started.set()
        release.wait(GUARD)
        return real(self, session, results)

    monkeypatch.setattr(RecallIndex, "index_reclaimed", index_reclaimed)
    after_reclaim: list[str] = []

    async def turn() -> None:
        await agent.reclaim_tool_results(keep_max=1)
        after_reclaim.append("went on")  # no await between: the cancel has not landed yet
        await asyncio.sleep(0)
        after_reclaim.append("still going")

    task = asyncio.create_task(turn())
    while not started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()  # a second Esc while the write is still running
    await asyncio.sleep(0.01)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert after_reclaim == ["went on"]  # cancelled at the first await after the reclaim
    assert recorder.of("tool_results_reclaimed")[0].count == 5  # reported, and in the session's log
    assert c.compaction_log[-1]["type"] == "tool_results_reclaimed"
    assert store.recall_index.stats().reclaimed == 5


async def test_a_summary_carries_the_index_warning_written_in_the_thread(store):
    from .test_engine import Broken

    broken = Broken(store.workdir)
    c = busy_session(store.new(), "w", rounds=6)
    c.recall_index = broken

    async def summarize(messages):
        return "SUMMARY"

    result = await c.acompact(summarize, keep_recent=4)
    assert result.compacted and "search index was not updated" in result.warning
    assert c.summarizations[-1].warning == result.warning
    assert c.recall_warnings == []  # a summary's own index problem is its result's warning
    await c.areclaim_tool_results(keep_max=0)
    assert len(c.recall_warnings) == 1 and "safe in the session" in c.recall_warnings[0]
