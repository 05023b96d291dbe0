"""A pattern that backtracks forever: `search_text` froze the event loop (Ctrl+C did nothing).

Here the real agent runs the search on the offline model while a ticker coroutine must keep ticking, and
the search must end with "took too long".
"""

from __future__ import annotations

import asyncio
import time

from xun.agent.tools import builtin

from .helpers import make_agent


async def test_a_pattern_that_backtracks_forever_is_stopped_and_the_loop_keeps_running(
    offline_server, tmp_path, monkeypatch
):
    monkeypatch.setattr(builtin, "SEARCH_TIME_LIMIT", 1.5)
    (tmp_path / "a.txt").write_text("a" * 60 + "b\n")
    agent, rec, _ = make_agent(offline_server, tmp_path)
    await agent.run("hello")  # the first call imports and connects; the loop is measured after that
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.05)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.ensure_future(ticker())
    started = time.monotonic()
    finished = await agent.run("search for `(a|aa)+$` in a.txt")
    took = time.monotonic() - started
    done.set()
    await ticking
    assert finished.status == "ok"
    [call] = rec.of("tool_call_finished")
    assert call.is_error and "took too long" in call.error
    assert took < 1.5 * 3 + 5
    assert max(gaps) < 1.0, f"the event loop stalled for {max(gaps):.2f} s"


async def test_the_reported_pattern_now_answers_at_once(offline_server, tmp_path):
    (tmp_path / "a.txt").write_text("a" * 34 + "b\n")
    agent, rec, _ = make_agent(offline_server, tmp_path)
    started = time.monotonic()
    await agent.run("search for `(a+)+$` in a.txt")
    [call] = rec.of("tool_call_finished")
    assert not call.is_error and time.monotonic() - started < 10
