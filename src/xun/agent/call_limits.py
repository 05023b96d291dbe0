"""Limits on what a server or a model can make one call cost: figures that cannot be true, a call that
never ends, a reply that starts hundreds of tools at once.

- `valid_total_tokens`/`valid_usage`: a server's usage is believed only when it is a whole number from 0
  to `MAX_REPORTED_TOKENS`; otherwise the estimate stands in (a `-999,999 tokens` was stored and shown).
- `within_deadline`: one model call, streaming included, ends within `provider.deadline` seconds; the
  per-chunk timeout alone never fires on a stream that sends a byte every 50 ms forever.
- `gather_limited`: the tool calls of one reply run at most `MAX_PARALLEL_TOOL_CALLS` at a time.
- `raise_if_cancel_pending`: a cancel that an `asyncio.wait_for` swallowed still ends the turn.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

__all__ = [
    "MAX_PARALLEL_TOOL_CALLS",
    "MAX_REPORTED_TOKENS",
    "CallDeadlineExceeded",
    "gather_limited",
    "raise_if_cancel_pending",
    "valid_total_tokens",
    "valid_usage",
    "within_deadline",
]

MAX_REPORTED_TOKENS = 100_000_000
"""No context is this large; a bigger (or negative) figure is a broken or hostile server."""
MAX_PARALLEL_TOOL_CALLS = 8
"""Tool calls of one reply that run at the same time (the rest wait their turn, in order)."""

T = TypeVar("T")


class CallDeadlineExceeded(TimeoutError):
    """A model call took longer than `provider.deadline` in all (the agent retries it as transient)."""


def valid_total_tokens(usage: Any) -> int | None:
    """`usage.total_tokens` when believable, else None."""
    value = getattr(usage, "total_tokens", None)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPORTED_TOKENS:
        return None
    return value


def valid_usage(usage: Any) -> Any:
    """The usage object when all its figures are believable, else None (nothing of it is shown)."""
    if usage is None or valid_total_tokens(usage) is None:
        return None
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(usage, name, None)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPORTED_TOKENS
        ):
            return None
    return usage


async def within_deadline(call: Awaitable[T], seconds: float) -> T:
    """Await `call`, cancelling it after `seconds` with CallDeadlineExceeded."""
    try:
        return await asyncio.wait_for(call, seconds)
    except TimeoutError:
        raise CallDeadlineExceeded(
            f"the model call took longer than {seconds:g} s in all (provider.deadline); "
            "the server kept the stream open without finishing"
        ) from None


async def gather_limited(calls: Iterable[Awaitable[T]], limit: int = MAX_PARALLEL_TOOL_CALLS) -> list[T]:
    """`asyncio.gather` with at most `limit` of `calls` running at once; results in the order given. A call
    cancelled before it started (the turn cancelled, xun quit) is closed, so Python does not warn at exit
    that it was never awaited."""
    gate = asyncio.Semaphore(limit)
    pending = list(calls)

    async def one(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    try:
        return list(await asyncio.gather(*(one(call) for call in pending)))
    finally:
        for call in pending:
            if inspect.iscoroutine(call) and inspect.getcoroutinestate(call) == inspect.CORO_CREATED:
                call.close()


def raise_if_cancel_pending() -> None:
    """Raise CancelledError when the current task was asked to cancel and is still running: Python 3.11's
    `asyncio.wait_for` returns the result of a call that finished just as its task was cancelled, and the
    cancel is lost (a Ctrl+Q or Esc as a command finished left the turn running to its end)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
