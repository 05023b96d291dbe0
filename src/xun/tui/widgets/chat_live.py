"""The chat's live part: the blocks the running work adds, writes into and takes back (a prompt sent, the
"thinking…" line, the reply streaming, tool calls, notices, summary dividers), and the marks a compaction
leaves on blocks already shown.

Mixed into `ChatView`, whose window it works with: at the newest, a block the work makes goes at the bottom
of the window (a long run releases the oldest a page at a time); away from it, it waits hidden below the
window (`_tail`), never moving the view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from textual.widget import Widget

from xun.tui.chat_blocks import released
from xun.tui.chat_window import PAGE, WINDOW, Entry, Released, summarised
from xun.tui.transcript import ToolItem
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock
from xun.tui.widgets.waiting_line import WaitingLine
from xun.tui.widgets.welcome_block import WelcomeBlock


class LiveBlocks:
    """What the running work shows in the chat (mixed into `ChatView`, whose window and markers it uses)."""

    async def _add_live(self, widget: Widget) -> None:
        """A block the running work made: at the bottom of the window when it holds the newest, else hidden
        below it until the window gets there (it neither mounts into the window nor moves it)."""
        if self.at_end:
            await self.mount(widget, before=None)
            if len(self.children) > WINDOW + PAGE and not self._window_lock.locked():
                self.call_later(self._bound_live)
            self._show_position()  # the title counts it
            return
        widget.display = False
        self._tail.append(widget)
        await self.mount(widget)
        settled = next((i for i, block in enumerate(self._tail) if self._in_progress(block)), len(self._tail))
        if settled > PAGE:  # a long turn far below the view: what it finished waits as entries, not blocks
            leaving, self._tail = self._tail[:settled], self._tail[settled:]
            self._below += [released(block) for block in leaving]
            await self.remove_children(leaving)
        if self._later is not None:
            self._later.update(self._later_text())
        self._show_position()

    async def _bound_live(self) -> None:
        """A long run adds blocks at the newest: the oldest leave the window, a page at a time, the view
        staying where it is."""
        async with self._window_lock:
            if not self.at_end or len(self._window()) <= WINDOW + PAGE:
                return
            following = self.is_anchored and not self._anchor_released
            anchor = None if following else self._view_anchor(self._window(), newest=True)
            await self._release_oldest()
            await self._sync_markers()
            self.call_after_refresh(self._keep_anchor, anchor)

    async def _remove_live(self, widget: Widget) -> None:
        """A block the running work takes back (the waiting line, an empty or failed reply)."""
        if widget in self._tail:
            self._tail.remove(widget)
        await widget.remove()
        if self._later is not None:
            await self._sync_markers()

    async def add(self, widget: Widget) -> Widget:
        await self._add_live(widget)
        return widget

    async def add_user(self, text: str) -> UserBlock:
        self.reply = None
        self.select(None)
        await self.query(WelcomeBlock).remove()
        await self.go_end()  # a prompt sent is shown, with what answers it
        block = UserBlock(text)
        await self.mount(block)
        self.anchor()
        return block

    def mark_replaced(self, text: str) -> None:
        """The last prompt, never answered, that the one sent now replaces in the session: dimmed and said so,
        so the chat shows what the model sees."""
        for child in reversed(self.children):
            if isinstance(child, UserBlock) and not child.has_class("-summarised"):
                if child.text == text and not child.has_class("-replaced"):
                    child.add_class("-replaced")
                    child.border_title = "you · replaced, not sent"
                return

    async def show_waiting(self) -> None:
        await self.hide_waiting()
        self.waiting = WaitingLine()
        await self._add_live(self.waiting)
        if self.at_end:
            self.anchor()

    async def hide_waiting(self) -> None:
        waiting, self.waiting = self.waiting, None
        if waiting is not None and waiting.is_attached:
            await self._remove_live(waiting)

    async def current_reply(self) -> AssistantBlock:
        if self.reply is None:
            self.reply = AssistantBlock(streaming=True)
            await self._add_live(self.reply)
        return self.reply

    async def end_reply(self, content: str, reasoning: str, *, cancelled: bool = False) -> None:
        block = self.reply
        self.reply = None
        if block is not None:
            await block.finish(content, reasoning)
            if cancelled:
                block.add_class("-cancelled")
            if not content and block.reasoning is None:
                await self._remove_live(block)
        elif content or reasoning:
            await self._add_live(AssistantBlock(content, reasoning))

    async def discard_reply(self) -> None:
        """The reply being streamed is thrown away, block and all (a failed attempt's text): the next attempt
        starts a block of its own, below the retry line."""
        block, self.reply = self.reply, None
        if block is not None:
            await block.discard()
            await self._remove_live(block)

    async def add_tool(self, call_id: str, name: str, arguments: str) -> ToolBlock:
        block = ToolBlock(call_id, name, arguments)
        await self._add_live(block)
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
        await self._add_live(block)
        self.last_notice = block
        return block

    async def add_divider(self, text: str, state: str) -> SummaryDivider:
        divider = SummaryDivider(text, state=state)
        await self._add_live(divider)
        return divider

    async def place_divider(
        self,
        text: str,
        first_kept: Widget | None,
        replacing: SummaryDivider | None = None,
        carried: Widget | None = None,
    ) -> SummaryDivider:
        """A finished summary: its divider goes where the cut is, above `first_kept` (the end when no block
        was kept), and every turn above it is marked as out of the context, but the turn's prompt the
        summary `carried` past it: a summary inside a long turn goes among its calls, not above its prompt
        (and the calls it took out are dimmed). The caller finds `first_kept`
        in a window at the newest (`go_end`)."""
        if replacing is not None and replacing.is_attached:
            await self._remove_live(replacing)
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
        self._above[:] = [summarised(entry) for entry in self._above]  # one for one: a page being read keeps its place
        return divider

    def mark_reclaimed(self, ids: Iterable[str]) -> None:
        """Tool results reclaimed from the context: their blocks say so, mounted or not."""
        wanted = set(ids)
        for block in self.tool_blocks(wanted):
            block.mark_reclaimed()
        self._update_tools(wanted, reclaimed=True, restored=False)

    def mark_restored(self, call_id: str) -> None:
        if (block := self.tool_block(call_id)) is not None:
            block.mark_restored()
        self._update_tools({call_id}, reclaimed=False, restored=True)

    def _update_tools(self, ids: set[str], **state: bool) -> None:
        """Entries of tool calls `ids` not mounted now come back with `state`."""

        def updated(entry: Entry) -> Entry:
            item = entry.item if isinstance(entry, Released) else entry
            if not isinstance(item, ToolItem) or item.call_id not in ids:
                return entry
            released = entry if isinstance(entry, Released) else Released(item)
            attributes = dict(released.attributes) | state
            classes = released.classes | {"-reclaimed"} if state["reclaimed"] else released.classes - {"-reclaimed"}
            return replace(
                released,
                item=replace(item, reclaimed=state["reclaimed"]),
                classes=classes,
                attributes=tuple(attributes.items()),
            )

        self._above[:] = [updated(entry) for entry in self._above]
        self._below[:] = [updated(entry) for entry in self._below]

    async def remove_from_last_user(self, inclusive: bool) -> None:
        """What /retry (not inclusive) and /revise (inclusive) take back from the screen: the blocks of the
        last prompt still in the context (a summary's divider and the turns it summarised stay)."""
        await self.go_end()
        children = list(self.children)
        last = max(
            (
                i
                for i, child in enumerate(children)
                if isinstance(child, UserBlock) and not child.has_class("-summarised")
            ),
            default=None,
        )
        if last is None:
            return
        doomed = [
            child
            for child in children[last if inclusive else last + 1 :]
            if not isinstance(child, SummaryDivider) and not child.has_class("-summarised")
        ]
        self.reply = None
        if doomed:
            await self.remove_children(doomed)
