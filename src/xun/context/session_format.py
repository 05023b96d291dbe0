"""The session file: its format versions, its layout, and reading it back whole or in part.

A session is one JSON document (format 2) whose archive of reclaimed originals comes last, its length
recorded at the opening, so a reader takes the session without parsing the archive and a resume reads the
newest messages without reading the rest. Older formats (1: JSON lines; 0: one plain document; a bare list
of messages) are still read. Every problem is a `SessionFormatError` naming the file, and nothing here
changes a conversation: `Conversation.loads` takes the attributes `parse_session_text` returns, or none.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from xun.base.atomic import open_regular
from xun.base.errors import SessionFormatError
from xun.base.timestamps import sane_timestamp
from xun.context.compaction_results import CompactionCounter
from xun.context.estimates import DEFAULT_TOKENS_PER_CHAR
from xun.context.message_list import MessageList
from xun.context.messages import (
    Message,
    MessageFormatError,
    RawOpenAIMessage,
    SystemPrompt,
    check_raw,
    message_from_json,
)
from xun.context.archive_store import ARCHIVE_BYTES, SessionFile
from xun.context.prompt_cache import PromptCacheRecord
from xun.context.reclaimed import ReclaimedArchive
from xun.context.summarise import SummarizationEvent

FORMAT_VERSION = 2
FORMAT_2_OPENING = re.compile(r'\{"format_version":(\d+),"compacted_count":(\d+),"compacted_chars":(\d+),')
"""How a session file of format 2 (or newer) opens."""
_ARCHIVE_KEY = ',"compacted_toolcalls":'
_DECODER = json.JSONDecoder()
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def is_session_id(text: object) -> bool:
    """Whether `text` can name the session's files (`<id>.json`, `<id>.md`): letters, digits, '_', '-'
    and '.', no '..', so an id read from a file can never name a path outside its folder."""
    return isinstance(text, str) and bool(_SESSION_ID.match(text)) and ".." not in text


def session_text(head: dict[str, Any], archive: ReclaimedArchive, ensure_ascii: bool) -> str:
    """The session file's text (format 2), whole (`session_chunks`)."""
    return "".join(session_chunks(head, archive, ensure_ascii))


def session_chunks(head: dict[str, Any], archive: ReclaimedArchive, ensure_ascii: bool) -> Iterator[str]:
    """The session file's text (format 2) in pieces: the layout, then `head` (the session but its archive,
    as `Conversation` makes it), then the archive of reclaimed originals, last, read from its file as the
    pieces are taken. With `ensure_ascii` every non-ASCII character (lone surrogates too) is written as a
    JSON escape."""
    chunks, chars, size = archive.json_parts(ensure_ascii)
    layout = {
        "format_version": FORMAT_VERSION,
        "compacted_count": len(archive),
        "compacted_chars": chars,
        "compacted_bytes": size,
    }
    with _gc_paused():
        text = json.dumps({**layout, **head}, ensure_ascii=ensure_ascii, separators=(",", ":"))
    yield text[:-1]
    yield _ARCHIVE_KEY
    del text
    yield from chunks
    yield "}"


def parse_session_text(
    text: str | bytes, source: str | os.PathLike[str] | None = None, file: SessionFile | None = None
) -> dict[str, Any]:
    """The `Conversation` attributes of session text (this format or an older one); raises
    SessionFormatError on any problem. With `file`, the session file `text` was read from (held open),
    the archive reads its originals from the file, not from `text`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SessionFormatError(source, f"not UTF-8 text ({exc})") from None
    with _gc_paused(long_lived=True):
        data, archive = read_session(text, source)
        if archive is not None and file is not None:
            archive.read_from(file, text)
        state = parse_session(data, archive, source)
        del data  # its containers go now, before the collector is back and would walk them all
    return state


def parse_session_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `Conversation` attributes of the session file at `path`, held open for its archive; raises
    SessionFormatError on any problem. A format 2 file is read up to its archive, which is parsed from
    the file a piece at a time when first needed: the archive is most of a long session's file."""
    try:
        data, file, partial = SessionFile.read_until_archive(path)
        if partial:
            state = _parse_up_to_archive(data, file, path)
            if state is not None:
                return state
            file.close()  # laid out otherwise than its opening says: read whole, as any other file
            data, file = SessionFile.read_whole(path)
    except OSError as exc:
        raise SessionFormatError(path, f"cannot read the file ({exc.strerror or exc})") from None
    return parse_session_text(data, path, file)


