"""The archive of reclaimed tool results and call arguments: what tier 1 took out of the context, kept
for recovery.

In a session file (format 2) the archive is the document's last value, `"compacted_toolcalls"`: an object
from tool call id to `{"tool", "arguments", "chars", "reclaimed_at", "original"}`, in the order the results
were reclaimed. The large arguments of an old call are archived under the call's id with `ARGUMENTS_SUFFIX`
(`call_7:arguments`) and `"kind": "arguments"` (a result has no `kind`, so files written before arguments
were reclaimed read the same).

Originals live in the session file; memory holds records and offsets (`ReclaimedArchive`). A loaded
session's archive stays one unparsed block of the file, read from it when first needed; each entry is then
its record and where its JSON text lies, and an original is read from the file when asked for. A save copies
the entries as they are (nothing re-encoded or re-decoded) from the old file to the new one, then reads from
the new one. Entries reclaimed since the last save are kept as the JSON text they are saved as, encoded once.
Format 1 files (one JSON line per result after the session's head line) load the same lazy way and are saved
in format 2.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache, partial
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, NamedTuple

from xun.base.errors import SessionFormatError
from xun.context.archive_store import PIECE, SessionFile, SessionText, utf8_length

ARGUMENTS_PREVIEW = 200
CHECKED_PIECE = 1 << 16
"""Bytes of an archive decoded at a time when a load checks its text (as text, up to four times as many)."""
_DECODER = json.JSONDecoder()

RESULT, ARGUMENTS = "result", "arguments"
"""The kinds of archive entry: a tool result, or the arguments of a tool call."""
ARGUMENTS_SUFFIX = ":arguments"
"""A call's id with this suffix is the archive id of its reclaimed arguments (what the placeholder names)."""
ARGUMENTS_RECLAIM_AT = 500
"""A call's arguments are reclaimed only when longer than this many characters: short calls (a path to read,
a short command) stay word for word, where they cost little and say exactly what was done."""
ARGUMENT_VALUE_KEPT = 100
"""A string value of at most this many characters (a path, a short command) stays verbatim in the placeholder
arguments; a longer one keeps its first ARGUMENT_HEAD characters and the placeholder mark."""
ARGUMENT_HEAD = 40


def arguments_id(call_id: str) -> str:
    """The archive id of a call's reclaimed arguments."""
    return call_id + ARGUMENTS_SUFFIX


def arguments_placeholder(arguments: str, archive_id: str) -> str:
    """Valid JSON standing for `arguments` once reclaimed (servers reject a call whose arguments are not
    JSON): an object keeps its keys, short values verbatim, and each long value becomes its head followed
    by `…[Compacted, ID: <archive_id>. <n> chars]`; anything else becomes `{"arguments": <that mark>}`.
    The mark has the shape of a result's placeholder, so extract_compacted_tool_result reads it back."""

    def mark(size: int) -> str:
        return f"[Compacted, ID: {archive_id}. {size:,} chars]"

    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return json.dumps({"arguments": mark(len(arguments))}, ensure_ascii=False)
    shown: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, str):
            shown[key] = item if len(item) <= ARGUMENT_VALUE_KEPT else f"{item[:ARGUMENT_HEAD]}…{mark(len(item))}"
        elif isinstance(item, (dict, list)):
            text = json.dumps(item, ensure_ascii=False)
            shown[key] = item if len(text) <= ARGUMENT_VALUE_KEPT else mark(len(text))
        else:
            shown[key] = item
    return json.dumps(shown, ensure_ascii=False)


