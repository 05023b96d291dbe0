"""/context (or Enter on the gauge): what fills the context, part by part, as tokens and as a bar, with
free space up to the threshold and to the window, and the five largest messages, each a key away in
the chat. The figures come from `xun.compact.breakdown`; this screen only shows them."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Region
from textual.content import Content
from textual.widgets import DataTable, Label, Static

from xun.compact.breakdown import ContextBreakdown
from xun.tui.format import NO_SERVER_COUNT, one_line, percent, tokens
from xun.tui.screens.modal import Modal, box_room
from xun.tui.widgets.breakdown_bar import (
    BEYOND,
    BEYOND_STYLE,
    FREE,
    FREE_STYLE,
    MARK,
    MARK_STYLE,
    PART_STYLES,
    BreakdownBar,
)

SWATCH = "██"
COUNTED = {
    "user": "msg",
    "assistant": "msg",
    "tool_calls": "call",
    "call_placeholders": "call",
    "tool_results": "result",
    "placeholders": "result",
    "other": "msg",
}
ROLE_NAMES = {"user": "you", "assistant": "assistant", "tool": "tool result"}


def part_rows(breakdown: ContextBreakdown) -> list[tuple[str, str, str, str, str]]:
    """(style, label, tokens, share of the threshold, detail) for every part and the free space."""
    rows = []
    threshold = breakdown.threshold
    for part in breakdown.parts:
        unit = COUNTED.get(part.kind)
        count = f"{part.count:,} {unit}{'s' if part.count != 1 else ''}" if unit else ""
        rows.append(
            (
                PART_STYLES.get(part.kind, ""),
                part.label,
                tokens(part.tokens),
                f"{percent(part.tokens, threshold)}%",
                count,
            )
        )
    free = breakdown.free
    rows.append(
        (
            FREE_STYLE,
            "free up to the threshold",
            tokens(free.to_threshold),
            f"{percent(free.to_threshold, threshold)}%",
            "",
        )
    )
    rows.append((MARK_STYLE, "the threshold (a summary is made past it)", tokens(threshold), "100%", ""))
    if free.to_window is not None:
        rows.append((BEYOND_STYLE, "free beyond it, up to the window", tokens(free.to_window), "", ""))
    else:  # the bar still runs on, so that a context past the threshold shows, and says what that part is
        rows.append(
            (BEYOND_STYLE, "past the threshold (the window is unknown: the bar shows a quarter more)", "", "", "")
        )
    return rows


def parts_content(breakdown: ContextBreakdown) -> Content:
    rows = part_rows(breakdown)
    width = max((len(label) for _s, label, *_rest in rows), default=10)
    lines = []
    for style, label, count, share, detail in rows:
        swatch = (
            FREE * 2
            if style == FREE_STYLE
            else BEYOND * 2
            if style == BEYOND_STYLE
            else f"{MARK} "
            if style == MARK_STYLE
            else SWATCH
        )
        lines.append(
            Content.assemble(
                (swatch, style),
                " ",
                f"{label:<{width}}",
                f" {count:>7}",
                (f" {share:>5}", "dim"),
                (f"  {detail}", "dim"),
            )
        )
    return Content("\n").join(lines)


def figures_line(breakdown: ContextBreakdown) -> str:
    reported = (
        f"reported {tokens(breakdown.reported_tokens)} at the last model call"
        if breakdown.reported_tokens is not None
        else NO_SERVER_COUNT
    )
    window = (
        f"window {tokens(breakdown.window)} ({breakdown.window_source})"
        if breakdown.window and breakdown.window_source
        else f"window {tokens(breakdown.window)}"
        if breakdown.window
        else "window unknown"
    )
    fixed = f" + {breakdown.fixed_tokens:,} per request (measured)" if breakdown.fixed_tokens is not None else ""
    return (
        f"{reported} · estimate {tokens(breakdown.live_estimate)} now · the parts: {breakdown.chars:,} chars × "
        f"{breakdown.tokens_per_char:.3f}{fixed} = {tokens(breakdown.estimated_tokens)} · threshold "
        f"{tokens(breakdown.threshold)}"
        f" · {window}"
    )


LARGEST_MIN = 10
"""The narrowest the "what" and message columns are cut to (with an ellipsis) for the table to fit the box."""


class BreakdownScreen(Modal[int | None]):
    """Dismisses with the index (into `conversation.messages`) of the message to show in the chat.

    Everything but the title scrolls as one (PgUp/PgDn, Home/End), and the table of the largest messages
    fits the box's width, its cells cut with an ellipsis: at 80x24 it showed one row of five, cut at the
    border, and End scrolled it sideways."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss(None)", "Close", id="context.close"),
        *(Binding(str(n), f"jump({n})", f"Show message {n}", id=f"context.jump{n}", show=False) for n in range(1, 6)),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False, priority=True),
        Binding("pageup", "scroll('page_up')", "Page up", show=False, priority=True),
        Binding("end", "scroll('scroll_end')", "End", show=False, priority=True),
        Binding("home", "scroll('scroll_home')", "Home", show=False, priority=True),
    ]

    def __init__(self, breakdown: ContextBreakdown, outlook: str = "") -> None:
        super().__init__(id="breakdown")
        self.breakdown = breakdown
        self.outlook = outlook
        """What compaction would do now (one line), "" for none."""

    def compose(self) -> ComposeResult:
        b = self.breakdown
        with Vertical(id="breakdown-box") as box:
            box.border_title = (
                f"what fills the context · {tokens(b.used)} of {tokens(b.threshold)} ({percent(b.used, b.threshold)}%)"
            )
            box.border_subtitle = "1-5 or enter: show the message in the chat · pgdn more · esc close"
            with VerticalScroll(id="breakdown-body"):
                yield Label(Text(figures_line(b)), id="breakdown-figures")
                if self.outlook:
                    yield Label(Text(self.outlook), id="breakdown-outlook")
                yield BreakdownBar(b, id="breakdown-bar")
                yield Static(parts_content(b), id="breakdown-parts")
                yield Label(
                    Text(f"the {len(b.largest)} largest messages" if b.largest else "no messages yet", style="bold"),
                    id="breakdown-largest-title",
                )
                table: DataTable[Text] = DataTable(id="breakdown-largest", cursor_type="row", show_header=False)
                self._fill(table)
                yield table

    def _fill(self, table: DataTable[Text]) -> None:
        """The rows, their two text columns cut to what the box leaves at the screen's width now."""
        cells = []
        for n, message in enumerate(self.breakdown.largest, start=1):
            what = ROLE_NAMES.get(message.role, message.role)
            if message.tool:
                what += f" {message.tool}"
            if message.reclaimed:
                what += " (placeholder)"
            cells.append(
                (
                    str(n),
                    one_line(f"#{message.index} {what}", 200),
                    tokens(message.tokens),
                    one_line(message.preview, 400),
                )
            )
        widths = [max([1, *(len(row[i]) for row in cells)]) for i in range(4)]
        room = box_room(self.app.size.width) - 2 - 2 * table.cell_padding * len(widths)  # its border, its padding
        rest = room - widths[0] - widths[2]  # for the message and its start: each half, or what the other leaves
        widths[1] = max(LARGEST_MIN, min(widths[1], max(rest - widths[3], rest // 2)))
        widths[3] = max(LARGEST_MIN, min(widths[3], rest - widths[1]))
        table.clear(columns=True)
        for key, width in zip(("key", "message", "tokens", "what"), widths):
            table.add_column(key, key=key, width=width)
        for (n, what, size, preview), message in zip(cells, self.breakdown.largest):
            table.add_row(
                Text(n, style="bold"),
                Text(one_line(what, widths[1])),
                Text(size, justify="right"),
                Text(one_line(preview, widths[3])),
                key=str(message.index),
            )

    def on_mount(self) -> None:
        self.query_one("#breakdown-largest", DataTable).focus(scroll_visible=False)
        # it opens at the top (the first row's highlight scrolled it down to the table)
        self.call_after_refresh(self.query_one("#breakdown-body", VerticalScroll).scroll_home, animate=False)

    def on_resize(self) -> None:
        table = self.query_one("#breakdown-largest", DataTable)
        row = table.cursor_row
        self._fill(table)
        table.move_cursor(row=row, animate=False, scroll=False)

    def action_scroll(self, how: str) -> None:
        getattr(self.query_one("#breakdown-body", VerticalScroll), f"action_{how}")()

    def action_jump(self, n: int) -> None:
        if 1 <= n <= len(self.breakdown.largest):
            self.dismiss(self.breakdown.largest[n - 1].index)

    @on(DataTable.RowHighlighted, "#breakdown-largest")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The row the cursor moves to in view: the table does not scroll, the body does (no further than
        needed: on opening, the top stays in view)."""
        table = self.query_one("#breakdown-largest", DataTable)
        row = table.virtual_region.y + 1 + event.cursor_row  # below the table's top border
        self.query_one("#breakdown-body", VerticalScroll).scroll_to_region(Region(0, row, 1, 1), animate=False)

    @on(DataTable.RowSelected, "#breakdown-largest")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.dismiss(int(event.row_key.value))
