"""A table that holds every row but mounts only a page of them around the cursor.

A DataTable lays out and keeps every row it is given, so a side panel listing thousands (the recoverable
results of a session of weeks) made every resize, and F4, cost more the longer the session. `PagedTable`
keeps the rows as data and gives the DataTable at most `page_size` of them (100, or four screens' worth
when the table is taller): moving the cursor past either edge of the page mounts the next one, Ctrl+Home
and Ctrl+End go to the first and the last row, and the title says which rows are mounted ("rows 74–100
of 7,466") whenever they are not all. Owners give rows in order, each a key and its data (`set_rows`,
`append_row`), which `render` turns into cells only when the row is mounted, and read the cursor as
`position`, the index in all the rows, never `cursor_row`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from textual.widget import Widget
from textual.widgets import DataTable

Row = tuple[str, Any]
"""A row's key and its data (its cells, unless the table was given a `render`)."""

PAGE_ROWS = 100
"""The rows mounted at most, unless four screens of the table hold more."""
PAGE_SCREENS = 4


class PagedTable(DataTable[str]):
    def __init__(
        self,
        *,
        title: str = "",
        titled: Widget | None = None,
        render: Callable[[Any], Sequence[Any]] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.base_title = title
        """The title without the rows' range (the widget it is on is `titled`, else the table)."""
        self._titled = titled
        self._render = render or (lambda cells: cells)
        self.rows_data: list[Row] = []
        """Every row, in order; the DataTable holds `rows_data[page_start:page_start + row_count]`."""
        self.page_start = 0

    # ------------------------------------------------------------------------------------ reading

    @property
    def page_size(self) -> int:
        return max(PAGE_ROWS, PAGE_SCREENS * self.size.height)

    @property
    def total(self) -> int:
        return len(self.rows_data)

    @property
    def position(self) -> int:
        """The cursor's index in all the rows (-1 with none)."""
        if not self.rows_data or not self.row_count:
            return -1
        return self.page_start + min(max(self.cursor_row, 0), self.row_count - 1)

    def range_text(self) -> str:
        """ "rows 74–100 of 7,466" while some rows are not mounted; "" when all are."""
        if self.row_count >= self.total:
            return ""
        return f"rows {self.page_start + 1:,}–{self.page_start + self.row_count:,} of {self.total:,}"

    # ------------------------------------------------------------------------------------ writing

    def set_rows(self, rows: Iterable[Row], *, cursor: int | None = None) -> None:
        """Every row anew (the columns stay); the cursor at index `cursor` of them (else where it was)."""
        wanted = self.position if cursor is None else cursor
        self.rows_data = list(rows)
        self.show_page(max(wanted, 0))

    def append_row(self, key: str, data: Any) -> None:
        """One more row at the end: mounted when the page reaches the end and has room, else when paged to."""
        self.rows_data.append((key, data))
        if self.page_start + self.row_count == self.total - 1 and self.row_count < self.page_size:
            self.add_row(*self._render(data), key=key)
        self._retitle()

    def show_page(self, index: int) -> None:
        """Mount the page that holds row `index` (its rows, anew: call it after the columns changed too),
        and put the cursor on it."""
        self.clear()
        size, total = self.page_size, self.total
        index = min(max(index, 0), max(total - 1, 0))
        self.page_start = min(max(index - size // 2, 0), max(total - size, 0))
        render = self._render
        for key, data in self.rows_data[self.page_start : self.page_start + size]:
            self.add_row(*render(data), key=key)
        if self.row_count:
            self.move_cursor(row=index - self.page_start, animate=False)
        self._retitle()

    def go_to(self, index: int) -> None:
        """The cursor on row `index` of all the rows, mounting its page if it is not."""
        if not self.rows_data:
            return
        index = min(max(index, 0), self.total - 1)
        if self.page_start <= index < self.page_start + self.row_count:
            self.move_cursor(row=index - self.page_start, animate=False)
        else:
            self.show_page(index)

    def _retitle(self) -> None:
        shown = self.range_text()
        titled = self._titled or self
        titled.border_title = " · ".join(part for part in (self.base_title, shown) if part)

    # ------------------------------------------------------------------------------------ keys

    def _visible_rows(self) -> int:
        return max(self.scrollable_content_region.height - (self.header_height if self.show_header else 0), 1)

    def action_cursor_down(self) -> None:
        if self.row_count and self.cursor_row >= self.row_count - 1 and self.position < self.total - 1:
            self.go_to(self.position + 1)
        else:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.row_count and self.cursor_row <= 0 and self.page_start > 0:
            self.go_to(self.position - 1)
        else:
            super().action_cursor_up()

    def action_page_down(self) -> None:
        target = self.position + self._visible_rows()
        if target >= self.page_start + self.row_count and self.page_start + self.row_count < self.total:
            self.go_to(target)
        else:
            super().action_page_down()

    def action_page_up(self) -> None:
        target = self.position - self._visible_rows()
        if target < self.page_start and self.page_start > 0:
            self.go_to(target)
        else:
            super().action_page_up()

    def action_scroll_top(self) -> None:
        """Ctrl+Home: the first row of all."""
        self.go_to(0)

    def action_scroll_bottom(self) -> None:
        """Ctrl+End: the last row of all."""
        self.go_to(self.total - 1)