class ReclaimedToolResult(NamedTuple):
    """What the recoverable-results list shows about one reclaimed result or call's arguments (not the
    original). Immutable (index writes take it to a worker thread), and a tuple: a first reclaim makes
    thousands at once. `tool_call_id` is the archive id (`call_id` is the call's own)."""

    tool_call_id: str
    tool_name: str = ""
    arguments: str = ""
    chars: int = 0
    reclaimed_at: float = 0.0
    kind: str = RESULT
    """RESULT, or ARGUMENTS: the call's arguments (`arguments` then previews the original itself)."""

    @property
    def call_id(self) -> str:
        """The id of the tool call this came from."""
        if self.kind == ARGUMENTS and self.tool_call_id.endswith(ARGUMENTS_SUFFIX):
            return self.tool_call_id[: -len(ARGUMENTS_SUFFIX)]
        return self.tool_call_id

    def to_json(self) -> dict[str, Any]:
        data = {
            "tool": self.tool_name,
            "arguments": self.arguments,
            "chars": self.chars,
            "reclaimed_at": self.reclaimed_at,
        }
        if self.kind != RESULT:
            data["kind"] = self.kind
        return data

    @classmethod
    def from_json(cls, tool_call_id: str, data: dict[str, Any]) -> ReclaimedToolResult:
        """Raises TypeError or ValueError on a malformed record."""
        kind = data.get("kind", RESULT)
        if kind not in (RESULT, ARGUMENTS):
            raise ValueError(f"kind should be {RESULT!r} or {ARGUMENTS!r}, got {kind!r}")
        return cls(
            tool_call_id,
            str(data.get("tool", "")),
            str(data.get("arguments", "")),
            int(data.get("chars", 0)),
            float(data.get("reclaimed_at") or 0.0),
            kind,
        )


def _json_text(text: str) -> str:
    """`text` as a JSON string, as `json.dumps(text, ensure_ascii=False)` writes it, without its
    per-call overhead (ASCII text, most tool output, takes the faster ASCII encoder)."""
    return encode_basestring_ascii(text) if text.isascii() else encode_basestring(text)


@lru_cache(maxsize=1)
def _time_text(when: float) -> str:
    """A time as JSON writes it (a reclaim stamps all its records with the same time)."""
    return repr(float(when))


def _entry(record: ReclaimedToolResult, original: str) -> str:
    """One archive entry as saved: `"id":{"tool":…,"original":…}` (compact JSON; `"kind"` only for arguments)."""
    kind = f'"kind":{_json_text(record.kind)},' if record.kind != RESULT else ""
    return (
        f'{_json_text(record.tool_call_id)}:{{"tool":{_json_text(record.tool_name)},"arguments":'
        f'{_json_text(record.arguments)},"chars":{int(record.chars)},"reclaimed_at":{_time_text(record.reclaimed_at)},'
        f'{kind}"original":{_json_text(original)}}}'
    )


def _entry_original(entry: str) -> str:
    _, end = _DECODER.raw_decode(entry)  # the id, then ":" and the record
    original: str = json.loads(entry[end + 1 :])["original"]
    return original


def _record(tool_call_id: Any, data: Any) -> tuple[ReclaimedToolResult, str]:
    """A stored record and its original; raises TypeError, ValueError or KeyError when malformed."""
    if not isinstance(tool_call_id, str) or not isinstance(data, dict) or not isinstance(data["original"], str):
        raise TypeError("the id and the original should be strings")
    try:
        record = ReclaimedToolResult.from_json(tool_call_id, data)
    except OverflowError as exc:
        raise ValueError(str(exc)) from None
    if not math.isfinite(record.reclaimed_at):
        raise ValueError(f"reclaimed_at should be a time, got {record.reclaimed_at}")
    return record, data["original"]


class _Block(NamedTuple):
    """A loaded archive not parsed yet: its entries (inside the braces; format 1: its lines) in `store`."""

    store: SessionFile | SessionText
    offset: int
    size: int  # in the store's units (bytes in a file)
    chars: int
    entries: int
    lines: bool = False


class _Where(NamedTuple):
    """Where an entry's text lies: `size` units at `offset` in `store`, `chars` characters."""

    store: SessionFile | SessionText
    offset: int
    size: int
    chars: int


