"""The conversation as a transcript: what the chat pane shows on resume and what `/render` exports.

A plain walk over `Conversation.messages` (no Textual here): user messages, assistant replies with
their reasoning, each tool call joined with its result, and the summaries that replaced older turns.
What a summary took out of the context comes back from the offload log: each summary is preceded by an
`OffloadedItem` that `offloaded_items` turns into the turns it replaced (marked `summarised`), read only
when they are shown (the chat loads them as the user scrolls). A section of thousands of messages is read
a page at a time from its start (`offloaded_page`: its rest is an `OffloadedItem` resuming at a byte
offset), and its blocks are counted as it streams by (`blocks_in`), so memory never holds a section whole.
Counted with `section_pages`, it also says where each page begins: a jump to one of its turns (`found_turns`
with the turn's marks) reads that page alone.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xun.base import paths

if TYPE_CHECKING:
    from xun.context.messages import Message
    from xun.context.conversation import Conversation
    from xun.context.offload import OffloadEntry, OffloadSection

PLACEHOLDER_HEAD = "[Compacted, ID: "


@dataclass(frozen=True, slots=True)
class UserItem:
    text: str
    index: int = 0
    """Position of the message in the conversation."""
    summarised: bool = False
    """Out of the context: it came back from the offload log."""
    carried: bool = False
    """The turn's prompt, carried word for word past a summary made inside its turn (shown above too)."""


@dataclass(frozen=True, slots=True)
class AssistantItem:
    content: str
    reasoning: str = ""
    index: int = 0
    summarised: bool = False


@dataclass(frozen=True, slots=True)
class ToolItem:
    call_id: str
    name: str
    arguments: str
    result: str | None
    """The result as it is in the context now (a placeholder when reclaimed), None if it never came."""
    result_chars: int | None
    """Characters of the result in the context (None when reclaimed or missing)."""
    reclaimed: bool = False
    index: int = 0
    summarised: bool = False


@dataclass(frozen=True, slots=True)
class SummaryItem:
    condensed: int
    kept: int
    offload_path: str | None
    summary: str
    time: float = 0.0
    index: int = 0


@dataclass(frozen=True, slots=True)
class OffloadedItem:
    """The turns one summary took out of the context, still in the offload log: `offloaded_items` reads them."""

    path: str
    when: str | None
    """The heading time of its section (None in sessions saved before it was recorded)."""
    ordinal: int
    """Which of this conversation's offloads it is (0 the first), when `when` is unknown."""
    conversation_id: str
    condensed: int
    repeat: int = 0
    """How many earlier offloads have the same `when` (logs written before it had milliseconds: several
    summaries of a long turn in one second)."""
    carried_head: bool = False
    """Its section opens with the turn's prompt carried past the summary before: shown once, not again."""
    resume_at: int | None = None
    """Where the turns not shown yet begin in the log (the byte offset of an entry in its section), when the
    section's first turns were read already (`history_page`); None: from the section's heading."""
    shown: int = 0
    """How many blocks of the section were read before `resume_at`."""
    stop_at: int | None = None
    """Where this part of the section ends (the offset of the first entry after it), when the turns after it
    were read already (`found_turns`); None: at the section's end."""
    upto: int | None = None
    """How many blocks of the section come before `stop_at`."""

    @property
    def whole(self) -> OffloadedItem:
        """The summary's turns from the first: what `blocks_in` counts."""
        if self.resume_at is None and self.stop_at is None:
            return self
        return replace(self, resume_at=None, shown=0, stop_at=None, upto=None)


Item = UserItem | AssistantItem | ToolItem | SummaryItem | OffloadedItem


@dataclass
class Transcript:
    items: list[Item] = field(default_factory=list)
    summary: str = ""
    """The summary the model sees now (empty when nothing was summarised)."""


