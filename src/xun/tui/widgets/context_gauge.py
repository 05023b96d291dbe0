"""The context gauge: tokens now against the threshold (and the window), a bar with the threshold
marked, the reported count and the live estimate side by side (and the share of the last call's prompt
served from the server's cache, when the server says), and a sparkline of the tokens at every
model call in which each compaction shows as a drop: one column a call, under a line that says so and
gives its range (its bars run from the lowest point to the highest, not from zero).

Zones: calm below 80% of the threshold, warning up to it, alarm above (classes -calm/-warning/-alarm).
Enter on the gauge (or a click) asks the app for the breakdown of what fills the context.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Sparkline, Static

from xun.tui.format import TOKENS_PER_CHAR, counted, literal, percent, tokens
from xun.tui.messages import OpenBreakdown
from xun.tui.widgets.context_bar import ContextBar

WARNING_FROM = 0.8
HISTORY_POINTS = 120
ROOMY_HEIGHT = 30
"""From this many rows the sparkline is two rows high; below, one, so that its label adds no row."""
STREAM_REFRESH = 1.0
"""Seconds between gauge updates while a reply streams: the figures move, and each update redraws only the
lines whose text changed, without a layout of the screen when they stay one line (`_show_streamed`)."""


def history_what(kinds: list[str]) -> tuple[str, str]:
    """What the points are, long and short: "model calls" alone, or how many of each (a compaction or a restore
    adds a point too: "the last 12 model calls" over 10 calls and 2 compactions was not true)."""
    calls = kinds.count("call")
    others = [counted(kinds.count(kind), kind) for kind in ("compaction", "restore") if kind in kinds]
    if not others:
        return counted(calls, "model call"), counted(calls, "model call")
    return ", ".join([counted(calls, "model call"), *others]), ", ".join([counted(calls, "call"), *others])


def history_label(points: list[int], width: int, kinds: list[str] | None = None) -> str:
    """The line over the sparkline: what a column is, and the range its heights span."""
    span = f"{tokens(min(points))}–{tokens(max(points))}" if points else ""
    long, short = history_what(kinds if kinds is not None else ["call"] * len(points))
    whats = [f"context at the last {long}", f"the last {long}"]
    whats += ["each model call"] if long == short else [f"the last {short}", short]
    for what in whats:
        if len(what) + 3 + len(span) <= width:
            return f"{what} · {span}"
    return span


def history_tooltip(points: list[int], kinds: list[str] | None = None) -> str:
    if not points:
        return ""
    long, _ = history_what(kinds if kinds is not None else ["call"] * len(points))
    return (
        f"The tokens in the context at each of the last {long}, oldest on the left, one "
        "column each; a drop is a compaction (a summary or a reclaim). The bars run from the lowest point "
        f"({tokens(min(points))}) to the highest ({tokens(max(points))}), not from zero."
    )


def rows(text: str, width: int) -> int:
    """How many rows `text` takes wrapped at `width`."""
    return len(Content(text).wrap(width))


def zone_of(now: float, threshold: int) -> str:
    if threshold <= 0:
        return "calm"
    if now > threshold:
        return "alarm"
    if now >= WARNING_FROM * threshold:
        return "warning"
    return "calm"


class ContextGauge(Vertical, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "breakdown", "Breakdown", id="gauge.breakdown", tooltip="What fills the context (/context)"),
    ]

    def __init__(self) -> None:
        super().__init__(id="gauge", classes="pane -calm")
        self.border_title = "context"
        self.tooltip = "Enter (or a click): what fills the context"
        self.reported: int | None = None
        self.estimate = 0
        self.threshold = 1
        self.known = False
        """False until the first figures (the session is still opening): the gauge says so, not "0 / 1"."""
        self.window: int | None = None
        self.window_source: str | None = None
        self.server_counts: str | None = None
        """The last reply's usage event `source`: "server", "estimate" (it sent none) or "disbelieved" (None: no
        model call yet)."""
        self.streaming_chars = 0
        """Characters streamed into the reply being written, not yet in any estimate."""
        self.history: list[int] = []
        self.history_kinds: list[str] = []
        """What made each point: "call" (a model call), "compaction" (a reclaim or a summary) or "restore"."""
        self.usage_text = ""
        self.cache_share: float | None = None
        """The share of the last call's prompt the server served from its cache (None: it did not say)."""
        self.zone = "calm"
        self._refresh_timer: Timer | None = None
        self._lines: dict[str, str] = {}
        """The text each line of figures shows now."""

    def compose(self) -> ComposeResult:
        yield Static("", id="gauge-figures", markup=False)
        yield ContextBar()
        yield Static("", id="gauge-detail", markup=False)
        yield Static("", id="gauge-usage", markup=False)
        yield Static("", id="gauge-history-label", markup=False)
        yield Sparkline([], id="gauge-history")

    def set_usage(self, text: str) -> None:
        """The model usage line: the last call's tokens, the session's totals, the cost (see `xun.context.usage`)."""
        self.usage_text = text
        usage = self.query_one("#gauge-usage", Static)
        usage.update(text)
        usage.display = bool(text)

    def on_mount(self) -> None:
        self._show()

    def on_resize(self) -> None:
        self._show()

    def action_breakdown(self) -> None:
        self.post_message(OpenBreakdown())

    def on_click(self) -> None:
        self.post_message(OpenBreakdown())

    @property
    def now(self) -> int:
        """Tokens now: the estimate plus what the reply has streamed since (four characters a token)."""
        return round(self.estimate + self.streaming_chars * TOKENS_PER_CHAR)

    def figures_text(self) -> str:
        if not self.known:
            return "… / … (the session is opening)"
        now, threshold = self.now, self.threshold
        text = f"{tokens(now)} / {tokens(threshold)} ({percent(now, threshold)}%)"
        if self.window:
            assumed = "?" if self.window_source and self.window_source.startswith("assumed") else ""
            text += f" · window {tokens(self.window)}{assumed}"
        return text

    def detail_text(self) -> str:
        """ "reported" only for the server's own count; without one, the estimate says why it stands alone."""
        if not self.known:
            return "no figures yet"
        if self.reported is not None:
            cache = f" · cache {percent(self.cache_share, 1)}%" if self.cache_share is not None else ""
            return f"reported {tokens(self.reported)} · estimate {tokens(self.now)}{cache}"
        why = {
            None: "no count from the server yet",
            "server": "no server count since the summary",
            "estimate": "the server sends no counts",
            "disbelieved": "the server's count was not believed",
        }[self.server_counts]
        return f"estimate {tokens(self.now)} · {why}"

    def set_cache_share(self, share: float | None) -> None:
        self.cache_share = share
        self._show()

    def model_called(self, source: str) -> None:
        """After each model call: whether the server sent its count (usage) with the reply, and whether xun
        believed it (the usage event's `source`: "server", "estimate" or "disbelieved")."""
        self.server_counts = source

    def context_replaced(self) -> None:
        """/clear or another session: no model call has seen this context, so no count or cache share is its."""
        self.server_counts = None
        self.cache_share = None
        self._show()

    def set_figures(
        self,
        *,
        reported: int | None,
        estimate: int,
        threshold: int,
        window: int | None,
        window_source: str | None = None,
    ) -> None:
        self.known = True
        self.reported = reported
        self.estimate = estimate
        self.threshold = max(threshold, 1)
        self.window = window
        self.window_source = window_source
        self.tooltip = literal(
            "Enter (or a click): what fills the context\n┃ on the bar: the threshold\n"
            + (
                f"window {window:,}: {window_source}"
                if window
                else "window unknown: the server did not say it (the bar runs a quarter past the threshold)"
            )
        )
        self._show()

    def set_estimate(self, estimate: int, reported: int | None) -> None:
        self.estimate, self.reported = estimate, reported
        self._show()

    def streamed(self, chars: int) -> None:
        """Characters of the reply being streamed; shown at most every STREAM_REFRESH seconds."""
        self.streaming_chars += chars
        if self._refresh_timer is None and self.is_mounted:
            self._refresh_timer = self.set_timer(STREAM_REFRESH, self._show_streamed)

    def _show_streamed(self) -> None:
        """What a streamed reply moves: the figures, the estimate, the bar and the zone, each only if changed."""
        self._refresh_timer = None
        if not self.is_mounted:
            return
        self._set_subtitle(self._show_figures())

    def _show_figures(self) -> int:
        """The zone, the two lines of figures and the bar, each redrawn only if it changed; the estimate."""
        now = self.now
        self._set_zone(zone_of(now, self.threshold))
        self._set_line("#gauge-figures", self.figures_text())
        self._set_line("#gauge-detail", self.detail_text())
        self.query_one(ContextBar).set_figures(self.reported or 0, now, self.threshold, self.window)
        return now

    def _set_line(self, selector: str, text: str) -> None:
        """A line of figures, redrawn only when its text changed, laid out again only when it wraps to
        another number of rows."""
        line = self.query_one(selector, Static)
        before = self._lines.get(selector)
        if text == before:
            return
        self._lines[selector] = text
        width = line.content_size.width
        same_height = width > 0 and before is not None and rows(before, width) == rows(text, width)
        line.update(text, layout=not same_height)

    def _set_zone(self, zone: str) -> None:
        if zone != self.zone:
            self.remove_class(f"-{self.zone}")
            self.zone = zone
        self.add_class(f"-{zone}")

    def _set_subtitle(self, now: int) -> None:
        label = {"calm": "calm", "warning": "warning", "alarm": "over threshold"}[self.zone]
        self.border_subtitle = f"{label} · {percent(now, self.threshold)}%" if self.known else "opening…"

    def reset_stream(self) -> None:
        self.streaming_chars = 0
        self._show()

    def add_point(self, value: int, kind: str = "call") -> None:
        self.history.append(max(int(value), 0))
        self.history_kinds.append(kind)
        del self.history[:-HISTORY_POINTS], self.history_kinds[:-HISTORY_POINTS]
        self._show()

    def set_history(self, values: list[int], kinds: list[str] | None = None) -> None:
        self.history = [max(int(v), 0) for v in values][-HISTORY_POINTS:]
        self.history_kinds = (kinds if kinds is not None else ["call"] * len(values))[-HISTORY_POINTS:]
        self._show()

    def _show(self) -> None:
        if self._refresh_timer is not None:
            self._refresh_timer.stop()
            self._refresh_timer = None
        if not self.is_mounted:
            return
        now = self._show_figures()
        sparkline = self.query_one("#gauge-history", Sparkline)
        label = self.query_one("#gauge-history-label", Static)
        width = max(self.content_size.width, 1)
        points, kinds = self.history[-width:], self.history_kinds[-width:]
        sparkline.data = points
        sparkline.styles.width = max(len(points), 1)  # a column a call: few points were stretched into blocks
        sparkline.styles.height = 2 if self.app.size.height >= ROOMY_HEIGHT else 1
        sparkline.display = label.display = len(points) >= 2
        label.update(history_label(points, width, kinds))
        sparkline.tooltip = label.tooltip = history_tooltip(points, kinds) or None
        self._set_subtitle(now)
