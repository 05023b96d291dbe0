"""A text shown whole, in a box that scrolls and stays until Esc: the detail of a compaction-log row (a
toast was cut at the screen's bottom and went away by itself)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from xun.base.valid_text import escape_control
from xun.tui.format import literal
from xun.tui.screens.modal import Modal


class DetailScreen(Modal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close", id="detail.close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(id="detail")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="detail-box") as box:
            box.border_title = self.title_text
            box.border_subtitle = "esc close"
            with VerticalScroll(id="detail-body"):
                yield Static(
                    literal(escape_control(self.text)), id="detail-text"
                )  # reasons come from servers and models

    def on_mount(self) -> None:
        self.query_one("#detail-body").focus()
