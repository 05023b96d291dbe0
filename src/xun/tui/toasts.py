"""Which toasts show now, and which wait for a dialog to close, without Textual.

A dialog opened to be read (F1, F7, F9) must not be covered by a toast: the toasts on screen wait until it
closes; a question (`Modal.HOLDS_TOASTS`) holds the ones raised while it is open too, so none covers its
buttons or its keys. A toast that no longer holds (the context fell back under the threshold) is withdrawn
wherever it is: waiting, let go but not yet shown, or raised and still in Textual's queue.

The app owns one `ToastHold` (`app.toasts`) and does what it decides: `XunApp.notify` shows only what
`admit` lets through, a dialog calls `hold`/`release`, and `withdrawn` drops a queued toast of a title
taken back since.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

Toast = dict[str, Any]
"""A toast as `App.notify` takes it: message, title, severity, timeout."""

ANSWERS_A_KEY = frozenset({"Quit?"})
"""Toasts that answer the key just pressed: a question holding the others back still shows these, so a
Ctrl+C under a confirmation always says "Quit?" before a second one quits."""


class ToastHold:
    """The toasts shown lately, those waiting for a dialog, and the titles withdrawn. `timeout` is how long
    a toast with none of its own shows (Textual's `NOTIFICATION_TIMEOUT`)."""

    def __init__(
        self,
        timeout: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._timeout = timeout
        self._clock = clock
        self._wall_clock = wall_clock
        self._recent: deque[tuple[float, Toast]] = deque(maxlen=8)
        """The toasts shown lately, with when (`clock`): those still on screen wait when a dialog opens."""
        self._held: list[Toast] | None = None
        """While a dialog is open, the toasts that wait for it to close (None: none is open)."""
        self._holding_new = False
        """Whether toasts raised while it is open wait too (a question)."""
        self._releasing: list[Toast] = []
        """Toasts a closed dialog let go, to be shown after the next refresh (`due`)."""
        self._withdrawn_at: dict[str, float] = {}
        """When the toasts of a title were last withdrawn (`wall_clock`, as a notification's `raised_at`)."""

    @property
    def holding(self) -> bool:
        """Whether a dialog holds the toasts."""
        return self._held is not None

    def admit(self, toast: Toast) -> bool:
        """Whether `toast` shows now; if not, it waits for the open question to close."""
        if self._held is not None and self._holding_new and toast["title"] not in ANSWERS_A_KEY:
            self._held.append(toast)
            return False
        self._recent.append((self._clock(), toast))
        return True

    def hold(self, *, new_ones_too: bool) -> bool:
        """A dialog opened: the toasts still on screen wait for it (and, for a question, those to come).
        Whether it is the first to hold them: then the screen's toasts are to be cleared."""
        first = self._held is None
        if first:
            now = self._clock()
            self._held = [toast for raised, toast in self._recent if now - raised < (toast["timeout"] or self._timeout)]
            self._recent.clear()
        self._holding_new = self._holding_new or new_ones_too
        return first

    def release(self) -> list[Toast]:
        """The dialog closed: the toasts that waited, to be shown (each once `due` says it still is)."""
        held, self._held, self._holding_new = self._held, None, False
        self._releasing.extend(held or ())
        return list(held or ())

    def due(self, toast: Toast) -> bool:
        """Whether a released toast is still to be shown (not withdrawn since); it is shown once."""
        if toast in self._releasing:
            self._releasing.remove(toast)
            return True
        return False

    def withdraw(self, title: str) -> None:
        """The toasts with this title no longer hold: none waiting or let go is shown, nor one still queued
        (`withdrawn`); those on screen are the app's to take down."""
        self._withdrawn_at[title] = self._wall_clock()
        if self._held is not None:
            self._held = [toast for toast in self._held if toast["title"] != title]
        self._releasing = [toast for toast in self._releasing if toast["title"] != title]
        for entry in [entry for entry in self._recent if entry[1]["title"] == title]:
            self._recent.remove(entry)

    def withdrawn(self, title: str, raised_at: float) -> bool:
        """Whether a toast raised at `raised_at` (`wall_clock`) was withdrawn before it was shown."""
        return raised_at <= self._withdrawn_at.get(title, float("-inf"))
