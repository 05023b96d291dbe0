"""A user's message in the chat."""

from __future__ import annotations

from textual.widgets import Static


class UserBlock(Static):
    def __init__(self, text: str) -> None:
        super().__init__(text, markup=False, classes="block")
        self.text = text
        self.border_title = "you"
