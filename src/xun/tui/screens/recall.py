"""F9 (and /recall [query]): search what compaction took out of the context.

A search box, results as they are typed, and the full entry of the highlighted result in a pane; a
reclaimed tool result that is still in this session's context as a placeholder can be restored into it.
Every query runs in a thread worker (a short pause after the last key first), and so does every read
of an entry: SQLite is never touched on the UI thread. The workers post messages
(`xun.tui.messages.RecallResults`, `RecallEntryLoaded`, `RecallStats`); the handlers here own the widgets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from xun.base.valid_text import escape_control
from xun.context.recall import RecallEntry, RecallError, RecallHit, RecallIndex
from xun.tui import messages as m
from xun.tui.format import literal
from xun.tui.screens.modal import Modal

DEBOUNCE = 0.15
"""Seconds after the last key before the search runs."""
LIMIT = 50
SHOWN_LIMIT = 200_000
"""Characters of an entry shown in the pane (the rest is said to be there)."""
MARKS = ("«", "»")
ROLES = {
    "user": "you",
    "assistant": "assistant",
    "reasoning": "reasoning",
    "tool_call": "tool call",
    "tool": "tool result",
}

Restorable = Callable[[str, str], tuple[bool, str]]
"""(session, tool_call_id) -> (can be restored now, why not)."""


def snippet_content(snippet: str, marks: tuple[str, str] = MARKS) -> Content:
    """The snippet as plain text with the matched words (between the marks) highlighted. The text is
    never parsed as markup: it is split at the marks and assembled from plain pieces."""
    start, end = marks
    pieces: list[tuple[str, str] | str] = []
    rest = snippet
    while rest:
        before, found, after = rest.partition(start)
        if before:
            pieces.append(before)
        if not found:
            break
        match, closed, rest = after.partition(end)
        if match:
            pieces.append((match, "bold reverse $accent" if closed else ""))
        if not closed:
            break
    return Content.assemble(*pieces) if pieces else Content("")


def lead_to_match(snippet: str, width: int, marks: tuple[str, str] = MARKS) -> str:
    """The snippet with its start cut (at a space, behind an ellipsis) when the first match would sit
    past a third of `width`, so the match stays in view on a narrow screen."""
    at = snippet.find(marks[0])
    keep = max(width // 3, 8)
    if width <= 0 or at <= keep or len(snippet) <= width:
        return snippet
    start = snippet.find(" ", at - keep, at)
    start = at - keep if start < 0 else start + 1
    return "…" + snippet[start:].lstrip("…")


class RecallScreen(Modal[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f9", "close", "Close", id="recall.close"),
        Binding("ctrl+r", "restore", "Restore into context", id="recall.restore"),
        Binding("f2", "scope", "This session / all", id="recall.scope"),
        Binding("ctrl+g", "show_in_chat", "Show in the chat", id="recall.chat"),
    ]

    def __init__(
        self,
        index: RecallIndex,
        *,
        session: str,
        query: str = "",
        clock: Callable[[float], str],
        restorable: Restorable,
        cursor_blink: bool = True,
    ) -> None:
        super().__init__(id="recall")
        self.index = index
        self.session = session
        """The current conversation's id."""
        self.initial_query = query
        self.clock = clock
        self.restorable = restorable
        self.cursor_blink = cursor_blink
        self.only_this_session = False
        self.hits: list[RecallHit] = []
        self.entry: RecallEntry | None = None
        self.searches = 0
        """How many searches finished and were shown (the tests wait on it)."""
        self.query_shown = ""
        self._serial = 0
        self._timer: Timer | None = None
        self._entry_wanted: int | None = None
        self._stats_text = ""
        self._restoring: RecallEntry | None = None
        self._restored: dict[int, tuple[RecallEntry, float]] = {}
        """Entries restored from here, and when: the index drops them, and a second look must say "restored"."""

    # ---------------------------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        with Vertical(id="recall-box") as box:
            box.border_title = "recall · search what compaction took out of the context"
            box.border_subtitle = self._subtitle()
            search = Input(
                value=self.initial_query,
                placeholder="search offloaded messages and reclaimed results",
                id="recall-query",
                compact=True,
                select_on_focus=False,
            )
            search.cursor_blink = self.cursor_blink
            yield search
            yield Label("", id="recall-status")
            yield OptionList(id="recall-results")
            with VerticalScroll(id="recall-entry"):
                yield Static("", id="recall-entry-text", markup=False)
            with Horizontal(id="recall-buttons"):
                yield Button(
                    "Restore into context (Ctrl+R)",
                    id="restore",
                    variant="warning",
                    compact=True,
                    disabled=True,
                    tooltip="Put the original back in place of its placeholder",
                )
                yield Button("Close (Esc)", id="close", compact=True)

    def _subtitle(self) -> str:
        scope = "this session" if self.only_this_session else "all sessions here"
        return f"{scope} (F2) · ↑↓ results · enter read · ctrl+r restore · esc close"

    def on_mount(self) -> None:
        self.query_one("#recall-query", Input).focus()
        self._load_stats()
        if self.initial_query.strip():
            self._search_now()
        else:
            self._show_status()

    # --------------------------------------------------------------------------------- searching

    @on(Input.Changed, "#recall-query")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(DEBOUNCE, self._search_now)

    @on(Input.Submitted, "#recall-query")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
            self._search_now()
        if self.hits:
            self.query_one("#recall-results", OptionList).focus()

    def _search_now(self) -> None:
        self._timer = None
        query = self.query_one("#recall-query", Input).value
        self._serial += 1
        if not query.strip():
            self.hits = []
            self.query_shown = ""
            self._fill([])
            self._show_status()
            return
        self._show_status("searching…")
        self._search(self._serial, query, self.session if self.only_this_session else None)

    @work(thread=True, exclusive=True, group="recall-search", exit_on_error=False)
    def _search(self, serial: int, query: str, session: str | None) -> None:
        """In a thread: the query and the index's warnings, posted back as one message."""
        try:
            hits = self.index.search(query, limit=LIMIT, session=session, prefix=True, highlight=MARKS)
        except RecallError as exc:
            self.post_message(m.RecallResults(serial, query, [], self.index.take_warnings(), str(exc)))
            return
        self.post_message(m.RecallResults(serial, query, hits, self.index.take_warnings()))

    @work(thread=True, exclusive=True, group="recall-entry", exit_on_error=False)
    def _read_entry(self, entry_id: int) -> None:
        try:
            entry = self.index.entry(entry_id)
        except RecallError as exc:
            self.post_message(m.RecallEntryLoaded(entry_id, None, self.index.take_warnings(), str(exc)))
            return
        self.post_message(m.RecallEntryLoaded(entry_id, entry, self.index.take_warnings()))

    @work(thread=True, group="recall-stats", exit_on_error=False)
    def _load_stats(self) -> None:
        """In a thread: the counts and the warnings met (each worker takes the warnings it may have added, so
        none waits unseen in the index for a later search)."""
        try:
            stats = self.index.stats()
        except RecallError:  # the search says so; only the warnings are this worker's to hand on
            if warnings := self.index.take_warnings():
                self.app.call_from_thread(self._warn, warnings)
            return
        self.post_message(m.RecallStats(stats.offloaded, stats.reclaimed, stats.sessions, self.index.take_warnings()))

    def _warn(self, warnings: list[str], error: str | None = None) -> None:
        for warning in warnings:
            self.app.notify(warning, title="history index", severity="warning")
        if error:
            self.app.notify(f"the history index cannot be used: {error}", title="history index", severity="error")

    def on_recall_stats(self, message: m.RecallStats) -> None:
        message.stop()
        self._warn(message.warnings)
        self._stats_text = (
            f"{message.offloaded:,} offloaded message{'s' if message.offloaded != 1 else ''} and "
            f"{message.reclaimed:,} reclaimed result{'s' if message.reclaimed != 1 else ''} indexed here"
        )
        if not self.query_shown and self._timer is None and not self.query_one("#recall-query", Input).value.strip():
            self._show_status()

    def on_recall_results(self, message: m.RecallResults) -> None:
        message.stop()
        self._warn(message.warnings, message.error)
        if message.serial != self._serial:
            return  # an older search finishing after a newer one started
        self.hits = list(message.hits)
        self.query_shown = message.query
        self._fill(self.hits)
        count = len(self.hits)
        if message.error:
            self._show_status("the search failed (see the notification)")
        elif count:
            more = "+" if count >= LIMIT else ""
            self._show_status(f"{count}{more} match{'es' if count != 1 else ''} for “{message.query.strip()}”")
        else:
            self._show_status(f"nothing matches “{message.query.strip()}”")
        self.searches += 1

    def _show_status(self, text: str | None = None) -> None:
        if text is None:
            text = self._stats_text or "type to search"
            if not self.hits:
                self._show_entry(None)
        self.query_one("#recall-status", Label).update(literal(text))

    # ----------------------------------------------------------------------------------- results

    def hit_content(self, hit: RecallHit, width: int = 0) -> Content:
        """Two lines: when, what and where from; then the snippet (each cut to `width` cells when given)."""
        role = ROLES.get(hit.role, hit.role)
        head = [self.clock(hit.time), role + (f" {hit.tool}" if hit.tool else ""), hit.source]
        if hit.session != self.session:
            head.append(f"session {hit.session}")
        first = Content.styled(escape_control(" · ".join(head), keep_newlines=False), "dim")
        second = snippet_content(lead_to_match(escape_control(hit.snippet), width))
        if width > 0:
            first, second = first.truncate(width, ellipsis=True), second.truncate(width, ellipsis=True)
        return Content.assemble(first, "\n", second)

    def _fill(self, hits: list[RecallHit], *, keep_place: bool = False) -> None:
        results = self.query_one("#recall-results", OptionList)
        place = results.highlighted if keep_place else None
        width = results.scrollable_content_region.width
        results.set_options([Option(self.hit_content(hit, width), id=str(hit.id)) for hit in hits])
        if hits:
            results.highlighted = place if place is not None and place < len(hits) else 0
            self._want_entry(hits[results.highlighted or 0].id)
        else:
            self._show_entry(None)

    def on_resize(self) -> None:
        if self.hits:
            self._fill(self.hits, keep_place=True)

    @property
    def highlighted_hit(self) -> RecallHit | None:
        results = self.query_one("#recall-results", OptionList)
        index = results.highlighted
        return self.hits[index] if index is not None and 0 <= index < len(self.hits) else None

    @on(OptionList.OptionHighlighted, "#recall-results")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is not None:
            self._want_entry(int(event.option.id))

    @on(OptionList.OptionSelected, "#recall-results")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one("#recall-entry").focus()

    def _want_entry(self, entry_id: int) -> None:
        if entry_id == self._entry_wanted:
            return
        self._entry_wanted = entry_id
        self._read_entry(entry_id)

    def on_recall_entry_loaded(self, message: m.RecallEntryLoaded) -> None:
        message.stop()
        self._warn(message.warnings, message.error)
        if message.entry_id != self._entry_wanted:
            return
        entry = message.entry
        if entry is None and message.entry_id in self._restored:
            entry = self._restored[message.entry_id][0]
            self.query_one("#recall-status", Label).update(literal(self.restore_state(entry)[1]))
        elif entry is None and not message.error:
            self.query_one("#recall-status", Label).update(
                Text("that entry is gone (the index was rebuilt): search again")
            )
        self._show_entry(entry)

    def entry_text(self, entry: RecallEntry) -> Text:
        text = Text()
        head = [self.clock(entry.time), ROLES.get(entry.role, entry.role), entry.source]
        if entry.tool:
            head.append(entry.tool)
        if entry.tool_call_id:
            head.append(f"id {entry.tool_call_id}")
        head.append(f"session {entry.session}")
        text.append(escape_control(" · ".join(head), keep_newlines=False) + "\n", style="bold")
        if entry.arguments:  # everything here was written by a model, a tool or a file: escape codes show
            text.append(escape_control(f"arguments {entry.arguments}") + "\n", style="dim")
        if entry.detail:
            text.append(escape_control(entry.detail) + "\n", style="dim")
        body = escape_control(entry.text.expandtabs(4))
        if len(body) > SHOWN_LIMIT:
            body = body[:SHOWN_LIMIT] + f"\n… ({len(entry.text):,} characters in all)"
        text.append("\n" + body)
        return text

    def _show_entry(self, entry: RecallEntry | None) -> None:
        self.entry = entry
        if entry is None:
            self._entry_wanted = None
        pane = self.query_one("#recall-entry-text", Static)
        pane.update(self.entry_text(entry) if entry is not None else Text("", style="dim"))
        self.query_one("#recall-entry", VerticalScroll).scroll_home(animate=False)
        self.refresh_restore()

    # ----------------------------------------------------------------------------------- restore

    def restore_state(self, entry: RecallEntry | None = None) -> tuple[bool, str]:
        entry = entry or self.entry
        if entry is None:
            return False, ""
        if entry.id in self._restored:
            return False, f"already restored into the context ({self.clock(self._restored[entry.id][1])})"
        if entry.source != "reclaimed" or not entry.tool_call_id:
            return False, "a summarised message: it can be read here, not restored"
        return self.restorable(entry.session, entry.tool_call_id)

    def refresh_restore(self) -> None:
        """Called when the entry changes, and by the app when the context changed (a restore finished)."""
        if not self.is_attached:
            return
        ok, why = self.restore_state()
        button = self.query_one("#restore", Button)
        button.disabled = not ok
        button.tooltip = literal(why or "Put the original back in place of its placeholder")

    def context_changed(self, kind: str) -> None:
        """The app finished some work (a turn, a compaction, a restore): what may be restored changed."""
        self.refresh_restore()
        restoring, self._restoring = self._restoring, None
        if kind == "restore" and restoring is not None:
            call_id = restoring.tool_call_id
            still = self.restorable(restoring.session, call_id)[0]
            if not still:  # its row says so at once; the index no longer has it
                restored = replace(restoring, source="restored")
                self._restored[restoring.id] = (restored, time.time())
                self.hits = [replace(hit, source="restored") if hit.id == restoring.id else hit for hit in self.hits]
                self._fill(self.hits, keep_place=True)
                if self.entry is not None and self.entry.id == restoring.id:
                    self._show_entry(restored)
            self.query_one("#recall-status", Label).update(
                literal(
                    f"could not restore {call_id} (see the notification)"
                    if still
                    else f"restored {call_id} into the context"
                )
            )

    def action_restore(self) -> None:
        entry = self.entry
        ok, why = self.restore_state()
        if entry is None:
            return
        if not ok:
            self.app.notify(f"cannot restore this entry: {why}", severity="warning")
            return
        self._restoring = entry
        self.app.post_message(m.RestoreRequested(entry.tool_call_id))
        self.query_one("#recall-status", Label).update(literal(f"restoring {entry.tool_call_id} into the context…"))

    def action_show_in_chat(self) -> None:
        """Close, and the chat shows the entry read here: its turn, mounted wherever it is in the session."""
        entry = self.entry
        if entry is None:
            return
        if entry.session != self.session:
            self.app.notify(
                f"it is in session {entry.session}; switch to it (/sessions) to see it in the chat", severity="warning"
            )
            return
        self.action_close()
        self.app.post_message(m.ShowInChat(entry.tool_call_id, entry.speaker, entry.text))

    def action_scope(self) -> None:
        self.only_this_session = not self.only_this_session
        self.query_one("#recall-box").border_subtitle = self._subtitle()
        self._search_now()

    def action_close(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self.dismiss(None)

    def on_key(self, event: events.Key) -> None:
        """Up and Down in the search box move through the results."""
        if event.key in ("up", "down") and self.query_one("#recall-query", Input).has_focus and self.hits:
            results = self.query_one("#recall-results", OptionList)
            if event.key == "down":
                results.action_cursor_down()
            else:
                results.action_cursor_up()
            event.stop()
            event.prevent_default()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "restore":
            self.action_restore()
        elif event.button.id == "close":
            self.action_close()
