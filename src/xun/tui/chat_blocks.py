"""The chat's blocks and what they leave behind: the block that shows a transcript entry, and the entry
(`Released`) that rebuilds a block as it was when it left the chat's bounded window."""

from __future__ import annotations

from collections.abc import Callable

from textual.widget import Widget

from xun.tui.chat_window import DividerItem, Entry, NoticeItem, Released
from xun.tui.transcript import AssistantItem, Item, SummaryItem, ToolItem, UserItem
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock

TOOL_STATE = ("state", "result_chars", "duration_text", "reclaimed", "restored", "result_text")
"""What a tool block gathers while it runs and keeps when it leaves the window."""
LIVE = -1
"""The message position of a block made while the app ran (not known to the chat: a jump finds it by
its place from the newest)."""
UNKEPT_CLASSES = frozenset({"-jump-target", "-collapsed"})
"""Marks a block does not keep when it leaves the window (a selection, a fold: it comes back folded)."""


def block_for(entry: Entry, shown_path: Callable[[str | None], str]) -> Widget:
    """The block that shows `entry` (a released one comes back with its marks and its tool state)."""
    if isinstance(entry, Released):
        widget = block_for(entry.item, shown_path)
        for name, value in entry.attributes:
            setattr(widget, name, value)
        if isinstance(widget, ToolBlock):
            widget.title = widget._heading()
        widget.set_classes(entry.classes)
    else:
        widget = _new_block(entry, shown_path)
        if getattr(entry, "summarised", False):
            widget.add_class("-summarised")
    widget.chat_entry = entry  # type: ignore[attr-defined]  # what it shows: found again by a jump
    return widget


def _new_block(item: Item | NoticeItem | DividerItem, shown_path: Callable[[str | None], str]) -> Widget:
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
    if isinstance(item, NoticeItem):
        return NoticeBlock(item.level, item.text)
    if isinstance(item, DividerItem):
        return SummaryDivider(item.text, state=item.state)
    assert isinstance(item, SummaryItem), item
    return SummaryDivider(SummaryDivider.describe(item.condensed, item.kept, shown_path(item.offload_path)))


def released(widget: Widget) -> Released:
    """What rebuilds `widget` as it is now, when the window comes back to it."""
    entry = getattr(widget, "chat_entry", None)
    item = entry.item if isinstance(entry, Released) else entry
    attributes: tuple[tuple[str, object], ...] = ()
    if isinstance(widget, UserBlock):
        item = item or UserItem(widget.text, index=LIVE)
        attributes = (("border_title", widget.border_title),)
    elif isinstance(widget, AssistantBlock):
        reasoning = widget.reasoning.text if widget.reasoning is not None else ""
        if not isinstance(item, AssistantItem) or (item.content, item.reasoning) != (widget.text, reasoning):
            item = AssistantItem(widget.text, reasoning, index=LIVE)
    elif isinstance(widget, ToolBlock):
        item = item or ToolItem(widget.call_id, widget.tool_name, widget.arguments, None, None, index=LIVE)
        attributes = tuple((name, getattr(widget, name)) for name in TOOL_STATE)
    elif isinstance(widget, NoticeBlock):
        item = item or NoticeItem(widget.level, widget.text)
    elif isinstance(widget, SummaryDivider):
        if not isinstance(item, SummaryItem):
            item = DividerItem(widget.text, widget.state)
    assert item is not None, widget
    return Released(item, frozenset(widget.classes - UNKEPT_CLASSES), attributes)
