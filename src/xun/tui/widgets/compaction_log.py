"""The compaction log: one row per compaction event in columns (time, kind, tokens before -> after,
what), filled from the session's saved log on resume. The detail (offload file, focus, reason, trigger,
what it costs in the server's prompt cache) is the highlighted row's tooltip; Enter shows it whole, in a
box that scrolls and stays until Esc; g shows the event's turn in the chat. Checks that changed nothing (a
reclaim with nothing to replace, an automatic skip repeated) are not rows: the pane's footer counts them.
The "what" column takes the width the others leave, its text cut with an ellipsis (the table is laid out
again when the pane's width or the other columns' change). It mounts a page of its rows (`PagedTable`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from xun.base.timestamps import sane_timestamp
from xun.base.valid_text import escape_control
from xun.context.reclaimed import ARGUMENTS_SUFFIX
from xun.tui.format import literal, one_line, tokens
from xun.tui.messages import ShowInChat
from xun.tui.widgets.paged_table import PagedTable

KINDS = {
    "tool_results_reclaimed": "reclaim",
    "summary_finished": "summary",
    "tool_result_restored": "restore",
    "compaction_skipped": "skipped",
    "compaction_failed": "failed",
    "summary_rejected": "rejected",
}
WHAT_CHARS = 40
"""A row as plain text (`LogEntry.line`) cuts "what" here; on screen the column's width cuts it, with an
ellipsis (the whole text is in the detail)."""
WHAT_CELL_CHARS = 400
"""At most this much of "what" goes into a cell (wider than any pane)."""
WHAT_MIN = 8
"""Narrower than this, the "what" column keeps this width and the table scrolls sideways."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    time: str
    kind: str
    trigger: str
    tokens_before: int | None
    tokens_after: int | None
    count: str
    offload: str | None
    reason: str
    focus: str = ""
    cache: str = ""
    """The prompt-cache cost: what the next call pays uncached, and what each later call saves."""
    cache_short: str = ""
    """The same in a few characters, for the row: "cache 4.5k once, saves 3k/call"."""
    calls: tuple[str, ...] = ()
    """The archive ids the event restored or reclaimed, in its order."""
    summary: int | None = None
    """Which of the session's finished summaries it is (0 the first): the chat's dividers, in order."""

    @property
    def saved(self) -> int:
        if self.tokens_before is None or self.tokens_after is None:
            return 0
        return max(self.tokens_before - self.tokens_after, 0)

    @property
    def changed_nothing(self) -> bool:
        """A reclaim that replaced nothing: counted, not listed."""
        return self.kind == "reclaim" and self.count == "nothing to reclaim"

    @property
    def figures(self) -> str:
        if self.tokens_before is None or self.tokens_after is None:
            return ""
        before, after = tokens(self.tokens_before), tokens(self.tokens_after)
        if before == after and self.tokens_before != self.tokens_after:  # "3.4k → 3.4k" read as nothing done
            change = self.tokens_before - self.tokens_after
            return f"{before}, {tokens(abs(change))} {'freed' if change > 0 else 'added'}"
        return f"{before} → {after}"

    @property
    def what(self) -> str:
        return " · ".join(part for part in (self.count or self.reason, self.cache_short) if part)

    def line(self) -> str:
        """The row as plain text (what the tests read): time, kind, before → after, what."""
        return " ".join(part for part in (self.time, self.kind, self.figures, one_line(self.what, WHAT_CHARS)) if part)

    def detail(self) -> str:
        """Everything about the event, for the tooltip and Enter."""
        lines = [f"{self.kind} at {self.time} ({'by hand' if self.trigger == 'manual' else self.trigger})"]
        if self.figures:
            lines.append(
                f"tokens {tokens(self.tokens_before)} → {tokens(self.tokens_after)}"
                + (f" ({tokens(self.saved)} freed)" if self.saved else "")
            )
        if self.count:
            lines.append(self.count)
        if self.cache:
            lines.append(self.cache)
        if self.focus:
            lines.append(f"focus: {self.focus}")
        if self.reason:
            lines.append(f"reason: {self.reason}")
        if self.offload:
            lines.append(f"originals in the offload log {self.offload} (searchable with F9)")
        return "\n".join(lines)


