"""What fills the context: the conversation split into the parts a person can act on, and what a
reclaim would replace right now. Plain Python (no Textual): the TUI's breakdown and preview screens
show these figures, the tests check them against the conversation's own estimate.

    breakdown = context_breakdown(conversation, threshold=agent.threshold, window=config.model.context_window)
    breakdown.parts        # system prompt, each persistent section (AGENTS.md), summary, user messages,
                           # assistant messages, tool calls, tool results kept, reclaimed placeholders
    breakdown.free         # free space up to the threshold, and beyond it up to the window
    breakdown.largest      # the five largest messages (index into conversation.messages)

    preview = reclaim_preview(conversation, keep_max=config.auto_compact.toolcall_keep_max)
    preview.count, preview.arguments, preview.tokens_saved   # results and call arguments it would replace

Sizes are the engine's estimated characters (`message_length`: content, text, reasoning and tool-call
arguments), so the message parts add up to `conversation.estimated_message_length()` exactly, and the
request's overhead (the tool schemas, `conversation.overhead_chars`, when the engine measured it) is a
part of its own; tokens are characters times `conversation.tokens_per_char`, the ratio calibrated at the
last reported count.
Nothing here changes the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xun.context.reclaimed import ARGUMENTS_RECLAIM_AT, arguments_id, arguments_placeholder
from xun.context.messages import (
    COMPACTED_SYSTEM_PROMPT,
    RawOpenAIMessage,
    SystemPrompt,
    UserMessage,
    content_text,
    message_length,
)

if TYPE_CHECKING:
    from xun.context.conversation import Conversation

__all__ = [
    "ContextBreakdown",
    "FreeSpace",
    "LargeMessage",
    "Part",
    "ReclaimPreview",
    "context_breakdown",
    "arguments_reclaimed",
    "reclaim_preview",
]

PLACEHOLDER_HEAD = "[Compacted, ID: "
LARGEST = 5
PREVIEW_CHARS = 120

# The part kinds, in the order they are shown (persistent sections come right after the system prompt).
(
    SYSTEM,
    SECTION,
    SUMMARY,
    USER,
    ASSISTANT,
    TOOL_CALLS,
    CALL_PLACEHOLDERS,
    TOOL_RESULTS,
    PLACEHOLDERS,
    OTHER,
    OVERHEAD,
) = (
    "system",
    "section",
    "summary",
    "user",
    "assistant",
    "tool_calls",
    "call_placeholders",
    "tool_results",
    "placeholders",
    "other",
    "overhead",
)
LABELS = {
    OVERHEAD: "tool definitions (every request)",
    SYSTEM: "system prompt",
    SUMMARY: "summary",
    USER: "user messages",
    ASSISTANT: "assistant messages",
    TOOL_CALLS: "tool calls",
    CALL_PLACEHOLDERS: "tool calls (reclaimed arguments)",
    TOOL_RESULTS: "tool results (kept)",
    PLACEHOLDERS: "tool results (reclaimed placeholders)",
    OTHER: "other messages",
}


@dataclass(frozen=True, slots=True)
class Part:
    """One slice of the context. `kind` is one of the constants above; `name` tells persistent
    sections apart (e.g. "AGENTS.md")."""

    kind: str
    label: str
    chars: int
    tokens: int
    count: int
    """How many messages (or sections, or tool calls) it is made of."""
    name: str = ""


@dataclass(frozen=True, slots=True)
class FreeSpace:
    """`to_threshold`: tokens until the threshold (0 above it); `to_window`: tokens from the threshold
    (or the estimate, when above it) to the window, None when the window is unknown."""

    to_threshold: int
    to_window: int | None


@dataclass(frozen=True, slots=True)
class LargeMessage:
    """One of the largest messages: its index in `conversation.messages`, what it is, and its start."""

    index: int
    role: str
    """"user", "assistant" or "tool" (an assistant message that only calls tools is "assistant")."""
    chars: int
    tokens: int
    preview: str
    tool: str = ""
    """The tool's name, for a tool result or an assistant message that calls tools."""
    tool_call_id: str = ""
    """The id of a tool result, or of the first call of an assistant message."""
    reclaimed: bool = False


