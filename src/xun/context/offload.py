"""The offload log: the originals of summarised messages, appended to a Markdown file.

One section per summary, headed `## Offloaded at <UTC ISO-8601 time>`, then a transcript of
`Human:` / `AI:` / `AI tool call:` / `Tool:` entries. Continuation lines of an entry are indented by
four spaces, so no message text can ever be mistaken for a heading or an entry, and the file can be
read back exactly (`read_offload_log`). Earlier summaries are not archived again.
"""

from __future__ import annotations

import errno
import io
import json
import mmap
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from xun.base.atomic import fsync_dir, open_regular
from xun.base.confined import LinkRefused, open_state
from xun.context.messages import Message, SystemPrompt, UserMessage, content_text
from xun.context.reclaimed import arguments_id

HEADING = "## Offloaded at "
INDENT = "    "
_ENTRY = re.compile(r"^(Human|AI|AI reasoning|AI tool call|Tool)(?: \(([^)]*)\))?: ?(.*)$")


@dataclass(slots=True)
class OffloadEntry:
    """One message (or one tool call) as the log holds it."""

    speaker: str  # Human, AI, AI reasoning, AI tool call, Tool
    text: str
    detail: str = ""  # e.g. "read_file, id call_1"
    cut: bool = False
    """`text` is only the first characters of a longer entry (`iter_offload_log` with a cap)."""


@dataclass(slots=True)
class OffloadSection:
    when: str
    conversation_id: str = ""
    entries: list[OffloadEntry] = field(default_factory=list)


def utc_now_iso() -> str:
    """To the millisecond: a section's heading time names it, and a long turn made several summaries in
    one second, and each must name its own section."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _entry(speaker: str, text: str, detail: str = "") -> str:
    head = f"{speaker} ({detail}):" if detail else f"{speaker}:"
    lines = text.split("\n")
    first = f"{head} {lines[0]}" if lines[0] else head
    return "\n".join([first, *(INDENT + line for line in lines[1:])])


def archive_ids(messages: Iterable[Message]) -> Iterator[str]:
    """The archive ids `transcript_entries` looks up for `messages`: each tool result's call id, and each
    call's `arguments_id`."""
    for message in messages:
        if isinstance(message, (SystemPrompt, UserMessage)):
            continue
        raw = message.raw
        if raw.get("role") == "tool":
            yield str(raw.get("tool_call_id", ""))
        else:
            yield from (arguments_id(str(call.get("id", ""))) for call in raw.get("tool_calls") or ())


def transcript_entries(messages: Iterable[Message], reclaimed: Mapping[str, str] | None = None) -> list[OffloadEntry]:
    """The log entries for `messages`; reclaimed tool results and call arguments are written as their
    originals (`reclaimed` maps archive ids to originals)."""
    reclaimed = reclaimed or {}
    names: dict[str, str] = {}
    out: list[OffloadEntry] = []
    for message in messages:
        if isinstance(message, SystemPrompt):
            continue  # the system prompt and earlier summaries are kept elsewhere
        if isinstance(message, UserMessage):
            text = message.text
            if message.images:
                text += "".join(f"\n[image: {url[:80]}]" for url in message.images)
            out.append(OffloadEntry("Human", text))
            continue
        raw = message.raw
        role = raw.get("role")
        if role == "tool":
            call_id = str(raw.get("tool_call_id", ""))
            original = reclaimed.get(call_id)
            detail = ", ".join(p for p in (names.get(call_id, ""), f"id {call_id}") if p)
            if original is not None:
                out.append(OffloadEntry("Tool", original, detail + ", reclaimed earlier"))
            else:
                out.append(OffloadEntry("Tool", content_text(raw.get("content")), detail))
            continue
        for key in ("reasoning_content", "reasoning"):
            if isinstance(raw.get(key), str) and raw[key]:
                out.append(OffloadEntry("AI reasoning", raw[key]))
        text = content_text(raw.get("content"))
        if text or not raw.get("tool_calls"):
            out.append(OffloadEntry("AI" if role == "assistant" else str(role).capitalize(), text))
        for call in raw.get("tool_calls") or ():
            function = call.get("function") or {}
            name = str(function.get("name", "?"))
            call_id = str(call.get("id", ""))
            names[call_id] = name
            original = reclaimed.get(arguments_id(call_id))
            if original is not None:
                out.append(OffloadEntry("AI tool call", original, f"{name}, id {call_id}, reclaimed earlier"))
                continue
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            out.append(OffloadEntry("AI tool call", arguments, f"{name}, id {call_id}"))
    return out


