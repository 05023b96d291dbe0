"""The whole text of a chat block that is folded there (a long paste, reply, tool call or result), in a
view that renders only the rows in view, with a key to copy it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Label

from xun.tui.format import literal
from xun.tui.screens.modal import Modal
from xun.tui.widgets.text_pager import TextPager


def read_whole(app: App[object], title: str, text: str) -> None:
    """Open the reader on `text`."""
    app.push_screen(ReaderScreen(title, text))


class ReaderScreen(Modal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss(None)", "Close", id="reader.close"),
        Binding("c", "copy", "Copy", id="reader.copy"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(id="reader")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        lines = self.text.count("\n") + 1
        with Vertical(id="reader-box") as box:
            box.border_title = literal(self.title_text, flat=True)
            box.border_subtitle = "c copy · home/end · pgup/pgdn · esc close"
            yield Label(
                f"{lines:,} line{'s' if lines != 1 else ''} · {len(self.text):,} characters · shown whole, "
                "long lines folded at the width",
                id="reader-summary",
            )
            yield TextPager(self.text, id="reader-body")

    def on_mount(self) -> None:
        self.query_one(TextPager).focus()

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.text)
        self.query_one("#reader-summary", Label).update(
            f"sent {len(self.text):,} characters to the terminal's clipboard; if nothing arrives there (some "
            "terminals refuse), /render FILE exports the whole conversation"
        )
