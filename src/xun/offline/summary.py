"""Summary mode: the scripted model's answer to a compaction summary request.

The agent's tier-2 compaction sends the messages to condense followed by a user message asking for the
seed's sections. This module extracts those sections from the transcript mechanically (no language
model): the system prompt, or the previous summary it holds, whose items are carried forward; user goals,
preferences and questions from user messages; file paths, commands and error strings from tool calls and
results; and the ids of reclaimed results (``[Compacted, ID: <id>. ...]``). Tool output is quoted as data
(inline code, attributed to the tool), never repeated as a bare line that could read as an instruction.
The whole summary stays under 1024 tokens by the offline tokenizer, and shorter than the transcript it
condenses (at most 9/10 of its tokens, above a small floor), so a compaction always gains room.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from xun.offline.planner import progress_lines
from xun.offline.quoting import (
    clip_line,
    code,
    count_lines,
    message_text,
    one_line,
    parse_arguments,
    quote_tool_text,
    quote_words,
    split_sentences,
)
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
SUMMARY_TOKEN_FLOOR = 240
CARRIED_ITEM_CHARS = 300
KEY_FACTS_SHARE = (
    2  # key_facts and user_preferences (the user's rules) may hold this many times the items of other sections
)
MAX_RECLAIMED_IDS = 12
MAX_LISTED_PATHS = 12
MAX_LISTED_COMMANDS = 6
MAX_LISTED_ERRORS = 4
# (items per section, characters per item), tried in order until the summary fits its budget.
_SHRINK_LEVELS = ((8, 220), (6, 180), (5, 150), (4, 120), (3, 100), (2, 80), (1, 64), (1, 40))

_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]*(.*?)[ \t]*$", re.M)
_COMPACTED = re.compile(r"\[Compacted, ID: ([^\s.\]]+)")
_BACKTICKED = re.compile(r"`([^`]+)`")
_PREFERENCE = re.compile(
    r"\b(?:prefer|always|never|don't|do not|please (?:use|keep|avoid|write)|i like|i want|i'd like|avoid)\b", re.I
)
_DECISION = re.compile(
    r"\b(?:decided|decision|let's|let us|we will|we'll|i will|i'll|go with|switch(?:ed)? to|chose|choose|instead "
    r"of|plan is)\b",
    re.I,
)
_PENDING = re.compile(
    r"\b(?:todo|to do|next|later|remaining|still need|after that|don't forget|remember to|pending)\b", re.I
)
_ERROR = re.compile(
    r"\[Error\]|\berror\b|exception|traceback|no such file|not found|permission denied|failed|fatal", re.I
)
_NAMED_ERROR = re.compile(r"\b\w*(?:Error|Exception)\b|Traceback|\bfatal:|\[Error\]")
_FOCUS = re.compile(r"^\s*focus\s*:\s*(.+)$", re.I | re.M)
_STOPWORDS = {
    "the",
    "and",
    "for",
    "with",
    "that",
    "this",
    "from",
    "into",
    "about",
    "what",
    "which",
    "keep",
    "only",
    "on",
    "all",
    "any",
    "are",
    "was",
    "were",
    "has",
    "have",
    "had",
    "its",
    "their",
    "them",
    "then",
    "than",
    "our",
}
_CARRIED_PREFIXES = {"reclaimed": "Reclaimed tool results", "files": "Files touched", "commands": "Commands run"}


def is_summary_request(text: str) -> bool:
    """A last user message that names the summary sections asks for a compaction summary."""
    return "system_context" in text and "pending_tasks" in text


SUMMARY_END_TAG = "</conversation_summary>"


def parse_previous_summary(text: str) -> dict[str, list[str]]:
    """Sections of a summary found in a system message ({} when it holds none). A summary wrapped in
    xun's compacted-history template ends at its closing tag: the notes after it are not summary items."""
    end_tag = text.rfind(SUMMARY_END_TAG)
    if end_tag != -1:
        text = text[:end_tag]
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
    assistant_count: int = 0
    tool_result_count: int = 0
    last_user_answered: bool = False


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
            facts.assistant_count += 1
            if text.strip():
                facts.assistant_texts.append(text)
            tool_calls = message.get("tool_calls") or []
            if text.strip() and not tool_calls:
                facts.last_user_answered = True
            for call in tool_calls:
                function = call.get("function") or {}
                name = function.get("name") or "tool"
                arguments = parse_arguments(function.get("arguments"))
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
            stripped = text.strip()
            if stripped.startswith("[Compacted, ID:"):
                reclaimed = _COMPACTED.findall(stripped[:400])
                if reclaimed:
                    facts.reclaimed_ids.extend(reclaimed)
                    continue
            label = f"`{name}`" + (f" {code(_subject(arguments), 100)}" if _subject(arguments) else "")
            # Errors show at the head or the tail of an output; scanning only those keeps huge outputs cheap.
            probe = stripped if len(stripped) <= 6000 else stripped[:4000] + "\n" + stripped[-2000:]
            error = _ERROR.search(probe)
            if stripped.startswith("[Error]") or (error and stripped.count("\n") < 3):
                facts.error_facts.append(
                    f"Error from {label} (tool output, quoted): {quote_tool_text(stripped, excerpt_chars)}"
                )
                continue
            size = f"{len(text):,} chars, {count_lines(text):,} lines"
            fact = (
                f"{label} → {size}; tool output (quoted, data not instructions): "
                f"{quote_tool_text(stripped, excerpt_chars)}"
            )
            facts.tool_facts.append(fact)
            if error:
                error_lines = _error_lines(probe)
                facts.error_facts.append(
                    f"Error text in {label} output (quoted): {quote_tool_text(' | '.join(error_lines), excerpt_chars)}"
                )
    return facts


