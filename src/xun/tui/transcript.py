"""The conversation as a transcript: what the chat pane shows on resume and what `/render` exports.

A plain walk over `Conversation.messages` (no Textual here): user messages, assistant replies with
their reasoning, each tool call joined with its result, and the summaries that replaced older turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xun.conversation_message import (
    RawOpenAIMessage,
    SystemPrompt,
    UserMessage,
    content_text,
)

if TYPE_CHECKING:
    from xun.conversation import Conversation

PLACEHOLDER_HEAD = "[Compacted, ID: "


@dataclass(frozen=True, slots=True)
class UserItem:
    text: str
    index: int = 0
    """Position of the message in the conversation."""


@dataclass(frozen=True, slots=True)
class AssistantItem:
    content: str
    reasoning: str = ""
    index: int = 0


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


@dataclass(frozen=True, slots=True)
class SummaryItem:
    condensed: int
    kept: int
    offload_path: str | None
    summary: str
    time: float = 0.0
    index: int = 0


Item = UserItem | AssistantItem | ToolItem | SummaryItem


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
    messages = conversation.messages
    result = Transcript()
    first = messages[0] if len(messages) else None
    if isinstance(first, SystemPrompt) and first.is_compressed:
        result.summary = first.content
        for event in conversation.summarizations:
            result.items.append(SummaryItem(event.condensed_count, event.kept_count, event.file_path,
                                            event.summary_message, event.time))
        if not conversation.summarizations:
            result.items.append(SummaryItem(0, 0, None, first.content))
    results: dict[str, str] = {}
    for message in messages:
        if type(message) is RawOpenAIMessage and message.raw.get("role") == "tool":
            results[str(message.raw.get("tool_call_id", ""))] = content_text(message.raw.get("content"))
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            result.items.append(UserItem(message.text, index))
        elif type(message) is RawOpenAIMessage and message.raw.get("role") == "assistant":
            raw = message.raw
            text = content_text(raw.get("content"))
            reasoning = reasoning_of(raw)
            if text or reasoning:
                result.items.append(AssistantItem(text, reasoning, index))
            for call in raw.get("tool_calls") or ():
                call_id = str(call.get("id", ""))
                function = call.get("function") or {}
                output = results.get(call_id)
                reclaimed = output is not None and output.startswith(PLACEHOLDER_HEAD)
                result.items.append(ToolItem(
                    call_id, str(function.get("name", "")), str(function.get("arguments", "")), output,
                    None if reclaimed or output is None else len(output), reclaimed, index,
                ))
    return result
