"""The app's heap and the cyclic garbage collector: frozen once the session shows, fully collected while
nobody types.

Everything alive when the session shows (Textual, the app, the loaded session) lives as long as the app;
`freeze` moves it out of the collector's reach, or a full collection would walk all of it every few seconds
while a reply streams, a pause of 100 ms or more that the keyboard feels.

What stays is mostly the chat's: every jump in a long session (Home, End, a search hit) releases a page of
blocks, with their styles and rendered lines, as cyclic garbage that only a full collection takes. With the
mounted blocks' own render caches, a full collection there walks a few hundred thousand objects, 0.25 to 0.5
s at 30,000 messages, and one that lands between a key and its frame delays the frame by as much. So the
collector's own full collections are rare while the heap is frozen (`FULL_COLLECTION_CAP` middle ones apart,
which bounds the garbage however busy the keyboard), and `collect_if_quiet` runs one at the first moment
input has been quiet for `QUIET_SECONDS` once `FULL_COLLECTION_EVERY` middle collections have passed."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_COLLECTION_EVERY = 100
"""Middle collections after which a full one runs at the next quiet moment (Python's own rule is every 10th)."""
FULL_COLLECTION_CAP = 1_000
"""Middle collections after which the collector runs a full one itself, quiet or not."""
QUIET_SECONDS = 1.0
"""Seconds without a key, a paste or a click before a full collection may run."""
CHECK_SECONDS = 0.25
"""How often the app asks `collect_if_quiet`."""


class HeapKeeper:
    """Owns the collector's state while an app runs: whether the app froze the heap, the thresholds to put
    back, and when input last came."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.frozen = False
        self._full_threshold = gc.get_threshold()[2]
        """The collector's third threshold before `freeze` raised it (put back by `release`)."""
        self._input_at = clock()

    def freeze(self) -> None:
        """Collect, freeze what is alive and resume the collector with rare full collections of its own.
        The collection before the freeze is a full one only when the collector was paused (`xun.tui.run`):
        nothing made since was ever collected. An app hosted with the collector running (Pilot tests, an
        embedding program) collects the young generations only; a full collection there walks the host's
        whole heap, a third of a second in a test worker, for garbage the collector has been taking all along."""
        gc.collect(1 if gc.isenabled() else 2)
        gc.freeze()
        young, middle, full = gc.get_threshold()
        if not self.frozen:  # a session opened again (after the trust question) keeps the first value
            self._full_threshold = full
        gc.set_threshold(young, middle, FULL_COLLECTION_CAP)
        gc.enable()
        self.frozen = True

    def release(self) -> None:
        """Unfreeze what the app froze (it may be collected once the app is gone) and put the threshold back."""
        if not self.frozen:
            return
        gc.unfreeze()
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, self._full_threshold)
        self.frozen = False

    def input_seen(self) -> None:
        self._input_at = self._clock()

    def collect_if_quiet(self) -> bool:
        """A full collection, when one is due and input has been quiet long enough; whether it ran."""
        due = self.frozen and gc.isenabled() and gc.get_count()[2] >= FULL_COLLECTION_EVERY
        if not due or self._clock() - self._input_at < QUIET_SECONDS:
            return False
        gc.collect()
        return True
