"""The heap's keeper: full collections wait for a moment nobody types (`xun.tui.heap`), unit-tested on a clock
the test moves, then in the app, where a key or a paste must put the collection off."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from xun.tui.app import XunApp
from xun.tui.heap import FULL_COLLECTION_CAP, FULL_COLLECTION_EVERY, QUIET_SECONDS, HeapKeeper

from .helpers import session_ready, wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    """One entry for each full collection that starts while the test runs."""
    seen: list[int] = []

    def started(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(2)

    gc.callbacks.append(started)
    try:
        yield seen
    finally:
        gc.callbacks.remove(started)


def make_due(full_collections: list[int]) -> None:
    """Exactly as many middle collections since a full one as make the next one due (each `gc.collect(1)`
    counts one): far from the collector's own cap, which a worker that ran other tests may have passed."""
    gc.collect()
    for _ in range(FULL_COLLECTION_EVERY):
        gc.collect(1)
    full_collections.clear()


def test_a_due_full_collection_waits_until_input_has_been_quiet(full_collections):
    clock = Clock()
    heap = HeapKeeper(clock)
    before = gc.get_threshold()
    heap.freeze()
    try:
        assert gc.get_threshold() == (*before[:2], FULL_COLLECTION_CAP)
        make_due(full_collections)
        for _ in range(8):  # a key every 0.3 s for 2.4 s: never quiet long enough
            clock.now += 0.3
            heap.input_seen()
            assert not heap.collect_if_quiet()
        clock.now += QUIET_SECONDS - 0.01
        assert not heap.collect_if_quiet()
        assert full_collections == []
        clock.now += 0.01
        assert heap.collect_if_quiet()
        assert len(full_collections) == 1
        assert not heap.collect_if_quiet(), "none is due right after one"
    finally:
        heap.release()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_nothing_is_collected_for_an_app_that_froze_nothing(full_collections):
    clock = Clock()
    heap = HeapKeeper(clock)
    make_due(full_collections)
    clock.now += 60
    assert not heap.collect_if_quiet()
    heap.release()  # nothing to put back
    assert gc.get_freeze_count() == 0


async def test_in_the_app_typing_and_pasting_put_the_full_collection_off(
    offline_server, session_factory, full_collections
):
    """The keys go through the app as a person's do; the clock that judges quiet is the test's, moved 0.3 s a
    key, so a slow machine cannot make a pause the test did not make."""
    from textual import events

    clock = Clock()
    app = XunApp(session_factory(offline_server))
    app.heap = HeapKeeper(clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await session_ready(pilot, app)
        await wait_until(pilot, lambda: app.heap.frozen, what="the heap frozen once the session showed")
        make_due(full_collections)
        for key in "typing on":
            clock.now += 0.3
            await pilot.press("space" if key == " " else key)
        clock.now += 0.3
        app.post_message(events.Paste("and a paste"))
        await pilot.pause(0.6)  # a couple of the app's checks, none quiet
        assert full_collections == [], "a full collection ran while keys kept coming"
        assert app.main.prompt.text == "typing onand a paste"
        clock.now += QUIET_SECONDS
        await wait_until(pilot, lambda: full_collections, what="the full collection once input was quiet")
