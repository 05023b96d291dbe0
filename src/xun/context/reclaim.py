"""Tier 1, reclaiming: old tool results, and the large arguments of their calls, swapped for recoverable
placeholders, the originals kept in the `ReclaimedArchive`; and restoring one, which pins it in place.

Functions over the messages, the archive and the set of pinned ids, which `Conversation` owns; it counts
the rounds, queues the search index's writes and reports the result.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from xun.context.message_list import MessageList
from xun.context.messages import Message, RawOpenAIMessage, content_text
from xun.context.reclaimed import (
    ARGUMENTS,
    ARGUMENTS_PREVIEW,
    ARGUMENTS_RECLAIM_AT,
    ReclaimedArchive,
    ReclaimedToolResult,
    arguments_id,
    arguments_placeholder,
)

PLACEHOLDER = (
    "[Compacted, ID: {id}. If this content is still needed, call extract_compacted_tool_result "
    "with this ID or re-run the tool.]"
)
_PLACEHOLDER_HEAD, _PLACEHOLDER_TAIL = PLACEHOLDER.split("{id}")


def _named_call(assistant: dict[str, Any], call_id: str) -> tuple[str, str]:
    """Name and arguments of the call `call_id` among an assistant message's tool calls, or two ""."""
    for call in assistant.get("tool_calls") or ():
        if call.get("id") == call_id:
            function = call.get("function") or {}
            return str(function.get("name", "")), str(function.get("arguments", ""))
    return "", ""


def with_arguments(assistant: dict[str, Any], call_id: str, arguments: str) -> dict[str, Any]:
    """A copy of an assistant message whose call `call_id` has `arguments` (the message itself is untouched:
    messages are values)."""
    calls = [
        {**call, "function": {**(call.get("function") or {}), "arguments": arguments}}
        if call.get("id") == call_id
        else call
        for call in assistant.get("tool_calls") or ()
    ]
    return {**assistant, "tool_calls": calls}


def pinnable(messages: Iterable[Message]) -> Iterator[str]:
    """The ids a restore can pin among `messages`: their tool results', and their calls' arguments'."""
    for m in messages:
        if isinstance(m, RawOpenAIMessage):
            if m.raw.get("role") == "tool":
                yield str(m.raw.get("tool_call_id"))
            else:
                yield from (arguments_id(str(call.get("id", ""))) for call in m.raw.get("tool_calls") or ())


def _caller_index(messages: Sequence[Message], index: int) -> int | None:
    """The assistant message that made the call whose result is at `index` (the nearest before it)."""
    for j in range(index - 1, -1, -1):
        message = messages[j]
        if not isinstance(message, RawOpenAIMessage) or message.raw.get("role") == "tool":
            continue
        return j
    return None


def _current_round(messages: Sequence[Message]) -> int:
    """The index of the assistant message whose calls are the newest round when the conversation ends
    in it or its results (a turn at work), else -1: its arguments are never reclaimed."""
    for j in range(len(messages) - 1, -1, -1):
        message = messages[j]
        if type(message) is not RawOpenAIMessage:
            return -1
        raw = message.raw
        if raw.get("role") != "tool":
            return j if raw.get("tool_calls") else -1
    return -1


class ReclaimPass(NamedTuple):
    """What one pass of `reclaim` did: the archive ids it reclaimed (results and arguments), how many of
    them are arguments, the (record, original) pairs to index, and where the next pass starts."""

    reclaimed: list[str]
    arguments_count: int
    indexed: list[tuple[ReclaimedToolResult, str]]
    frontier: int


