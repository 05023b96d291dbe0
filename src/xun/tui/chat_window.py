"""The chat's window over a whole session: which blocks are mounted, and what the rest is while it is not.

No Textual here. The chat holds the transcript as entries (items, cheap) and mounts at most `WINDOW` of
them as blocks, wherever the view is: pages come in at the end the view reaches and as many leave at the
other end, so a restyle, a layout or a resize costs the same in a session of 30 messages or 30,000. A
block made while the app runs (a prompt, a reply, a tool call, a notice) that leaves the window becomes a
`Released` entry: what rebuilds it as it was when the window comes back to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from xun.tui.transcript import AssistantItem, Item, OffloadedItem, SummaryItem, ToolItem, UserItem

WINDOW = 100
"""The most blocks mounted at once: a few hundred rows, several screens of a tall terminal. A resize, a
restyle or a stream step lays out every mounted block: this bound, not the session's length, is their cost."""
FIRST_PAGE = 10
"""Blocks mounted first (a resumed session's newest, Home's oldest): few, since mounting is most of what
a first screen costs; when they do not fill the view, more pages follow at once."""
PAGE = 20
"""Blocks mounted each time the view reaches an end of the window: small, so scrolling never stalls."""


@dataclass(frozen=True, slots=True)
class NoticeItem:
    """A notice as an entry (an offload log that could not be read, a released notice)."""

    level: str
    text: str


@dataclass(frozen=True, slots=True)
class DividerItem:
    """A summary's divider made while the app ran (its text is all it shows)."""

    text: str
    state: str = "done"


@dataclass(frozen=True, slots=True)
class Released:
    """A block that left the window: the item it shows, its marks (classes), and the state a tool block
    gathered while it ran (`attributes`), so that it comes back exactly as it left."""

    item: Item | NoticeItem | DividerItem
    classes: frozenset[str] = frozenset()
    attributes: tuple[tuple[str, object], ...] = ()


Entry = Item | NoticeItem | DividerItem | Released
Counts = Mapping[OffloadedItem, int]
"""How many blocks the turns of each summary show, once counted from the offload log (`blocks_in`)."""
NOT_COUNTED: Counts = {}


def blocks_left(entry: OffloadedItem, counts: Counts = NOT_COUNTED) -> int:
    """How many blocks the turns of a summary not read yet show: as many as were counted in the offload log,
    less those read already (the rest of a section read a page at a time), else about one a message."""
    if entry.upto is not None:  # a part of the section, the turns after it read already
        return max(entry.upto - entry.shown, 0)
    count = counts.get(entry.whole)
    return max(count - entry.shown, 0) if count is not None else max(entry.condensed - entry.shown, 1)


def weight(entries: Iterable[Entry], counts: Counts = NOT_COUNTED) -> int:
    """How many blocks `entries` show, the turns summaries took out (unread yet) as `blocks_left` says."""
    return sum(blocks_left(entry, counts) if isinstance(entry, OffloadedItem) else 1 for entry in entries)


def position_text(
    above: Sequence[Entry], mounted: int, below: Sequence[Entry], later: int = 0, counts: Counts = NOT_COUNTED
) -> str:
    """Where the mounted blocks are in the whole session: `blocks 1,201–1,360 of 30,412`, exact once the turns
    summaries took out are counted (`~` until then); empty when every block is mounted."""
    if not above and not below and not later:
        return ""
    first = weight(above, counts) + 1
    last = first + mounted - 1
    total = last + weight(below, counts) + later
    uncounted = any(
        isinstance(entry, OffloadedItem) and entry.whole not in counts for seq in (above, below) for entry in seq
    )
    return f"blocks {first:,}–{last:,} of {'~' if uncounted else ''}{total:,}"


def centred(total: int, at: int, size: int) -> tuple[int, int]:
    """A window of `size` entries out of `total` holding `at` a third of the way down (its context above it,
    more of what followed below), clipped to the ends."""
    size = min(size, total)
    start = max(0, min(at - size // 3, total - size))
    return start, start + size


def messages_in(entries: Sequence[Entry]) -> int:
    """About how many messages of the session `entries` show: the span of their positions, and what the
    summaries among them took out (of a part of a summary's turns, its blocks)."""
    summarised = sum(
        entry.condensed if entry.whole is entry else blocks_left(entry)
        for entry in entries
        if isinstance(entry, OffloadedItem)
    )
    indexed = [
        entry.index
        for entry in entries
        if isinstance(entry, (UserItem, AssistantItem, ToolItem)) and not entry.summarised and entry.index >= 0
    ]
    others = sum(1 for entry in entries if not isinstance(entry, (OffloadedItem, SummaryItem)))
    return max(summarised + (max(indexed) - min(indexed) + 1 if indexed else 0), others)


def summarised(entry: Entry) -> Entry:
    """`entry` as a turn a summary took out of the context (dimmed)."""
    if isinstance(entry, Released):
        if isinstance(entry.item, (UserItem, AssistantItem, ToolItem)):
            return replace(entry, item=replace(entry.item, summarised=True), classes=entry.classes | {"-summarised"})
        return entry
    if isinstance(entry, (UserItem, AssistantItem, ToolItem)):
        return replace(entry, summarised=True)
    return entry
