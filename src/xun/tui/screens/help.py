"""F1: every key and every slash command."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from xun.tui.screens.modal import Modal


class HelpScreen(Modal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss(None)", "Close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__(id="help")
        self.sections = sections

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = "xun · keys and commands"
            box.border_subtitle = "esc close"
            with VerticalScroll(id="help-body"):
                for title, rows in self.sections:
                    table = Table(
                        title=Text(title, style="bold"),
                        title_justify="left",
                        show_header=False,
                        box=None,
                        expand=True,
                        padding=(0, 1),
                    )
                    table.add_column(style="bold", no_wrap=True)
                    table.add_column(ratio=1)
                    for key, text in rows:
                        table.add_row(Text(key), Text(text))
                    yield Static(table, classes="help-section")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()