def _parse_up_to_archive(data: bytes, file: SessionFile, path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """`parse_session_file` of what comes before the archive, the archive left in `file`; None when the
    file does not hold together as its opening says (a character cut, a head or an archive otherwise)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    with _gc_paused(long_lived=True):
        head = session_head(text)
        if head is None or head[1] != len(text):
            return None
        archive = ReclaimedArchive.from_file(file, len(data), head[0], path)  # bytes, not `head[1]`'s characters
        return None if archive is None else parse_session(head[0], archive, path)


@contextlib.contextmanager
def _gc_paused(long_lived: bool = False) -> Iterator[None]:
    """Building or parsing a large session makes no reference cycles; pausing the collector saves it
    from re-walking every live object many times over.

    With `long_lived` (a loaded session, kept as long as it is open), what was made goes straight to the
    collector's oldest generation (a freeze, then an unfreeze) rather than being walked by the next young
    collection and then the middle one; not when something else has frozen objects (the app does), whose
    freeze an unfreeze would undo.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if long_lived and not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _parse_messages(items: list[Any], fail: Callable[[str], SessionFormatError]) -> list[Message]:
    """Typed messages from their stored forms; replies and tool results (most of them) inline, with
    their tool calls checked (`check_raw`), other messages through `message_from_json`."""
    raw_class = RawOpenAIMessage
    try:
        return [
            raw_class(
                check_raw(raw) if "tool_calls" in raw or raw.get("tool_call_id", "").__class__ is not str else raw
            )
            if m.__class__ is dict
            and m.get("kind") == "raw"
            and (raw := m["raw"]).__class__ is dict
            and raw.get("role").__class__ is str
            else message_from_json(m)
            for m in items
        ]
    except (MessageFormatError, KeyError) as exc:
        for index, item in enumerate(items):
            try:
                message_from_json(item)
            except MessageFormatError as error:
                raise fail(f"message {index}: {error}") from None
        raise fail(f"a message is malformed ({exc!r})") from None


UNANSWERED_AT_LOAD = (
    "[Cancelled] This session was saved without this tool call's result (xun stopped while it "
    "waited or ran): it did not run, or was cut off while running; check its effects before running it again."
)
"""The result a loaded session gives a call that has none: servers refuse a call without its result (HTTP
400), so such a session would fail on every prompt, and a front end would show the call running for ever."""


def answer_unanswered_calls(messages: list[Message]) -> list[int]:
    """Give every tool call without a result one (`UNANSWERED_AT_LOAD`), after the results its reply has;
    returns the indices of the results put in, in the final list."""
    inserted: list[int] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        calls = (
            message.raw.get("tool_calls")
            if isinstance(message, RawOpenAIMessage) and message.role == "assistant"
            else None
        )
        if not calls:
            continue
        answered = set()
        while (
            index < len(messages)
            and isinstance(message := messages[index], RawOpenAIMessage)
            and message.role == "tool"
        ):
            answered.add(message.raw.get("tool_call_id"))
            index += 1
        for call in calls:
            ident = call.get("id") if isinstance(call, dict) else None
            if isinstance(ident, str) and ident and ident not in answered:
                messages.insert(
                    index, RawOpenAIMessage(raw={"role": "tool", "tool_call_id": ident, "content": UNANSWERED_AT_LOAD})
                )
                inserted.append(index)
                index += 1
    return inserted


def session_head(
    text: str, stop_after: str | None = None, give_up_at: str | None = None
) -> tuple[dict[str, Any], int] | None:
    """Format 2's session but its archive, parsed key by key up to the archive, and where the archive
    starts; None when `text` does not open as format 2 does. Does not check the archive. With
    `stop_after`, only the keys up to that one (and where the next begins), None when it never comes, or
    when the key `give_up_at` comes first (it is not parsed)."""
    layout = FORMAT_2_OPENING.match(text)
    if layout is None:
        return None
    data: dict[str, Any] = {
        "format_version": int(layout[1]),
        "compacted_count": int(layout[2]),
        "compacted_chars": int(layout[3]),
    }
    position = layout.end()
    try:
        while True:
            key, colon = _DECODER.raw_decode(text, position)
            if not isinstance(key, str) or text[colon] != ":":
                return None
            if key == "compacted_toolcalls":
                return data, colon + 1
            if key == give_up_at:
                return None
            data[key], position = _DECODER.raw_decode(text, colon + 1)
            if key == stop_after:
                return data, position
            if text[position] != ",":
                return None
            position += 1
    except (ValueError, IndexError, RecursionError):
        return None


_MESSAGE_OPENING = '{"kind":"'
"""How every stored message opens (`Message.to_json` puts its kind first)."""
_MESSAGES_KEY = ',"messages":['
FORMAT_2_BYTES = re.compile(ARCHIVE_BYTES.pattern.decode())
"""How a session file that records its archive's length in bytes opens (a resume reads its end first)."""
NEWEST_READ = 1 << 16
"""What `read_newest_messages` reads of the opening of a session file at first (all but the messages and the
archive must be in it: the piece doubles until they are, up to NEWEST_READ_MAX)."""
NEWEST_TAIL_READ = 1 << 16
"""What it reads of the end of the messages at first: the piece grows fourfold while the newest messages are
not whole in it, up to NEWEST_READ_MAX."""
NEWEST_READ_MAX = 1 << 24


def _messages_head(text: str) -> tuple[str, int, int] | None:
    """The session id, the number of messages and where their list opens (its "["), from the opening of
    session text whose messages come last but the archive; None for another layout."""
    head = session_head(text, stop_after="message_count", give_up_at="messages")
    if head is None:
        return None
    data, position = head
    total, ident = data.get("message_count"), data.get("conversation_id")
    if (
        not isinstance(total, int)
        or isinstance(total, bool)
        or total < 0
        or not isinstance(ident, str)
        or not text.startswith(_MESSAGES_KEY, position)
    ):
        return None
    return ident, total, position + len(_MESSAGES_KEY) - 1


def _newest_stored(text: str, opening: int, close: int, count: int, total: int) -> list[Any] | None:
    """The newest `count` stored messages (oldest first) of the list that closes at `close` in `text` and opens
    at `opening` (-1: before `text`, a piece of the file's end); None when what is found does not hold together,
    or when `text` ends before they do (a larger piece may hold them).

    A message found from the end is taken only when it closes exactly where the next one opens (or where the
    list closes): a dict nested in a message closes before its message does, so it is never taken for one."""
    found: list[Any] = []
    end = search = close
    try:
        while len(found) < min(count, total):
            at = text.rfind(_MESSAGE_OPENING, opening + 1, search)
            if at <= 0:  # (at 0 nothing before it says whether it opens a message)
                return None
            item, stop = _DECODER.raw_decode(text, at)
            if stop != end or text[at - 1] not in ",[":
                search = at  # inside a message: its own opening is further back
                continue
            found.append(item)
            end = search = at - 1
            if end == opening:
                break
    except (ValueError, RecursionError):
        return None
    if end == opening and len(found) != total:
        return None
    found.reverse()
    return found


def _typed(ident: str, total: int, found: list[Any] | None) -> tuple[str, int, list[Message]] | None:
    if found is None:
        return None
    try:
        return ident, total, _parse_messages(found, lambda reason: SessionFormatError(None, reason))
    except SessionFormatError:
        return None


def newest_messages(text: str, count: int) -> tuple[str, int, list[Message]] | None:
    """The session id, the number of messages, and the newest `count` of them, from session text whose
    messages come last but the archive (as `dumps` writes them), without parsing the others: the stored
    messages are found from the end. None when the text is laid out otherwise or when what is found does not
    hold together (the whole is then read as always); this is a preview, the whole text is read after it."""
    layout = FORMAT_2_OPENING.match(text)
    if layout is None or not text.endswith("}"):
        return None
    archive_key = len(text) - 1 - int(layout[3]) - len(_ARCHIVE_KEY)
    close = archive_key - 1
    if close < 0 or text[close] != "]" or not text.startswith(_ARCHIVE_KEY, archive_key):
        return None
    head = _messages_head(text)
    if head is None:
        return None
    ident, total, opening = head
    return _typed(ident, total, _newest_stored(text, opening, close, count, total))


def read_newest_messages(path: str | os.PathLike[str], count: int) -> tuple[str, int, list[Message]] | None:
    """`newest_messages` of the session file at `path`, reading only its opening and the end of its messages
    (the archive's length in bytes, at its opening, says where they end): a 50,000-message session is 40 MB,
    most of it the archive. None when the file is laid out otherwise or cannot be read (the whole is then read
    as always, and any problem named then)."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            decoder = codecs.getincrementaldecoder("utf-8")()  # (a character cut at a piece's end waits)
            text = decoder.decode(handle.read(NEWEST_READ))
            while True:  # the opening grows while all before the messages is not in it (a long compaction log)
                layout = FORMAT_2_BYTES.match(text)
                if layout is None and len(text) >= 256:  # (the layout's keys are in the first 100 characters)
                    return None
                if layout is not None and (head := _messages_head(text)) is not None:
                    break
                if len(text) >= NEWEST_READ_MAX or handle.tell() >= size:
                    return None
                text += decoder.decode(handle.read(max(len(text), 256)))
            assert layout is not None
            ident, total, opening = head
            list_at = len(text[:opening].encode("utf-8"))  # where the list opens, in bytes
            key_at = size - 1 - int(layout[1]) - len(_ARCHIVE_KEY)
            if key_at <= list_at:
                return None
            piece = NEWEST_TAIL_READ
            while True:
                start = max(key_at - piece, list_at)
                handle.seek(start)
                tail = handle.read(key_at + len(_ARCHIVE_KEY) - start)
                if not tail.endswith(b"]" + _ARCHIVE_KEY.encode()):
                    return None
                cut = 0
                while start > list_at and cut < len(tail) and 0x80 <= tail[cut] < 0xC0:
                    cut += 1  # into the middle of a character: from the next one
                window = tail[cut:].decode("utf-8")
                found = _newest_stored(
                    window, 0 if start == list_at else -1, len(window) - len(_ARCHIVE_KEY) - 1, count, total
                )
                if found is not None or start == list_at or piece >= NEWEST_READ_MAX:
                    return _typed(ident, total, found)
                piece *= 4
    except (OSError, ValueError):  # (UnicodeDecodeError is one)
        return None


def read_session(text: str, source: Any = None) -> tuple[Any, ReclaimedArchive | None]:
    """The parsed session but its archive, and the archive over `text`, not parsed; None when `data`
    holds the archive (format 0, or a format 2 file another tool laid out anew). Raises
    SessionFormatError when `text` is not JSON or its archive is not the length recorded."""
    data: Any
    head = session_head(text)
    if head is not None:
        data, start = head
        end = len(text) - 1
        if end - start == data["compacted_chars"] and text.endswith("}"):
            return data, ReclaimedArchive.from_json_text(text, start, end, data["compacted_count"], source)
    try:  # format 1: the head is the first line, the archive lines follow it
        data, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and data.get("format_version") == 1:
        archive_at = end + 1 if text.startswith("\n", end) else len(text)
        return data, ReclaimedArchive.from_lines(text, archive_at, data.get("compacted_toolcalls") or {}, source)
    if data is not None and not text[end:].strip():
        return data, None
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        raise SessionFormatError(source, f"not valid JSON ({exc}); the file may be truncated or corrupt") from None


def parse_session(data: Any, archive: ReclaimedArchive | None, source: Any) -> dict[str, Any]:
    """Validate a parsed session (current or legacy) into Conversation attributes."""

    def fail(reason: str) -> SessionFormatError:
        return SessionFormatError(source, reason)

    if isinstance(data, list):  # the oldest form: a bare list of OpenAI messages
        data = {"messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise fail("not a xun session (expected an object with a 'messages' list)")
    version = data.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise fail(f"format_version should be a whole number, got {version!r}")
    if version > FORMAT_VERSION:
        raise fail(f"written by a newer xun (format {version}; this one reads up to {FORMAT_VERSION})")
    messages = _parse_messages(data["messages"], fail)
    if SystemPrompt in map(type, messages[1:]):  # the stored kinds make exact classes
        stray = next(i for i, m in enumerate(messages) if i and isinstance(m, SystemPrompt))
        raise fail(f"message {stray}: a system prompt may only be message 0")
    tokens = data.get("tokens_used")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
        raise fail(f"tokens_used should be a whole number or null, got {tokens!r}")
    conversation_id = data.get("conversation_id") or uuid.uuid4().hex
    if not is_session_id(conversation_id):
        raise fail(f"conversation_id should be a file name (letters, digits, '_', '-', '.'), got {conversation_id!r}")
    if archive is not None:
        reclaimed = archive
    else:
        stored = data.get("compacted_toolcalls") or {}
        if not isinstance(stored, dict):
            raise fail("compacted_toolcalls should be an object")
        if version == 0:
            reclaimed = ReclaimedArchive.from_legacy(stored, source)
        else:
            reclaimed = ReclaimedArchive.from_records(stored, data.get("compacted_count"), source)
    try:
        counter = CompactionCounter.from_json(data.get("compaction") or {})
    except ValueError as exc:
        raise fail(str(exc)) from None
    try:
        prompt_cache = PromptCacheRecord.from_json(data.get("prompt_cache") or {})
    except ValueError as exc:
        raise fail(str(exc)) from None
    events: list[SummarizationEvent] = []
    summarizations = data.get("summarizations") or []
    if not isinstance(summarizations, list):
        raise fail("summarizations should be a list of objects")
    for i, event in enumerate(summarizations):
        try:
            if not all(
                isinstance(event.get(key), (str, type(None))) for key in ("file_path", "warning", "offload_when")
            ):
                raise TypeError("file_path, warning and offload_when should be text or null")
            events.append(
                SummarizationEvent(
                    cutoff_index=int(event["cutoff_index"]),
                    summary_message=str(event["summary_message"]),
                    file_path=event.get("file_path"),
                    time=sane_timestamp(event.get("time")),
                    condensed_count=int(event.get("condensed_count") or 0),
                    kept_count=int(event.get("kept_count") or 0),
                    warning=event.get("warning"),
                    offload_when=event.get("offload_when"),
                    carried=event.get("carried") is True,
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise fail(f"summarization event {i} is malformed ({exc!r})") from None
    log = data.get("compaction_log") or []
    kept = data.get("kept_originals") or []
    pinned = data.get("pinned_toolcalls") or []
    if not isinstance(log, list) or not all(isinstance(e, dict) for e in log):
        raise fail("compaction_log should be a list of objects")
    if not isinstance(kept, list) or not all(isinstance(e, dict) and isinstance(e.get("messages"), list) for e in kept):
        raise fail("kept_originals should be a list of objects with a 'messages' list")
    if not isinstance(pinned, list) or not all(isinstance(p, str) for p in pinned):
        raise fail("pinned_toolcalls should be a list of ids")
    try:
        kept = [{**e, "messages": [message_from_json(m) for m in e["messages"]]} for e in kept]
    except MessageFormatError as exc:
        raise fail(f"kept_originals: {exc}") from None
    usage = data.get("usage") or {}
    usage_chars = usage.get("chars") if isinstance(usage, dict) else None
    ratio = usage.get("tokens_per_char") if isinstance(usage, dict) else None
    overhead = usage.get("overhead_chars", 0) if isinstance(usage, dict) else 0
    fixed = usage.get("fixed_tokens") if isinstance(usage, dict) else None
    usage_messages = usage.get("messages") if isinstance(usage, dict) else None
    if (
        not isinstance(usage_messages, int)
        or isinstance(usage_messages, bool)
        or not 0 <= usage_messages <= len(messages)
    ):
        usage_messages = len(messages)  # older files: the report was taken as of the saved messages
    if usage_chars is not None and (not isinstance(usage_chars, int) or usage_chars < 0):
        raise fail(f"usage.chars should be a whole number or null, got {usage_chars!r}")
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 10:
        ratio = DEFAULT_TOKENS_PER_CHAR
    created = data.get("created_at")
    title = data.get("title")
    draft = data.get("draft")
    totals = data.get("usage_totals")
    return {
        "title": title if isinstance(title, str) and title.strip() else None,
        "draft": draft if isinstance(draft, str) else "",
        "usage_totals": {
            k: v
            for k, v in totals.items()
            if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        }
        if isinstance(totals, dict)
        else {},
        "messages": MessageList(messages),
        "conversation_id": conversation_id,
        "total_tokens": tokens,
        "usage_chars": usage_chars if tokens is not None else None,
        "tokens_per_char": float(ratio),
        "overhead_chars": overhead
        if isinstance(overhead, int) and not isinstance(overhead, bool) and overhead >= 0
        else 0,
        "fixed_tokens": fixed
        if isinstance(fixed, int) and not isinstance(fixed, bool) and abs(fixed) < 10_000_000
        else None,
        "usage_messages": usage_messages,
        "compaction_counter": counter,
        "prompt_cache": prompt_cache,
        "_reclaimed": reclaimed,
        "_pinned": set(pinned),
        "summarizations": events,
        "compaction_log": log,
        "kept_originals": kept,
        "created_at": float(created)
        if isinstance(created, (int, float)) and not isinstance(created, bool)
        else time.time(),
    }