def reasoning_of(raw: dict[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        value = raw.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def transcript(conversation: Conversation) -> Transcript:
    """Never reads the archive of reclaimed originals (a resumed session parses it only when asked)."""
    from xun.context.messages import SystemPrompt

    messages = conversation.messages
    result = Transcript()
    first = messages[0] if len(messages) else None
    if isinstance(first, SystemPrompt) and first.is_summary:
        result.summary = first.content
        offloads = iter(offloaded_of(conversation))
        for event in conversation.summarizations:
            if event.file_path:
                result.items.append(next(offloads))
            result.items.append(
                SummaryItem(event.condensed_count, event.kept_count, event.file_path, event.summary_message, event.time)
            )
        if not conversation.summarizations:
            result.items.append(SummaryItem(0, 0, None, first.content))
    tail = message_items(messages)
    if conversation.summarizations and conversation.summarizations[-1].carried:
        for at, item in enumerate(tail):
            if isinstance(item, UserItem):
                tail[at] = replace(item, carried=True)
                break
    result.items += tail
    return result


def offloaded_of(conversation: Conversation) -> list[OffloadedItem]:
    """What each of the conversation's summaries took out of the context, oldest first (read on demand);
    each knows how many earlier ones share its heading time, and whether the summary before it carried the
    turn's prompt (its section then opens with that copy)."""
    items: list[OffloadedItem] = []
    seen: dict[str | None, int] = {}
    carried = False
    for event in conversation.summarizations:
        if event.file_path:
            repeat = seen.get(event.offload_when, 0)
            seen[event.offload_when] = repeat + 1
            items.append(
                OffloadedItem(
                    str(event.file_path),
                    event.offload_when,
                    len(items),
                    conversation.conversation_id,
                    event.condensed_count,
                    repeat,
                    carried,
                )
            )
        carried = event.carried
    return items


def message_items(messages: Sequence[Message], first_index: int = 0) -> list[Item]:
    """The turns in `messages`, the conversation's from position `first_index` on (the newest messages alone
    make the same items as the end of the whole: a tool's result always comes after its call). The messages'
    module is imported here, in the opening thread, not before the app's first frame."""
    from xun.context.messages import RawOpenAIMessage, UserMessage, content_text

    # one walk of tens of thousands of messages on a resume: the exact class first, the costly calls only
    # where needed (a reply's reasoning, content that is not plain text)
    raw_class = RawOpenAIMessage
    results: dict[str, str] = {}
    for message in messages:
        if message.__class__ is raw_class and (raw := message.raw).get("role") == "tool":
            content = raw.get("content")
            results[str(raw.get("tool_call_id", ""))] = content if content.__class__ is str else content_text(content)
    items: list[Item] = []
    append = items.append
    for index, message in enumerate(messages, first_index):
        if message.__class__ is raw_class:
            raw = message.raw
            if raw.get("role") != "assistant":
                continue
            content = raw.get("content")
            text = content if content.__class__ is str else content_text(content)
            reasoning = reasoning_of(raw) if "reasoning_content" in raw or "reasoning" in raw else ""
            if text or reasoning:
                append(AssistantItem(text, reasoning, index))
            for call in raw.get("tool_calls") or ():
                call_id = str(call.get("id", ""))
                function = call.get("function") or {}
                output = results.get(call_id)
                reclaimed = output is not None and output.startswith(PLACEHOLDER_HEAD)
                append(
                    ToolItem(
                        call_id,
                        str(function.get("name", "")),
                        str(function.get("arguments", "")),
                        output,
                        None if reclaimed or output is None else len(output),
                        reclaimed,
                        index,
                    )
                )
        elif isinstance(message, UserMessage):
            append(UserItem(message.text, index))
    return items


_TOOL_DETAIL = re.compile(r"^(?:(?P<name>.*?), )?id (?P<id>[^,]*)(?P<reclaimed>, reclaimed earlier)?$")


def _pick(sections: list[OffloadSection], item: OffloadedItem) -> OffloadSection | None:
    """The item's section among a log's sections: by its heading time, else by its ordinal."""
    if item.when is not None:
        same = [s for s in sections if s.when == item.when and s.conversation_id in ("", item.conversation_id)]
        if same:
            return same[min(item.repeat, len(same) - 1)]
    own = [s for s in sections if s.conversation_id == item.conversation_id]
    return own[item.ordinal] if item.ordinal < len(own) else None


def _section_start(path: str, item: OffloadedItem) -> int | None:
    """The byte offset of the item's section, as `_pick` chooses it, found by the headings' bytes (no entry is
    read): the first section headed with its time is found at once."""
    from xun.context.offload import heading_offset, section_heads  # only when summarised turns are shown

    start = heading_offset(path, item.when) if item.when is not None else None
    if start is not None:
        same: list[int] = []
        for offset, when, conversation_id in section_heads(path, start):
            if when == item.when and conversation_id in ("", item.conversation_id):
                same.append(offset)
                if len(same) > item.repeat:
                    return offset
        if same:
            return same[-1]  # fewer than `repeat`: the last of them
    own = [offset for offset, _, conversation_id in section_heads(path) if conversation_id == item.conversation_id]
    return own[item.ordinal] if item.ordinal < len(own) else None


def _section_entries(path: str, item: OffloadedItem) -> Iterator[tuple[int, OffloadEntry]]:
    """The entries of the item's section not read yet, each with its offset, read as a stream (memory holds
    a chunk of the log and one entry); the turn's prompt carried from above is left out."""
    from xun.context.offload import SectionReader

    start = item.resume_at
    if start is None:
        start = _section_start(path, item)
        if start is None:
            raise LookupError(f"the offload log {item.path} has no section for this summary")
    carried = item.carried_head and item.resume_at is None
    for number, (offset, entry) in enumerate(SectionReader(path, start).entries()):
        if item.stop_at is not None and offset >= item.stop_at:
            return
        if number or not carried or entry.speaker != "Human":
            yield offset, entry


MAX_OFFLOAD_LOG_BYTES = 256 * 1024 * 1024
"""The largest offload log read back (an export of several summaries parses it whole: a 3 GB file took 6.2 GB)."""


def _log_path(item: OffloadedItem, workdir: str | os.PathLike[str] | None) -> str:
    """The item's offload log; OSError when its path names anything but one (a tampered file_path is never
    read) or the log is too large to read back."""
    path = Path(item.path)
    if not path.is_absolute() and workdir is not None:
        path = Path(workdir) / path
    folder = paths.offload_dir("/").name  # the app's transcript does not know the workspace: the folder's name
    real = path.resolve()
    if real.parent.name != folder or real.suffix != ".md":
        raise OSError(f"{item.path} is not an offload log (.xun/{folder}/*.md); only those are read")
    if real.stat().st_size > MAX_OFFLOAD_LOG_BYTES:
        raise OSError(f"the offload log {item.path} is over {MAX_OFFLOAD_LOG_BYTES // 2**20} MB; open it in an editor")
    return str(path)


class _Turns:
    """Summarised turns made from a section's entries in order, each call joined with its result; with `keep`
    False they are only counted (memory holds none of them)."""

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self.items: list[Item] = []
        self.count = 0
        self.calls: dict[str, int] = {}
        """Each call's item, by its id: its result fills it in."""
        self.waiting: set[str] = set()
        """The calls whose result has not come yet."""
        self.reasoning = ""

    @property
    def settled(self) -> bool:
        """No reasoning waits for its reply and no call for its result: a page can end before the next entry."""
        return not self.reasoning and not self.waiting

    def _append(self, item: Item) -> None:
        self.count += 1
        if self.keep:
            self.items.append(item)

    def add(self, entry: OffloadEntry) -> None:
        if entry.speaker == "Human":
            self._append(UserItem(entry.text, summarised=True))
        elif entry.speaker == "AI reasoning":
            self.reasoning += entry.text
        elif entry.speaker == "AI":
            self._append(AssistantItem(entry.text, self.reasoning, summarised=True))
            self.reasoning = ""
        elif entry.speaker == "AI tool call":
            self.finish()
            match = _TOOL_DETAIL.match(entry.detail)
            name, call_id = (match["name"] or "", match["id"]) if match else (entry.detail, "")
            if self.keep:
                self.calls[call_id] = len(self.items)
            self.waiting.add(call_id)
            self._append(ToolItem(call_id, name, entry.text, None, None, summarised=True))
        elif entry.speaker == "Tool":
            match = _TOOL_DETAIL.match(entry.detail)
            call_id = match["id"] if match else ""
            self.waiting.discard(call_id)
            at = self.calls.get(call_id)
            if at is not None:
                call = self.items[at]
                assert isinstance(call, ToolItem)
                self.items[at] = replace(call, result=entry.text, result_chars=len(entry.text))

    def finish(self) -> None:
        """Reasoning with no reply after it is shown on its own."""
        if self.reasoning:
            self._append(AssistantItem("", self.reasoning, summarised=True))
            self.reasoning = ""


def offloaded_items(
    item: OffloadedItem,
    workdir: str | os.PathLike[str] | None = None,
    parsed: dict[str, list[OffloadSection]] | None = None,
) -> list[Item]:
    """The summarised turns of one offload (from `resume_at` on, for the rest of a section), as transcript
    items marked `summarised`; read as a stream, or picked from `parsed` (each log parsed once, for a caller
    reading many sections).

    Raises OSError when the log cannot be read and LookupError when its section is not there."""
    path = _log_path(item, workdir)
    turns = _Turns()
    if parsed is not None and item.whole is item:
        if path not in parsed:
            from xun.context.offload import read_offload_log  # only when summarised turns are shown

            parsed[path] = read_offload_log(path)
        section = _pick(parsed[path], item)
        if section is None:
            raise LookupError(f"the offload log {item.path} has no section for this summary")
        entries = section.entries
        if item.carried_head and entries and entries[0].speaker == "Human":
            entries = entries[1:]  # the copy of the turn's prompt the summary before carried: it is shown above
        for entry in entries:
            turns.add(entry)
    else:
        for _, entry in _section_entries(path, item):
            turns.add(entry)
    turns.finish()
    return turns.items


def offloaded_page(
    item: OffloadedItem, size: int, workdir: str | os.PathLike[str] | None = None
) -> tuple[list[Item], OffloadedItem | None]:
    """The first turns of one offload not read yet, at least `size` blocks of them where the section has
    that many (more where a call waits for its result, or reasoning for its reply), and the rest (of the
    section, or of the part of it `item` is) as an `OffloadedItem` that resumes where they end (None when none
    is left). Raises as `offloaded_items` does."""
    turns = _Turns()
    for offset, entry in _section_entries(_log_path(item, workdir), item):
        if turns.count >= size and turns.settled:
            return turns.items, replace(item, resume_at=offset, shown=item.shown + turns.count)
        turns.add(entry)
    turns.finish()
    return turns.items, None


def found_turns(
    item: OffloadedItem,
    wanted: Callable[[Item], bool],
    size: int,
    workdir: str | os.PathLike[str] | None = None,
    *,
    marks: Sequence[str] = (),
    pages: SectionPages | None = None,
) -> list[Item] | None:
    """The turns of `item` with the page that holds the first one `wanted` picks read (at least `size` blocks,
    as `offloaded_page` ends pages), the turns before and after that page left lazy (`OffloadedItem` parts of
    the section); None when `wanted` picks none of them. Memory holds a page at a time. With the section's
    `pages` (counted for pages of `size`) and `marks` (`call_marks`, `said_marks`: every turn `wanted` picks
    holds one of them in the log's bytes), only the pages the marks are on are read; else (or when the log
    changed since `pages` were counted) the section is walked from its start. Raises as `offloaded_items` does."""
    path = _log_path(item, workdir)
    if pages is not None and marks and pages.size == size:
        try:
            return _found_by_marks(item, wanted, size, path, marks, pages)
        except _Unindexed:
            pass
    found = _page_holding(item, wanted, size, path)
    return None if found is None else _parts(item, found)


_Found = tuple[int | None, int, list[Item], int | None]
"""A page found: where it begins (None: where its part of the section begins), the section's blocks before it,
its turns, and where the turns after it begin (None: none are left)."""


def _page_holding(
    item: OffloadedItem, wanted: Callable[[Item], bool], size: int, path: str, limit: int | None = None
) -> _Found | None:
    """The first page of `item`, walked from where it begins, that holds a turn `wanted` picks; None when
    none does, or none of the pages that begin before byte `limit`."""
    page = _Turns()
    page_start = item.resume_at
    before = item.shown
    for offset, entry in _section_entries(path, item):
        if page.count >= size and page.settled:
            if any(map(wanted, page.items)):
                return page_start, before, page.items, offset
            if limit is not None and offset >= limit:
                return None
            before += page.count
            page_start, page = offset, _Turns()
        page.add(entry)
    page.finish()
    return (page_start, before, page.items, None) if any(map(wanted, page.items)) else None


def _parts(item: OffloadedItem, found: _Found) -> list[Item]:
    """The page found, between the lazy parts of `item` before and after it."""
    page_start, before, page, rest = found
    parts: list[Item] = []
    if before > item.shown:
        parts.append(replace(item, stop_at=page_start, upto=before))
    parts += page
    if rest is not None:
        parts.append(replace(item, resume_at=rest, shown=before + len(page)))
    return parts


class _Unindexed(Exception):
    """The pages counted for a section no longer describe its log: it is walked instead."""


def _found_by_marks(
    item: OffloadedItem,
    wanted: Callable[[Item], bool],
    size: int,
    path: str,
    marks: Sequence[str],
    pages: SectionPages,
) -> list[Item] | None:
    """`found_turns` reading only the pages that hold one of `marks`, in order, from the first."""
    from xun.context.offload import first_mark

    if not pages.starts or any(not mark or "\ufffd" in mark for mark in marks) or not pages.current(path):
        raise _Unindexed
    needles = [mark.encode("utf-8", errors="surrogatepass") for mark in marks]
    position = max(pages.starts[0], item.resume_at or 0)
    end = pages.end if item.stop_at is None else min(item.stop_at, pages.end)
    # a mark found at a line's end ("\n" and the entry it begins) is the next line's: the one before a page's
    # first entry belongs to that page
    while (hit := first_mark(path, needles, position - 1, end)) is not None:
        page = bisect_right(pages.starts, hit + 1) - 1
        limit = pages.starts[page + 1] if page + 1 < len(pages.starts) else None
        if item.resume_at is not None and pages.starts[page] < item.resume_at:
            start, before = item.resume_at, item.shown  # the part begins inside the page
        else:
            start, before = pages.starts[page], pages.before[page]
        found = _page_holding(replace(item, resume_at=start, shown=before), wanted, size, path, limit)
        if found is not None:
            ends = None if limit is None or (item.stop_at is not None and limit >= item.stop_at) else limit
            if found[0] == pages.starts[page] and found[3] != ends:
                raise _Unindexed  # the page did not end where it ended when counted
            return _parts(item, found)
        if limit is None or limit >= end:
            return None
        position = limit
    return None


def call_marks(call_id: str) -> tuple[str, ...]:
    """What the log holds in the entries of tool call `call_id` (its call or its result): for `found_turns`."""
    return (f"id {call_id})", f"id {call_id}, reclaimed earlier)")


def said_marks(speaker: str, text: str) -> tuple[str, ...]:
    """What the log holds where the prompt (`speaker` "Human"), the reply or the reasoning (`speaker` "AI
    reasoning": `text` a part of it) `text` is: the entry's start, or the text anywhere in reasoning; for
    `found_turns`. None for an empty reply (a block of reasoning alone has no entry of its own)."""
    from xun.context.offload import INDENT, OffloadEntry, render_entries

    if not text:
        return ()
    if speaker == "AI reasoning":
        return (text.replace("\n", "\n" + INDENT),)
    return ("\n" + render_entries([OffloadEntry("Human" if speaker == "Human" else "AI", text)]),)


@dataclass(slots=True)
class SectionPages:
    """Where the pages of one summary's section begin in its log (`section_pages`): two numbers a page, no
    entry kept, so that a jump reads only the page that holds its turn."""

    size: int
    """The blocks a page holds at least (as `offloaded_page` ends pages of that size)."""
    blocks: int
    """The section's blocks (`blocks_in`)."""
    starts: array[int]
    """The byte offset of each page's first entry, the first page's first (after a carried prompt)."""
    before: array[int]
    """The section's blocks before each page."""
    end: int
    """Where the section ends: the next heading, or the log's end."""
    crc: int | None
    """CRC-32 of the log's bytes from the first page to `end`."""
    stamp: tuple[int, int, int, int]
    """The log's device, inode, size and modification time when this was true of it."""

    def current(self, path: str) -> bool:
        """The log still holds the section as counted: unchanged, or only appended to (a later summary)."""
        from xun.context.offload import span_crc

        stamp = _stamp(path)
        if stamp == self.stamp:
            return True
        if stamp[:2] != self.stamp[:2] or stamp[2] < self.end or not self.starts:
            return False
        if span_crc(path, self.starts[0], self.end) != self.crc:
            return False
        self.stamp = stamp
        return True


def _stamp(path: str) -> tuple[int, int, int, int]:
    status = os.stat(path)
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def section_pages(item: OffloadedItem, size: int, workdir: str | os.PathLike[str] | None = None) -> SectionPages | None:
    """`blocks_in` of the whole section of `item`, with where its pages of `size` blocks begin (each as
    `offloaded_page` ends it, read from the section's start); None when it cannot be read."""
    from xun.context.offload import section_end, span_crc

    item = item.whole
    turns = _Turns(keep=False)
    starts: array[int] = array("q")
    before: array[int] = array("q")
    try:
        path = _log_path(item, workdir)
        stamp = _stamp(path)
        last = 0
        for offset, entry in _section_entries(path, item):
            if not starts or (turns.count - before[-1] >= size and turns.settled):
                starts.append(offset)
                before.append(turns.count)
            turns.add(entry)
            last = offset
        turns.finish()
        end = section_end(path, last)
        crc = span_crc(path, starts[0], end) if starts else None
    except (OSError, LookupError, UnicodeError):
        return None
    return SectionPages(size, turns.count, starts, before, end, crc, stamp)


def _problem(item: OffloadedItem, exc: Exception) -> str:
    return f"{item.condensed} summarised messages could not be read from {item.path}: {exc}"


def whole_history(items: list[Item], workdir: str | os.PathLike[str] | None = None) -> tuple[list[Item], list[str]]:
    """`items` with every `OffloadedItem` read from its log; the second list says what could not be read.
    One summary's turns are read as a stream; several are read from one parse of each log, dropped at the end."""
    out: list[Item] = []
    problems: list[str] = []
    parsed: dict[str, list[OffloadSection]] | None = None
    if sum(isinstance(item, OffloadedItem) for item in items) > 1:
        parsed = {}
    for item in items:
        if isinstance(item, OffloadedItem):
            try:
                out += offloaded_items(item, workdir, parsed)
            except (OSError, LookupError, UnicodeError) as exc:
                problems.append(_problem(item, exc))
        else:
            out.append(item)
    return out, problems


def history_page(
    item: OffloadedItem, size: int, workdir: str | os.PathLike[str] | None = None
) -> tuple[list[Item], list[str]]:
    """`offloaded_page` of `item`, the rest of its section (if any) the last item; the second list says what
    could not be read (then nothing of it is given)."""
    try:
        items, rest = offloaded_page(item, size, workdir)
    except (OSError, LookupError, UnicodeError) as exc:
        return [], [_problem(item, exc)]
    return [*items, rest] if rest is not None else items, []


def history_tail(
    item: OffloadedItem, pages: SectionPages | None, workdir: str | os.PathLike[str] | None = None
) -> tuple[list[Item], list[str]]:
    """`item` read from below: with its section's `pages` (still true of the log), the last page of its part
    read and the turns before that page left lazy (a part ending where the page begins), so that scrolling up
    into a section of thousands of turns reads a page of it; else all of the part (`whole_history`). The
    second list says what could not be read."""
    try:
        path = _log_path(item, workdir)
        if pages is not None and pages.starts and pages.current(path):
            first = pages.starts[0] if item.resume_at is None else item.resume_at
            page = bisect_left(pages.starts, pages.end if item.stop_at is None else item.stop_at) - 1
            if page >= 0 and pages.starts[page] > first:
                start, before = pages.starts[page], pages.before[page]
                turns = offloaded_items(replace(item, resume_at=start, shown=before), workdir)
                return [replace(item, stop_at=start, upto=before), *turns], []
    except (OSError, LookupError, UnicodeError) as exc:
        return [], [_problem(item, exc)]
    return whole_history([item], workdir)


def history_found(
    item: OffloadedItem,
    wanted: Callable[[Item], bool],
    size: int,
    workdir: str | os.PathLike[str] | None = None,
    *,
    marks: Sequence[str] = (),
    pages: SectionPages | None = None,
) -> tuple[list[Item] | None, list[str]]:
    """`found_turns` of `item`; the second list says what could not be read."""
    try:
        return found_turns(item, wanted, size, workdir, marks=marks, pages=pages), []
    except (OSError, LookupError, UnicodeError) as exc:
        return None, [_problem(item, exc)]


def offloaded_prompts(item: OffloadedItem, workdir: str | os.PathLike[str] | None = None) -> list[str]:
    """The user's prompts among the turns of `item`, read as the section streams by (none where it cannot be
    read: the chat says why when it shows them)."""
    try:
        return [entry.text for _, entry in _section_entries(_log_path(item, workdir), item) if entry.speaker == "Human"]
    except (OSError, LookupError, UnicodeError):
        return []


def blocks_in(item: OffloadedItem, workdir: str | os.PathLike[str] | None = None) -> int:
    """How many blocks the chat shows for the turns of `item` (a notice when they cannot be read), counted
    as the section streams by: none of them is kept."""
    turns = _Turns(keep=False)
    try:
        for _, entry in _section_entries(_log_path(item, workdir), item):
            turns.add(entry)
    except (OSError, LookupError, UnicodeError):
        return 1
    turns.finish()
    return turns.count
