"""A one-line bar of the context: reported tokens, the estimate beyond them, and the threshold mark.
It ends at the estimate, as the gauge's figure does: after a reclaim or a summary the last reported
count (from before it) is higher than what the context holds now, and only the line below says so.

The scale is the context window when it is known, else 125% of the threshold (so the mark sits at
four fifths of the width). The colour comes from the style sheet (the gauge's zone class)."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

FILLED, ESTIMATED, EMPTY, MARK = "█", "▒", "·", "┃"


def bar_cells(width: int, reported: int, estimate: int, threshold: int, window: int | None) -> str:
    """The bar as characters, for the widget and its tests."""
    if width <= 0:
        return ""
    scale = max(window or 0, round(threshold * 1.25), estimate, 1)
    upto = min(width, round(width * estimate / scale))
    filled = min(upto, round(width * reported / scale))
    mark = min(width - 1, max(0, round(width * threshold / scale) - 1))
    cells = [FILLED] * filled + [ESTIMATED] * (upto - filled) + [EMPTY] * (width - upto)
    cells[mark] = MARK
    return "".join(cells)


class ContextBar(Widget):
    DEFAULT_CSS = "ContextBar { height: 1; }"

    def __init__(self) -> None:
        super().__init__(id="context-bar")
        self.reported = 0
        self.estimate = 0
        self.threshold = 1
        self.window: int | None = None

    def set_figures(self, reported: int, estimate: int, threshold: int, window: int | None) -> None:
        """New figures; the bar is redrawn only when its cells change (a streamed reply moves it seldom)."""
        before = self.cells
        self.reported, self.estimate, self.threshold, self.window = reported, estimate, threshold, window
        if self.cells != before or not self.content_size.width:
            self.refresh()

    @property
    def cells(self) -> str:
        return bar_cells(self.content_size.width, self.reported, self.estimate, self.threshold, self.window)

    def render(self) -> Content:
        cells = self.cells
        parts: list[tuple[str, str]] = []
        for char in cells:
            style = "bold reverse" if char == MARK else "dim" if char == EMPTY else ""
            if parts and parts[-1][1] == style:
                parts[-1] = (parts[-1][0] + char, style)
            else:
                parts.append((char, style))
        return Content.assemble(*parts)
