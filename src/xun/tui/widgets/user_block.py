"""A user's message in the chat; a very long one (a big paste) is folded (`xun.tui.folding`)."""

from __future__ import annotations

from textual import events
from textual.widgets import Static

from xun.tui.folding import fold
from xun.tui.format import literal
from xun.tui.widgets.readable_text import folded_content

TITLE = "your message"


class UserBlock(Static):
    def __init__(self, text: str, *, carried: bool = False) -> None:
        self.folded = fold(text)
        super().__init__(literal(text) if self.folded is None else folded_content(self.folded), classes="block")
        self.text = text
        self.border_title = "you · the turn's prompt, carried past the summary" if carried else "you"

    def read_whole(self) -> None:
        from xun.tui.screens.reader import read_whole  # read when first opened, not at start-up

        read_whole(self.app, TITLE, self.text)

    def on_click(self, event: events.Click) -> None:
        if self.folded is not None:
            event.stop()
            self.read_whole()
