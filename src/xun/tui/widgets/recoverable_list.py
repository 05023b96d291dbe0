"""The recoverable tool results: one row per reclaimed result or call's arguments (tool, marked "args" for
arguments; arguments; original size in tokens; when reclaimed; short id), filtered by typing; Enter opens
the inspector. The table mounts a page of the rows (`PagedTable`): a session of weeks has thousands."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Input

from xun.base.valid_text import escape_control
from xun.context.reclaimed import ARGUMENTS, ReclaimedToolResult
from xun.tui.format import TOKENS_PER_CHAR, tokens
from xun.tui.messages import OpenInspector
from xun.tui.widgets.paged_table import PagedTable
from xun.tui.widgets.tool_block import call_subject


def short_id(call_id: str) -> str:
    return call_id[-8:] if len(call_id) > 8 else call_id


LABELS = ("tool", "arguments", "tokens", "when", "id")
"""The columns: what was called on what first (a narrow pane cuts the id, the least telling column)."""
ARGUMENTS_MIN = 8
"""Narrower than this, the arguments column keeps this width and the table scrolls sideways."""

Cells = tuple[str, str, str, str, str]
ListedRow = tuple[ReclaimedToolResult, bool, Cells]
"""A row's record, whether a summary took its placeholder out, and its cells as plain text."""


