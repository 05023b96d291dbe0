"""auto_compact.mode = "ask": may the automatic summary run now? Run now, not now, or turn automatic
summaries off for this session. Unanswered, the summary runs after ask_timeout (the agent stops waiting
and the app closes this screen). Keys typed ahead cannot answer (`GuardedQuestion`): the "o" of a word
typed as it opens must not turn automatic summaries off."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label

from xun.tui.screens.guarded import GuardedQuestion

ANSWERS = ("now", "not_now", "off")
"""What the screen dismisses with: summarise now, not now (for this turn), off for this session."""


class ConsentScreen(GuardedQuestion[str]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,f5", "answer('now')", "Summarise now", id="consent.yes"),
        Binding("n,escape", "answer('not_now')", "Not now", id="consent.no"),
        Binding("o", "answer('off')", "Off for this session", id="consent.off"),
    ]
    ANSWER_KEYS = frozenset("yno")
    BOX_ID = "consent-box"
    SUBTITLE = "y run now · n/Esc not now · o off for this session"

    def __init__(self, situation: str, timeout: float, *, keep_text: str = "", countdown: bool = True) -> None:
        super().__init__(id="consent")
        self.situation = situation
        """Why it asks, as it is now: e.g. "The context is over the threshold (9.1k / 8k)."."""
        self.timeout = timeout
        self._opened = time.monotonic()
        self.countdown = countdown
        self.keep_text = keep_text
        """What the summary would do, e.g. "9 messages summarised, 4 kept" (empty when unknown)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="consent-box") as box:
            box.border_title = "summarise the conversation?"
            box.border_subtitle = self.WAITING
            yield Label(self._text(self.timeout), id="consent-text")
            with Horizontal(id="consent-buttons"):
                yield Button("Run now (y)", id="now", variant="primary", compact=True, disabled=True)
                yield Button("Not now (n)", id="not_now", compact=True, disabled=True)
                yield Button(
                    "Off for this session (o)",
                    id="off",
                    variant="warning",
                    compact=True,
                    disabled=True,
                    tooltip='Sets auto_compact.mode = "off" until the app quits; F5 still summarises',
                )

    def _text(self, left: float) -> Text:
        what = f" ({self.keep_text})" if self.keep_text else ""
        return Text(f"{self.situation} Summarise older turns now{what}? Without an answer it runs in {left:.0f} s.")

    def on_mount(self) -> None:
        super().on_mount()
        if self.countdown:
            self.set_interval(1, self._count_down, name="consent countdown")

    def _count_down(self) -> None:
        left = max(0.0, self.timeout - (time.monotonic() - self._opened))
        self.query_one("#consent-text", Label).update(self._text(left))

    def focus_for(self, armed: bool) -> None:
        if armed:
            self.query_one("#now", Button).focus()

    def action_answer(self, answer: str) -> None:
        if self.armed:
            self.dismiss(answer if answer in ANSWERS else "not_now")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.armed and event.button.id in ANSWERS:
            self.dismiss(event.button.id)