@dataclass(frozen=True, slots=True)
class ContextBreakdown:
    parts: list[Part]
    """The non-empty parts, in display order."""
    free: FreeSpace
    largest: list[LargeMessage]
    chars: int
    """Every part's characters: `conversation.estimated_message_length()` plus the request overhead."""
    estimated_tokens: int
    """`chars` times `tokens_per_char` (the sum of the parts)."""
    live_estimate: int
    """`conversation.estimated_tokens()`: the last reported count plus what changed since."""
    reported_tokens: int | None
    """`usage.total_tokens` of the last model call (None before the first, or since a summary)."""
    tokens_per_char: float
    threshold: int
    window: int | None
    messages: int
    window_source: str | None = None
    """Where the window's figure came from (the config, the server, an overflow error)."""
    fixed_tokens: int | None = None
    """The server's measured cost of a request besides its messages (the tool definitions as it renders
    them, or ignores them): the tool-definition parts share it, and it is added to `chars` times the ratio
    (None: not measured; the definitions are priced by their characters)."""

    def part(self, kind: str, name: str = "") -> Part | None:
        return next((p for p in self.parts if p.kind == kind and p.name == name), None)

    @property
    def used(self) -> int:
        """The tokens the bar is filled with: the larger of the sum of the parts and the live estimate."""
        return max(self.estimated_tokens, self.live_estimate)


@dataclass(frozen=True, slots=True)
class ReclaimPreview:
    """What `Conversation.reclaim_tool_results(keep_max)` would replace now: tool results, and the arguments of
    their calls (ids `<call id>:arguments`)."""

    ids: tuple[str, ...]
    chars_before: int
    """Characters of those results and arguments now."""
    chars_after: int
    """Characters of their placeholders."""
    tokens_per_char: float
    keep_max: int
    tool_results: int
    """Tool results in the conversation (kept, reclaimed or restored)."""
    skipped: tuple[int, int, int] = (0, 0, 0)
    """Of the older results, those left as they are: (placeholders already, restored by hand, shorter than a
    placeholder)."""
    arguments: int = 0
    """Of `count`, the calls whose arguments would be replaced."""

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def results(self) -> int:
        """Of `count`, the tool results."""
        return self.count - self.arguments

    @property
    def what(self) -> str:
        """What would be replaced, in words: "3 tool results and the arguments of 2 calls"."""
        results, arguments = self.results, self.arguments
        parts = [
            f"{results} tool result{'s' if results != 1 else ''}" if results or not arguments else "",
            f"the arguments of {arguments} call{'s' if arguments != 1 else ''}" if arguments else "",
        ]
        return " and ".join(filter(None, parts))

    @property
    def chars_saved(self) -> int:
        return self.chars_before - self.chars_after

    @property
    def tokens_saved(self) -> int:
        return round(self.chars_saved * self.tokens_per_char)

    @property
    def why_nothing(self) -> str:
        """Why a reclaim now would replace nothing ("" when it would replace something)."""
        if self.count:
            return ""
        n = self.tool_results
        if n == 0:
            return "there are no tool results in the context"
        if n <= self.keep_max:
            kept = "the newest tool result is" if self.keep_max == 1 else f"the newest {self.keep_max} tool results are"
            have = "is only 1 tool result" if n == 1 else f"are only {n} tool results"
            return f"{kept} kept, and there {have}"
        parts = [
            f"{k} {what}"
            for k, what in zip(
                self.skipped, ("placeholders already", "restored by hand (they stay)", "shorter than a placeholder")
            )
            if k
        ]
        return f"of the {n - self.keep_max} older than the newest {self.keep_max}: {', '.join(parts)}"


def current_turn_results(conversation: Conversation) -> int:
    """Tool results after the last user message: what the model is working with in the turn now."""
    messages = conversation.messages
    count = 0
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, UserMessage):
            break
        count += _is_tool_result(message)
    return count


@dataclass(slots=True)
class _Tally:
    chars: int = 0
    count: int = 0

    def add(self, chars: int, count: int = 1) -> None:
        self.chars += chars
        self.count += count