class _Written(NamedTuple):
    """What a save wrote of the archive: each entry (or the unparsed block, id None) as it was then, where
    it landed (bytes from the archive's "{") and its length; and the archive's length in bytes."""

    entries: list[tuple[str | None, Any, int, int, int]]
    size: int


ARCHIVE_KEY = b',"compacted_toolcalls":'
"""What comes just before the archive in a session file (format 2)."""


def _original_of(tool_call_id: str, where: str | _Where) -> str:
    """The original of an entry kept as its text, or read from where it lies, checked to be the entry of
    `tool_call_id` (SessionFormatError naming the file otherwise: never another entry's text)."""
    if isinstance(where, str):
        return _entry_original(where)
    entry = where.store.read_text(where.offset, where.size)
    try:
        _check_id(entry, 0, tool_call_id)
        original = _entry_original(entry)
        if len(entry) != where.chars or not isinstance(original, str):
            raise ValueError("not the entry's length")
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        raise where.store.changed(f"reclaimed result {tool_call_id!r} is not where it was") from None
    return original


def _check_id(text: str, at: int, tool_call_id: str) -> None:
    """Raise ValueError unless the entry of `tool_call_id` begins at `text[at]`."""
    found, colon = _DECODER.raw_decode(text, at)
    if found != tool_call_id or text[colon] != ":":
        raise ValueError(f"expected the entry of {tool_call_id!r}")


def _runs(entries: dict[str, str | _Where]) -> Iterator[tuple[str, str | _Where | list[tuple[str, _Where]]]]:
    """The entries in order, those that lie one after the other in one file (a comma between) grouped
    into runs of up to a piece (`(first id, [(id, where), ...])`), so a save reads each run at once."""
    run: list[tuple[str, _Where]] = []
    for key, where in entries.items():
        if run and not (
            isinstance(where, _Where)
            and where.store is run[-1][1].store
            and where.offset == run[-1][1].offset + run[-1][1].size + 1
            and where.offset + where.size - run[0][1].offset <= PIECE
        ):
            yield (run[0][0], run) if len(run) > 1 else run[0]
            run = []
        if isinstance(where, _Where) and where.store.in_bytes:
            run.append((key, where))
        else:
            yield key, where
    if run:
        yield (run[0][0], run) if len(run) > 1 else run[0]


def _pieces(parts: list[str | Callable[[], Iterable[str]]]) -> Iterator[str]:
    for part in parts:
        if isinstance(part, str):
            yield part
        else:
            yield from part()


def _read_run(run: list[tuple[str, _Where]]) -> list[str]:
    """The text of a run of entries (commas between), each checked to be the entry its id says."""
    first, last = run[0][1], run[-1][1]
    text = first.store.read_text(first.offset, last.offset + last.size - first.offset)
    at = 0
    try:
        for key, where in run:
            _check_id(text, at, key)
            at += where.chars
            if at < len(text) and text[at] != ",":
                raise ValueError("expected ','")
            at += 1
        if at != len(text) + 1:
            raise ValueError("not the run's length")
    except (ValueError, IndexError, RecursionError):
        raise first.store.changed(f"reclaimed result {key!r} is not where it was") from None
    return [text]


