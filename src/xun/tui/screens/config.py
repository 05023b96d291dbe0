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
from xun.tui.format import one_line
from xun.tui.screens.modal import Modal, box_room


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
            rows = [(item.key, shown_value(item.value), item.source) for item in self.items]
            widths = self._fit(rows)
            for label, width in zip(("key", "value", "from"), widths):
                table.add_column(label, key=label, width=width)
            for row, item in zip(rows, self.items):
                table.add_row(*(Text(one_line(cell, width)) for cell, width in zip(row, widths)), key=item.key)
            yield table
            yield Label("", id="config-description")

    def _fit(self, rows: list[tuple[str, str, str]]) -> list[int]:
        """The key whole; the value and where it came from share the rest, each cut with an ellipsis (the
        line under the table has both whole): at 80 columns "default" showed as "defaul"."""
        widths = [
            max([len(label), *(len(one_line(row[i], 200)) for row in rows)])
            for i, label in enumerate(("key", "value", "from"))
        ]
        room = box_room(self.app.size.width) - 2 * 3 - widths[0]
        source = min(widths[2], max(room - widths[1], room // 3, 7))  # what the values leave, at least a third
        return [widths[0], max(min(widths[1], room - source), 8), source]

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        if self.items:
            self._describe(0)

    def _describe(self, row: int) -> None:
        if 0 <= row < len(self.items):
            item = self.items[row]
            # the whole value too (wrapped): a long one is cut in the table's column
            self.query_one("#config-description", Label).update(
                Text(escape_control(f"{item.key} = {shown_value(item.value)}  ({item.source})\n{item.description}"))
            )

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe(event.cursor_row)
