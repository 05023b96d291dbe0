"""The chat pane: an anchored scroll of blocks (user, assistant, tool, notices, summary dividers).

A long history is mounted newest first: `show_transcript` mounts the last `PAGE` blocks, and the rest
come in pages when the view reaches its top (the chat loads them itself, after the scroll that asked).
The turns a summary took out of the context are read from the offload log only when their page is
reached, and are shown dimmed (`-summarised`) above the divider that replaced them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import Reactive
from textual.widget import Widget
from textual.widgets import Static

from xun.tui.transcript import AssistantItem, Item, OffloadedItem, SummaryItem, ToolItem, UserItem, whole_history
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock
from xun.tui.widgets.waiting_line import WaitingLine
from xun.tui.widgets.welcome_block import WelcomeBlock

PAGE = 10
"""Blocks mounted first from a history: few, since mounting blocks is most of what a resumed session's
first screen costs; when they do not fill the view, older pages follow at once (`_fill_view`)."""
OLDER_PAGE = 20
"""Blocks mounted each time the view reaches the top: small, so scrolling up never stalls."""


class EarlierMarker(Static):
    """The top line while older blocks are not mounted yet."""


BLOCKS = (UserBlock, AssistantBlock, ToolBlock, SummaryDivider, NoticeBlock)


class ChatView(VerticalScroll):
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

    def __init__(self, *, shown_path: Callable[[str | None], str], welcome: Callable[[], Widget | None] | None = None) -> None:
        super().__init__(id="chat")
        self._welcome = welcome
        self.border_title = "chat"
        self._shown_path = shown_path
        self._older: list[Item] = []
        self._marker: EarlierMarker | None = None
        self.reply: AssistantBlock | None = None
        """The assistant block being streamed into, if any."""
        self.waiting: WaitingLine | None = None
        """"thinking…" from a turn's start to its first token, tool call or end."""
        self._loading_older = False
        """A page is being read and mounted (the newest by `show_transcript`, or an older one): one at a time."""
        self._older_wanted = False
        self._generation = 0
        """Which history `_older` holds: a page read for one replaced meanwhile (a session switch, /clear) is
        dropped, never mounted into the next."""
        self._going_home = False
        """Home was pressed: each page that loads leaves the view at the top."""
        self.selected: Widget | None = None
        """The block `[`/`]` moved to (or a jump from /context showed), marked `-jump-target`."""
        self.last_notice: NoticeBlock | None = None
        """The newest notice added: a slash command that answered with one brings it into view."""

    def on_mount(self) -> None:
        self.anchor()

    def set_reactive(self, reactive: Reactive[Any], value: Any) -> None:
        """Never a scroll above the top. Textual 8.2.8 anchors a view whose blocks are shorter than it at a
        negative `scroll_y`, set here past its validator (textual#6652): the blocks were drawn against the
        bottom with a void above them, and a layout a few lines short at that moment hid the newest lines."""
        if reactive.name in ("scroll_y", "scroll_target_y") and value < 0:
            value = 0
        super().set_reactive(reactive, value)

    # ------------------------------------------------------------------------------ history

    def _widget_for(self, item: Item | NoticeBlock) -> Widget:
        if isinstance(item, NoticeBlock):
            return item
        widget = self._block_for(item)
        if getattr(item, "summarised", False):
            widget.add_class("-summarised")
        return widget

    def _block_for(self, item: Item) -> Widget:
        if isinstance(item, UserItem):
            return UserBlock(item.text, carried=item.carried)
        if isinstance(item, AssistantItem):
            return AssistantBlock(item.content, item.reasoning)
        if isinstance(item, ToolItem):
            block = ToolBlock(item.call_id, item.name, item.arguments)
            if item.result is not None:
                block.finished(result_chars=item.result_chars or 0, duration_text="", result=item.result)
                if item.result_chars is None:
                    block.result_chars = None
                    block.title = block._heading()
            if item.reclaimed:
                block.mark_reclaimed()
            return block
        assert isinstance(item, SummaryItem), item
        return SummaryDivider(SummaryDivider.describe(item.condensed, item.kept, self._shown_path(item.offload_path)))

    async def show_transcript(self, items: list[Item]) -> None:
        """Replace everything with a history: the newest page now, older pages on scroll-up (a scroll-up
        while the newest page is read waits for it: two reads of one list mounted some turns twice)."""
        generation = self._new_history(list(items))
        self._loading_older = True
        try:
            await self.remove_children()
            newest = await self._take_page(PAGE, generation)
            if newest is None:
                return
            widgets = [self._widget_for(item) for item in newest]
            if self._older:
                self._marker = EarlierMarker(self._marker_text(), id="earlier")
                widgets.insert(0, self._marker)
            if not widgets and self._welcome is not None and (welcome := self._welcome()) is not None:
                widgets.append(welcome)
            if widgets:
                await self.mount_all(widgets)
        finally:
            if generation == self._generation:
                self._loading_older = False
        self.anchor()
        self.call_after_refresh(self._fill_view)
        if self._going_home:
            self._want_older()

    async def add_older(self, items: list[Item]) -> None:
        """Turns older than the whole history shown (a resume shows its newest turns before the rest of the
        session is read): they come on scroll-up like the others."""
        if not items:
            return
        self._older[:0] = items
        if self._marker is None:
            self._marker = EarlierMarker(self._marker_text(), id="earlier")
            await self.mount(self._marker, before=0)
        else:
            self._marker.update(self._marker_text())
        self.call_after_refresh(self._fill_view)

    def _new_history(self, items: list[Item]) -> int:
        """Forget the shown history (a page still being read for it is dropped); the new one's generation."""
        self._generation += 1
        self._older = items
        self._marker = None
        self.reply = None
        self._older_wanted = False
        self._loading_older = False
        return self._generation

    async def _take_page(self, size: int, generation: int) -> list[Item | NoticeBlock] | None:
        """The newest `size` items not mounted yet, reading the offload log for summarised turns among them;
        None when another history replaced this one while the log was read."""
        while True:
            page = self._older[-size:]
            lazy = [i for i, item in enumerate(page) if isinstance(item, OffloadedItem)]
            if not lazy:
                break
            at = len(self._older) - len(page) + lazy[-1]
            items, problems = await asyncio.to_thread(whole_history, [self._older[at]])
            if generation != self._generation:
                return None
            notices = [NoticeBlock("warning", problem) for problem in problems]
            self._older[at:at + 1] = [*items, *notices]
        taken, self._older = self._older[-size:] if size else [], self._older[:-size] if size else self._older
        return taken

    @property
    def older_count(self) -> int:
        return len(self._older)

    def _marker_text(self) -> str:
        summarised = sum(item.condensed for item in self._older if isinstance(item, OffloadedItem))
        indexed = [item.index for item in self._older if isinstance(item, (UserItem, AssistantItem, ToolItem))
                   and not item.summarised]
        others = sum(1 for item in self._older if not isinstance(item, (OffloadedItem, SummaryItem)))
        messages = max(summarised + (max(indexed) - min(indexed) + 1 if indexed else 0), others)
        return f"⋯ {messages:,} earlier messages · scroll up (or press Home) to load them"

    async def load_older(self) -> int:
        """Mount the next page of older blocks above the current ones, keeping the view still."""
        self._older_wanted = False
        if not self._older or self._loading_older:
            return 0
        self._loading_older = True
        generation = self._generation
        try:
            page = await self._take_page(OLDER_PAGE, generation)
            if page is None:
                return 0
            widgets = [self._widget_for(item) for item in page]
            height_before = self.virtual_size.height
            if self._marker is not None:
                await self.mount_all(widgets, after=self._marker)
            else:
                await self.mount_all(widgets, before=0)
            if generation != self._generation:  # replaced while mounting: the page belongs to no history shown
                await self.remove_children([widget for widget in widgets if widget.is_attached])
                return 0
            if not self._older and self._marker is not None:
                await self._marker.remove()
                self._marker = None
            elif self._marker is not None:
                self._marker.update(self._marker_text())

            def keep_place() -> None:
                grown = self.virtual_size.height - height_before
                if self._going_home:
                    self._going_home = bool(self._older)
                    self.scroll_home(animate=False, immediate=True)
                elif grown > 0:
                    self.scroll_to(y=self.scroll_y + grown, animate=False, immediate=True)

            self.call_after_refresh(keep_place)
            self.call_after_refresh(self._fill_view)
            return len(widgets)
        finally:
            if generation == self._generation:
                self._loading_older = False

    def _fill_view(self) -> None:
        """A view the mounted blocks do not fill (a tall terminal, short blocks) asks for older ones."""
        if self._older and self.max_scroll_y == 0:
            self._want_older()

    def _want_older(self) -> None:
        """Load the next older page once this scroll (or layout) is over; a chat removed meanwhile (the app
        quitting) loads nothing."""
        if self._older and not self._older_wanted:
            self._older_wanted = True
            self.call_later(self.load_older)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value > old_value and self._going_home and not self._loading_older:
            self._going_home = False  # the user scrolled down: stop taking the view to the top
        if new_value <= 0 < old_value:
            self._want_older()

    def on_mouse_scroll_up(self) -> None:
        if self.scroll_y <= 0:
            self._want_older()

    def action_scroll_home(self) -> None:
        """Home goes to the very top: what loads meanwhile does not keep the view where it was."""
        self._going_home = True
        self.release_anchor()
        self._want_older()
        self.scroll_home(animate=False, immediate=True)

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

    # ---------------------------------------------------------------------------------- live

    async def add(self, widget: Widget) -> Widget:
        await self.mount(widget)
        return widget

    async def add_user(self, text: str) -> UserBlock:
        self.reply = None
        self.select(None)
        await self.query(WelcomeBlock).remove()
        block = UserBlock(text)
        await self.mount(block)
        self.anchor()
        return block

    def mark_replaced(self, text: str) -> None:
        """The last prompt, never answered, that the one sent now replaces in the session: dimmed and said so,
        so the chat shows what the model sees (it looked like part of the conversation, trial F #25)."""
        for child in reversed(self.children):
            if isinstance(child, UserBlock) and not child.has_class("-summarised"):
                if child.text == text and not child.has_class("-replaced"):
                    child.add_class("-replaced")
                    child.border_title = "you · replaced, not sent"
                return

    async def show_waiting(self) -> None:
        await self.hide_waiting()
        self.waiting = WaitingLine()
        await self.mount(self.waiting)
        self.anchor()

    async def hide_waiting(self) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is not None and waiting.is_attached:
            await waiting.remove()

    async def current_reply(self) -> AssistantBlock:
        if self.reply is None:
            self.reply = AssistantBlock(streaming=True)
            await self.mount(self.reply)
        return self.reply

    async def end_reply(self, content: str, reasoning: str, *, cancelled: bool = False) -> None:
        block = self.reply
        self.reply = None
        if block is not None:
            await block.finish(content, reasoning)
            if cancelled:
                block.add_class("-cancelled")
            if not content and block.reasoning is None:
                await block.remove()
        elif content or reasoning:
            await self.mount(AssistantBlock(content, reasoning))

    async def discard_reply(self) -> None:
        """The reply being streamed is thrown away, block and all (a failed attempt's text): the next attempt
        starts a block of its own, below the retry line (it wrote into the old block, above it: trial F #37)."""
        block, self.reply = self.reply, None
        if block is not None:
            await block.discard()
            await block.remove()

    async def add_tool(self, call_id: str, name: str, arguments: str) -> ToolBlock:
        block = ToolBlock(call_id, name, arguments)
        await self.mount(block)
        return block

    def tool_blocks(self, ids: Iterable[str] | None = None) -> list[ToolBlock]:
        wanted = set(ids) if ids is not None else None
        return [block for block in self.query(ToolBlock) if wanted is None or block.call_id in wanted]

    def tool_block(self, call_id: str) -> ToolBlock | None:
        for block in self.query(ToolBlock):
            if block.call_id == call_id:
                return block
        return None

    async def add_notice(self, level: str, text: str) -> NoticeBlock:
        block = NoticeBlock(level, text)
        await self.mount(block)
        self.last_notice = block
        return block

    async def add_divider(self, text: str, state: str) -> SummaryDivider:
        divider = SummaryDivider(text, state=state)
        await self.mount(divider)
        return divider

    async def place_divider(self, text: str, first_kept: Widget | None,
                            replacing: SummaryDivider | None = None, carried: Widget | None = None) -> SummaryDivider:
        """A finished summary: its divider goes where the cut is, above `first_kept` (the end when no block
        was kept), and every turn above it is marked as out of the context, but the turn's prompt the
        summary `carried` past it: a summary inside a long turn goes among its calls, not above its prompt
        (they stacked there, the calls they took out never dimmed: trial F #5)."""
        if replacing is not None and replacing.is_attached:
            await replacing.remove()
        divider = SummaryDivider(text, state="done")
        if first_kept is not None and first_kept.parent is self:
            await self.mount(divider, before=first_kept)
        else:
            await self.mount(divider)
        for child in self.children:
            if child is divider:
                break
            if isinstance(child, (UserBlock, AssistantBlock, ToolBlock)) and child is not carried:
                child.add_class("-summarised")
        self._older[:] = [replace(item, summarised=True) if isinstance(item, (UserItem, AssistantItem, ToolItem))
                          else item for item in self._older]  # in place, one for one: a page being read keeps its place
        return divider

    async def remove_from_last_user(self, inclusive: bool) -> None:
        """What /retry (not inclusive) and /revise (inclusive) take back from the screen: the blocks of the
        last prompt still in the context (a summary's divider and the turns it summarised stay)."""
        children = list(self.children)
        last = max((i for i, child in enumerate(children) if isinstance(child, UserBlock)
                    and not child.has_class("-summarised")), default=None)
        if last is None:
            return
        doomed = [child for child in children[last if inclusive else last + 1:]
                  if not isinstance(child, SummaryDivider) and not child.has_class("-summarised")]
        self.reply = None
        if doomed:
            await self.remove_children(doomed)

    async def clear(self) -> None:
        self._new_history([])
        await self.remove_children()