def _is_tool_result(message: Any) -> bool:
    return type(message) is RawOpenAIMessage and message.raw.get("role") == "tool"


def _call_arguments_chars(calls: Iterable[Any]) -> tuple[int, int]:
    """Characters of the arguments of tool calls (what `message_length` counts for them), and how many."""
    chars = count = 0
    for call in calls:
        if not isinstance(call, dict):
            continue
        count += 1
        function = call.get("function")
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            chars += len(arguments)
    return chars, count


def arguments_reclaimed(call: Any) -> bool:
    """Whether a tool call's arguments are a reclaim's placeholder (they name their archive id)."""
    if not isinstance(call, dict):
        return False
    function = call.get("function")
    arguments = function.get("arguments") if isinstance(function, dict) else None
    return isinstance(arguments, str) and f"{PLACEHOLDER_HEAD}{arguments_id(str(call.get('id', '')))}." in arguments


def _system_parts(system: SystemPrompt, total: int) -> tuple[int, int, list[tuple[str, int]]]:
    """(system prompt chars, summary chars, [(section name, chars)]) adding up to `total`."""
    sections = [(name, len(text)) for name, text in system.persist_sections.items() if text]
    summary = len(COMPACTED_SYSTEM_PROMPT.format(summary=system.content)) if system.is_summary else 0
    rest = total - summary - sum(chars for _name, chars in sections)
    return max(rest, 0), summary, sections


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def context_breakdown(
    conversation: Conversation,
    *,
    threshold: int,
    window: int | None = None,
    largest: int = LARGEST,
    tool_definitions: Mapping[str, int] | None = None,
    window_source: str | None = None,
) -> ContextBreakdown:
    """The conversation split into parts (see the module's docstring); `largest` messages listed.

    `tool_definitions` (`Toolbox.definition_chars()`: characters by source, "" for the built-ins, else an
    MCP server's name) replaces the measured overhead with one part per source, so each server's cost shows."""
    ratio = conversation.tokens_per_char
    tally: dict[str, _Tally] = {kind: _Tally() for kind in LABELS}
    sections: dict[str, int] = {}
    sizes: list[LargeMessage] = []
    total = 0
    for index, message in enumerate(conversation.messages):
        chars = message_length(message)
        total += chars
        if isinstance(message, SystemPrompt):
            base, summary, named = _system_parts(message, chars)
            tally[SYSTEM].add(base)
            if summary:
                tally[SUMMARY].add(summary)
            for name, size in named:
                sections[name] = sections.get(name, 0) + size
            continue
        if isinstance(message, UserMessage):
            tally[USER].add(chars)
            sizes.append(LargeMessage(index, "user", chars, 0, _preview(message.text)))
            continue
        raw = message.raw if isinstance(message, RawOpenAIMessage) else {}
        role = raw.get("role")
        if role == "tool":
            text = content_text(raw.get("content"))
            reclaimed = text.startswith(PLACEHOLDER_HEAD)
            tally[PLACEHOLDERS if reclaimed else TOOL_RESULTS].add(chars)
            sizes.append(
                LargeMessage(
                    index,
                    "tool",
                    chars,
                    0,
                    _preview(text),
                    _tool_name(conversation, index, raw),
                    str(raw.get("tool_call_id", "")),
                    reclaimed,
                )
            )
        elif role == "assistant":
            calls = raw.get("tool_calls") or ()
            call_chars, call_count = _call_arguments_chars(calls)
            call_chars = min(call_chars, chars)
            reclaimed_chars, reclaimed_calls = _call_arguments_chars(c for c in calls if arguments_reclaimed(c))
            if call_count > reclaimed_calls:
                tally[TOOL_CALLS].add(call_chars - reclaimed_chars, call_count - reclaimed_calls)
            if reclaimed_calls:
                tally[CALL_PLACEHOLDERS].add(reclaimed_chars, reclaimed_calls)
            tally[ASSISTANT].add(chars - call_chars)
            first = next((c for c in calls if isinstance(c, dict)), None)
            function = (first or {}).get("function") or {}
            text = content_text(raw.get("content"))
            shown = text or (f"calls {function.get('name', '?')} {function.get('arguments', '')}" if first else "")
            sizes.append(
                LargeMessage(
                    index,
                    "assistant",
                    chars,
                    0,
                    _preview(shown),
                    str(function.get("name", "")),
                    str((first or {}).get("id", "")),
                    bool(reclaimed_calls),
                )
            )
        else:
            tally[OTHER].add(chars)
    parts: list[Part] = []

    fixed = getattr(conversation, "fixed_tokens", None)
    overhead = getattr(conversation, "overhead_chars", 0) or 0  # measured by newer engines only
    definitions = (
        dict(tool_definitions)
        if tool_definitions is not None
        else ({"": overhead} if isinstance(overhead, int) and overhead > 0 else {})
    )
    definition_chars = sum(definitions.values())

    def add(kind: str, chars: int, count: int, name: str = "") -> None:
        if chars or (count and kind != SYSTEM):
            label = f"{name} (persistent)" if kind == SECTION else LABELS[kind]
            if kind == OVERHEAD and tool_definitions is not None:
                label = f"tool definitions: {f'MCP server {name}' if name else 'built-in tools'} (every request)"
            tokens = round(chars * ratio)
            if kind == OVERHEAD and fixed is not None:  # what the server counts for them (llama.cpp may ignore them)
                tokens = round(max(fixed, 0) * chars / max(definition_chars, 1))
            parts.append(Part(kind, label, chars, tokens, count, name))

    for source, chars in definitions.items():
        add(OVERHEAD, chars, 0, source)
        if fixed is None:
            total += chars
    add(SYSTEM, tally[SYSTEM].chars, tally[SYSTEM].count)
    for name, chars in sections.items():
        add(SECTION, chars, 1, name)
    for kind in (SUMMARY, USER, ASSISTANT, TOOL_CALLS, CALL_PLACEHOLDERS, TOOL_RESULTS, PLACEHOLDERS, OTHER):
        add(kind, tally[kind].chars, tally[kind].count)
    estimate = round(total * ratio) + (max(fixed, 0) if fixed is not None else 0)
    live = conversation.estimated_tokens()
    used = max(estimate, live)
    threshold = max(int(threshold), 1)
    free = FreeSpace(
        to_threshold=max(threshold - used, 0),
        to_window=max(window - max(threshold, used), 0) if window else None,
    )
    top = sorted(sizes, key=lambda m: (-m.chars, m.index))[: max(largest, 0)]
    top = [
        LargeMessage(m.index, m.role, m.chars, round(m.chars * ratio), m.preview, m.tool, m.tool_call_id, m.reclaimed)
        for m in top
    ]
    return ContextBreakdown(
        parts,
        free,
        top,
        total,
        estimate,
        live,
        conversation.total_tokens,
        ratio,
        threshold,
        window,
        len(conversation.messages),
        window_source,
        fixed,
    )


