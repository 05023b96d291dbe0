"""The offline server's deterministic token counter.

The scripted model is not an LLM and has no vocabulary, but every response still reports `usage`, so the
context gauge and the auto-compaction trigger can be exercised offline. The rule is simple enough to be
recomputed by hand in a test:

* text: ``ceil(characters / 4)`` tokens (characters are Python ``str`` characters, not bytes);
* prompt: ``3`` (reply priming) plus, for every message, ``4`` (per-message overhead) plus
  ``ceil(c / 4)`` where ``c`` is the characters of the message's text fields together: ``content`` (a
  string, or the ``text`` of its text parts), ``name``, ``reasoning_content`` / ``reasoning``, and for
  each tool call its ``function.name`` and ``function.arguments``; each non-text content part (an image,
  audio, a file) adds a flat ``85`` tokens;
* tools: each entry of the request's ``tools`` adds ``ceil(len(json) / 4)`` where ``json`` is the entry
  as compact JSON (``separators=(",", ":")``, non-ASCII kept);
* completion: ``ceil(c / 4)`` where ``c`` is all characters the reply generated: reasoning, content, and
  each tool call's name and arguments.

``total_tokens`` is ``prompt_tokens + completion_tokens``. Role names and tool call ids are not counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

CHARS_PER_TOKEN = 4
PROMPT_PRIMING_TOKENS = 3
PER_MESSAGE_TOKENS = 4
NON_TEXT_PART_TOKENS = 85
REASONING_FIELDS = ("reasoning_content", "reasoning")


def tokens_for_chars(char_count: int) -> int:
    """Tokens for a number of characters; the one place the 4-characters rule lives."""
    return -(-char_count // CHARS_PER_TOKEN)


def count_text_tokens(text: str) -> int:
    """Tokens of one piece of text."""
    return tokens_for_chars(len(text))


def _content_chars_and_parts(content: Any) -> tuple[int, int]:
    """Characters of text in a message content, and how many non-text parts it carries."""
    if isinstance(content, str):
        return len(content), 0
    chars = 0
    other_parts = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                chars += len(part["text"])
            elif isinstance(part, str):
                chars += len(part)
            else:
                other_parts += 1
    return chars, other_parts


def message_text_chars(message: Mapping[str, Any]) -> tuple[int, int]:
    """Characters the tokenizer counts in one message, and its non-text part count."""
    chars, other_parts = _content_chars_and_parts(message.get("content"))
    name = message.get("name")
    if isinstance(name, str):
        chars += len(name)
    for field in REASONING_FIELDS:
        value = message.get(field)
        if isinstance(value, str):
            chars += len(value)
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                for key in ("name", "arguments"):
                    value = function.get(key)
                    if isinstance(value, str):
                        chars += len(value)
    return chars, other_parts


def count_message_tokens(message: Mapping[str, Any]) -> int:
    """Tokens one message adds to a prompt (overhead included)."""
    chars, other_parts = message_text_chars(message)
    return PER_MESSAGE_TOKENS + tokens_for_chars(chars) + NON_TEXT_PART_TOKENS * other_parts


def count_tool_tokens(tool: Any) -> int:
    """Tokens one tool schema adds to a prompt."""
    return tokens_for_chars(len(json.dumps(tool, ensure_ascii=False, separators=(",", ":"))))


def count_prompt_tokens(messages: Iterable[Mapping[str, Any]], tools: Iterable[Any] | None = None) -> int:
    """Tokens of a whole chat-completion prompt: priming, messages and tool schemas."""
    total = PROMPT_PRIMING_TOKENS
    total += sum(count_message_tokens(message) for message in messages)
    if tools:
        total += sum(count_tool_tokens(tool) for tool in tools)
    return total
