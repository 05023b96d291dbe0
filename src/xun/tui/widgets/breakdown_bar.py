"""A one-line bar of what fills the context: one coloured segment per part, free space dotted, the
threshold marked. The scale is the one the gauge's bar uses (the window when known, else 125% of the
threshold), so the two bars read the same."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from xun.compact.breakdown import ContextBreakdown

FILLED, FREE, BEYOND, MARK = "█", "·", "·", "┃"

PART_STYLES = {
    "overhead": "$foreground 50%",
    "system": "$primary",
    "section": "$primary-lighten-2",
    "summary": "$accent",
    "user": "$success",
    "assistant": "$secondary",
    "tool_calls": "$warning-darken-2",
    "call_placeholders": "$warning-darken-2 40%",
    "tool_results": "$warning",
    "placeholders": "$warning 40%",
    "other": "$error",
}
"""The colour of each part's segment and swatch (theme variables, so every theme has them)."""
FREE_STYLE = "$foreground 60%"
BEYOND_STYLE = "$foreground 25%"
MARK_STYLE = "bold $text"


def scale_of(breakdown: ContextBreakdown) -> int:
    return max(breakdown.window or 0, round(breakdown.threshold * 1.25), breakdown.used, 1)


def segments(breakdown: ContextBreakdown, width: int) -> list[tuple[str, int]]:
    """(kind, cells) for the filled parts and the free space ("free", then "beyond" the threshold),
    adding up to `width`; every non-empty part gets at least one cell when there is room."""
    if width <= 0:
        return []
    scale = scale_of(breakdown)
    used_cells = min(width, round(width * breakdown.used / scale))
    parts = [(p.kind, p.tokens) for p in breakdown.parts if p.tokens > 0]
    total = sum(tokens for _kind, tokens in parts)
    cells: list[tuple[str, int]] = []
    if total and used_cells:
        # largest remainder, so the segments fill exactly the used cells
        shares = [(kind, used_cells * tokens / total) for kind, tokens in parts]
        counts = [int(share) for _kind, share in shares]
        rest = used_cells - sum(counts)
        order = sorted(range(len(shares)), key=lambda i: shares[i][1] - counts[i], reverse=True)
        for i in order[:rest]:
            counts[i] += 1
        for i, count in enumerate(counts):  # a part too small for a cell borrows one from the largest
            if count == 0 and sum(counts) >= len(counts):
                largest = max(range(len(counts)), key=counts.__getitem__)
                if counts[largest] > 1:
                    counts[largest] -= 1
                    counts[i] = 1
        cells = [(kind, count) for (kind, _share), count in zip(shares, counts, strict=True) if count]
    mark = min(width - 1, max(0, round(width * breakdown.threshold / scale) - 1))
    filled = sum(count for _kind, count in cells)
    if filled < width:
        free = max(min(mark + 1, width) - filled, 0)
        if free:
            cells.append(("free", free))
        if width - filled - free:
            cells.append(("beyond", width - filled - free))
    return cells


def bar_content(breakdown: ContextBreakdown, width: int) -> Content:
    pieces: list[tuple[str, str]] = []
    for kind, count in segments(breakdown, width):
        if kind == "free":
            pieces.append((FREE * count, FREE_STYLE))
        elif kind == "beyond":
            pieces.append((BEYOND * count, BEYOND_STYLE))
        else:
            pieces.append((FILLED * count, PART_STYLES.get(kind, "")))
    # the threshold mark over whatever is there
    text = "".join(piece for piece, _style in pieces)
    scale = scale_of(breakdown)
    mark = min(width - 1, max(0, round(width * breakdown.threshold / scale) - 1)) if width > 0 else 0
    out: list[tuple[str, str]] = []
    position = 0
    for piece, style in pieces:
        start, end = position, position + len(piece)
        if start <= mark < end:
            if mark > start:
                out.append((text[start:mark], style))
            out.append((MARK, MARK_STYLE))
            if end > mark + 1:
                out.append((text[mark + 1 : end], style))
        else:
            out.append((piece, style))
        position = end
    return Content.assemble(*out)


class BreakdownBar(Widget):
    DEFAULT_CSS = "BreakdownBar { height: 1; }"

    def __init__(self, breakdown: ContextBreakdown, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.breakdown = breakdown

    def render(self) -> Content:
        return bar_content(self.breakdown, self.content_size.width)