def render_entries(entries: Iterable[OffloadEntry]) -> str:
    """Entries as the log writes them (also how a summary request quotes a transcript)."""
    return "\n".join(_entry(e.speaker, e.text, e.detail) for e in entries)


def render_section(entries: list[OffloadEntry], when: str, conversation_id: str) -> str:
    body = render_entries(entries)
    return f"{HEADING}{when}\n\n<!-- xun conversation {conversation_id}, {len(entries)} entries -->\n\n{body}\n\n"


def append_offload(
    path: str | os.PathLike[str],
    messages: Iterable[Message],
    *,
    conversation_id: str,
    reclaimed: Mapping[str, str] | None = None,
    when: str | None = None,
) -> Path:
    """Append one section for `messages` and fsync it before returning; raises OSError on failure.

    The file is created owner-readable only. A file left without a final newline by an interrupted
    earlier append is first closed off with one, so the new section always starts on its own line.
    """
    target = Path(path)
    text = render_section(transcript_entries(messages, reclaimed), when or utc_now_iso(), conversation_id)
    created = not target.exists()
    # O_NONBLOCK: a FIFO planted where the log should be fails the open instead of blocking it; no link is
    # followed (the log, its folder or `.xun` linked to ~/.bashrc, say, would have the transcript appended there)
    try:
        fd = open_state(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0))
    except LinkRefused as exc:
        raise OSError(
            errno.ELOOP,
            "the offload log or a folder on its way is a symbolic link, which xun does not "
            "follow in its own folder; remove it",
            exc.filename,
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "the offload log is not a regular file", str(target))
        size = os.fstat(fd).st_size
        if not created and size:
            if os.pread(fd, 1, size - 1) != b"\n":
                text = "\n\n" + text
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(target.parent)
    return target


def parse_entries(text: str) -> list[OffloadEntry]:
    """Entries as `render_entries` wrote them (a quoted transcript), read back exactly."""
    entries: list[OffloadEntry] = []
    current: OffloadEntry | None = None
    for line in text.split("\n"):
        if line.startswith(INDENT) and current is not None:
            current.text += "\n" + line[len(INDENT) :]
            continue
        match = _ENTRY.match(line)
        if match:
            current = OffloadEntry(match.group(1), match.group(3), match.group(2) or "")
            entries.append(current)
        elif line.strip():
            current = None
    return entries


def read_offload_log(path: str | os.PathLike[str]) -> list[OffloadSection]:
    """Parse a log back into sections and entries (exact texts); tolerant of a torn last section."""
    sections: list[OffloadSection] = []
    for item in iter_offload_log(path):
        if isinstance(item, OffloadSection):
            sections.append(item)
        else:
            sections[-1].entries.append(item)
    return sections


READ_PIECE = 1 << 16
"""The most of one line `iter_offload_log` holds at a time: a longer line is read in pieces of this many
characters, so no line of a log (one can be hundreds of megabytes) is ever in memory whole."""


