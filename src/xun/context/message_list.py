"""A list of messages that keeps the conversation's length estimate incrementally.

`Conversation.messages` is one of these: a real `list`, so callers append, slice, index and assign as
with any list, while every mutation keeps the bookkeeping right. Per-message lengths are counted once,
lazily, for a prefix of the list; an append costs nothing until the next estimate, which then counts
only what was added. Any other change forgets the counts from the first index it touches, and records
that index as a low-water mark so the reclaim frontier can rewind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsIndex

from xun.context.messages import Message, message_length


class MessageList(list[Message]):
    __slots__ = ("_lengths", "_total", "edits", "low_water")

    def __init__(self, items: Iterable[Message] = ()) -> None:
        super().__init__(items)
        self._lengths: list[int] = []
        self._total = 0
        self.edits = 0
        """Counts every change other than an append (a compaction plan checks it is still current)."""
        self.low_water = 0
        """The lowest index changed other than by appending, since the owner last reset it."""

    def estimated_length(self) -> int:
        counted = len(self._lengths)
        if counted < len(self):
            new = [message_length(m) for m in list.__getitem__(self, slice(counted, None))]
            self._lengths.extend(new)
            self._total += sum(new)
        return self._total

    def counted_length(self, start: int, stop: int) -> int:
        """Sum of the estimates of messages[start:stop] (counts the whole list first if needed)."""
        self.estimated_length()
        return sum(self._lengths[start:stop])

    def _forget_from(self, index: int) -> None:
        index = max(index, 0)
        self.edits += 1
        if index < self.low_water:
            self.low_water = index
        if index < len(self._lengths):
            self._total -= sum(self._lengths[index:])
            del self._lengths[index:]

    def _slice_start(self, key: slice) -> int:
        start, stop, step = key.indices(len(self))
        return min(start, stop) if step > 0 else min(stop + 1, start)

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, slice):
            self._forget_from(self._slice_start(key))
            super().__setitem__(key, value)
            return
        index = key.__index__()
        if index < 0:
            index += len(self)
        super().__setitem__(key, value)
        self.edits += 1
        if index < self.low_water:
            self.low_water = index
        if index < len(self._lengths):  # counted already: swap its length in place, O(1)
            new = message_length(value)
            self._total += new - self._lengths[index]
            self._lengths[index] = new

    def replace_at(self, replacements: dict[int, Message]) -> None:
        """Put each message at its index (0 <= index < len), as one change: a reclaim swaps thousands at once."""
        if not replacements:
            return
        put = super().__setitem__
        lengths, counted, total = self._lengths, len(self._lengths), self._total
        for index, message in replacements.items():
            put(index, message)
            if index < counted:
                new = message_length(message)
                total += new - lengths[index]
                lengths[index] = new
        self._total = total
        self.edits += 1
        self.low_water = min(self.low_water, min(replacements))

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice):
            self._forget_from(self._slice_start(key))
        else:
            index = key.__index__()
            self._forget_from(index + len(self) if index < 0 else index)
        super().__delitem__(key)

    def __iadd__(self, other: Iterable[Message]) -> MessageList:  # type: ignore[override,misc]
        self.extend(other)
        return self

    def __imul__(self, count: SupportsIndex) -> MessageList:
        self._forget_from(0)
        return super().__imul__(count)

    def insert(self, index: SupportsIndex, value: Message) -> None:
        i = index.__index__()
        self._forget_from(i + len(self) if i < 0 else min(i, len(self)))
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Message:
        i = index.__index__()
        self._forget_from(i + len(self) if i < 0 else i)
        return super().pop(index)

    def remove(self, value: Message) -> None:
        self._forget_from(self.index(value))
        super().remove(value)

    def clear(self) -> None:
        self._forget_from(0)
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._forget_from(0)
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._forget_from(0)
        super().reverse()