class RecoverableList(Vertical):
    TAKES_TYPING: ClassVar[bool] = True
    """Typing filters the list: it does not go to the prompt."""

    def __init__(self, *, clock: Callable[[float], str], cursor_blink: bool = True) -> None:
        super().__init__(id="recoverable", classes="pane")
        self.border_title = "recoverable results"
        self._clock = clock
        self._cursor_blink = cursor_blink
        self.records: dict[str, ReclaimedToolResult] = {}
        self.shown: list[str] = []
        """Ids of the rows on screen, in order."""
        self.summarised: set[str] = set()
        """Reclaimed results whose placeholder a summary took out of the context: readable (the inspector,
        the offload log, F9), no longer restorable."""
        self._cells: dict[str, tuple[ReclaimedToolResult, bool, Cells]] = {}
        """Each row's cells as last made, by id: a refill makes only the new or changed ones."""
        self._widths: list[int] = []
        """The columns' widths for the rows listed (their widest cells)."""

    def compose(self) -> ComposeResult:
        filter_input = Input(placeholder="type to filter", id="recoverable-filter", compact=True)
        filter_input.cursor_blink = self._cursor_blink
        filter_input.can_focus = False  # typing while the table has the keyboard fills it: one stop on Tab, not two
        yield filter_input
        table = PagedTable(
            title="recoverable results",
            titled=self,
            render=self._row_cells,
            id="recoverable-table",
            cursor_type="row",
            zebra_stripes=True,
        )
        for label in LABELS:  # as Text: a str is read as markup, whose first use costs the first frame 3 ms
            table.add_column(Text(label), key=label)
        yield table

    @property
    def table(self) -> PagedTable:
        return self.query_one("#recoverable-table", PagedTable)

    @property
    def filter_text(self) -> str:
        return self.query_one("#recoverable-filter", Input).value

    def set_filter(self, text: str) -> None:
        self.query_one("#recoverable-filter", Input).value = text

    def on_mount(self) -> None:
        self._refill()

    # -------------------------------------------------------------------------------------- rows

    def load(self, records: Iterable[ReclaimedToolResult]) -> None:
        self.records = {record.tool_call_id: record for record in records}
        self.summarised &= self.records.keys()  # (none left after /clear)
        self._refill()

    def add(self, records: Iterable[ReclaimedToolResult]) -> None:
        for record in records:
            self.records[record.tool_call_id] = record
        self._refill()

    def set_summarised(self, ids: Iterable[str]) -> None:
        summarised = set(ids) & set(self.records)
        if summarised != self.summarised:
            self.summarised = summarised
            self._refill()

    def discard(self, call_id: str) -> None:
        if self.records.pop(call_id, None) is not None:
            self._refill()

    def matches(self, record: ReclaimedToolResult, needle: str) -> bool:
        if not needle:
            return True
        kind = "args arguments" if record.kind == ARGUMENTS else ""
        haystack = f"{record.tool_call_id} {record.tool_name} {kind} {record.arguments}".lower()
        return all(word in haystack for word in needle.lower().split())

    def _lay_out_columns(self) -> None:
        """Every column as wide as its widest cell but "arguments", which takes what the pane leaves (its
        text cut with an ellipsis): the "when" and id columns stay on screen in a narrow panel."""
        table = self.table
        table.clear(columns=True)
        labels = LABELS
        widths = self._widths or [len(label) for label in labels]
        room = table.content_region.width - table.styles.scrollbar_size_vertical
        others = sum(widths) - widths[1] + len(labels) * 2 * table.cell_padding
        arguments = min(widths[1], max(room - others, ARGUMENTS_MIN)) if room > 0 else widths[1]
        for label, width in zip(labels, widths):
            table.add_column(Text(label), key=label, width=arguments if label == "arguments" else width)

    def on_resize(self, event: events.Resize) -> None:
        """Only the arguments column's width changes: the page of rows is mounted again, nothing else."""
        if self.is_mounted:
            table = self.table
            at = table.position
            self._lay_out_columns()
            table.show_page(at)

    def _plain_cells(self, record: ReclaimedToolResult, gone: bool) -> Cells:
        made = self._cells.get(record.tool_call_id)
        if made is not None and made[0] is record and made[1] == gone:
            return made[2]
        when = "summarised" if gone else self._clock(record.reclaimed_at) if record.reclaimed_at else "—"
        cells = (
            (record.tool_name or "?") + (" args" if record.kind == ARGUMENTS else ""),
            call_subject(record.arguments, 60),
            tokens(record.chars * TOKENS_PER_CHAR),
            when,
            short_id(record.call_id),
        )
        self._cells[record.tool_call_id] = (record, gone, cells)
        return cells

    @staticmethod
    def _row_cells(row: ListedRow) -> tuple[Text, ...]:
        record, gone, (_, arguments, size, when, ident) = row
        dim = "dim" if gone else ""
        tool = Text(escape_control(record.tool_name or "?", keep_newlines=False), style=dim)
        if record.kind == ARGUMENTS:  # the call's own arguments, not its result
            tool.append(" args", style="italic dim" if gone else "italic")
        return (
            tool,
            Text(escape_control(arguments), style=dim, no_wrap=True, overflow="ellipsis"),
            Text(size, justify="right", style=dim),
            Text(when, style="italic dim" if gone else ""),
            Text(escape_control(ident), style="dim"),
        )

    def _refill(self) -> None:
        if not self.is_mounted:
            return
        table = self.table
        selected = self.selected_id
        needle = self.filter_text.strip()
        rows: list[tuple[str, ListedRow]] = []
        widths = [len(label) for label in LABELS]
        for record in reversed(list(self.records.values())):
            if not self.matches(record, needle):
                continue
            gone = record.tool_call_id in self.summarised
            cells = self._plain_cells(record, gone)
            widths = [max(width, len(cell)) for width, cell in zip(widths, cells)]
            rows.append((record.tool_call_id, (record, gone, cells)))
        if len(self._cells) > 2 * len(self.records):  # rows dropped (/clear, restores): forget their cells
            self._cells = {key: made for key, made in self._cells.items() if key in self.records}
        self._widths = widths
        self._lay_out_columns()
        self.shown = [key for key, _ in rows]
        table.set_rows(rows, cursor=self.shown.index(selected) if selected in self.shown else 0)
        self.border_subtitle = self.footer(needle)

    def footer(self, needle: str) -> str:
        """What the list holds, each count named: "3 results: 1 restorable (2.1k tokens) · 2 summarised (read
        only)" (it said "0 items" beside listed rows, counting only the restorable ones)."""
        restorable = [record for key, record in self.records.items() if key not in self.summarised]
        size = f"{tokens(sum(record.chars for record in restorable) * TOKENS_PER_CHAR)} tokens"
        n = len(self.records)
        parts = [f"{n:,} result{'s' if n != 1 else ''}"]
        if self.summarised:
            parts[0] += f": {len(restorable):,} restorable" + (f" ({size})" if restorable else "")
            parts.append(f"{len(self.summarised):,} summarised (read only)")
        else:
            parts.append(size)
        if needle:  # of every row, summarised ones included
            parts.insert(0, f"{len(self.shown):,} of {n:,} shown")
        return " · ".join(parts)

    @property
    def selected_id(self) -> str | None:
        if not self.is_mounted or not self.shown:
            return None
        row = self.table.position
        return self.shown[row] if 0 <= row < len(self.shown) else None

    # ------------------------------------------------------------------------------------ events

    @on(Input.Changed, "#recoverable-filter")
    def _filter_changed(self) -> None:
        self._refill()

    @on(Input.Submitted, "#recoverable-filter")
    def _filter_submitted(self) -> None:
        self.table.focus()

    @on(DataTable.RowSelected, "#recoverable-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(OpenInspector(event.row_key.value))

    def on_key(self, event: events.Key) -> None:
        """Typing while the table has the keyboard filters it."""
        if not self.table.has_focus:
            return
        text = self.filter_text
        if event.is_printable and event.character:
            self.set_filter(text + event.character)
        elif event.key == "backspace" and text:
            self.set_filter(text[:-1])
        elif event.key == "escape" and text:
            self.set_filter("")
            return  # and the app's Esc takes the keyboard back to the prompt
        else:
            return
        event.stop()
        event.prevent_default()

    def on_paste(self, event: events.Paste) -> None:
        """A paste while the table has the keyboard filters it, as typing does: its first line, printable
        characters only (the table itself takes no paste)."""
        if not self.table.has_focus:
            return
        lines = event.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        first = next((line for line in lines if line.strip()), "")
        self.set_filter(self.filter_text + "".join(ch for ch in first.replace("\t", " ") if ch.isprintable()))
        event.stop()
        event.prevent_default()

    def focus_table(self) -> None:
        """F8: the newest row first (the cursor kept its row while newer ones came in above it, and ended
        on the oldest, where Down does nothing: one entry, it looked)."""
        if self.shown and not self.filter_text:
            self.table.go_to(0)
        self.table.focus()
