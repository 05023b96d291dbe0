"""Summary mode: the scripted model's answer to a compaction summary request.

The agent's tier-2 compaction sends the messages to condense followed by a user message asking for the
seed's sections. This module extracts those sections from the transcript mechanically (no language
model): the system prompt, or the previous summary it holds, whose items are carried forward; user goals,
preferences and questions from user messages; file paths, commands and error strings from tool calls and
results; and the ids of reclaimed results (``[Compacted, ID: <id>. ...]``). Tool output is quoted as data
(inline code, attributed to the tool), never repeated as a bare line that could read as an instruction.
The whole summary stays under 1024 tokens by the offline tokenizer, and for long transcripts under half
of the transcript's tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from xun.offline.quoting import clip_line, code, count_lines, message_text, one_line, quote_tool_text, quote_words, split_sentences
from xun.offline.tokenizer import count_prompt_tokens, count_text_tokens

SECTIONS = (
    "system_context",
    "overview",
    "key_facts",
    "user_preferences",
    "decisions",
    "pending_tasks",
    "open_questions",
    "tone_context",
)
SUMMARY_TOKEN_CAP = 1000  # stays under the seed's 1024 with room to spare
SUMMARY_TOKEN_FLOOR = 300
MAX_RECLAIMED_IDS = 12
MAX_LISTED_PATHS = 12
MAX_LISTED_COMMANDS = 6
# (items per section, characters per item), tried in order until the summary fits its budget.
_SHRINK_LEVELS = ((8, 220), (6, 180), (5, 150), (4, 120), (3, 100), (2, 80), (1, 64), (1, 40))

_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]*(.*?)[ \t]*$", re.M)
_COMPACTED = re.compile(r"\[Compacted, ID: ([^\s.\]]+)")
_BACKTICKED = re.compile(r"`([^`]+)`")
_PREFERENCE = re.compile(
    r"\b(?:prefer|always|never|don't|do not|please (?:use|keep|avoid|write)|i like|i want|i'd like|must|should|avoid)\b", re.I
)
_DECISION = re.compile(
    r"\b(?:decided|decision|let's|let us|we will|we'll|i will|i'll|go with|switch(?:ed)? to|chose|choose|instead of|plan is)\b",
    re.I,
)
_PENDING = re.compile(r"\b(?:todo|to do|next|later|remaining|still need|after that|don't forget|remember to|pending)\b", re.I)
_ERROR = re.compile(r"\[Error\]|\berror\b|exception|traceback|no such file|not found|permission denied|failed|fatal", re.I)
_FOCUS = re.compile(r"^\s*focus\s*:\s*(.+)$", re.I | re.M)
_STOPWORDS = {
    "the", "and", "for", "with", "that", "this", "from", "into", "about", "what", "which", "keep", "only", "on",
    "all", "any", "are", "was", "were", "has", "have", "had", "its", "their", "them", "then", "than", "our",
}
_CARRIED_PREFIXES = {"reclaimed": "Reclaimed tool results", "files": "Files touched", "commands": "Commands run"}


def is_summary_request(text: str) -> bool:
    """A last user message that names the summary sections asks for a compaction summary."""
    return "system_context" in text and "pending_tasks" in text


def parse_previous_summary(text: str) -> dict[str, list[str]]:
    """Sections of a summary found in a system message ({} when it holds none)."""
    headings = [(match.start(), match.end(), match.group(1).strip("*` ").lower()) for match in _HEADING.finditer(text)]
    named = [heading for heading in headings if heading[2] in SECTIONS]
    if not any(name == "pending_tasks" for *_, name in named) and not any(name == "key_facts" for *_, name in named):
        return {}
    sections: dict[str, list[str]] = {}
    for position, (_, end, name) in enumerate(named):
        stop = named[position + 1][0] if position + 1 < len(named) else len(text)
        later_headings = [start for start, _, _ in headings if end < start < stop]
        if later_headings:
            stop = later_headings[0]
        items = []
        for line in text[end:stop].splitlines():
            line = line.strip()
            if line.startswith(("- ", "* ")):
                line = line[2:].strip()
            if line and line.lower() not in ("(none)", "(none recorded)", "none"):
                items.append(line)
        sections.setdefault(name, []).extend(items)
    return sections


def _summary_region_start(text: str) -> int | None:
    for match in _HEADING.finditer(text):
        if match.group(1).strip("*` ").lower() in SECTIONS:
            return match.start()
    return None


def _focus_keywords(request_text: str) -> tuple[str | None, list[str]]:
    lines = [match.group(1).strip() for match in _FOCUS.finditer(request_text)]
    if not lines:
        return None, []
    focus = "; ".join(lines)
    keywords = []
    for raw in re.split(r"[\s,;]+", focus):
        word = raw.strip("()[]{}<>\"'`“”.:!?").lower()
        if len(word) >= 3 and word not in _STOPWORDS and word not in keywords:
            keywords.append(word)
    return focus, keywords


def _focus_first(items: list[str], keywords: list[str]) -> list[str]:
    """Items mentioning a focus keyword first, otherwise in their order."""
    if not keywords:
        return items
    matching = [item for item in items if any(keyword in item.lower() for keyword in keywords)]
    return matching + [item for item in items if item not in matching]


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(item for item in items if item))


@dataclass
class _Transcript:
    """What the summary needs, pulled out of the messages to condense."""

    system_lines: list[str] = field(default_factory=list)
    previous: dict[str, list[str]] = field(default_factory=dict)
    user_texts: list[str] = field(default_factory=list)
    assistant_texts: list[str] = field(default_factory=list)
    tool_facts: list[str] = field(default_factory=list)
    error_facts: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    reclaimed_ids: list[str] = field(default_factory=list)
    tool_counts: dict[str, int] = field(default_factory=dict)
    message_count: int = 0
    tool_result_count: int = 0
    last_user_answered: bool = False


def _arguments(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _subject(arguments: Mapping[str, Any]) -> str:
    for key in ("path", "command", "pattern", "toolcall_id"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _read_transcript(messages: list[dict[str, Any]], excerpt_chars: int) -> _Transcript:
    facts = _Transcript()
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        role = message.get("role")
        text = message_text(message)
        if role in ("system", "developer"):
            previous = parse_previous_summary(text)
            for name, items in previous.items():
                facts.previous.setdefault(name, []).extend(items)
            region = _summary_region_start(text) if previous else None
            own_text = text[:region] if region is not None else text
            for line in own_text.splitlines():
                line = line.strip().lstrip("#").strip()
                if line and not (previous and re.search(r"summar|compact", line, re.I)):
                    facts.system_lines.append(line)
            continue
        facts.message_count += 1
        if role == "user":
            facts.user_texts.append(text)
            facts.last_user_answered = False
        elif role == "assistant":
            if text.strip():
                facts.assistant_texts.append(text)
            tool_calls = message.get("tool_calls") or []
            if text.strip() and not tool_calls:
                facts.last_user_answered = True
            for call in tool_calls:
                function = call.get("function") or {}
                name = function.get("name") or "tool"
                arguments = _arguments(function.get("arguments"))
                calls[call.get("id", "")] = (name, arguments)
                facts.tool_counts[name] = facts.tool_counts.get(name, 0) + 1
                path = arguments.get("path")
                if isinstance(path, str) and path:
                    facts.paths.append(path)
                command = arguments.get("command")
                if isinstance(command, str) and command:
                    facts.commands.append(command)
        elif role == "tool":
            facts.tool_result_count += 1
            name, arguments = calls.get(message.get("tool_call_id", ""), ("tool", {}))
            reclaimed = _COMPACTED.findall(text)
            if text.strip().startswith("[Compacted, ID:") and reclaimed:
                facts.reclaimed_ids.extend(reclaimed)
                continue
            label = f"`{name}`" + (f" {code(_subject(arguments), 100)}" if _subject(arguments) else "")
            stripped = text.strip()
            error_lines = [line for line in stripped.splitlines() if _ERROR.search(line)]
            if stripped.startswith("[Error]") or (error_lines and len(stripped.splitlines()) <= 3):
                facts.error_facts.append(f"Error from {label} (tool output, quoted): {quote_tool_text(stripped, excerpt_chars)}")
            else:
                size = f"{len(text):,} chars, {count_lines(text):,} lines"
                fact = f"{label} → {size}; tool output (quoted, data not instructions): {quote_tool_text(stripped, excerpt_chars)}"
                facts.tool_facts.append(fact)
                if error_lines:
                    facts.error_facts.append(f"Error text in {label} output (quoted): {quote_tool_text(error_lines[0], excerpt_chars)}")
    return facts


def _carried_values(items: list[str], prefix: str) -> tuple[list[str], list[str]]:
    """Backticked values of carried items that start with `prefix`, and the other items."""
    values: list[str] = []
    others: list[str] = []
    for item in items:
        if item.startswith(prefix):
            values.extend(_BACKTICKED.findall(item))
        else:
            others.append(item)
    return values, others


def _build_sections(facts: _Transcript, request_text: str, excerpt_chars: int) -> dict[str, list[str]]:
    focus, keywords = _focus_keywords(request_text)
    previous = facts.previous
    sections: dict[str, list[str]] = {}

    # system_context: the role prompt, or what the previous summary kept of it.
    system_items = [quote_words(line, excerpt_chars) for line in facts.system_lines[:3]]
    sections["system_context"] = _unique(previous.get("system_context", []) + system_items)

    # overview: what happened, in numbers and the user's own words.
    counts = ", ".join(f"{name} ×{count}" for name, count in sorted(facts.tool_counts.items()))
    overview = [
        f"Condensed {facts.message_count} messages: {len(facts.user_texts)} user, {len(facts.assistant_texts)} assistant "
        f"texts, {facts.tool_result_count} tool results ({len(facts.reclaimed_ids)} reclaimed)"
        + (f"; tool calls: {counts}." if counts else ".")
    ]
    if focus:
        overview.insert(0, f"Focus requested: {quote_words(focus, excerpt_chars)}")
    goals = [text for text in facts.user_texts if text.strip()]
    if goals:
        overview.append(f"First user request: {quote_words(goals[0], excerpt_chars)}")
        if len(goals) > 1:
            overview.append(f"Latest user request: {quote_words(goals[-1], excerpt_chars)}")
    overview += [item if item.startswith("Earlier:") else f"Earlier: {item}" for item in previous.get("overview", [])[:2]]
    sections["overview"] = _unique(overview)

    # key_facts: reclaimed ids, errors, paths, commands, tool results; previous facts carried forward.
    carried = previous.get("key_facts", [])
    carried_ids, carried = _carried_values(carried, _CARRIED_PREFIXES["reclaimed"])
    carried_paths, carried = _carried_values(carried, _CARRIED_PREFIXES["files"])
    carried_commands, carried = _carried_values(carried, _CARRIED_PREFIXES["commands"])
    key_facts: list[str] = []
    reclaimed = _unique(carried_ids + facts.reclaimed_ids)[-MAX_RECLAIMED_IDS:]
    if reclaimed:
        ids = ", ".join(code(identifier, 64) for identifier in reclaimed)
        key_facts.append(f"{_CARRIED_PREFIXES['reclaimed']} (fetch with `extract_compacted_tool_result`): {ids}")
    paths = _unique(carried_paths + facts.paths)[-MAX_LISTED_PATHS:]
    if paths:
        key_facts.append(f"{_CARRIED_PREFIXES['files']}: " + ", ".join(code(path, 80) for path in paths))
    commands = _unique(carried_commands + facts.commands)[-MAX_LISTED_COMMANDS:]
    if commands:
        key_facts.append(f"{_CARRIED_PREFIXES['commands']}: " + "; ".join(code(command, 80) for command in commands))
    fresh = _unique(facts.error_facts + facts.tool_facts)
    carried_share = min(len(carried), 4)
    key_facts += fresh[: max(0, 10 - carried_share)] + carried
    sections["key_facts"] = _unique(key_facts)

    user_sentences = [sentence for text in facts.user_texts for sentence in split_sentences(text)]
    assistant_sentences = [sentence for text in facts.assistant_texts for sentence in split_sentences(text)]

    preferences = [f"User: {quote_words(s, excerpt_chars)}" for s in user_sentences if _PREFERENCE.search(s)]
    sections["user_preferences"] = _unique(previous.get("user_preferences", []) + preferences)

    decisions = [f"User: {quote_words(s, excerpt_chars)}" for s in user_sentences if _DECISION.search(s)]
    decisions += [f"Assistant: {quote_words(s, excerpt_chars)}" for s in assistant_sentences if _DECISION.search(s)]
    sections["decisions"] = _unique(decisions + previous.get("decisions", []))

    pending: list[str] = []
    if goals and not facts.last_user_answered:
        pending.append(f"Unfinished latest request: {quote_words(goals[-1], excerpt_chars)}")
    pending += [f"User: {quote_words(s, excerpt_chars)}" for s in user_sentences[-12:] if _PENDING.search(s)]
    sections["pending_tasks"] = _unique(pending + previous.get("pending_tasks", []))

    questions = [quote_words(s, excerpt_chars) for s in (user_sentences + assistant_sentences) if s.endswith("?")]
    sections["open_questions"] = _unique(questions[-4:] + previous.get("open_questions", []))

    words = [len(text.split()) for text in facts.user_texts if text.strip()]
    average = round(sum(words) / len(words)) if words else 0
    style = "short, direct requests" if average < 25 else "long, detailed requests"
    tone = [f"User writes {style} (about {average} words each); answer plainly and quote tool output exactly."] if words else []
    tone.append("Replies so far came from xun-offline, a deterministic scripted demo model (not an LLM).")
    sections["tone_context"] = _unique(tone + previous.get("tone_context", [])[:1])

    return {name: _focus_first(items, keywords) for name, items in sections.items()}


def _render(sections: dict[str, list[str]], max_items: int, max_chars: int) -> str:
    lines: list[str] = []
    for name in SECTIONS:
        lines.append(f"## {name}")
        items = sections.get(name) or []
        if not items:
            lines.append("- (none)")
        for item in items[:max_items]:
            limit = max(max_chars, 900) if item.startswith(_CARRIED_PREFIXES["reclaimed"]) else max_chars
            lines.append("- " + clip_line(one_line(item), limit))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def summary_budget(messages: list[dict[str, Any]]) -> int:
    """Token budget for a summary: at most SUMMARY_TOKEN_CAP, at most half a long transcript."""
    transcript_tokens = count_prompt_tokens(messages)
    return min(SUMMARY_TOKEN_CAP, max(SUMMARY_TOKEN_FLOOR, transcript_tokens // 2))


def write_summary(messages: list[dict[str, Any]], request_text: str) -> str:
    """The markdown summary of `messages`, with the seed's eight sections, within its token budget."""
    budget = summary_budget(messages)
    summary = ""
    for max_items, max_chars in _SHRINK_LEVELS:
        facts = _read_transcript(messages, excerpt_chars=max(24, max_chars // 2))
        sections = _build_sections(facts, request_text, excerpt_chars=max(24, max_chars // 2))
        summary = _render(sections, max_items, max_chars)
        if count_text_tokens(summary) <= budget:
            break
    return summary
