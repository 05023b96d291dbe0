"""The chat pane: an anchored scroll of blocks (user, assistant, tool, notices, summary dividers).

The chat holds a session's whole transcript as entries and mounts a bounded window of them
(`chat_window.WINDOW` blocks): a resumed session shows its newest page, pages come in at whichever end the
view reaches while as many leave at the other end, and Home, End and a jump to a turn mount the page
they show at once, whatever the session's length. The turns a summary took out of the context are read
from the offload log only when their page is reached (from the top a page at a time, the rest of the
summary's section left unread), and are shown dimmed (`-summarised`) above the divider that replaced them.
Blocks made while the view is away from the newest (a reply streaming) wait hidden below the window
(`_tail`) until End, or a scroll down, reaches them: the blocks the running work adds and writes into are
`chat_live.LiveBlocks`, a part of the chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import Reactive
from textual.scrollbar import ScrollBar
from textual.widget import Widget
from textual.widgets import Static

from xun.tui.chat_window import (
    FIRST_PAGE,
    PAGE,
    WINDOW,
    DividerItem,
    Entry,
    NoticeItem,
    Released,
    centred,
    messages_in,
    position_text,
    weight,
)
from xun.tui import textual_private as private
from xun.tui.chat_blocks import block_for, released
from xun.tui.transcript import (
    Item,
    OffloadedItem,
    SectionPages,
    SummaryItem,
    history_found,
    history_page,
    history_tail,
    section_pages,
)
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.chat_live import LiveBlocks
from xun.tui.widgets.measured_once import MeasuredOnce
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.session_scroll_bar import SessionPlace, SessionScrollBar
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock
from xun.tui.widgets.waiting_line import WaitingLine


class EarlierMarker(Static):
    """The top line while older blocks are not mounted."""


class LaterMarker(Static):
    """The bottom line while newer blocks are not mounted (the view is away from the newest)."""


BLOCKS = (UserBlock, AssistantBlock, ToolBlock, SummaryDivider, NoticeBlock)


class ChatView(LiveBlocks, VerticalScroll, MeasuredOnce):
    """Focused, `[` and `]` select the previous and next block and Enter (or Space) opens or folds the
    selected tool call or reasoning (opens a folded message in the reader), `o` reads the selected block
    whole: no block is a stop on Tab."""

    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "select_block(-1)", "Previous block", id="chat.previous_block"),
        Binding("right_square_bracket", "select_block(1)", "Next block", id="chat.next_block"),
        Binding("enter,space", "toggle_block", "Open/fold", id="chat.toggle_block"),
        Binding("o", "read_block", "Read whole", id="chat.read_block"),
    ]

    def __init__(
        self, *, shown_path: Callable[[str | None], str], welcome: Callable[[], Widget | None] | None = None
    ) -> None:
        super().__init__(id="chat")
        self._welcome = welcome
        self.border_title = "chat"
        self._shown_path = shown_path
        self._above: list[Entry] = []
        """Entries older than the window, oldest first, not mounted."""
        self._below: list[Entry] = []
        """Entries newer than the window, not mounted (empty while the window holds the newest)."""
        self._tail: list[Widget] = []
        """Blocks newer than `_below`, mounted but hidden: made (or still running) while the view was away
        from the newest. Shown, in order, when the window reaches them."""
        self._marker: EarlierMarker | None = None
        self._later: LaterMarker | None = None
        self.reply: AssistantBlock | None = None
        """The assistant block being streamed into, if any."""
        self.waiting: WaitingLine | None = None
        """"thinking…" from a turn's start to its first token, tool call or end."""
        self._window_lock = asyncio.Lock()
        """One change of the window at a time (a page read while another is mounted mounted turns twice)."""
        self._loading_older = False
        """A change of the window is under way (a page being read or mounted, Home, End, a jump)."""
        self._older_wanted = False
        self._newer_wanted = False
        self._generation = 0
        """Which history the entries belong to: a page read for one replaced meanwhile (a session switch,
        /clear) is dropped, never mounted into the next."""
        self.selected: Widget | None = None
        """The block `[`/`]` moved to (or a jump from /context showed), marked `-jump-target`."""
        self.last_notice: NoticeBlock | None = None
        """The newest notice added: a slash command that answered with one brings it into view."""
        self._counts: dict[OffloadedItem, int] = {}
        """How many blocks the turns of each summary show, counted from the offload log off the event loop
        (`_count_offloaded`): the title's position is exact once they are."""
        self._pages: dict[OffloadedItem, SectionPages] = {}
        """Where the pages of each summary's turns begin in the log, found as they are counted: a jump to a
        turn reads only its page."""
        self._unmounted = (0, 0)
        """The blocks above and below the window, as the title last counted them: the scrollbar, drawn at
        every scroll step, reads them rather than walk a long session's entries."""

    def on_mount(self) -> None:
        self.anchor()

    def set_reactive(self, reactive: Reactive[Any], value: Any) -> None:
        """Never a scroll above the top. Textual 8.2.8 anchors a view whose blocks are shorter than it at a
        negative `scroll_y`, set here past its validator (textual#6652): the blocks were drawn against the
        bottom with a void above them, and a layout a few lines short at that moment hid the newest lines."""
        if reactive.name in ("scroll_y", "scroll_target_y") and value < 0:
            value = 0
        super().set_reactive(reactive, value)

    # ------------------------------------------------------------------------------ entries and blocks

    def _in_progress(self, widget: Widget) -> bool:
        """A block the running work still writes into (or not a transcript block at all): never released."""
        if widget is self.reply or not isinstance(widget, BLOCKS):
            return True
        if isinstance(widget, ToolBlock):
            return widget.state == "running"
        return isinstance(widget, SummaryDivider) and widget.state != "done"

    def _window(self) -> list[Widget]:
        """The mounted blocks the view shows, in order (not the markers, not the hidden `_tail`)."""
        hidden = {id(widget) for widget in self._tail}
        return [
            child
            for child in self.children
            if child is not self._marker and child is not self._later and id(child) not in hidden
        ]

    @property
    def at_end(self) -> bool:
        """The window holds the newest block: what the running work adds shows at once."""
        return not self._below and not self._tail

    @property
    def older_count(self) -> int:
        return len(self._above)

    @property
    def newer_count(self) -> int:
        return len(self._below) + len(self._tail)

    def _marker_text(self) -> str:
        return f"⋯ {messages_in(self._above):,} earlier messages · scroll up to load them, Home for the first"

    def _later_text(self) -> str:
        newer = weight(self._below, self._counts) + len(self._tail)
        return f"⋯ {newer:,} newer blocks · scroll down to load them, End for the newest"

    async def _sync_markers(self) -> None:
        """The lines at the window's ends and the position in the title say what is not mounted."""
        if self._above and self._marker is None:
            self._marker = EarlierMarker(self._marker_text(), id="earlier")
            await self.mount(self._marker, before=0)
        elif self._above and self._marker is not None:
            self._marker.update(self._marker_text())
        elif self._marker is not None:
            marker, self._marker = self._marker, None
            await marker.remove()
        if not self.at_end and self._later is None:
            self._later = LaterMarker(self._later_text(), id="later")
            await self.mount(self._later, before=self._tail[0] if self._tail else None)
        elif not self.at_end and self._later is not None:
            self._later.update(self._later_text())
        elif self._later is not None:
            later, self._later = self._later, None
            await later.remove()
        self._show_position()

    def _show_position(self) -> None:
        position = position_text(self._above, len(self._window()), self._below, len(self._tail), self._counts)
        self.border_title = f"chat · {position}" if position else "chat"
        self._unmounted = (weight(self._above, self._counts), weight(self._below, self._counts) + len(self._tail))
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.refresh()

    # ------------------------------------------------------------------------------ the scrollbar

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """The bar says where the view is in the whole session, not in the mounted window."""
        return private.vertical_scrollbar(self, lambda: SessionScrollBar(self, thickness=self.scrollbar_size_vertical))

    def session_place(self) -> SessionPlace | None:
        """The whole session's rows and the rows above the view, the unmounted blocks counted as the title
        counts them and each as tall as the mounted ones on average; None while every block is mounted."""
        window = self._window()
        if not window or (not self._above and not self._below and not self._tail):
            return None
        rows = self.virtual_size.height
        per_block = rows / len(window)
        above, below = (blocks * per_block for blocks in self._unmounted)
        return SessionPlace(rows=above + rows + below, above=above + self.scroll_y)

    async def go_to_fraction(self, fraction: float) -> None:
        """Show the block at `fraction` of the whole session at the top of the view (0 is Home, 1 is End): the
        scrollbar's click and drag. The summarised turns it falls in are read from the offload log first."""
        if fraction <= 0:
            await self.go_home()
            return
        if fraction >= 1:
            await self.go_end()
            return
        self._anchored = False
        async with self._window_lock:
            block = await self._block_at_fraction(fraction)
        self._follow_newest()
        if block is not None and block.is_attached:
            self.scroll_to(y=block.virtual_region.y, animate=False, immediate=True)
            self.call_after_refresh(self._scroll_to_block, block)
        self.call_after_refresh(self._fill_view)

    def _scroll_to_block(self, block: Widget) -> None:
        if block.is_attached and block.parent is self:
            self.scroll_to(y=block.virtual_region.y, animate=False, immediate=True, release_anchor=not self.at_end)

    def _entry_holding(self, source: list[Entry], block: int) -> tuple[int, int] | None:
        """The index of the entry of `source` that shows its `block`-th block (0 the first), and which of the
        entry's blocks it is."""
        for index, entry in enumerate(source):
            blocks = weight([entry], self._counts)
            if block < blocks:
                return index, block
            block -= blocks
        return None

    async def _block_at_fraction(self, fraction: float) -> Widget | None:
        """The block at `fraction` of the session, its page mounted if it is not (the caller holds the lock)."""
        generation = self._generation
        while True:
            window = self._window()
            above = weight(self._above, self._counts)
            total = above + len(window) + weight(self._below, self._counts) + len(self._tail)
            wanted = min(total - 1, int(fraction * total))
            if above <= wanted < above + len(window):
                return window[wanted - above]
            source, at = (self._above, wanted) if wanted < above else (self._below, wanted - above - len(window))
            holding = self._entry_holding(source, at)
            if holding is None:  # a block in the hidden tail: the newest page
                return await self._rewindow(lambda whole: None)
            index, block = holding
            target = source[index]
            if not isinstance(target, OffloadedItem):
                return await self._rewindow(lambda whole: next(i for i, entry in enumerate(whole) if entry is target))
            # the summarised turns up to the block, and a page after it; the rest of the section stays lazy
            items, problems = await asyncio.to_thread(history_page, target, block + PAGE)
            if generation != self._generation:
                return None
            source[index : index + 1] = [*items, *(NoticeItem("warning", problem) for problem in problems)]

    # ------------------------------------------------------------------------------ history

    async def show_transcript(self, items: list[Item]) -> None:
        """Replace everything with a history: its newest page now, the rest as the view goes up."""
        generation = self._new_history(list(items))
        async with self._window_lock:
            if generation != self._generation:
                return
            self._loading_older = True
            try:
                await self.remove_children()
                newest = await self._take(self._above, FIRST_PAGE, generation, newest=True)
                if newest is None:
                    return
                widgets = [block_for(entry, self._shown_path) for entry in newest]
                if not widgets and self._welcome is not None and (welcome := self._welcome()) is not None:
                    widgets.append(welcome)
                if widgets:
                    await self.mount_all(widgets)
                await self._sync_markers()
            finally:
                if generation == self._generation:
                    self._loading_older = False
        self.anchor()
        self.call_after_refresh(self._fill_view)
        self._count_offloaded()

    async def add_older(self, items: list[Item]) -> None:
        """Turns older than the whole history shown (a resume shows its newest turns before the rest of the
        session is read): they come on scroll-up like the others."""
        if not items:
            return
        async with self._window_lock:
            self._above[:0] = items
            await self._sync_markers()
        self.call_after_refresh(self._fill_view)
        self._count_offloaded()

    def _count_offloaded(self) -> None:
        """Count the blocks of the summarised turns not read yet, in a thread (a log of 20,000 messages is
        parsed): the title says `~` until then."""
        uncounted = list(
            dict.fromkeys(
                entry.whole
                for entry in (*self._above, *self._below)
                if isinstance(entry, OffloadedItem) and entry.whole not in self._counts
            )
        )
        if uncounted:
            self.run_worker(self._count(uncounted, self._generation), group="chat-count", exit_on_error=False)

    async def _count(self, items: list[OffloadedItem], generation: int) -> None:
        found = await asyncio.to_thread(lambda: {item: section_pages(item, PAGE) for item in items})
        self._counts.update((item, 1 if pages is None else pages.blocks) for item, pages in found.items())
        self._pages.update((item, pages) for item, pages in found.items() if pages is not None)
        if generation == self._generation and self.is_attached:
            if self._later is not None:
                self._later.update(self._later_text())
            self._show_position()

    def _new_history(self, items: list[Item]) -> int:
        """Forget the shown history (a page still being read for it is dropped); the new one's generation."""
        self._generation += 1
        self._above = list(items)
        self._below = []
        self._tail = []
        self._marker = self._later = None
        self.reply = None
        self._older_wanted = self._newer_wanted = False
        self._loading_older = False
        return self._generation

    async def _take(self, source: list[Entry], size: int, generation: int, *, newest: bool) -> list[Entry] | None:
        """The newest (or oldest) `size` entries of `source`, taken out of it, the summarised turns among them
        read from the offload log first; None when another history replaced this one meanwhile. A summary's
        section is read a page at a time, its rest left lazy: from the oldest, from where it begins; from the
        newest, from where its last page begins once its pages are counted (`_count`; until then, all of
        what is left of it, as a section's end is found only by reading it)."""
        while size:
            page = source[-size:] if newest else source[:size]
            lazy = [i for i, entry in enumerate(page) if isinstance(entry, OffloadedItem)]
            if not lazy:
                break
            if newest:
                at = len(source) - len(page) + lazy[-1]
                lazy_item = source[at]
                assert isinstance(lazy_item, OffloadedItem)
                pages = self._pages.get(lazy_item.whole)
                items, problems = await asyncio.to_thread(history_tail, lazy_item, pages)
            else:
                at = lazy[0]
                items, problems = await asyncio.to_thread(history_page, source[at], size - at)
            if generation != self._generation:
                return None
            source[at : at + 1] = [*items, *(NoticeItem("warning", problem) for problem in problems)]
        if not size:
            return []
        if newest:
            taken = source[-size:]
            del source[-size:]
        else:
            taken = source[:size]
            del source[:size]
        return taken

    def _view_anchor(self, window: list[Widget], *, newest: bool) -> tuple[Widget, float] | None:
        """A block in view and its line on screen: kept there while pages come and go at the ends."""
        top, bottom = self.scroll_y, self.scroll_y + self.scrollable_content_region.height
        shown = [widget for widget in window if widget.virtual_region.bottom > top and widget.virtual_region.y < bottom]
        if not shown:
            return None
        widget = shown[-1] if newest else shown[0]
        return widget, widget.virtual_region.y - self.scroll_y

    def _keep_anchor(self, anchor: tuple[Widget, float] | None) -> None:
        if anchor is not None and anchor[0].is_attached and anchor[0].parent is self:
            self.scroll_to(
                y=anchor[0].virtual_region.y - anchor[1], animate=False, immediate=True, release_anchor=not self.at_end
            )

    async def load_older(self) -> int:
        """Mount the page before the window (releasing as many blocks at its bottom), keeping the view still."""
        self._older_wanted = False
        async with self._window_lock:
            return await self._mount_older(PAGE) if self._above else 0

    async def _mount_older(self, size: int, *, keep_view: bool = True) -> int:
        generation = self._generation
        self._loading_older = True
        try:
            page = await self._take(self._above, size, generation, newest=True)
            if not page:
                return 0
            window = self._window()
            anchor = self._view_anchor(window, newest=False) if keep_view else None
            widgets = [block_for(entry, self._shown_path) for entry in page]
            await self.mount_all(widgets, before=window[0] if window else self._later)
            if generation != self._generation:  # replaced while mounting: the page belongs to no history shown
                await self.remove_children([widget for widget in widgets if widget.is_attached])
                return 0
            await self._release_newest()
            await self._sync_markers()
            self.call_after_refresh(self._keep_anchor, anchor)
            self.call_after_refresh(self._fill_view)
            return len(widgets)
        finally:
            if generation == self._generation:
                self._loading_older = False

    async def load_newer(self) -> int:
        """Mount the page after the window (releasing as many at its top), keeping the view still; the
        hidden blocks made meanwhile show once every entry before them is mounted."""
        self._newer_wanted = False
        async with self._window_lock:
            if self.at_end:
                return 0
            generation = self._generation
            self._loading_older = True
            try:
                page = await self._take(self._below, PAGE, generation, newest=False)
                if page is None:
                    return 0
                window = self._window()
                anchor = self._view_anchor(window, newest=True)
                widgets = [block_for(entry, self._shown_path) for entry in page]
                if widgets:
                    await self.mount_all(widgets, before=self._later)
                if generation != self._generation:
                    await self.remove_children([widget for widget in widgets if widget.is_attached])
                    return 0
                if not self._below:
                    self._show_tail()
                await self._release_oldest()
                await self._sync_markers()
                self.call_after_refresh(self._keep_anchor, anchor)
                self.call_after_refresh(self._fill_view)
                return len(widgets)
            finally:
                if generation == self._generation:
                    self._loading_older = False

    def _follow_newest(self) -> None:
        """A window that holds the newest follows what comes next once the view is scrolled to its bottom;
        one that does not never sticks to its own bottom."""
        self._anchored = self.at_end
        if self.at_end:
            self.release_anchor()

    def _show_tail(self) -> None:
        """The window reached the newest: the hidden blocks join it, and the view follows what comes next
        once it is scrolled to the bottom."""
        for widget in self._tail:
            widget.display = True
        self._tail = []
        self._follow_newest()

    async def _release_newest(self) -> None:
        """Blocks past the bound at the window's bottom leave it: as entries of `_below`, or, from the first
        one still in progress on, hidden in `_tail` (they are the newest; the work goes on writing into them)."""
        window = self._window()
        excess = len(window) - WINDOW
        if excess <= 0:
            return
        leaving = window[-excess:]
        held = next((i for i, widget in enumerate(leaving) if self._in_progress(widget)), len(leaving))
        self._below[:0] = [released(widget) for widget in leaving[:held]]
        for widget in leaving[held:]:
            widget.display = False
        self._tail[:0] = leaving[held:]
        self._anchored = False  # the newest is not in the window: nothing keeps the view at its bottom
        self._forget_selection(leaving)
        await self.remove_children(leaving[:held])

    async def _release_oldest(self) -> None:
        """Blocks past the bound at the window's top leave it, as entries at the end of `_above`."""
        window = self._window()
        excess = len(window) - WINDOW
        if excess <= 0:
            return
        held = next((i for i, widget in enumerate(window[:excess]) if self._in_progress(widget)), excess)
        leaving = window[:held]
        self._above += [released(widget) for widget in leaving]
        self._forget_selection(leaving)
        await self.remove_children(leaving)

    def _forget_selection(self, leaving: list[Widget]) -> None:
        if self.selected is not None and self.selected in leaving:
            self.select(None)

    async def _rewindow(self, choose: Callable[[list[Entry]], int | None]) -> Widget | None:
        """Release the window and mount the page that `choose` picks in the whole transcript (the index of
        an entry, shown a third of the way down; None: the newest page). Returns the chosen entry's block.
        The caller holds the window's lock; the screen shows the old window until the new one is whole."""
        generation = self._generation
        self._loading_older = True
        try:
            with self.app.batch_update():
                return await self._replace_window(choose, generation)
        finally:
            if generation == self._generation:
                self._loading_older = False

    async def _replace_window(self, choose: Callable[[list[Entry]], int | None], generation: int) -> Widget | None:
        window = self._window()
        held = next((i for i, widget in enumerate(window) if self._in_progress(widget)), len(window))
        whole = [*self._above, *(released(widget) for widget in window[:held]), *self._below]
        for widget in window[held:]:
            widget.display = False
        self._tail[:0] = window[held:]
        self.select(None)
        await self.remove_children([*window[:held], *(m for m in (self._marker, self._later) if m)])
        self._marker = self._later = None
        at = choose(whole)
        if at is None:
            self._above, self._below = whole, []
            page = await self._take(self._above, FIRST_PAGE, generation, newest=True)
        else:
            start, end = centred(len(whole), at, 2 * PAGE)
            # summarised turns read between the page's start and the chosen entry would push it off the page
            start = max([start, *(i + 1 for i in range(start, at) if isinstance(whole[i], OffloadedItem))])
            self._above, self._below = whole[:start], whole[start:]
            page = await self._take(self._below, end - start, generation, newest=False)
        if page is None:
            return None
        widgets = [block_for(entry, self._shown_path) for entry in page]
        await self.mount_all(widgets, before=self._tail[0] if self._tail else None)
        if at is None or not self._below:
            self._show_tail()
        await self._sync_markers()
        target = whole[at] if at is not None else None
        return next((w for w in widgets if getattr(w, "chat_entry", None) is target), None)

    async def go_home(self) -> None:
        """The first block of the session, reading only the first page."""
        self._anchored = False
        async with self._window_lock:
            whole = (
                weight(self._above, self._counts)
                + len(self._window())
                + weight(self._below, self._counts)
                + len(self._tail)
            )
            if self._above and whole <= WINDOW:
                # a short session: all of it, counted in blocks (a summary's unread turns are one entry)
                await self._mount_older(weight(self._above, self._counts), keep_view=False)
            if self._above:  # a long session, or one whose unread turns were more than their estimate
                await self._rewindow(lambda whole: 0)
        self._follow_newest()
        self.scroll_to(y=0, animate=False, immediate=True)
        self.call_after_refresh(self.scroll_to, y=0, animate=False, immediate=True)
        self.call_after_refresh(self._fill_view)

    async def go_end(self) -> None:
        """The newest block, the view following what comes next."""
        async with self._window_lock:
            if not self.at_end:
                await self._rewindow(lambda whole: None)
                self.call_after_refresh(self._fill_view)
        self.anchor()

    async def show_entry(self, wanted: Callable[[Entry], bool]) -> Widget | None:
        """The block of the first entry that `wanted` picks, mounted (with its page) if it is not; None when
        no entry is picked (summarised turns are not searched: they hold no message of the context)."""
        for widget in self._window():
            entry = getattr(widget, "chat_entry", None)
            if entry is not None and wanted(entry):
                return widget
        if not any(wanted(entry) for entry in (*self._above, *self._below)):
            return None
        self._anchored = False

        def choose(whole: list[Entry]) -> int | None:
            return next((i for i, entry in enumerate(whole) if wanted(entry)), None)

        async with self._window_lock:
            with self.app.batch_update():  # the first frame shows the block at the top, as its callers want
                block = await self._rewindow(choose)
                if block is not None:
                    private.lay_out_now(self.screen)
                    self.scroll_to_widget(block, animate=False, top=True, immediate=True)
        self._follow_newest()
        self.call_after_refresh(self._fill_view)
        return block

    async def show_divider(self, ordinal: int) -> Widget | None:
        """The divider of the session's `ordinal`-th finished summary (0 the first), mounted (with its page) if
        it is not; None when the chat holds fewer. The chat's dividers are its summaries, in order."""

        def finished(entry: Entry | Widget) -> bool:
            if isinstance(entry, Widget):
                return isinstance(entry, SummaryDivider) and entry.state == "done"
            item = entry.item if isinstance(entry, Released) else entry
            return isinstance(item, SummaryItem) or (isinstance(item, DividerItem) and item.state == "done")

        everything: list[Entry | Widget] = [*self._above, *self._window(), *self._below, *self._tail]
        target = next(islice((entry for entry in everything if finished(entry)), ordinal, None), None)
        if isinstance(target, Widget):
            if target in self._tail:
                await self.go_end()
            return target
        if target is None:
            return None
        item = target.item if isinstance(target, Released) else target
        return await self.show_entry(lambda entry: (entry.item if isinstance(entry, Released) else entry) is item)

    async def show_summarised(self, wanted: Callable[[Entry], bool], marks: Sequence[str] = ()) -> Widget | None:
        """`show_entry`, searching the turns summaries took out (newest first) until one holds the entry: only
        the page of a summary's turns that holds it is read into the chat, the rest of them stays lazy. With
        `marks` (what the log holds where the entry is: `found_turns`), a counted summary's pages are not read
        but the one the marks are on."""
        block = await self.show_entry(wanted)
        if block is not None:
            return block
        async with self._window_lock:
            generation = self._generation
            found = False
            for source in (self._below, self._above):
                at = len(source) - 1
                while not found and at >= 0:
                    if isinstance(item := source[at], OffloadedItem):
                        pages = self._pages.get(item.whole)
                        parts, problems = await asyncio.to_thread(
                            lambda: history_found(item, wanted, PAGE, marks=marks, pages=pages)
                        )
                        if generation != self._generation:
                            return None
                        if problems:
                            source[at : at + 1] = [NoticeItem("warning", problem) for problem in problems]
                        elif parts is not None:
                            source[at : at + 1] = parts
                            found = True
                    at -= 1
        return await self.show_entry(wanted) if found else None

    def _fill_view(self) -> None:
        """A view the mounted blocks do not fill (a tall terminal, short blocks) asks for more: newer ones
        while the window is away from the newest, else older ones."""
        if self.max_scroll_y == 0:
            if not self.at_end:
                self._want_newer()
            elif self._above:
                self._want_older()

    def _want_older(self) -> None:
        """Load the next older page once this scroll (or layout) is over; a chat removed meanwhile (the app
        quitting) loads nothing."""
        if self._above and not self._older_wanted:
            self._older_wanted = True
            self.call_later(self.load_older)

    def _want_newer(self) -> None:
        if not self.at_end and not self._newer_wanted:
            self._newer_wanted = True
            self.call_later(self.load_newer)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.reply is not None:
            self.reply.catch_up()  # a reply streaming below the view waits until the view reaches it
        if new_value <= 0 < old_value:
            self._want_older()
        elif new_value >= self.max_scroll_y > old_value:
            self._want_newer()

    def on_mouse_scroll_up(self) -> None:
        if self.scroll_y <= 0:
            self._want_older()

    def on_mouse_scroll_down(self) -> None:
        if self.scroll_y >= self.max_scroll_y:
            self._want_newer()

    def page(self, direction: int) -> None:
        """PageUp (-1) or PageDown (1), loading the next page when the view is at that end already."""
        if direction < 0:
            self.action_page_up()
        else:
            self.action_page_down()

    def action_page_up(self) -> None:
        if self.scroll_y <= 0:
            self._want_older()
        super().action_page_up()

    def action_scroll_up(self) -> None:
        if self.scroll_y <= 0:
            self._want_older()
        super().action_scroll_up()

    def action_page_down(self) -> None:
        if self.scroll_y >= self.max_scroll_y:
            self._want_newer()
        super().action_page_down()

    def action_scroll_down(self) -> None:
        if self.scroll_y >= self.max_scroll_y:
            self._want_newer()
        super().action_scroll_down()

    def action_scroll_home(self) -> None:
        """Home: the session's first block, at once (only the first page is read)."""
        self.release_anchor()
        self.call_later(self.go_home)

    def action_scroll_end(self) -> None:
        """End: the newest block, at once."""
        self.call_later(self.go_end)

    # ------------------------------------------------------------------------------- selection

    def select(self, block: Widget | None, *, scroll: bool = True) -> None:
        if self.selected is not None:
            self.selected.remove_class("-jump-target")
        self.selected = block
        if block is None:
            return
        block.add_class("-jump-target")
        self.release_anchor()
        if scroll:
            self.call_after_refresh(self.scroll_to_widget, block, animate=False, top=False)

    def action_select_block(self, step: int) -> None:
        blocks = [child for child in self.children if isinstance(child, BLOCKS)]
        if not blocks:
            return
        if self.selected in blocks:
            at = blocks.index(self.selected) + step
        else:  # start from the newest
            at = len(blocks) - 1
        if at < 0:
            self._want_older()
            at = 0
        elif at >= len(blocks):
            self._want_newer()
        self.select(blocks[min(at, len(blocks) - 1)])

    def action_toggle_block(self) -> None:
        block = self.selected
        if isinstance(block, ToolBlock):
            block.collapsed = not block.collapsed
        elif isinstance(block, AssistantBlock) and block.reasoning is not None:
            block.reasoning.collapsed = not block.reasoning.collapsed
        elif isinstance(block, (UserBlock, AssistantBlock)) and block.folded is not None:
            block.read_whole()

    def action_read_block(self) -> None:
        """The selected block's whole text in the reader (a long one is folded in the chat)."""
        if isinstance(self.selected, (UserBlock, AssistantBlock, ToolBlock)):
            self.selected.read_whole()

    async def clear(self) -> None:
        self._new_history([])
        await self.remove_children()
