"""auto_compact.mode = "ask": may the automatic summary run now? (It runs anyway after ask_timeout.)"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class ConsentScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Summarise", id="consent.yes"),
        Binding("n,escape", "answer(False)", "Not now", id="consent.no"),
    ]

    def __init__(self, tokens_text: str, timeout: float) -> None:
        super().__init__(id="consent")
        self.tokens_text = tokens_text
        self.timeout = timeout

    def compose(self) -> ComposeResult:
        with Vertical(id="consent-box") as box:
            box.border_title = "summarise the conversation?"
            yield Label(Text(f"The context is over the threshold ({self.tokens_text}). Summarise older turns now? "
                             f"Without an answer it runs in {self.timeout:g} s."))
            with Horizontal(id="consent-buttons"):
                yield Button("Summarise (y)", id="yes", variant="primary", compact=True)
                yield Button("Not now (n)", id="no", compact=True)

    def action_answer(self, answer: bool) -> None:
        self.dismiss(bool(answer))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")
