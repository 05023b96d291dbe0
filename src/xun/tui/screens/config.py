"""/config: every setting, its value, where it came from, and what it does."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from xun.agent.config import ConfigItem
from xun.base.valid_text import escape_control
from xun.tui.screens.modal import Modal


def shown_value(value: object) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "[]"
    return str(value)


class ConfigScreen(Modal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close", id="config.close")]

    def __init__(self, items: list[ConfigItem]) -> None:
        super().__init__(id="config")
        self.items = items

    def compose(self) -> ComposeResult:
        with Vertical(id="config-box") as box:
            box.border_title = "settings"
            box.border_subtitle = "set them in .xun/config.toml or ~/.config/xun/config.toml · esc close"
            table: DataTable[Text] = DataTable(id="config-table", cursor_type="row")
            table.add_columns("key", "value", "from")
            for item in self.items:
                table.add_row(Text(escape_control(item.key)), Text(escape_control(shown_value(item.value))),
                              Text(escape_control(item.source)), key=item.key)
            yield table
            yield Label("", id="config-description")

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        if self.items:
            self._describe(0)

    def _describe(self, row: int) -> None:
        if 0 <= row < len(self.items):
            item = self.items[row]
            # the whole value too (wrapped): a long one is cut in the table's column
            self.query_one("#config-description", Label).update(
                Text(escape_control(f"{item.key} = {shown_value(item.value)}  ({item.source})\n{item.description}")))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe(event.cursor_row)