def _tool_name(conversation: Conversation, index: int, raw: dict[str, Any]) -> str:
    call_id = raw.get("tool_call_id")
    for j in range(index - 1, -1, -1):
        message = conversation.messages[j]
        if not isinstance(message, RawOpenAIMessage) or message.raw.get("role") == "tool":
            continue
        for call in message.raw.get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id") == call_id:
                return str((call.get("function") or {}).get("name", ""))
        break
    return ""


def reclaim_preview(conversation: Conversation, keep_max: int) -> ReclaimPreview:
    """The tool results and call arguments a reclaim keeping the newest `keep_max` would replace now, as
    `Conversation.reclaim_tool_results` chooses them: older than the newest `keep_max` results, not a
    placeholder already, not restored by hand, and longer than their placeholder; and the arguments of
    those results' calls when longer than ARGUMENTS_RECLAIM_AT, but for the round at work."""
    from xun.context.reclaim import PLACEHOLDER

    keep_max = max(int(keep_max), 0)
    messages = conversation.messages
    positions: list[int] = []
    large: dict[int, int] = {}  # result position -> its caller's, when the caller has large arguments
    caller, caller_large = -1, False
    for i, message in enumerate(messages):
        if type(message) is RawOpenAIMessage:
            if message.raw.get("role") == "tool":
                positions.append(i)
                if caller_large:
                    large[i] = caller
            else:
                caller, caller_large = i, False
                for call in message.raw.get("tool_calls") or ():
                    function = call.get("function") if isinstance(call, dict) else None
                    if isinstance(function, dict) and len(function.get("arguments") or "") > ARGUMENTS_RECLAIM_AT:
                        caller_large = True
                        break
    # Results restored by hand stay until they leave the conversation (the conversation keeps their ids).
    pinned: set[str] = getattr(conversation, "_pinned", set())
    older = positions[: len(positions) - keep_max] if len(positions) >= keep_max else []
    current = _current_round(messages)
    ids: list[str] = []
    before = after = arguments = 0
    skipped = [0, 0, 0]
    for i in older:
        raw = messages[i].raw  # type: ignore[union-attr]  # positions holds tool results only
        call_id = str(raw.get("tool_call_id", ""))
        at = large.get(i, current)
        call = (
            next(
                (
                    c
                    for c in messages[at].raw.get("tool_calls") or ()  # type: ignore[union-attr]
                    if isinstance(c, dict) and c.get("id") == call_id
                ),
                None,
            )
            if at != current
            else None
        )
        if call is not None:
            text = (call.get("function") or {}).get("arguments")
            key = arguments_id(call_id)
            if (
                isinstance(text, str)
                and len(text) > ARGUMENTS_RECLAIM_AT
                and key not in pinned
                and not arguments_reclaimed(call)
            ):
                shown = len(arguments_placeholder(text, key))
                if shown < len(text):
                    ids.append(key)
                    before += len(text)
                    after += shown
                    arguments += 1
        text = content_text(raw.get("content"))
        placeholder = PLACEHOLDER.format(id=call_id)
        why = (
            0
            if text.startswith(PLACEHOLDER_HEAD)
            else 1
            if call_id in pinned
            else 2
            if len(placeholder) >= len(text)
            else None
        )
        if why is not None:
            skipped[why] += 1
            continue
        ids.append(call_id)
        before += message_length(messages[i])
        after += len(placeholder)
    return ReclaimPreview(
        tuple(ids),
        before,
        after,
        conversation.tokens_per_char,
        keep_max,
        len(positions),
        (skipped[0], skipped[1], skipped[2]),
        arguments,
    )


