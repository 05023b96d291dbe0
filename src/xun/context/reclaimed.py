"""The archive of reclaimed tool results and call arguments: what tier 1 took out of the context, kept
for recovery.

In a session file (format 2) the archive is the document's last value, `"compacted_toolcalls"`: an object
from tool call id to `{"tool", "arguments", "chars", "reclaimed_at", "original"}`, in the order the results
were reclaimed. The large arguments of an old call are archived under the call's id with `ARGUMENTS_SUFFIX`
(`call_7:arguments`) and `"kind": "arguments"` (a result has no `kind`, so files written before arguments
were reclaimed read the same). Each entry is kept as the JSON text it is saved as, encoded once when it is reclaimed,
and a loaded session keeps its archive as one unparsed block of the file's text until the archive is first
read, so saving and loading a long session neither re-encodes nor re-decodes thousands of large tool
outputs. Format 1 files (one JSON line per result after the session's head line) load the same lazy way
and are saved in format 2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from functools import lru_cache
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, NamedTuple

from xun.base.errors import SessionFormatError

ARGUMENTS_PREVIEW = 200
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


class ReclaimedArchive(Mapping[str, ReclaimedToolResult]):
    """Reclaimed results by tool call id, in the order they were reclaimed.

    The archive of a loaded session stays one unparsed block until it is first read; the load checks
    its exact length, and a block that turns out unreadable then raises SessionFormatError naming the
    session file.
    """

    def __init__(self) -> None:
        self._records: dict[str, ReclaimedToolResult] = {}
        self._entries: dict[str, str] = {}
        self._text = ""  # a loaded session's text; its archive block is `_text[_start:_end]`
        self._start = self._end = 0
        self._block_count = 0
        self._block_is_lines = False  # format 1: one JSON line per result, rather than a JSON object
        self._source: Any = None

    def __getitem__(self, tool_call_id: str) -> ReclaimedToolResult:
        self._parse_block()
        return self._records[tool_call_id]

    def __iter__(self) -> Iterator[str]:
        self._parse_block()
        return iter(self._records)

    def __len__(self) -> int:
        return self._block_count + len(self._records)

    def __contains__(self, tool_call_id: object) -> bool:
        self._parse_block()
        return tool_call_id in self._records

    def add(self, record: ReclaimedToolResult, original: str) -> None:
        self._records[record.tool_call_id] = record
        self._entries[record.tool_call_id] = _entry(record, original)

    def original(self, tool_call_id: str) -> str | None:
        if tool_call_id not in self:
            return None
        return _entry_original(self._entries[tool_call_id])

    def originals(self) -> dict[str, str]:
        """Every original by id (decodes them all: for offloading and exports, not for listing)."""
        self._parse_block()
        return {k: _entry_original(entry) for k, entry in self._entries.items()}

    def pop(self, tool_call_id: str) -> str:
        """Remove a record and return its original (used when it is restored into the context)."""
        original = self.original(tool_call_id)
        if original is None:
            raise KeyError(tool_call_id)
        del self._records[tool_call_id]
        del self._entries[tool_call_id]
        return original

    def clear(self) -> None:
        self._records.clear()
        self._entries.clear()
        self._text, self._start, self._end, self._block_count = "", 0, 0, 0

    def _fail(self, reason: str) -> SessionFormatError:
        return SessionFormatError(self._source, reason)

    def _parse_block(self) -> None:
        if not self._block_count:
            return
        parsed = self._parse_lines() if self._block_is_lines else self._parse_object()
        records = {k: record for k, (record, _) in parsed.items()}
        entries = {k: entry for k, (_, entry) in parsed.items()}
        records.update(self._records)
        entries.update(self._entries)
        self._records, self._entries = records, entries
        self._text, self._start, self._end, self._block_count = "", 0, 0, 0

    def _parse_object(self) -> dict[str, tuple[ReclaimedToolResult, str]]:
        """Format 2's block, entry by entry, keeping each entry's text as it is (nothing re-encoded)."""
        text, position, end = self._text, self._start + 1, self._end - 1  # inside the braces
        parsed: dict[str, tuple[ReclaimedToolResult, str]] = {}
        count = 0  # entries, a repeated id among them (a later one wins, as in any JSON reader)
        while position < end:
            count += 1
            try:
                tool_call_id, colon = _DECODER.raw_decode(text, position)
                if text[colon] != ":":
                    raise ValueError(f"expected ':' at character {colon - self._start} of the archive")
                data, after = _DECODER.raw_decode(text, colon + 1)
                if text[after] not in ",}" or (text[after] == "}") != (after == end):
                    raise ValueError(f"expected ',' at character {after - self._start} of the archive")
                record, _ = _record(tool_call_id, data)
            except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
                raise self._fail(f"reclaimed-result archive entry {count} is unreadable ({exc})") from None
            parsed[tool_call_id] = (record, text[position:after])
            position = after + 1
        if count != self._block_count:
            raise self._fail(f"the reclaimed-result archive holds {count} results instead of {self._block_count}")
        return parsed

    def _parse_lines(self) -> dict[str, tuple[ReclaimedToolResult, str]]:
        """Format 1's block: one JSON line per result (re-encoded as format 2 entries)."""
        # split on "\n" only: JSON written with ensure_ascii=False may hold U+2028 and friends raw
        chunks = self._text[self._start : self._end].split("\n")
        if chunks[-1] or len(chunks) - 1 != self._block_count:
            raise self._fail(f"the reclaimed-result archive has {len(chunks) - 1} lines instead of {self._block_count}")
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
    def json_chunks(self) -> list[str]:
        """The archive as saved, in pieces to join (no copy of the whole made here): one compact JSON
        object, its entries in the order they were reclaimed."""
        if self._block_is_lines:
            self._parse_block()
        # a loaded block goes as it is, without its closing brace
        chunks = [self._text[self._start : self._end - 1] if self._block_count else "{"]
        separator = "," if self._block_count else ""
        for entry in self._entries.values():
            chunks += (separator, entry)
            separator = ","
        chunks.append("}")
        return chunks

    @classmethod
    def from_json_text(cls, text: str, start: int, end: int, count: int, source: Any = None) -> ReclaimedArchive:
        """An archive over the unparsed object `text[start:end]` (not copied) holding `count` entries,
        parsed on first read. The caller has checked the block's length against the one recorded."""
        if not (text.startswith("{", start) and text.startswith("}", end - 1)) or (count == 0) != (end - start == 2):
            raise SessionFormatError(source, "the archive of reclaimed tool results is damaged; the file was edited")
        archive = cls()
        archive._text, archive._start, archive._end, archive._block_count, archive._source = (
            text,
            start,
            end,
            count,
            source,
        )
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
        archive._text, archive._start, archive._end, archive._source = text, start, len(text), source
        archive._block_count, archive._block_is_lines = count or 0, True
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
