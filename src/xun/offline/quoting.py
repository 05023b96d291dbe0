"""Reading text out of chat messages, and quoting it back so it stays data.

The scripted model repeats what it saw (tool output, user words) in its answers and summaries. Tool
output can contain anything, including text that looks like instructions or markdown headings, so it is
always collapsed to one line, stripped of backticks, cut short and wrapped in backticks before it is
repeated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_WHITESPACE = re.compile(r"\s+")
ELLIPSIS = "…"


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content: the string itself, or its text parts joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text", "") for part in content if isinstance(part, Mapping) and part.get("type") == "text"]
        return "\n".join(text for text in texts if isinstance(text, str))
    return ""


def one_line(text: str) -> str:
    """Collapse all whitespace (newlines included) to single spaces."""
    return _WHITESPACE.sub(" ", text).strip()


def clip(text: str, limit: int) -> str:
    """Cut text to at most `limit` characters, marking the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS
    return text[: limit - 1].rstrip() + ELLIPSIS


def quote_tool_text(text: str, limit: int = 120) -> str:
    """Tool output as an inline code span: one line, no backticks inside, at most `limit` characters."""
    flat = one_line(text[: limit * 2 + 200]).replace("`", "'")  # only the head can show, so only the head is read
    if not flat:
        return "(empty)"
    return f"`{clip(flat, limit)}`"


def quote_words(text: str, limit: int = 160) -> str:
    """Someone's words in curly quotes, on one line, at most `limit` characters."""
    flat = one_line(text[: limit * 2 + 200]).replace("“", '"').replace("”", '"')
    return f"“{clip(flat, limit)}”"


def code(value: str, limit: int = 200) -> str:
    """A path, command or id as an inline code span (backticks inside become quotes)."""
    return f"`{clip(one_line(value).replace('`', chr(39)), limit)}`"


def clip_line(line: str, limit: int) -> str:
    """Cut a rendered markdown line without leaving a code span or a quote open."""
    if len(line) <= limit:
        return line
    cut = clip(line, limit)
    if cut.count("`") % 2:
        cut += "`"
    if cut.count("“") > cut.count("”"):
        cut += "”"
    return cut


def count_lines(text: str) -> int:
    """Lines in a piece of text, the way a person counts them (a trailing newline adds none)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of a text, stripped, empty ones dropped."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [part.strip() for part in parts if part and part.strip()]


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict ({} when they are not a JSON object)."""
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