def _current_round(messages: list[Any]) -> int:
    """As `Conversation._current_round`: the assistant message of the round at work, else -1."""
    for j in range(len(messages) - 1, -1, -1):
        message = messages[j]
        if type(message) is not RawOpenAIMessage:
            return -1
        if message.raw.get("role") != "tool":
            return j if message.raw.get("tool_calls") else -1
    return -1


def tokens_from(conversation: Conversation, index: int) -> int:
    """The estimated tokens of the messages from `index` to the end: after a change at `index`, what the
    next request pays uncached (a prompt cache serves only the prefix before the first change)."""
    from xun.context.estimates import MESSAGE_TOKENS

    messages = conversation.messages[max(index, 0) :]
    return round(sum(message_length(m) for m in messages) * conversation.tokens_per_char) + MESSAGE_TOKENS * len(
        messages
    )


def first_tool_result(conversation: Conversation, ids: tuple[str, ...] | list[str]) -> int | None:
    """The position of the first message a reclaim or restore of `ids` changes: a tool result among `ids`,
    or the message calling a tool whose arguments are among them (None when none is in the conversation)."""
    wanted = set(ids)
    for index, message in enumerate(conversation.messages):
        if isinstance(message, RawOpenAIMessage):
            raw = message.raw
            if raw.get("role") == "tool":
                if raw.get("tool_call_id") in wanted:
                    return index
            elif any(
                isinstance(call, dict) and arguments_id(str(call.get("id", ""))) in wanted
                for call in raw.get("tool_calls") or ()
            ):
                return index
    return None