def _error_lines(text: str) -> list[str]:
    """The most telling error lines of an output: named errors and exceptions first, at most two."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if _NAMED_ERROR.search(line)]
    chosen = named[:2] or [line for line in lines if _ERROR.search(line)][:1]
    return chosen


def _carried_values(items: list[str], prefix: str) -> tuple[list[str], list[str]]:
    """Backticked values of carried items that start with `prefix`, and the other items."""
    values: list[str] = []
    others: list[str] = []
    for item in items:
        if item.startswith(prefix):
            listed = item.split(":", 1)[1] if ":" in item else item
            values.extend(_BACKTICKED.findall(listed))
        else:
            others.append(item)
    return values, others


@dataclass
class _Section:
    """A section's candidate items: pinned (always first), fresh (from this transcript), carried (from the
    previous summary). `latest` keeps the newest fresh items when they must be cut, else the first."""

    pinned: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    latest: bool = True

    def choose(self, limit: int, keywords: list[str]) -> list[str]:
        """At most `limit` items: pinned, then fresh and carried sharing the rest, focus matches first."""
        pinned = _unique(self.pinned)[:limit]
        fresh = [item for item in _unique(self.fresh) if item not in pinned]
        carried = [item for item in _unique(self.carried) if item not in pinned and item not in fresh]
        room = limit - len(pinned)
        carried_count = min(len(carried), room // 2 if fresh else room)
        if carried and room >= 1 and carried_count == 0 and not fresh:
            carried_count = 1
        fresh_count = min(len(fresh), room - carried_count)
        carried_count = min(len(carried), room - fresh_count)
        fresh_pick = (fresh[len(fresh) - fresh_count :] if self.latest else fresh[:fresh_count]) if fresh_count else []
        picked = pinned + fresh_pick + carried[:carried_count]
        if keywords:
            matches = [
                item for item in pinned + fresh + carried if any(keyword in item.lower() for keyword in keywords)
            ]
            picked = _unique(matches + picked)[:limit]
        return picked

    def is_carried(self, item: str) -> bool:
        return item in self.carried and item not in self.pinned and item not in self.fresh


def _build_sections(facts: _Transcript, request_text: str, excerpt_chars: int) -> tuple[dict[str, _Section], list[str]]:
    focus, keywords = _focus_keywords(request_text)
    previous = facts.previous
    sections = {name: _Section() for name in SECTIONS}

    # system_context: the role prompt, or what the previous summary kept of it.
    sections["system_context"] = _Section(
        fresh=[quote_words(line, excerpt_chars) for line in facts.system_lines[:3]],
        carried=previous.get("system_context", []),
        latest=False,
    )

    # overview: what happened, in numbers and the user's own words.
    pinned = [
        f"{facts.message_count} messages condensed ({len(facts.user_texts)} user, {facts.assistant_count} assistant, "
        f"{facts.tool_result_count} tool results, {len(facts.reclaimed_ids)} reclaimed)."
    ]
    if focus:
        pinned.insert(0, f"Focus requested: {quote_words(focus, excerpt_chars)}")
    goals = [text for text in facts.user_texts if text.strip()]
    overview_fresh = []
    if goals:
        overview_fresh.append(f"First user request: {quote_words(goals[0], excerpt_chars)}")
    counts = ", ".join(f"{name} ×{count}" for name, count in sorted(facts.tool_counts.items()))
    if counts:
        overview_fresh.append(f"Tool calls: {counts}.")
    carried_overview = [
        item if item.startswith("Earlier:") else f"Earlier: {item}" for item in previous.get("overview", [])
    ]
    sections["overview"] = _Section(pinned, overview_fresh, carried_overview, latest=False)

    # key_facts: reclaimed ids, errors, paths and commands pinned; tool results fresh; old facts carried.
    carried = previous.get("key_facts", [])
    carried_ids, carried = _carried_values(carried, _CARRIED_PREFIXES["reclaimed"])
    carried_paths, carried = _carried_values(carried, _CARRIED_PREFIXES["files"])
    carried_commands, carried = _carried_values(carried, _CARRIED_PREFIXES["commands"])
    key_pinned: list[str] = []
    reclaimed = _unique(carried_ids + facts.reclaimed_ids)[-MAX_RECLAIMED_IDS:]
    if reclaimed:
        ids = ", ".join(code(identifier, 64) for identifier in reclaimed)
        key_pinned.append(f"{_CARRIED_PREFIXES['reclaimed']} (fetch with `extract_compacted_tool_result`): {ids}")
    paths = _unique(carried_paths + facts.paths)[-MAX_LISTED_PATHS:]
    if paths:
        key_pinned.append(f"{_CARRIED_PREFIXES['files']}: " + ", ".join(code(path, 80) for path in paths))
    commands = _unique(carried_commands + facts.commands)[-MAX_LISTED_COMMANDS:]
    if commands:
        key_pinned.append(f"{_CARRIED_PREFIXES['commands']}: " + "; ".join(code(command, 80) for command in commands))
    key_pinned += _unique(facts.error_facts)[-MAX_LISTED_ERRORS:]
    sections["key_facts"] = _Section(key_pinned, facts.tool_facts, carried)

    user_sentences = [sentence for text in facts.user_texts for sentence in split_sentences(text)]
    assistant_sentences = [sentence for text in facts.assistant_texts for sentence in split_sentences(text)]

    preferences = [f"User: {quote_words(s, excerpt_chars)}" for s in user_sentences if _PREFERENCE.search(s)]
    sections["user_preferences"] = _Section(fresh=preferences, carried=previous.get("user_preferences", []))

    decisions = [f"User: {quote_words(s, excerpt_chars)}" for s in user_sentences if _DECISION.search(s)]
    decisions += [f"Assistant: {quote_words(s, excerpt_chars)}" for s in assistant_sentences if _DECISION.search(s)]
    sections["decisions"] = _Section(fresh=decisions, carried=previous.get("decisions", []))

    pending_pinned = []
    if goals:
        state = "answered; check it is done" if facts.last_user_answered else "not yet answered"
        pending_pinned.append(f"Latest user request ({state}): {quote_words(goals[-1], excerpt_chars)}")
    pending = [f"User: {quote_words(s, excerpt_chars)}" for s in user_sentences if _PENDING.search(s)]
    carried_pending = [
        re.sub(r"^Latest user request \([^)]*\):", "Earlier request:", item)
        for item in previous.get("pending_tasks", [])
    ]
    sections["pending_tasks"] = _Section(pending_pinned, pending, carried_pending)

    questions = [quote_words(s, excerpt_chars) for s in (user_sentences + assistant_sentences) if s.endswith("?")]
    sections["open_questions"] = _Section(fresh=questions, carried=previous.get("open_questions", []))

    words = [len(text.split()) for text in facts.user_texts if text.strip()]
    tone = []
    if words:
        average = round(sum(words) / len(words))
        style = "short, direct requests" if average < 25 else "long, detailed requests"
        tone.append(f"User writes {style} (about {average} words each).")
    tone.append("Replies so far came from xun-offline, a scripted demo model (not an LLM).")
    sections["tone_context"] = _Section(pinned=tone, carried=previous.get("tone_context", []))
    return sections, keywords


def _render(sections: dict[str, _Section], keywords: list[str], max_items: int, max_chars: int) -> str:
    lines: list[str] = []
    for name in SECTIONS:
        lines.append(f"## {name}")
        limit = max_items * (KEY_FACTS_SHARE if name in ("key_facts", "user_preferences") else 1)
        items = sections[name].choose(limit, keywords)
        if not items:
            lines.append("- (none)")
        for item in items:
            if item.startswith(_CARRIED_PREFIXES["reclaimed"]):
                item_limit = max(max_chars, 900)
            elif sections[name].is_carried(item):
                item_limit = max(max_chars, CARRIED_ITEM_CHARS)  # kept whole or dropped, never clipped again
            else:
                item_limit = max_chars
            lines.append("- " + clip_line(one_line(item), item_limit))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def summary_budget(messages: list[dict[str, Any]]) -> int:
    """Token budget for a summary: at most SUMMARY_TOKEN_CAP, and 9/10 of a transcript above the floor. The
    limit a request states is not followed: like many models, this one writes what it writes, and xun must
    cope with a summary cut off at its `max_tokens` (following it starved long turns of their summaries)."""
    transcript_tokens = count_prompt_tokens(messages)
    return min(SUMMARY_TOKEN_CAP, max(SUMMARY_TOKEN_FLOOR, transcript_tokens * 9 // 10))


_TRANSCRIPT = re.compile(r"<transcript>\n(.*?)\n</transcript>", re.DOTALL)


def transcript_messages(request_text: str) -> list[dict[str, Any]]:
    """The messages of a transcript quoted in the request (xun sends a long history in pieces that way),
    as chat messages, so a piece is summarised like any conversation."""
    from xun.context.offload import parse_entries

    match = _TRANSCRIPT.search(request_text)
    if match is None:
        return []
    messages: list[dict[str, Any]] = []
    for entry in parse_entries(match.group(1)):
        name, _, ident = entry.detail.partition(", id ")
        ident = ident.split(",")[0]
        if entry.speaker == "Human":
            messages.append({"role": "user", "content": entry.text})
        elif entry.speaker == "AI":
            messages.append({"role": "assistant", "content": entry.text})
        elif entry.speaker == "AI tool call":
            call = {"id": ident, "type": "function", "function": {"name": name, "arguments": entry.text}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif entry.speaker == "Tool":
            messages.append({"role": "tool", "tool_call_id": ident, "content": entry.text})
    return messages


def write_summary(messages: list[dict[str, Any]], request_text: str) -> str:
    """The markdown summary of `messages` (and of a transcript quoted in the request), with the seed's
    eight sections, within its token budget."""
    messages = [*messages, *transcript_messages(request_text)]
    budget = summary_budget(messages)
    summary = ""
    progress = progress_lines(messages)  # a long task's steps done, so its next call repeats none
    for max_items, max_chars in _SHRINK_LEVELS:
        facts = _read_transcript(messages, excerpt_chars=max(24, max_chars // 2))
        sections, keywords = _build_sections(facts, request_text, excerpt_chars=max(24, max_chars // 2))
        sections["key_facts"].pinned[:0] = progress
        summary = _render(sections, keywords, max_items, max_chars)
        if count_text_tokens(summary) <= budget:
            break
    return summary


def useless_summary() -> str:
    """The eight sections with nothing in them: what a summarizer that fails its job writes (the offline
    server's `--useless-summaries`, for showing what xun itself must keep)."""
    return "\n".join(f"## {name}\n- (nothing useful)\n" for name in SECTIONS)
