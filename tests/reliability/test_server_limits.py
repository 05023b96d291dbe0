"""Issue 13, item 12: a server's bad data costs one call at most.

Each test points the real agent at `HostileServer` (real HTTP on loopback): usage figures that cannot be
true, a chunk that is not UTF-8, a stream that trickles a byte every 50 ms forever, and a reply asking for
60 `run_command` calls at once (each records how many were running beside it).
"""

from __future__ import annotations

import asyncio
import gc
import time
import warnings

from xun.agent.call_limits import MAX_PARALLEL_TOOL_CALLS, gather_limited

from .helpers import make_agent
from .hostile_server import HostileServer


async def _run(mode: str, tmp_path, prompt: str = "hello", **settings):
    server = HostileServer(mode)
    try:
        agent, rec, store = make_agent(server, tmp_path, **settings)
        started = time.monotonic()
        finished = await agent.run(prompt)
        return agent, rec, store, finished, time.monotonic() - started, server.requests
    finally:
        server.stop()


async def test_negative_and_absurd_usage_figures_are_not_stored_or_shown(tmp_path):
    for figure in (-999_999, 10**15):
        agent, rec, store, finished, _, _ = await _run(f"usage:{figure}", tmp_path)
        assert finished.status == "ok"
        # nothing of it is believed: no reported count, and the estimate stands alone, labelled so
        assert agent.conversation.total_tokens is None
        assert [event.source for event in rec.of("usage") if event.source != "estimate"] == ["disbelieved"]
        for event in rec.of("usage"):
            for name in ("total_tokens", "prompt_tokens", "completion_tokens"):
                value = getattr(event, name, None)
                assert value is None or 0 <= value < 10_000, (name, value)
        store.save(agent.conversation)
        assert str(figure) not in store.path_for(agent.conversation.conversation_id).read_text()


async def test_a_chunk_that_is_not_utf8_is_retried(tmp_path):
    agent, rec, _, finished, _, requests = await _run("bad-utf8", tmp_path)
    assert finished.status == "ok" and requests == 2
    [retry] = rec.of("retry")
    assert "malformed" in retry.reason or "utf" in retry.reason.lower()
    assert agent.conversation.completion_params()[-1]["content"] == "a fine reply"


async def test_a_stream_that_trickles_forever_is_cut_at_the_deadline(tmp_path):
    agent, rec, _, finished, took, requests = await _run(
        "trickle", tmp_path, provider__deadline=1.0, provider__timeout=0.4, retry__attempts=2
    )
    assert finished.status == "error" and "provider.deadline" in finished.error
    assert requests == 2 and took < 2 * 1.0 + 3.0
    assert [m["role"] for m in agent.conversation.completion_params()] == ["system", "user"]


async def test_the_deadline_bounds_the_call_not_the_making_of_its_client(tmp_path, monkeypatch):
    """`provider.deadline` bounds the model call, not the making of its client (the SDK's import, slow on a
    busy machine): each attempt reaches the server."""
    import xun.agent.bounded_http as bounded_http

    made = bounded_http.bounded_client

    def slow_to_make(*args, **kwargs):
        time.sleep(1.2)  # longer than the deadline
        return made(*args, **kwargs)

    monkeypatch.setattr(bounded_http, "bounded_client", slow_to_make)
    _, _, _, finished, _, requests = await _run(
        "trickle", tmp_path, provider__deadline=1.0, provider__timeout=0.4, retry__attempts=2
    )
    assert finished.status == "error" and "provider.deadline" in finished.error
    assert requests == 2  # both attempts reached the server


async def test_sixty_parallel_commands_run_a_few_at_a_time(tmp_path):
    command = "mkdir -p running; touch running/$$; ls running | wc -l >> counts; sleep 0.2; rm running/$$"
    agent, rec, _, finished, _, _ = await _run(f"calls:60:{command}", tmp_path, auto_confirm=True)
    assert finished.status == "ok"
    assert len(rec.of("tool_call_finished")) == 60
    counts = [int(line) for line in (tmp_path / "counts").read_text().split()]
    assert len(counts) == 60 and max(counts) <= MAX_PARALLEL_TOOL_CALLS
    assert max(counts) > 1  # they do still run side by side


async def test_tool_calls_cancelled_before_they_start_are_closed_not_left_unawaited():
    """Quitting as a reply's tool calls were about to run printed "coroutine ... was never awaited" on the
    terminal at exit: the calls that never started are closed."""

    async def call(n: int) -> int:
        await asyncio.sleep(1)
        return n

    calls = [call(n) for n in range(5)]
    task = asyncio.ensure_future(gather_limited(iter(calls), limit=2))
    await asyncio.sleep(0)  # the gather starts; the first two calls take the gate, the rest wait
    task.cancel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            await task
        except asyncio.CancelledError:
            pass
        del calls, task
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