def reclaim(
    messages: MessageList, archive: ReclaimedArchive, pinned: set[str], frontier: int, keep_max: int, *, collect: bool
) -> ReclaimPass:
    """Replace all but the newest `keep_max` tool results with placeholders, and the large arguments of
    their calls (`Conversation.reclaim_tool_results` says which); scans from `frontier`, or from the first
    message changed since. With `collect` the records and originals are returned to index."""
    start = min(frontier, messages.low_water, len(messages))
    cutoff = len(messages)  # the oldest kept tool result; everything before it may be reclaimed
    seen = 0
    for i in range(len(messages) - 1, start - 1, -1):
        message = messages[i]
        if type(message) is RawOpenAIMessage and message.raw.get("role") == "tool":
            if seen == keep_max:
                break
            seen += 1
            cutoff = i
    reclaimed: list[str] = []
    arguments_count = 0
    indexed: list[tuple[ReclaimedToolResult, str]] = []
    now = time.time()
    if seen == keep_max:
        placeholders: dict[int, Message] = {}
        current = _current_round(messages)
        caller: int | None = None  # the assistant message nearest before i, once one is passed
        for i in range(start, cutoff):
            message = messages[i]
            if type(message) is not RawOpenAIMessage:
                continue
            raw = message.raw
            if raw.get("role") != "tool":
                caller = i
                continue
            call_id = str(raw.get("tool_call_id", ""))
            at = caller if caller is not None else _caller_index(messages, i)
            call = (placeholders.get(at) or messages[at]) if at is not None else None
            name, arguments = _named_call(call.raw, call_id) if type(call) is RawOpenAIMessage else ("", "")
            if at is not None and at != current:
                replaced = _reclaim_arguments(archive, pinned, call, call_id, name, arguments, now)  # type: ignore[arg-type]
                if replaced is not None:
                    record, placeholders[at] = replaced
                    reclaimed.append(record.tool_call_id)
                    arguments_count += 1
                    if collect:
                        indexed.append((record, arguments))
            if call_id in pinned:
                continue
            content = raw.get("content")
            text = content if type(content) is str else content_text(content)
            if text.startswith(_PLACEHOLDER_HEAD):
                continue
            placeholder = f"{_PLACEHOLDER_HEAD}{call_id}{_PLACEHOLDER_TAIL}"
            if len(placeholder) >= len(text):
                continue
            record = ReclaimedToolResult(call_id, name, arguments[:ARGUMENTS_PREVIEW], len(text), now)
            archive.add(record, text)
            placeholders[i] = RawOpenAIMessage(raw={**raw, "content": placeholder})
            reclaimed.append(call_id)
            if collect:
                indexed.append((record, text))
        messages.replace_at(placeholders)
        # the round at work is scanned again next time: its arguments may be reclaimed once it is done
        frontier = current if 0 <= current < cutoff else cutoff
    else:
        frontier = start
    messages.low_water = sys.maxsize
    return ReclaimPass(reclaimed, arguments_count, indexed, frontier)


def _reclaim_arguments(
    archive: ReclaimedArchive,
    pinned: set[str],
    call: RawOpenAIMessage,
    call_id: str,
    name: str,
    arguments: str,
    now: float,
) -> tuple[ReclaimedToolResult, RawOpenAIMessage] | None:
    """Archive the arguments of `call_id` and return the record and `call` with their placeholder, or None
    when they stay (short, restored by hand, reclaimed already, or no shorter as a placeholder)."""
    if len(arguments) <= ARGUMENTS_RECLAIM_AT:
        return None
    key = arguments_id(call_id)
    if key in pinned or key in archive:
        return None
    shown = arguments_placeholder(arguments, key)
    if len(shown) >= len(arguments):
        return None
    record = ReclaimedToolResult(key, name, arguments[:ARGUMENTS_PREVIEW], len(arguments), now, ARGUMENTS)
    archive.add(record, arguments)
    return record, RawOpenAIMessage(raw=with_arguments(call.raw, call_id, shown))


def restore(messages: MessageList, archive: ReclaimedArchive, pinned: set[str], toolcall_id: str) -> None:
    """Put the original of `toolcall_id` back in place of its placeholder and pin it there; KeyError for
    an id never reclaimed, ValueError when its message has left the conversation in a summary."""
    if toolcall_id not in archive:
        raise KeyError(f"no reclaimed tool result has the id {toolcall_id!r}")
    record = archive[toolcall_id]
    i = placeholder_index(messages, record)
    if i is None:
        what = "the call" if record.kind == ARGUMENTS else "tool result"
        raise ValueError(
            f"{what} {toolcall_id!r} was summarised away; its original is still available by id but "
            "there is no place left in the conversation to restore it to"
        )
    holder = messages[i]
    assert isinstance(holder, RawOpenAIMessage), "a reclaimed id is found only in a raw message"
    raw = holder.raw
    original = archive.pop(toolcall_id)
    if record.kind == ARGUMENTS:
        messages[i] = RawOpenAIMessage(raw=with_arguments(raw, record.call_id, original))
    else:
        messages[i] = RawOpenAIMessage(raw={**raw, "content": original})
    pinned.add(toolcall_id)


def placeholder_index(messages: Sequence[Message], record: ReclaimedToolResult) -> int | None:
    """Where the placeholder of an archived original is now: the tool result's message, or the message
    holding the call whose arguments it is; None when a summary took it out of the conversation."""
    call_id, arguments = record.call_id, record.kind == ARGUMENTS
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if type(message) is not RawOpenAIMessage:
            continue
        raw = message.raw
        if arguments:
            if raw.get("role") != "tool" and any(call.get("id") == call_id for call in raw.get("tool_calls") or ()):
                return i
        elif raw.get("role") == "tool" and raw.get("tool_call_id") == call_id:
            return i
    return None


def reclaimed_in_context(messages: Sequence[Message], archive: ReclaimedArchive) -> set[str]:
    """The archive ids whose placeholder is still in the conversation (restorable); the others were
    summarised away after they were reclaimed (still readable by id)."""
    found: set[str] = set()
    for message in messages:
        if type(message) is not RawOpenAIMessage:
            continue
        raw = message.raw
        if raw.get("role") == "tool":
            key = str(raw.get("tool_call_id", ""))
            if key in archive:
                found.add(key)
            continue
        for call in raw.get("tool_calls") or ():
            key = arguments_id(str(call.get("id", "")))
            if key in archive:
                found.add(key)
    return found
