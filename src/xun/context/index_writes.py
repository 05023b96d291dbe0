"""The search index's writes a conversation owes: queued in the step that changes what is history, then
run in order, inline (the synchronous API) or in a worker thread (the async one, so SQLite's work stays
off the event loop), their warnings handed back on the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from xun.context.messages import Message
from xun.context.reclaimed import ReclaimedToolResult


class RecallListener(Protocol):
    """Told what leaves the context, in the same step (the recall index, `xun.context.recall.RecallIndex`,
    listens): each call returns a warning to show, or None. On async paths the calls run in a worker thread."""

    def index_offload(
        self, session: str, messages: Iterable[Message], *, reclaimed: Mapping[str, str] | None = None, when: str
    ) -> str | None: ...

    def index_reclaimed(self, session: str, results: Iterable[tuple[ReclaimedToolResult, str]]) -> str | None: ...

    def forget_reclaimed(self, session: str, tool_call_ids: Iterable[str] | None = None) -> str | None: ...


class IndexWrite:
    """One queued write to the search index: `write` only uses what it was given when queued (never the
    conversation), so it can run in any thread; `settle` takes its warning afterwards, on the loop."""

    __slots__ = ("write", "settle", "warning", "done")

    def __init__(self, write: Callable[[], str | None], settle: Callable[[str | None], None] | None) -> None:
        self.write = write
        self.settle = settle
        self.warning: str | None = None
        self.done = False


class IndexWrites:
    """The index writes a conversation owes, run strictly in the order they were queued, by one runner
    at a time: a restore's delete can never overtake the insert of the reclaim before it, even when that
    insert is still running in a worker thread."""

    def __init__(self) -> None:
        self._queue: collections.deque[IndexWrite] = collections.deque()
        self._lock = threading.Lock()
        self._owed: collections.deque[IndexWrite] = collections.deque()
        """Queued writes whose warnings have not been taken yet (touched on the loop's thread only)."""

    def add(self, write: Callable[[], str | None], settle: Callable[[str | None], None] | None) -> IndexWrite:
        """Queue a write; `settle` takes its warning once it has run."""
        job = IndexWrite(write, settle)
        self._owed.append(job)
        self._queue.append(job)
        return job

    def run(self) -> None:
        """Run every queued write (any thread). Waits for a runner already at work in another thread."""
        with self._lock:
            while self._queue:
                job = self._queue.popleft()
                try:
                    job.warning = job.write()
                except Exception as exc:  # noqa: BLE001 - the index's own calls never raise; this is a last guard
                    job.warning = (
                        f"the search index was not updated ({type(exc).__name__}: {exc}); run `xun history --reindex`"
                    )
                job.done = True

    def settle(self) -> None:
        """Hand the warnings of finished writes to their steps, in order (on the loop's thread only)."""
        owed = self._owed
        while owed and owed[0].done:
            job = owed.popleft()
            if job.settle is not None:
                job.settle(job.warning)

    def run_here(self) -> None:
        """Run the queued writes here and now, and settle them."""
        self.run()
        self.settle()

    async def run_in_thread(self) -> None:
        """Run the queued writes in a worker thread (the event loop stays free), and settle them."""
        if self._owed and not self._owed[-1].done:  # queued, or still running in another runner
            await in_thread_despite_cancel(self.run)
        self.settle()


async def in_thread_despite_cancel(fn: Callable[[], None]) -> None:
    """Run `fn` in a worker thread and wait for it to finish even when the task is cancelled meanwhile:
    the conversation has already changed, so the step must end whole (its warnings taken, its events
    sent) before the cancellation is delivered, at the task's next await, as it was when the step was
    synchronous."""
    future = asyncio.ensure_future(asyncio.to_thread(fn))
    task = asyncio.current_task()
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled() or task is None:
                raise
            cancelled = True
            task.uncancel()
    future.result()
    if cancelled and task is not None:
        task.cancel()
