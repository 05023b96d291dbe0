"""The conversation as a transcript: what the chat pane shows on resume and what `/render` exports.

A plain walk over `Conversation.messages` (no Textual here): user messages, assistant replies with
their reasoning, each tool call joined with its result, and the summaries that replaced older turns.
What a summary took out of the context comes back from the offload log: each summary is preceded by an
`OffloadedItem` that `offloaded_items` turns into the turns it replaced (marked `summarised`), read only
when they are shown (the chat loads them as the user scrolls up).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xun.base import paths

if TYPE_CHECKING:
    from xun.context.messages import Message
    from xun.context.conversation import Conversation
    from xun.context.offload import OffloadSection

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


def _streamed_section(path: str, item: OffloadedItem) -> OffloadSection | None:
    """`_pick` over the log read as a stream: memory holds the section being read and the best match so far,
    never the log (a session of weeks has a log of tens of megabytes, and one summary is a part of it).
    The sections before the first one headed with the item's time are skipped unread."""
    from xun.context.offload import heading_offset, read_section  # only when summarised turns are shown

    start = heading_offset(path, item.when) if item.when is not None else None
    if start is not None:
        if item.repeat == 0:  # the first section headed with its time: read in one piece
            section = read_section(path, start)
            if section is not None and section.conversation_id in ("", item.conversation_id):
                return section
        section, by_when = _stream_pick(path, item, start)
        if by_when:
            return section
    return _stream_pick(path, item, 0)[0]


def _stream_pick(path: str, item: OffloadedItem, start: int) -> tuple[OffloadSection | None, bool]:
    """`_pick` over the sections from byte `start` on; whether it was found by its heading time."""
    from xun.context.offload import OffloadSection, iter_offload_log

    by_when: OffloadSection | None = None
    by_ordinal: OffloadSection | None = None
    same = own = 0

    def close(section: OffloadSection | None) -> bool:
        """Keep `section` if it matches (its conversation id is known once it is read); True when it is the one."""
        nonlocal by_when, by_ordinal, same, own
        if section is None:
            return False
        if (
            item.when is not None
            and section.when == item.when
            and section.conversation_id in ("", item.conversation_id)
        ):
            if same <= item.repeat:
                by_when = section  # the repeat-th, or the last while there are fewer
            same += 1
            if same > item.repeat:
                return True
        if by_when is None and section.conversation_id == item.conversation_id:
            if own == item.ordinal:
                by_ordinal = section
            own += 1
        return False

    current: OffloadSection | None = None
    for part in iter_offload_log(path, start=start):
        if isinstance(part, OffloadSection):
            if close(current):
                return by_when, True
            current = part
        elif current is not None:
            current.entries.append(part)
    close(current)
    return (by_when, True) if same else (by_ordinal, False)


def _section_of(item: OffloadedItem, parsed: dict[str, list[OffloadSection]] | None = None) -> OffloadSection | None:
    """The item's section: from `parsed` (each log parsed once, for a caller reading many sections), else
    read as a stream. No log stays in memory after the call."""
    if parsed is None:
        return _streamed_section(item.path, item)
    if item.path not in parsed:
        from xun.context.offload import read_offload_log  # only when summarised turns are shown

        parsed[item.path] = read_offload_log(item.path)
    return _pick(parsed[item.path], item)


MAX_OFFLOAD_LOG_BYTES = 256 * 1024 * 1024
"""The largest offload log read back on scroll-up (it is read whole; a 3 GB file took 6.2 GB)."""


def offloaded_items(
    item: OffloadedItem,
    workdir: str | os.PathLike[str] | None = None,
    parsed: dict[str, list[OffloadSection]] | None = None,
) -> list[Item]:
    """The summarised turns of one offload, as transcript items marked `summarised` (`parsed`: see
    `_section_of`).

    Raises OSError when the log cannot be read and LookupError when its section is not there."""
    path = Path(item.path)
    if not path.is_absolute() and workdir is not None:
        path = Path(workdir) / path
    folder = paths.offload_dir("/").name  # the app's transcript does not know the workspace: the folder's name
    real = path.resolve()
    if real.parent.name != folder or real.suffix != ".md":  # a tampered file_path: never read what it names
        raise OSError(f"{item.path} is not an offload log (.xun/{folder}/*.md); only those are read")
    if real.stat().st_size > MAX_OFFLOAD_LOG_BYTES:
        raise OSError(f"the offload log {item.path} is over {MAX_OFFLOAD_LOG_BYTES // 2**20} MB; open it in an editor")
    section = _section_of(replace(item, path=str(path)), parsed)
    if section is None:
        raise LookupError(f"the offload log {item.path} has no section for this summary")
    items: list[Item] = []
    calls: dict[str, int] = {}
    reasoning = ""
    entries = section.entries
    if item.carried_head and entries and entries[0].speaker == "Human":
        entries = entries[1:]  # the copy of the turn's prompt the summary before carried: it is shown above
    for entry in entries:
        if entry.speaker == "Human":
            items.append(UserItem(entry.text, summarised=True))
        elif entry.speaker == "AI reasoning":
            reasoning += entry.text
        elif entry.speaker == "AI":
            items.append(AssistantItem(entry.text, reasoning, summarised=True))
            reasoning = ""
        elif entry.speaker == "AI tool call":
            if reasoning:
                items.append(AssistantItem("", reasoning, summarised=True))
                reasoning = ""
            match = _TOOL_DETAIL.match(entry.detail)
            name, call_id = (match["name"] or "", match["id"]) if match else (entry.detail, "")
            calls[call_id] = len(items)
            items.append(ToolItem(call_id, name, entry.text, None, None, summarised=True))
        elif entry.speaker == "Tool":
            match = _TOOL_DETAIL.match(entry.detail)
            call_id = match["id"] if match else ""
            at = calls.get(call_id)
            if at is not None:
                call = items[at]
                assert isinstance(call, ToolItem)
                items[at] = ToolItem(
                    call.call_id, call.name, call.arguments, entry.text, len(entry.text), summarised=True
                )
    if reasoning:
        items.append(AssistantItem("", reasoning, summarised=True))
    return items


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
                problems.append(f"{item.condensed} summarised messages could not be read from {item.path}: {exc}")
        else:
            out.append(item)
    return out, problems


def blocks_in(item: OffloadedItem, workdir: str | os.PathLike[str] | None = None) -> int:
    """How many blocks the chat shows for the turns of `item` (a notice when they cannot be read)."""
    items, problems = whole_history([item], workdir)
    return len(items) + len(problems)