class ReclaimedArchive(Mapping[str, ReclaimedToolResult]):
    """Reclaimed results by tool call id, in the order they were reclaimed.

    Originals live in the session file; memory holds records and offsets. A loaded archive stays one
    unparsed block of the file (its place, not its text) until it is first read; then each entry is its
    record and where its text lies (`_Where`). An original is read from the file when asked for, and a
    save copies the entries from the old file to the new one, then points at the new one. Entries added
    since the last save (and those of a format 1 file, or of a file another tool laid out anew) are kept
    as their JSON text until the next save. A block, or an entry, that turns out unreadable raises
    SessionFormatError naming the session file; so does a file changed under an open session.
    """

    def __init__(self) -> None:
        self._records: dict[str, ReclaimedToolResult] = {}
        self._entries: dict[str, str | _Where] = {}  # an entry's text when not saved yet, else where it lies
        self._block: _Block | None = None
        self._source: Any = None
        self._lock = threading.RLock()  # a save (a worker thread) against reads that parse or move entries
        self._written: tuple[int, _Written] | None = None  # the last json_parts: its thread, what it wrote

    def __getitem__(self, tool_call_id: str) -> ReclaimedToolResult:
        self._parse_block()
        return self._records[tool_call_id]

    def __iter__(self) -> Iterator[str]:
        self._parse_block()
        return iter(self._records)

    def __len__(self) -> int:
        block = self._block
        return (block.entries if block is not None else 0) + len(self._records)

    def __contains__(self, tool_call_id: object) -> bool:
        self._parse_block()
        return tool_call_id in self._records

    def add(self, record: ReclaimedToolResult, original: str) -> None:
        with self._lock:
            self._records[record.tool_call_id] = record
            self._entries[record.tool_call_id] = _entry(record, original)

    def original(self, tool_call_id: str) -> str | None:
        self._parse_block()
        with self._lock:
            where = self._entries.get(tool_call_id)
        return None if where is None else _original_of(tool_call_id, where)

    def originals(self) -> dict[str, str]:
        """Every original by id (reads them all: for offloading and exports, not for listing)."""
        self._parse_block()
        with self._lock:
            entries = dict(self._entries)
        originals = {}
        for key, where in _runs(entries):
            if isinstance(where, list):  # read in one piece, each entry checked
                (text,), at = _read_run(where), 0
                for k, w in where:
                    originals[k] = _entry_original(text[at : at + w.chars])
                    at += w.chars + 1
            else:
                originals[key] = _original_of(key, where)
        return originals

    def pop(self, tool_call_id: str) -> str:
        """Remove a record and return its original (used when it is restored into the context)."""
        original = self.original(tool_call_id)
        if original is None:
            raise KeyError(tool_call_id)
        with self._lock:
            self._records.pop(tool_call_id, None)
            self._entries.pop(tool_call_id, None)
        return original

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._entries.clear()
            self._block = None
            self._written = None

    def _fail(self, reason: str) -> SessionFormatError:
        return SessionFormatError(self._source, reason)

    def _parse_block(self) -> None:
        if self._block is None:
            return
        with self._lock:
            block = self._block
            if block is None:
                return
            parsed: Mapping[str, tuple[ReclaimedToolResult, str | _Where]]
            if block.lines:
                parsed = self._parse_lines(block.store.read_text(block.offset, block.size), block)
            else:
                parsed = self._parse_object(block)
            records = {k: record for k, (record, _) in parsed.items()}
            entries: dict[str, str | _Where] = {k: entry for k, (_, entry) in parsed.items()}
            records.update(self._records)
            entries.update(self._entries)
            self._records, self._entries, self._block = records, entries, None

    def _parse_object(self, block: _Block) -> dict[str, tuple[ReclaimedToolResult, _Where]]:
        """Format 2's entries (inside the braces), each kept as where it lies (nothing re-encoded). The block
        is read a piece at a time (`pieces`), never whole: a session's archive is most of its file, and one
        large string read and freed would stay in the process's memory."""
        in_bytes = block.store.in_bytes
        pieces = block.store.pieces(block.offset, block.size)
        pending = next(pieces, None)  # the next piece, read ahead: the last entry is known as the last
        text, ascii_text, exhausted = "", True, pending is None
        position = 0  # where the next entry starts in `text`
        units, chars = block.offset, 0  # the store's offset of `text[chars]`
        parsed: dict[str, tuple[ReclaimedToolResult, _Where]] = {}
        count = 0  # entries, a repeated id among them (a later one wins, as in any JSON reader)
        wanted = 0  # characters `text` should hold before the next try (an entry longer than what is read)

        def measure(start: int, end: int) -> int:
            """The store's units (bytes in a file) of `text[start:end]`."""
            if not in_bytes or ascii_text:
                return end - start
            piece = text[start:end]
            return len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))

        while True:
            if not exhausted and (len(text) - position < wanted or position == len(text)):
                if position:  # what was parsed goes; `units` and `chars` follow the cut
                    units += measure(chars, position)
                    text, chars, position = text[position:], 0, 0
                while pending is not None:
                    text += pending
                    pending = next(pieces, None)
                    if len(text) >= wanted:
                        break
                exhausted = pending is None
                ascii_text = text.isascii()
                if in_bytes and not ascii_text and block.chars == block.size:
                    raise self._fail("the reclaimed-result archive is not the length recorded; the file was edited")
                continue
            if position == len(text):
                break
            try:
                tool_call_id, colon = _DECODER.raw_decode(text, position)
                if text[colon] != ":":
                    raise ValueError(f"expected ':' after entry {count + 1}'s id")
                data, after = _DECODER.raw_decode(text, colon + 1)
                if after == len(text) and not exhausted:
                    raise IndexError("the separator is in the next piece")
                if after != len(text) and (text[after] != "," or (after + 1 == len(text) and exhausted)):
                    raise ValueError(f"expected ',' after entry {count + 1}")
                record, _ = _record(tool_call_id, data)
            except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
                if not exhausted:  # the entry goes on in the pieces not read yet: read as much again
                    wanted = 2 * (len(text) - position) + 1
                    continue
                raise self._fail(f"reclaimed-result archive entry {count + 1} is unreadable ({exc})") from None
            count += 1
            wanted = 0
            units += measure(chars, position)
            size = measure(position, after)
            parsed[tool_call_id] = (record, _Where(block.store, units, size, after - position))
            units, chars = units + size, after
            position = after + 1 if after < len(text) else after
        if count != block.entries:
            raise self._fail(f"the reclaimed-result archive holds {count} results instead of {block.entries}")
        return parsed

    def _parse_lines(self, text: str, block: _Block) -> dict[str, tuple[ReclaimedToolResult, str]]:
        """Format 1's block: one JSON line per result (re-encoded as format 2 entries, saved at the next save)."""
        # split on "\n" only: JSON written with ensure_ascii=False may hold U+2028 and friends raw
        chunks = text.split("\n")
        if chunks[-1] or len(chunks) - 1 != block.entries:
            raise self._fail(f"the reclaimed-result archive has {len(chunks) - 1} lines instead of {block.entries}")
        parsed: dict[str, tuple[ReclaimedToolResult, str]] = {}
        for number, line in enumerate(chunks[:-1], 1):
            try:
                data = json.loads(line)
                record, original = _record(data["id"], data)
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                raise self._fail(f"reclaimed-result archive line {number} is unreadable ({exc})") from None
            parsed[record.tool_call_id] = (record, _entry(record, original))
        return parsed

    # persistence
    def json_parts(self, ensure_ascii: bool = False) -> tuple[Iterator[str], int, int]:
        """The archive as saved, in pieces (one compact JSON object, its entries in the order they were
        reclaimed), and its length in characters and in UTF-8 bytes, known before a piece is read: the
        entries on disk are read from their file a piece at a time as the pieces are taken (each checked to
        be the entry its id names), so a save never holds the whole archive. `saved` then points at the file
        they were written to. With `ensure_ascii`, a character UTF-8 cannot hold (a lone surrogate) is
        written as a JSON escape (only text in memory can hold one: a file's text was decoded as UTF-8)."""
        with self._lock:
            if self._block is not None and self._block.lines:
                self._parse_block()
            parts: list[str | Callable[[], Iterable[str]]] = []
            chars = size = 0
            written: list[tuple[str | None, Any, int, int, int]] = []

            def put(text: str | Callable[[], Iterable[str]], length: tuple[int, int] = (0, 0)) -> tuple[int, int]:
                """Add a piece, or a read of the file (`length`: its characters and bytes); where it lands."""
                nonlocal chars, size
                if isinstance(text, str):
                    if ensure_ascii and not text.isascii():
                        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
                    length = len(text), utf8_length(text)
                parts.append(text)
                at = size
                chars, size = chars + length[0], size + length[1]
                return at, length[1]

            put("{")
            block = self._block
            if block is not None:  # copied as it is
                store = block.store
                if isinstance(store, SessionFile):
                    at, span = put(partial(store.pieces, block.offset, block.size), (block.chars, block.size))
                else:
                    at, span = put(store.read_text(block.offset, block.size))
                written.append((None, block, at, span, chars - 1))
            separator = "," if block is not None else ""
            for key, where in _runs(self._entries):
                put(separator)
                separator = ","
                if isinstance(where, list):  # entries one after the other in one file: read in one piece
                    first, last = where[0][1], where[-1][1]
                    span = last.offset + last.size - first.offset
                    at, _ = put(partial(_read_run, where), (sum(w.chars for _, w in where) + len(where) - 1, span))
                    written += [(k, w, at + w.offset - first.offset, w.size, w.chars) for k, w in where]
                elif isinstance(where, str) or not where.store.in_bytes:
                    text = where if isinstance(where, str) else where.store.read_text(where.offset, where.size)
                    starts = chars
                    at, span = put(text)
                    written.append((key, where, at, span, chars - starts))
                else:
                    at, _ = put(partial(_read_run, [(key, where)]), (where.chars, where.size))
                    written.append((key, where, at, where.size, where.chars))
            put("}")
            self._written = threading.get_ident(), _Written(written, size)
        return _pieces(parts), chars, size

    def saved(self, path: str | os.PathLike[str]) -> None:
        """After the text of the last `json_parts` (in this thread) was saved to `path`: its entries are read
        from that file from now on, and the ones in memory are let go. When that file cannot be opened or is
        not what was written, everything stays where it was (the old file, or memory): nothing is lost."""
        with self._lock:
            last, self._written = self._written, None
            if last is None or last[0] != threading.get_ident() or not last[1].entries:
                return  # (another thread made text since: what this one saved is not known here)
            written = last[1]
            try:
                file, start = SessionFile.reopen(path, written.size, ARCHIVE_KEY)
            except (OSError, SessionFormatError):
                return
            self._source = path  # (what a block found unreadable when first parsed is named by)
            for key, was, at, size, chars in written.entries:
                if key is None:
                    if self._block is was and self._block is not None:
                        self._block = _Block(file, start + at, size, chars, self._block.entries)
                elif self._entries.get(key) is was:
                    self._entries[key] = _Where(file, start + at, size, chars)

    def read_from(self, file: SessionFile, text: str) -> None:
        """Read the unparsed archive from `file`, the session file `text` was decoded from, rather than
        from `text` (which is then no longer kept)."""
        block = self._block
        if block is not None and isinstance(block.store, SessionText):
            offset = utf8_length(text, 0, block.offset)
            size = utf8_length(text, block.offset, block.offset + block.size)
            self._block = block._replace(store=file, offset=offset, size=size)

    @classmethod
    def from_json_text(cls, text: str, start: int, end: int, count: int, source: Any = None) -> ReclaimedArchive:
        """An archive over the unparsed object `text[start:end]` (not copied) holding `count` entries,
        parsed on first read. The caller has checked the block's length against the one recorded."""
        if not (text.startswith("{", start) and text.startswith("}", end - 1)) or (count == 0) != (end - start == 2):
            raise SessionFormatError(source, "the archive of reclaimed tool results is damaged; the file was edited")
        archive = cls()
        archive._source = source
        if count:
            archive._block = _Block(SessionText(text, source), start + 1, end - start - 2, end - start - 2, count)
        return archive

    @classmethod
    def from_file(
        cls, file: SessionFile, start: int, head: dict[str, Any], source: Any = None
    ) -> ReclaimedArchive | None:
        """An archive over the unparsed object at byte `start` of `file`, to the file's last byte, as the
        session's `head` records it (its entries, bytes and characters, the text checked a piece at a time);
        None when the file does not hold such an object there (the whole file is then read, and a problem
        named as in any other). Each entry is checked when it is parsed."""
        size, chars, count = (head.get(key) for key in ("compacted_bytes", "compacted_chars", "compacted_count"))
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (size, chars, count)):
            return None
        assert isinstance(size, int) and isinstance(chars, int) and isinstance(count, int)
        if start + size + 1 != file.size or size < 2 or chars > size or (count == 0) != (size == 2):
            return None
        if file.read_bytes(start, 1) != b"{" or file.read_bytes(file.size - 2, 2) != b"}}":
            return None
        decoder, counted = codecs.getincrementaldecoder("utf-8")(), 0
        for at in range(start, start + size, CHECKED_PIECE):  # none kept
            piece = file.read_bytes(at, min(CHECKED_PIECE, start + size - at))
            try:
                counted += len(decoder.decode(piece, final=at + CHECKED_PIECE >= start + size))
            except UnicodeDecodeError:
                return None
        if counted != chars:
            return None
        archive = cls()
        archive._source = source
        if count:
            archive._block = _Block(file, start + 1, size - 2, chars - 2, count)
        return archive

    @classmethod
    def from_lines(cls, text: str, start: int, summary: Any, source: Any = None) -> ReclaimedArchive:
        """Format 1: an archive over the unparsed lines of `text` from `start` on (not copied), checked
        against the length the session's head recorded (the first format 1 files recorded only the
        count, checked by counting lines); the lines are parsed on first read."""

        def whole_number(key: str) -> int | None:
            value = summary.get(key, None if key == "archive_chars" else 0)
            if value is None and key == "archive_chars":
                return None
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SessionFormatError(source, f"compacted_toolcalls.{key} should be a whole number, got {value!r}")
            return value

        if not isinstance(summary, dict):
            raise SessionFormatError(source, "compacted_toolcalls should be an object")
        count, chars = whole_number("archived_lines"), whole_number("archive_chars")
        damaged = (count and not text.endswith("\n")) or (
            len(text) - start != chars if chars is not None else text.count("\n", start) != count
        )
        if damaged:
            raise SessionFormatError(
                source,
                f"the archive of {count} reclaimed tool results after the session's first line is "
                f"{len(text) - start} characters instead of {chars}; the file is truncated or was edited",
            )
        archive = cls()
        archive._source = source
        if count:
            archive._block = _Block(SessionText(text, source), start, len(text) - start, len(text) - start, count, True)
        return archive

    @classmethod
    def from_records(cls, records: Any, count: Any, source: Any = None) -> ReclaimedArchive:
        """Format 2's archive already parsed (a file another tool laid out anew, e.g. `jq .`), checked
        against the `count` of entries recorded beside it."""
        if not isinstance(records, dict):
            raise SessionFormatError(source, "compacted_toolcalls should be an object")
        if count != len(records):
            raise SessionFormatError(
                source,
                f"the archive holds {len(records)} reclaimed tool results instead of {count!r}; the file was edited",
            )
        archive = cls()
        for number, (tool_call_id, data) in enumerate(records.items(), 1):
            try:
                archive.add(*_record(tool_call_id, data))
            except (ValueError, KeyError, TypeError) as exc:
                raise SessionFormatError(
                    source, f"reclaimed-result archive entry {number} is unreadable ({exc!r})"
                ) from None
        return archive

    @classmethod
    def from_legacy(cls, originals: Mapping[str, Any], source: Any = None) -> ReclaimedArchive:
        """The old form, id -> original text, as xun-agent 1.4 saved it."""
        archive = cls()
        for tool_call_id, original in originals.items():
            if not isinstance(original, str):
                raise SessionFormatError(source, f"compacted tool result {tool_call_id!r} should be text")
            archive.add(ReclaimedToolResult(tool_call_id, chars=len(original)), original)
        return archive
