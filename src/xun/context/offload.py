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
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from xun.base.atomic import fsync_dir, open_regular, private_dirs
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


@dataclass(slots=True)
class OffloadSection:
    when: str
    conversation_id: str = ""
    entries: list[OffloadEntry] = field(default_factory=list)


def utc_now_iso() -> str:
    """To the millisecond: a section's heading time names it, and a long turn made several summaries in
    one second (the transcript then showed the first one's turns for each: trial F #20)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
    private_dirs(target.parent)
    text = render_section(transcript_entries(messages, reclaimed), when or utc_now_iso(), conversation_id)
    created = not target.exists()
    # O_NONBLOCK: a FIFO planted where the log should be fails the open instead of blocking it;
    # O_NOFOLLOW: so does a link (to ~/.bashrc, say), which would have the transcript appended to it
    try:
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "the offload log is a symbolic link, which xun does not follow in its "
                          "own folder; remove it", str(target)) from None
        raise
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
            current.text += "\n" + line[len(INDENT):]
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
    current: OffloadEntry | None = None
    with io.TextIOWrapper(open_regular(path), encoding="utf-8", errors="replace", newline="") as handle:  # keep "\r"
        text = handle.read()
    for line in text.split("\n"):
        if line.startswith(HEADING):
            sections.append(OffloadSection(when=line[len(HEADING):].strip()))
            current = None
            continue
        if not sections:
            continue
        if line.startswith(INDENT) and current is not None:
            current.text += "\n" + line[len(INDENT):]
            continue
        if line.startswith("<!-- xun conversation "):
            words = line.split()  # a cut or tampered line may stop after "conversation"
            sections[-1].conversation_id = words[3].rstrip(",") if len(words) > 3 else ""
            continue
        match = _ENTRY.match(line)
        if match:
            current = OffloadEntry(match.group(1), match.group(3), match.group(2) or "")
            sections[-1].entries.append(current)
        elif line.strip():
            current = None
    return sections