def iter_offload_log(
    path: str | os.PathLike[str], cap: int | None = None, start: int = 0
) -> Iterator[OffloadSection | OffloadEntry]:
    """A log read as a stream: each section as its heading is read (its `entries` stay empty), then each of
    its entries once it is whole, so memory holds one entry, never the log. With `cap`, an entry keeps
    its first `cap` characters and is marked `cut` when it had more. The texts are exact otherwise, as
    `read_offload_log` gives them; an entry takes the conversation id its section's comment gave before it.
    `start` is the byte offset of a heading (`heading_offset`) to read from, the sections before it unread."""
    reader = _EntryReader(cap)
    section: OffloadSection | None = None
    line_start = True
    rest = ""  # where the pieces after a long line's first go: "entry" (its text), "check" (ends it if not blank)
    raw = open_regular(path)
    raw.seek(start)
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as handle:  # keep "\r"
        while piece := handle.readline(READ_PIECE):
            ends = piece.endswith("\n")
            line = piece[:-1] if ends else piece
            if not line_start:
                if rest == "entry":
                    reader.add(line)
                elif rest == "check" and line.strip():
                    yield from reader.finish()
                    rest = ""
                line_start = ends
                continue
            line_start, rest = ends, ""
            if line.startswith(HEADING):
                yield from reader.finish()
                section = OffloadSection(when=line[len(HEADING) :].strip())
                yield section
                continue
            if section is None:
                continue
            if line.startswith(INDENT) and reader.open:
                reader.add("\n" + line[len(INDENT) :])
                rest = "entry"
                continue
            if line.startswith("<!-- xun conversation "):
                words = line.split()  # a cut or tampered line may stop after "conversation"
                section.conversation_id = words[3].rstrip(",") if len(words) > 3 else ""
                continue
            match = _ENTRY.match(line)
            if match:
                yield from reader.finish()
                reader.start(OffloadEntry(match.group(1), "", match.group(2) or ""), match.group(3))
                rest = "entry"
            elif line.strip():
                yield from reader.finish()
            else:
                rest = "check"
        yield from reader.finish()


def heading_offset(path: str | os.PathLike[str], when: str) -> int | None:
    """The byte offset of the first section headed `when`, found in the bytes (no entry is parsed), or None."""
    needle = f"{HEADING}{when}".encode()
    with open_regular(path) as handle:
        if not os.fstat(handle.fileno()).st_size:
            return None
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:

            def after(position: int) -> int:
                found = _find(data, b"\n" + needle, position)
                return found + 1 if found >= 0 else -1

            line = 0 if data[: len(needle)] == needle else after(0)
            while line >= 0:
                end = line + len(needle)
                if end == len(data) or data[end : end + 1] in (b"\n", b"\r", b" ", b"\t"):
                    return line
                line = after(end)
    return None


READ_CHUNK = 1 << 18
"""The most bytes of a section `SectionReader` decodes at a time (cut at a line's end); it starts with
`FIRST_CHUNK`, since a page of a section needs only its first entries."""
FIRST_CHUNK = 1 << 16
CONVERSATION_COMMENT = "<!-- xun conversation "


def _comment_id(line: str) -> str:
    words = line.split()  # a cut or tampered line may stop after "conversation"
    return words[3].rstrip(",") if len(words) > 3 else ""