def entry_from_record(
    record: dict[str, Any], clock: Callable[[float], str], shown_path: Callable[[str | None], str]
) -> LogEntry | None:
    kind = KINDS.get(str(record.get("type", "")))
    if kind is None:
        return None
    trigger = str(record.get("trigger", "auto"))
    if kind == "summary" and trigger == "emergency":
        kind = "emergency"
    before = record.get("tokens_before")
    after = record.get("tokens_after")
    count = ""
    reason = ""
    offload = None
    calls: tuple[str, ...] = ()
    if kind == "reclaim":
        n = int(record.get("count", 0) or 0)
        arguments = int(record.get("arguments", 0) or 0)  # of n, calls' arguments (older records have none)
        parts = [
            f"{n - arguments:,} result{'s' if n - arguments != 1 else ''}" if n > arguments else "",
            f"{arguments:,} call args" if arguments else "",
        ]
        count = ", ".join(filter(None, parts)) or "nothing to reclaim"
        reason = str(record.get("reason") or "")
        ids = record.get("ids")
        calls = tuple(str(i) for i in ids) if isinstance(ids, list | tuple) else ()
    elif kind in ("summary", "emergency"):
        count = f"{int(record.get('condensed', 0) or 0):,} summarised, {int(record.get('kept', 0) or 0):,} kept"
        inside = int(record.get("turn_rounds", 0) or 0)
        if inside:
            entries = int(record.get("ledger_entries", 0) or 0)
            calls = f"{inside} call{'s' if inside != 1 else ''}"
            count = (
                f"inside the turn: {calls} condensed, ledger {entries} entr{'ies' if entries != 1 else 'y'}; {count}"
            )
        reason = str(record.get("why") or "")
        if record.get("method") == "extractive":  # the model gave no usable summary: xun wrote this one
            count = f"xun's own summary; {count}"
            because = str(record.get("own_because") or "the model gave no usable summary")
            reason = "; ".join(filter(None, (reason, f"xun's own extractive summary: {because}")))
        offload = shown_path(record.get("offload_path")) or None
    elif kind == "restore":
        restored = str(record.get("id", ""))
        call_id = restored.removesuffix(ARGUMENTS_SUFFIX)
        count = f"id …{call_id[-8:]}" + (" args" if call_id != restored else "")
        calls = (restored,) if restored else ()
    elif kind == "rejected":
        then = {"retry": "asked once more", "extractive": "xun's extractive summary instead"}.get(
            str(record.get("next")), ""
        )
        reason = str(record.get("reason", "")) + (f"; {then}" if then else "")
    else:
        reason = str(record.get("reason", ""))
    moment = record.get("time")
    miss, saves = record.get("cache_miss_tokens"), record.get("saved_per_call")
    cache = cache_short = ""
    if isinstance(miss, int) and isinstance(saves, int):
        per_call = f"{'saves' if saves >= 0 else 'adds'} {tokens(abs(saves))}/call"  # a minus read as a loss
        cache = f"cache: next call {tokens(miss)} uncached, {per_call}"
        cache_short = f"cache {tokens(miss)} once, {per_call}"
    return LogEntry(
        time=clock(sane_timestamp(moment)) if sane_timestamp(moment, -1.0) >= 0 else "--:--:--",
        kind=kind,
        trigger=trigger,
        tokens_before=int(before) if isinstance(before, (int, float)) else None,
        tokens_after=int(after) if isinstance(after, (int, float)) else None,
        count=count,
        offload=offload,
        reason=reason,
        focus=str(record.get("focus") or ""),
        cache=cache,
        cache_short=cache_short,
        calls=calls,
    )


