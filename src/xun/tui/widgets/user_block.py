"""A user's message in the chat."""

from __future__ import annotations

from textual.widgets import Static

from xun.tui.format import literal


class UserBlock(Static):
    def __init__(self, text: str, *, carried: bool = False) -> None:
        super().__init__(literal(text), classes="block")
        self.text = text
        self.border_title = "you · the turn's prompt, carried past the summary" if carried else "you"