class SectionReader:
    """One section of a log read from byte `start`, a chunk at a time, until the next heading: each entry with
    the byte offset of its first line, as `iter_offload_log` reads it (which judges a line of over `READ_PIECE`
    characters by its first piece: only a tampered log has one that this reads otherwise). `start` is the
    section's heading, or the first line of one of its entries (an offset `entries` gave): the rest of the
    section is read from there, so that a section of thousands of entries can be shown a page at a time.
    Memory holds one chunk and one entry, never the section."""

    def __init__(self, path: str | os.PathLike[str], start: int) -> None:
        self.path = path
        self.start = start
        self.when: str | None = None
        """The heading's time (None until it is read, or when `start` is not at the heading)."""
        self.conversation_id = ""
        """As the section's conversation comments say it, once they are read."""

    def entries(self) -> Iterator[tuple[int, OffloadEntry]]:
        with open_regular(self.path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= self.start:
                return
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                yield from self._parse(_lines(data, self.start, size))

    def _parse(self, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, OffloadEntry]]:
        """An entry's indented lines continue it until a line that is not indented, blank or a conversation
        comment ends it."""
        entry: OffloadEntry | None = None
        parts: list[str] = []  # the open entry's lines
        first = True
        at = 0
        for offset, line in lines:
            if line.startswith(HEADING):
                if not first:
                    break
                self.when = line[len(HEADING) :].strip()
                first = False
                continue
            first = False
            if line[:4] == INDENT:
                if entry is not None:
                    parts.append(line[4:])
                    continue
            elif line.startswith(CONVERSATION_COMMENT):
                self.conversation_id = _comment_id(line)
                continue
            match = _ENTRY.match(line)
            if match:
                if entry is not None:
                    entry.text = "\n".join(parts)
                    yield at, entry
                entry, at, parts = OffloadEntry(match.group(1), "", match.group(2) or ""), offset, [match.group(3)]
            elif line.strip() and entry is not None:
                entry.text = "\n".join(parts)
                yield at, entry
                entry = None
        if entry is not None:
            entry.text = "\n".join(parts)
            yield at, entry


def _lines(data: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, str]]:
    """The lines of `data` from byte `start`, each with its offset, decoded a chunk at a time (the chunks
    doubling from `FIRST_CHUNK`, each cut at a line's end; a line longer than a chunk is read whole)."""
    position = start
    chunk = min(FIRST_CHUNK, READ_CHUNK)
    while position < end:
        cut = min(position + chunk, end)
        if cut < end:
            cut = data.rfind(b"\n", position, cut) + 1 or data.find(b"\n", cut) + 1 or end
        lines = data[position:cut].split(b"\n")
        _release(data, position, cut)
        if cut < end or not lines[-1]:
            lines.pop()  # the chunk ends with a line's "\n"
        for line in lines:
            yield position, line.decode("utf-8", errors="replace")
            position += len(line) + 1
        position = cut
        chunk = min(2 * chunk, READ_CHUNK)


def _release(data: mmap.mmap, start: int, end: int) -> None:
    """Unmap the pages of `data` from `start` to `end` once read (they stay in the page cache, and a read
    maps them again): the walk of a large log would otherwise count all of it in the app's resident memory
    until it ends (counting a 30,000-message session's sections added 20 MB)."""
    if hasattr(mmap, "MADV_DONTNEED"):  # not on Windows
        first = start - start % mmap.PAGESIZE
        if end > first:
            data.madvise(mmap.MADV_DONTNEED, first, end - first)


def read_section(path: str | os.PathLike[str], start: int) -> OffloadSection | None:
    """The section whose heading is at byte `start` (`heading_offset`), entries and all, exactly as
    `iter_offload_log` reads it, but decoded in chunks and split into lines at once: a section of thousands
    of entries is read in a fraction of the time. None when no heading is there."""
    with open_regular(path) as handle:
        handle.seek(start)
        if handle.read(len(HEADING.encode())) != HEADING.encode():
            return None
    reader = SectionReader(path, start)
    entries = [entry for _, entry in reader.entries()]
    if reader.when is None:
        return None
    return OffloadSection(reader.when, reader.conversation_id, entries)


def section_heads(path: str | os.PathLike[str], start: int = 0) -> Iterator[tuple[int, str, str]]:
    """The sections from byte `start` on, found in the bytes (no entry is read): each heading's offset, its
    time and the conversation id of the comment under it."""
    heading = HEADING.encode()
    with open_regular(path) as handle:
        if os.fstat(handle.fileno()).st_size <= start:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = start if data[start : start + len(heading)] == heading else _next_heading(data, start)
            while at >= 0:
                line_end = data.find(b"\n", at)
                line_end = len(data) if line_end < 0 else line_end
                when = data[at:line_end].decode("utf-8", errors="replace")[len(HEADING) :].strip()
                below = data[line_end : line_end + 4096].decode("utf-8", errors="replace").split("\n")
                comment = next((line for line in below if line.strip()), "")
                yield at, when, _comment_id(comment) if comment.startswith(CONVERSATION_COMMENT) else ""
                at = _next_heading(data, line_end)


