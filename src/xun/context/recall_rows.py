"""The rows of the recall index: what it holds of an offload log's entry or a reclaimed original (its
text cut at INDEXED_CHARS, its role and tool, a key that makes writing it twice add nothing)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from xun.context import offload
from xun.context.offload import OffloadEntry
from xun.context.reclaimed import ARGUMENTS, ReclaimedToolResult

if TYPE_CHECKING:
    from xun.context.conversation import Conversation

ROLES = {"Human": "user", "AI": "assistant", "AI reasoning": "reasoning", "AI tool call": "tool_call", "Tool": "tool"}
Row = tuple[Any, ...]
"""One row of `entries` without its id, in `_ROW_COLUMNS` order."""


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def epoch(when: str) -> float:
    try:
        parsed = datetime.fromisoformat(when.strip().replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def clean(text: str) -> str:
    """Text SQLite can store: lone surrogates (from undecodable input) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _split_detail(detail: str) -> tuple[str, str]:
    """Tool name and call id from an offload detail such as "read_file, id call_1, reclaimed earlier"."""
    tool, call_id = "", ""
    for part in detail.split(", "):
        if part.startswith("id "):
            call_id = part[3:]
        elif part != "reclaimed earlier" and not tool:
            tool = part
    return tool, call_id


INDEXED_CHARS = 1 << 20
"""The most of one entry's text the index holds (its first 1,048,576 characters, then `CUT_NOTE`): words
past them are not searchable, and the offload log or session file keeps the whole text. A planted 300 MB
entry cost the index 300 MB and a rebuild gigabytes of memory."""
CUT_NOTE = (
    f"\n[… the search index keeps only the first {INDEXED_CHARS:,} characters of an entry; "
    "its offload log or session file has it whole]"
)


def _indexed(text: str, cut: bool = False) -> str:
    """An entry's text as the index holds it (cut at INDEXED_CHARS, with `CUT_NOTE`), ready for SQLite."""
    if cut or len(text) > INDEXED_CHARS:
        text = text[:INDEXED_CHARS] + CUT_NOTE
    return clean(text)


def offload_row(session: str, when: str, position: int, entry: OffloadEntry) -> Row:
    """The row of an offload section's entry at `position`. The key is the content's, so writing the same
    section twice (the incremental index, then a rebuild that reads it back) adds nothing."""
    session, speaker, detail = clean(session), clean(entry.speaker), clean(entry.detail)
    text = _indexed(entry.text, entry.cut)
    tool, call_id = _split_detail(detail)
    key = "o:" + _digest(session, when, str(position), speaker, detail, text)
    return (
        key,
        "offload",
        session,
        epoch(when),
        ROLES.get(speaker, speaker.lower()),
        speaker,
        tool,
        call_id,
        "",
        detail,
        position,
        text,
    )


def offload_rows(session: str, when: str, entries: Sequence[OffloadEntry]) -> list[Row]:
    """Rows for the entries of one offload section (`offload_row`)."""
    return [offload_row(session, when, position, entry) for position, entry in enumerate(entries)]


def reclaimed_row(session: str, record: ReclaimedToolResult, original: str, fallback_time: float = 0.0) -> Row:
    """A reclaimed original's row: a tool result, or a call's arguments (role "tool_call"); its
    `tool_call_id` is the archive id, the one a restore takes."""
    call_id = clean(record.tool_call_id)
    at = record.reclaimed_at or fallback_time
    arguments = record.kind == ARGUMENTS  # then the text is the arguments: no preview of them beside it
    role, speaker = ("tool_call", "AI tool call") if arguments else ("tool", "Tool")
    return (
        reclaimed_key(session, call_id),
        "reclaimed",
        session,
        at,
        role,
        speaker,
        clean(record.tool_name),
        call_id,
        "" if arguments else clean(record.arguments),
        "",
        0,
        _indexed(original),
    )


def as_logged(entries: Iterable[OffloadEntry]) -> list[OffloadEntry]:
    """The entries as `read_offload_log` will read them back from the log, so the incremental index and
    a rebuild hold the same rows: the first line is parsed with the log's own pattern, and an entry the
    log's reader cannot parse (an unknown speaker) is left out, as a rebuild would leave it out."""
    out = []
    for entry in entries:
        head, newline, rest = entry.text.partition("\n")
        match = offload._ENTRY.match(offload._entry(entry.speaker, head, entry.detail))
        if match is not None:
            out.append(OffloadEntry(match.group(1), match.group(3) + newline + rest, match.group(2) or ""))
    return out


def reclaimed_rows(conversation: Conversation) -> list[Row]:
    """The rows of a session's reclaimed originals."""
    archive = conversation.reclaimed_results
    originals = archive.originals()
    session = conversation.conversation_id
    return [
        reclaimed_row(session, record, originals[call_id], conversation.created_at)
        for call_id, record in archive.items()
    ]


def reclaimed_key(session: str, tool_call_id: str) -> str:
    """The key of a reclaimed original's row: one row per session and archive id."""
    return "r:" + _digest(clean(session), clean(tool_call_id))
