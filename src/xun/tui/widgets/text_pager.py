"""A text of any length in a view that renders only the rows in view: each line is folded at the width by
cells (not at words), so laying it out is arithmetic on line lengths, not a render of the whole text (a
`TextArea` took seconds to wrap an 800k-character line at each resize)."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from textual import events
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from xun.base.valid_text import escape_control


class TextPager(ScrollView, can_focus=True):
    """Shows `text` with its control characters visible and its tabs expanded; `text` is kept as given."""

    DEFAULT_CSS = """
    TextPager {
        scrollbar-gutter: stable;
    }
    """

    def __init__(self, text: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = text
        self._lines = escape_control(text.expandtabs(4)).split("\n")
        self._width = 0
        self._starts: list[int] = [0]
        """The row each line starts at, and the row count after the last."""
        self._chopped: dict[int, list[str]] = {}
        """Lines that are not ASCII, cut into rows by cells at `_width` (as they are first drawn)."""
        self._end_wanted = False
        """End was pressed before the text was laid out (as the reader opened): the first layout goes there."""

    @property
    def line_count(self) -> int:
        return len(self._lines)

    @property
    def row_count(self) -> int:
        return self._starts[-1]

    def _rows_of(self, index: int, line: str, width: int) -> int:
        if line.isascii():
            return max(1, -(-len(line) // width))
        return max(1, len(self._pieces(index)))

    def _pieces(self, index: int) -> list[str]:
        pieces = self._chopped.get(index)
        if pieces is None:
            line = self._lines[index]
            pieces = self._chopped[index] = chop_cells(line, self._width) if line else [""]
        return pieces

    def lay_out(self, width: int) -> None:
        """Fold the lines at `width`, keeping the line at the top of the view at the top."""
        width = max(1, width)
        if width == self._width:
            return
        top = self.line_at(round(self.scroll_y)) if self._width else 0
        self._width = width
        self._chopped.clear()
        self._starts = list(
            accumulate((self._rows_of(i, line, width) for i, line in enumerate(self._lines)), initial=0)
        )
        self.virtual_size = Size(width, self.row_count)
        if self._end_wanted:
            self._end_wanted = False
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
        else:
            self.scroll_to(y=self._starts[top], animate=False, immediate=True)

    def line_at(self, row: int) -> int:
        """The line shown at `row` of the whole text."""
        return min(len(self._lines) - 1, max(0, bisect_right(self._starts, row) - 1))

    def action_scroll_home(self) -> None:
        """At once: an animated scroll over thousands of rows took a second."""
        self.scroll_home(animate=False, immediate=True)

    def action_scroll_end(self) -> None:
        """At once, or as soon as the text is laid out and its size is known (End pressed as it opens)."""
        if not self._width:
            self._end_wanted = True
            return
        self.call_after_refresh(self.scroll_end, animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self.lay_out(self.scrollable_content_region.width)

    def on_mount(self) -> None:
        super().on_mount()
        if self.scrollable_content_region.width:
            self.lay_out(self.scrollable_content_region.width)

    def render_line(self, y: int) -> Strip:
        style = self.rich_style
        width = self.scrollable_content_region.width
        row = round(self.scroll_y) + y
        if not self._width or row >= self.row_count:
            return Strip.blank(width, style)
        index = self.line_at(row)
        piece = row - self._starts[index]
        line = self._lines[index]
        if line.isascii():
            text = line[piece * self._width : (piece + 1) * self._width]
        else:
            pieces = self._pieces(index)
            text = pieces[piece] if piece < len(pieces) else ""
        return Strip([Segment(text, style)], cell_len(text)).extend_cell_length(width, style)