STYLES = {
    "reclaim": "bold cyan",
    "summary": "bold magenta",
    "emergency": "bold red",
    "restore": "bold green",
    "skipped": "bold yellow",
    "failed": "bold red",
    "rejected": "bold yellow",
}


class CompactionLog(PagedTable):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "show_in_chat", "Show in the chat", id="log.show_in_chat", show=False),
    ]

    def __init__(self, *, clock: Callable[[float], str], shown_path: Callable[[str | None], str]) -> None:
        super().__init__(
            title="compaction log",
            render=self._cells,
            id="compaction-log",
            classes="pane",
            cursor_type="row",
            zebra_stripes=False,
        )
        self.border_title = "compaction log"
        self._clock = clock
        self._shown_path = shown_path
        self.entries: list[LogEntry] = []
        """The rows, oldest first."""
        self.unchanged = 0
        """Automatic checks that changed nothing (not rows)."""
        self._fitted: tuple[int, int, int, int] | None = None
        """The widths the columns were laid out with (`_widths`)."""
        self.last_unchanged: LogEntry | None = None
        """The newest of them: its reason is in the pane's tooltip."""
        self._summaries = 0
        """The finished summaries among the rows so far."""

    def on_mount(self) -> None:
        self._lay_out()
        self._update_subtitle()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_what()

    def _widths(self) -> tuple[int, int, int, int] | None:
        """Each column's width: time, kind and tokens as wide as their widest cell, "what" the room the pane
        leaves beside them (None before the pane has a size). All are given, none measured by the table:
        it measures its cells when it is next idle, and a row drawn before that would be cut to the
        labels' widths."""
        room = self.content_region.width - self.styles.scrollbar_size_vertical  # (room for the scrollbar, always)
        if room <= 0:
            return None
        time, kind, figures = (
            max([len(label), *(len(cell) for cell in cells)])
            for label, cells in (
                ("time", [e.time for e in self.entries]),
                ("kind", [e.kind for e in self.entries]),
                ("tokens", [e.figures for e in self.entries]),
            )
        )
        return time, kind, figures, max(room - time - kind - figures - 4 * 2 * self.cell_padding, WHAT_MIN)

    def _lay_out(self) -> None:
        """The columns, the last as wide as the pane leaves it, and the page of rows again."""
        cursor = self.position
        self._fitted = self._widths()
        self.clear(columns=True)
        widths = self._fitted or (None, None, None, None)
        # labels as Text: a str is read as markup, whose first use costs the app's first frame 3 ms
        for label, width in zip(("time", "kind", "tokens", "what"), widths, strict=True):
            self.add_column(Text(label), key=label, width=width)
        if len(self.rows_data) != len(self.entries):
            self.rows_data = [(str(index), entry) for index, entry in enumerate(self.entries)]
        self.show_page(cursor)

    def _fit_what(self) -> None:
        if self.columns and self._widths() != self._fitted:
            self._lay_out()

    @staticmethod
    def _cells(entry: LogEntry) -> tuple[Text, ...]:
        return (
            Text(entry.time, style="dim"),
            Text(entry.kind, style=STYLES.get(entry.kind, "bold")),
            Text(entry.figures, justify="right"),
            Text(
                escape_control(one_line(entry.what, WHAT_CELL_CHARS)),
                style="italic" if entry.reason else "",
                no_wrap=True,
                overflow="ellipsis",
            ),
        )

    def _add_row(self, entry: LogEntry) -> None:
        if self._widths() != self._fitted:  # a wider cell makes its column wider
            self._lay_out()  # (the entry is in `entries` already)
        else:
            self.append_row(str(len(self.entries) - 1), entry)

    def _take(self, record: dict[str, Any]) -> LogEntry | None:
        """The record's entry, kept in `entries` when it is a row (not yet in the table)."""
        entry = entry_from_record(record, self._clock, self._shown_path)
        if entry is None:
            return None
        if entry.kind in ("summary", "emergency") and record.get("status", "compacted") == "compacted":
            entry = replace(entry, summary=self._summaries)
            self._summaries += 1
        if entry.changed_nothing or (
            entry.kind == "skipped"
            and entry.trigger != "manual"
            and any(e.kind == "skipped" and e.reason == entry.reason for e in self.entries[-3:])
        ):
            self.unchanged += 1  # a repeated automatic skip says nothing new either
            self.last_unchanged = entry
            return entry
        self.entries.append(entry)
        return entry

    def add_record(self, record: dict[str, Any]) -> LogEntry | None:
        entry = self._take(record)
        if entry is not None and self.entries and self.entries[-1] is entry:
            self._add_row(entry)
            self.go_to(self.total - 1)
        self._update_subtitle()
        self._update_tooltip()
        return entry

    def load(self, records: list[dict[str, Any]]) -> None:
        self.entries = []
        self.unchanged = 0
        self.last_unchanged = None
        self._summaries = 0
        for record in records:
            self._take(record)
        self.rows_data = []
        self._lay_out()  # once, for all the rows (a resumed session's whole log)
        self.go_to(self.total - 1)
        self._update_subtitle()
        self._update_tooltip()

    @property
    def highlighted(self) -> LogEntry | None:
        row = self.position
        return self.entries[row] if self.entries and 0 <= row < len(self.entries) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._update_tooltip()

    def unchanged_detail(self) -> str:
        """Why the newest check that changed nothing changed nothing ("" when none did)."""
        last = self.last_unchanged
        if last is None:
            return ""
        what = last.count if last.kind == "reclaim" else last.kind
        return f"the last check that changed nothing ({last.time}): {what}" + (
            f": {last.reason}" if last.reason else ""
        )

    def _update_tooltip(self) -> None:
        entry = self.highlighted
        detail = "\n\n".join(part for part in (entry.detail() if entry else "", self.unchanged_detail()) if part)
        self.tooltip = literal(detail) if detail else None  # reasons come from servers and models: text, not markup

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        entry = self.highlighted
        if entry is not None:
            from xun.tui.screens.detail import DetailScreen  # read when first opened, not at start-up

            self.app.push_screen(
                DetailScreen(
                    f"compaction log · {entry.kind} at {entry.time}",
                    "\n\n".join(part for part in (entry.detail(), self.unchanged_detail()) if part),
                )
            )

    def action_show_in_chat(self) -> None:
        """The chat at the highlighted event's turn: a summary's divider, a restored or reclaimed call."""
        entry = self.highlighted
        if entry is None:
            return
        if entry.summary is not None:
            self.post_message(ShowInChat("", summary=entry.summary))
        elif entry.calls:
            self.post_message(ShowInChat(entry.calls[0]))
        else:
            what = "a reclaim that lists no calls" if entry.kind == "reclaim" else f"a {entry.kind} compaction"
            self.app.notify(f"{what} has no single turn in the chat", title="compaction log")

    def _update_subtitle(self) -> None:
        saved = sum(entry.saved for entry in self.entries if entry.kind in ("reclaim", "summary", "emergency"))
        back = sum(
            entry.tokens_after - entry.tokens_before
            for entry in self.entries
            if entry.kind == "restore" and entry.tokens_before is not None and entry.tokens_after is not None
        )
        n = len(self.entries)
        parts = [f"{n} event{'s' if n != 1 else ''}"]
        if saved:
            parts.append(f"{tokens(saved)} tokens freed")
        if back > 0:  # what restores brought back into the context
            parts.append(f"{tokens(back)} restored")
        if self.unchanged:
            parts.append(f"{self.unchanged} check{'s' if self.unchanged != 1 else ''} changed nothing")
        self.border_subtitle = " · ".join(parts)
