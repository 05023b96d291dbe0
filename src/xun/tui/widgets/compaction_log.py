"""The compaction log: one entry per compaction event (time, kind, tokens before -> after, how many
results or messages, what it costs in the server's prompt cache, the offload file), filled from the session's saved log on resume."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from xun.tui.format import tokens

KINDS = {
    "tool_results_reclaimed": "reclaim",
    "summary_finished": "summary",
    "tool_result_restored": "restore",
    "compaction_skipped": "skipped",
    "compaction_failed": "failed",
}


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
    cache: str = ""
    """The prompt-cache cost: what the next call pays uncached, and what each later call saves."""

    @property
    def saved(self) -> int:
        if self.tokens_before is None or self.tokens_after is None:
            return 0
        return max(self.tokens_before - self.tokens_after, 0)

    def line(self) -> str:
        """The entry as plain text (what the tests read)."""
        parts = [self.time, self.kind]
        if self.tokens_before is not None and self.tokens_after is not None:
            parts.append(f"{tokens(self.tokens_before)} → {tokens(self.tokens_after)}")
        if self.count:
            parts.append(self.count)
        if self.cache:
            parts.append(self.cache)
        if self.reason:
            parts.append(self.reason)
        parts.append(self.trigger)
        text = " ".join(parts)
        if self.offload:
            text += f"\n  → {self.offload}"
        return text


def entry_from_record(record: dict[str, Any], clock: Callable[[float], str], shown_path: Callable[[str | None], str]) -> LogEntry | None:
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
    if kind == "reclaim":
        n = int(record.get("count", 0) or 0)
        count = f"{n} result{'s' if n != 1 else ''}" if n else "nothing to reclaim"
    elif kind in ("summary", "emergency"):
        count = f"{int(record.get('condensed', 0) or 0)} msgs summarised, {int(record.get('kept', 0) or 0)} kept"
        offload = shown_path(record.get("offload_path")) or None
    elif kind == "restore":
        count = f"id …{str(record.get('id', ''))[-8:]}"
    else:
        reason = str(record.get("reason", ""))
    moment = record.get("time")
    miss, saves = record.get("cache_miss_tokens"), record.get("saved_per_call")
    cache = ""
    if isinstance(miss, int) and isinstance(saves, int):
        cache = f"· cache: next call {tokens(miss)} uncached, {'saves' if saves >= 0 else 'adds'} {tokens(abs(saves))}/call"
    return LogEntry(
        time=clock(float(moment)) if isinstance(moment, (int, float)) else "--:--:--",
        kind=kind,
        trigger=trigger,
        tokens_before=int(before) if isinstance(before, (int, float)) else None,
        tokens_after=int(after) if isinstance(after, (int, float)) else None,
        count=count,
        offload=offload,
        reason=reason,
        cache=cache,
    )


STYLES = {"reclaim": "bold cyan", "summary": "bold magenta", "emergency": "bold red", "restore": "bold green",
          "skipped": "bold yellow", "failed": "bold red"}


class CompactionLog(RichLog):
    def __init__(self, *, clock: Callable[[float], str], shown_path: Callable[[str | None], str]) -> None:
        super().__init__(id="compaction-log", classes="pane", wrap=True, markup=False, min_width=10, max_lines=2000)
        self.border_title = "compaction log"
        self._clock = clock
        self._shown_path = shown_path
        self.entries: list[LogEntry] = []
        self._width = 0

    def on_mount(self) -> None:
        self._update_subtitle()

    def _render_entry(self, entry: LogEntry) -> Text:
        text = Text(no_wrap=False)
        text.append(entry.time, style="dim")
        text.append(" ")
        text.append(entry.kind, style=STYLES.get(entry.kind, "bold"))
        if entry.tokens_before is not None and entry.tokens_after is not None:
            text.append(f" {tokens(entry.tokens_before)} → {tokens(entry.tokens_after)}")
        if entry.count:
            text.append(f" {entry.count}")
        if entry.cache:
            text.append(f" {entry.cache}", style="dim")
        if entry.reason:
            text.append(f" {entry.reason}", style="italic")
        text.append(f" {entry.trigger}", style="dim")
        if entry.offload:  # a no-break space: a long path folds after the arrow instead of leaving it alone
            text.append(f"\n  →\u00a0{entry.offload}", style="dim")
        return text

    def add_record(self, record: dict[str, Any]) -> LogEntry | None:
        entry = entry_from_record(record, self._clock, self._shown_path)
        if entry is None:
            return None
        self.entries.append(entry)
        self.write(self._render_entry(entry))
        self._update_subtitle()
        return entry

    def load(self, records: list[dict[str, Any]]) -> None:
        self.entries = []
        self.clear()
        for record in records:
            entry = entry_from_record(record, self._clock, self._shown_path)
            if entry is not None:
                self.entries.append(entry)
                self.write(self._render_entry(entry))
        self._update_subtitle()

    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width != self._width and self.entries:
            self._width = width
            self.clear()
            for entry in self.entries:
                self.write(self._render_entry(entry))
        self._width = width

    def _update_subtitle(self) -> None:
        saved = sum(entry.saved for entry in self.entries if entry.kind in ("reclaim", "summary", "emergency"))
        n = len(self.entries)
        self.border_subtitle = f"{n} event{'s' if n != 1 else ''}" + (f" · {tokens(saved)} tokens freed" if saved else "")
