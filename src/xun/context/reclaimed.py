"""The archive of reclaimed tool results: what tier 1 took out of the context, kept for recovery.

Each result is kept as the JSON line it is saved as (`{"id", "tool", "arguments", "chars",
"reclaimed_at", "original"}`), encoded once when it is reclaimed. A session file holds these lines after
its head line, and a loaded session keeps them as one unparsed block until the archive is first read,
so saving and loading a long session does not re-encode or re-decode thousands of large tool outputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from xun.base.errors import SessionFormatError

ARGUMENTS_PREVIEW = 200


@dataclass(frozen=True, slots=True)
class ReclaimedToolResult:
    """What the recoverable-results list shows about one reclaimed result (not the original)."""

    tool_call_id: str
    tool_name: str = ""
    arguments: str = ""
    chars: int = 0
    reclaimed_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool_name, "arguments": self.arguments, "chars": self.chars, "reclaimed_at": self.reclaimed_at}

    @classmethod
    def from_json(cls, tool_call_id: str, data: dict[str, Any]) -> ReclaimedToolResult:
        """Raises TypeError or ValueError on a malformed record."""
        return cls(
            tool_call_id,
            str(data.get("tool", "")),
            str(data.get("arguments", "")),
            int(data.get("chars", 0)),
            float(data.get("reclaimed_at") or 0.0),
        )


def _line(record: ReclaimedToolResult, original: str) -> str:
    return json.dumps({"id": record.tool_call_id, **record.to_json(), "original": original}, ensure_ascii=False) + "\n"


class ReclaimedArchive(Mapping[str, ReclaimedToolResult]):
    """Reclaimed results by tool call id, in the order they were reclaimed.

    Lines loaded from a session stay one unparsed block until the archive is first read; the load
    checks their exact length, and a line that turns out unreadable then raises
    SessionFormatError naming the session file.
    """

    def __init__(self) -> None:
        self._records: dict[str, ReclaimedToolResult] = {}
        self._lines: dict[str, str] = {}
        self._text = ""  # a loaded session's text; its archive lines start at `_start`
        self._start = 0
        self._block_count = 0
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
        self._lines[record.tool_call_id] = _line(record, original)

    def original(self, tool_call_id: str) -> str | None:
        if tool_call_id not in self:
            return None
        return json.loads(self._lines[tool_call_id])["original"]

    def originals(self) -> dict[str, str]:
        """Every original by id (decodes them all: for offloading and exports, not for listing)."""
        self._parse_block()
        return {k: json.loads(line)["original"] for k, line in self._lines.items()}

    def pop(self, tool_call_id: str) -> str:
        """Remove a record and return its original (used when it is restored into the context)."""
        original = self.original(tool_call_id)
        if original is None:
            raise KeyError(tool_call_id)
        del self._records[tool_call_id]
        del self._lines[tool_call_id]
        return original

    def clear(self) -> None:
        self._records.clear()
        self._lines.clear()
        self._text, self._start, self._block_count = "", 0, 0

    def _parse_block(self) -> None:
        if not self._block_count:
            return
        records: dict[str, ReclaimedToolResult] = {}
        lines: dict[str, str] = {}
        # split on "\n" only: JSON written with ensure_ascii=False may hold U+2028 and friends raw
        chunks = self._text[self._start:].split("\n")
        if chunks[-1] or len(chunks) - 1 != self._block_count:
            raise SessionFormatError(
                self._source, f"the reclaimed-result archive has {len(chunks) - 1} lines instead of {self._block_count}"
            )
        del chunks[-1]
        for number, line in enumerate((chunk + "\n" for chunk in chunks), 1):
            try:
                data = json.loads(line)
                tool_call_id = data["id"]
                if not isinstance(tool_call_id, str) or not isinstance(data["original"], str):
                    raise TypeError("the id and the original should be strings")
                records[tool_call_id] = ReclaimedToolResult.from_json(tool_call_id, data)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SessionFormatError(self._source, f"reclaimed-result archive line {number} is unreadable ({exc})") from None
            lines[tool_call_id] = line
        records.update(self._records)
        lines.update(self._lines)
        self._records, self._lines = records, lines
        self._text, self._start, self._block_count = "", 0, 0

    # persistence
    def lines(self) -> str:
        """The archive as text: one JSON line per original, in the order they were reclaimed."""
        loaded = self._text[self._start:] if self._block_count else ""
        return loaded + "".join(self._lines.values())

    def summary(self) -> dict[str, int]:
        """What the session's head records about the archive lines that follow it."""
        loaded = len(self._text) - self._start if self._block_count else 0
        return {"archived_lines": len(self), "archive_chars": loaded + sum(map(len, self._lines.values()))}

    @classmethod
    def from_lines(cls, text: str, start: int, summary: Any, source: Any = None) -> ReclaimedArchive:
        """An archive over the unparsed lines of `text` from `start` on (not copied), checked in O(1)
        against the exact length the session's head recorded; the lines are parsed on first read."""

        def whole_number(key: str) -> int:
            value = summary.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SessionFormatError(source, f"compacted_toolcalls.{key} should be a whole number, got {value!r}")
            return value

        count, chars = whole_number("archived_lines"), whole_number("archive_chars")
        if len(text) - start != chars or (count and not text.endswith("\n")):
            raise SessionFormatError(
                source,
                f"the archive of {count} reclaimed tool results after the session's first line is "
                f"{len(text) - start} characters instead of {chars}; the file is truncated or was edited",
            )
        archive = cls()
        archive._text, archive._start, archive._block_count, archive._source = text, start, count, source
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