def section_end(path: str | os.PathLike[str], position: int) -> int:
    """Where the section holding the line at byte `position` ends: the offset of the next heading, or the
    log's size."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= position:
            return size
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found = _next_heading(data, position)
    return size if found < 0 else found


def span_crc(path: str | os.PathLike[str], start: int, end: int) -> int | None:
    """The CRC-32 of the log's bytes from `start` to `end` (None when the log is shorter): whether a part of
    the log is still what it was."""
    with open_regular(path) as handle:
        if os.fstat(handle.fileno()).st_size < end:
            return None
        if end <= start:
            return zlib.crc32(b"")
        crc = 0
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for at in range(start, end, READ_CHUNK):
                crc = zlib.crc32(data[at : min(at + READ_CHUNK, end)], crc)
                _release(data, at, min(at + READ_CHUNK, end))
        return crc


def first_mark(path: str | os.PathLike[str], marks: list[bytes], start: int, end: int) -> int | None:
    """The first offset from `start` at which one of `marks` (not empty) lies whole before `end`, found in the
    bytes (no line is decoded; the marks' common beginning is searched once), or None."""
    common = os.path.commonprefix(marks)
    with open_regular(path) as handle:
        end = min(end, os.fstat(handle.fileno()).st_size)
        if end <= start:
            return None
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if not common:
                return min((at for mark in marks if (at := _find(data, mark, start, end)) >= 0), default=None)
            at = _find(data, common, start, end)
            while at >= 0:
                if any(at + len(mark) <= end and data[at : at + len(mark)] == mark for mark in marks):
                    return at
                at = _find(data, common, at + 1, end)
    return None


def _next_heading(data: mmap.mmap, position: int) -> int:
    """The offset of the first heading after byte `position` (a line's start), or -1."""
    found = _find(data, b"\n" + HEADING.encode(), position)
    return found + 1 if found >= 0 else -1


def _find(data: mmap.mmap, needle: bytes, start: int, end: int | None = None) -> int:
    """`data.find(needle, start, end)`, a window of READ_CHUNK bytes at a time, each window's pages released
    once searched (`_release`)."""
    end = len(data) if end is None else min(end, len(data))
    at = start
    while at < end:
        stop = min(at + READ_CHUNK + len(needle) - 1, end)
        found = data.find(needle, at, stop)
        if found >= 0:
            return found
        _release(data, at, stop)
        if stop == end:
            break
        at = stop - len(needle) + 1
    return -1


class _EntryReader:
    """The entry `iter_offload_log` is reading: its text gathered in pieces, up to `cap` characters."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.entry: OffloadEntry | None = None
        self.pieces: list[str] = []
        self.size = 0

    @property
    def open(self) -> bool:
        return self.entry is not None

    def start(self, entry: OffloadEntry, text: str) -> None:
        self.entry, self.pieces, self.size = entry, [], 0
        self.add(text)

    def add(self, text: str) -> None:
        if self.entry is None or self.entry.cut:
            return
        if self.cap is not None and self.size + len(text) > self.cap:
            text = text[: self.cap - self.size]
            self.entry.cut = True
        self.pieces.append(text)
        self.size += len(text)

    def finish(self) -> Iterator[OffloadEntry]:
        """The entry, whole (or cut at `cap`), when one was being read."""
        if self.entry is not None:
            self.entry.text = "".join(self.pieces)
            yield self.entry
        self.entry, self.pieces, self.size = None, [], 0
