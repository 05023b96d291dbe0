"""The scripted model: what the offline server answers, decided from the request alone.

It is a deterministic demo model, not an LLM. The same request always gets the same reply, so the agent
loop, tool calls, compaction and the UI can be tested and demonstrated without a network. The decision,
in order:

1. a compaction summary request (the last user message names ``system_context`` and ``pending_tasks``)
   gets a markdown summary of the transcript (see `xun.offline.summary`);
2. a request for a long reply ("write 10000 tokens", "count to 500") gets that reply, generated lazily;
3. once tool results have come back after the last user message, a text answer quoting them (and no
   more tool calls for that message, so an agent loop ends);
4. otherwise tool calls picked from the last user message's words, only among the tools offered
   ("search the history for X" and "read history entry N" call the history tools);
5. otherwise a short text answer that says what this model is.

"use the tool NAME with {json}" calls NAME (any offered tool, MCP ones included) with that JSON object, or
with `{}` completed from its schema when no JSON follows; this is how MCP tools are shown offline.

Two phrases make it misbehave on purpose, for tests of how a client copes with a model's mistakes:
"call the missing tool NAME" calls NAME with `{}` whether the request offers it or not, and "with broken
arguments" cuts the JSON arguments of the tool calls it makes in half (so they are not valid JSON).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from xun.offline.planner import final_answer, next_step, read_task, step_call
from xun.offline.protocol import ChatRequest
from xun.offline.quoting import code, count_lines, message_text, one_line, parse_arguments, quote_tool_text, quote_words
from xun.offline.summary import is_summary_request, useless_summary, write_summary

MAX_LONG_REPLY_TOKENS = 1_000_000
# Three-letter words: each plus a space is exactly one token under the 4-characters rule.
_FILLER_WORDS = (
    "the",
    "fox",
    "ran",
    "far",
    "and",
    "sat",
    "low",
    "now",
    "two",
    "owl",
    "saw",
    "one",
    "big",
    "red",
    "sun",
    "set",
)

_COMPACTED_ID = re.compile(r"\[Compacted, ID: ([^\s.\]]+)")
_MISSING_TOOL = re.compile(r"\bcall the missing tool `?([A-Za-z0-9_-]{1,64})`?", re.I)
_BROKEN_ARGUMENTS = re.compile(r"\bwith broken arguments\b", re.I)
_USE_TOOL = re.compile(r"\buse the tool `?([A-Za-z0-9_-]{1,64})`?(?:\s+with\s*(?=\{))?", re.I)


# ---------------------------------------------------------------------------------------------------
# What a reply is


class TextSource:
    """Content that can be produced piece by piece, so a long reply is never built whole."""

    def pieces(self, piece_chars: int) -> Iterator[str]:
        raise NotImplementedError


@dataclass
class FixedText(TextSource):
    """Content already known in full (short answers, summaries)."""

    text: str

    def pieces(self, piece_chars: int) -> Iterator[str]:
        for start in range(0, len(self.text), piece_chars):
            yield self.text[start : start + piece_chars]


@dataclass
class FillerTokens(TextSource):
    """Exactly `count` tokens of filler words, generated on the fly."""

    count: int

    def pieces(self, piece_chars: int) -> Iterator[str]:
        last = self.count - 1
        words = (_FILLER_WORDS[p % len(_FILLER_WORDS)] + ("" if p == last else " ") for p in range(self.count))
        return _gathered(words, piece_chars)


@dataclass
class CountingText(TextSource):
    """The numbers 1 to `last`, separated by spaces, generated on the fly."""

    last: int

    def pieces(self, piece_chars: int) -> Iterator[str]:
        return _gathered((str(n) if n == self.last else f"{n} " for n in range(1, self.last + 1)), piece_chars)


def _gathered(units: Iterator[str], piece_chars: int) -> Iterator[str]:
    """Join generated units into pieces of about `piece_chars`, never holding more than one piece."""
    buffer: list[str] = []
    buffered = 0
    for unit in units:
        buffer.append(unit)
        buffered += len(unit)
        if buffered >= piece_chars:
            yield "".join(buffer)
            buffer, buffered = [], 0
    if buffer:
        yield "".join(buffer)


@dataclass
class PlannedToolCall:
    """A tool call the model makes: id, function name, JSON arguments."""

    id: str
    name: str
    arguments: str


@dataclass
class Reply:
    """What the model says: optional reasoning, content, and tool calls."""

    content: TextSource = field(default_factory=lambda: FixedText(""))
    tool_calls: list[PlannedToolCall] = field(default_factory=list)
    reasoning: str | None = None


# ---------------------------------------------------------------------------------------------------
# Reading the request


def last_user_index(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last user message, or None."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def request_fingerprint(request: ChatRequest) -> str:
    """A hash of the conversation, so ids are stable for the same request and differ between turns."""
    canonical = json.dumps(request.messages, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def tool_call_id(fingerprint: str, index: int) -> str:
    """A deterministic tool call id, unique per conversation state and position."""
    return "call_" + hashlib.sha256(f"{fingerprint}:{index}".encode()).hexdigest()[:24]


# ---------------------------------------------------------------------------------------------------
# Picking tools from words

_TRIGGERS = (
    (
        "history",
        re.compile(
            r"\b(?:search|grep|look\s+up)\s+(?:in\s+|through\s+)?(?:the\s+|our\s+|my\s+)?(?:conversation\s+|chat\s+)?history\b"
            r"|\b(?:read|show|open)\s+(?:the\s+)?(?:full\s+)?history\s+entry\b",
            re.I,
        ),
    ),
    ("extract", re.compile(r"\b(?:recover|extract|restore|retrieve|fetch|uncompact|un-compact)\w*", re.I)),
    ("run", re.compile(r"\b(?:run|execute|exec)\b", re.I)),
    ("search", re.compile(r"\b(?:search|grep)\b", re.I)),
    ("list", re.compile(r"\b(?:list|ls)\b", re.I)),
    ("write", re.compile(r"\b(?:write|save)\b", re.I)),
)
_QUOTED_SPAN = re.compile(r"\[Compacted, ID: [^\]\n]*\]?|`([^`\n]+)`|\"([^\"\n]+)\"")
_PLACEHOLDER = re.compile(r"\x00(\d+)\x00")
_CLAUSE_BOUNDARY = re.compile(r"\s*(?:\n+|;|[.!?](?=\s|$)|,|\band then\b|\bthen\b|\band\b|\balso\b)\s*", re.I)
_EXTENSIONLESS_FILES = {"makefile", "dockerfile", "license", "readme", "justfile", "gemfile", "procfile", "agents.md"}
_NOT_PATHS = {"e.g", "i.e", "etc", "and/or", "n/a", "i/o", "w/o", "a.m", "p.m", "vs"}
_PATH_CHARS = re.compile(r"^[\w.~/+-]+$")
_EXTENSION = re.compile(r"^[\w.+-]*\w\.[A-Za-z][A-Za-z0-9]{0,7}$")
_LIST_FILLER = {
    "the",
    "a",
    "all",
    "files",
    "file",
    "directory",
    "directories",
    "dir",
    "folder",
    "folders",
    "contents",
    "content",
    "of",
    "in",
    "under",
    "inside",
    "at",
    "me",
    "please",
    "current",
    "everything",
    "what's",
    "whats",
    "what",
    "is",
    "there",
    "here",
    "this",
    "project",
    "repo",
    "repository",
    "entries",
}
_SEARCH_FILLER = {
    "the",
    "code",
    "codebase",
    "files",
    "file",
    "repo",
    "project",
    "for",
    "text",
    "string",
    "pattern",
    "word",
}
_ID_TOKEN = re.compile(r"\b(?:call|toolu|fc|tool|chatcmpl)_[A-Za-z0-9_-]+\b|\bID[:\s]+([A-Za-z0-9_-]+)", re.I)
_MENTIONS_COMPACTION = re.compile(r"compact|reclaim", re.I)


@dataclass
class _Span:
    """A quoted span pulled out of the message before splitting (backticks, double quotes, placeholders)."""

    text: str
    kind: str  # "code", "quote" or "compacted"


@dataclass
class _Intent:
    name: str
    arguments: dict[str, Any]


def _strip_punctuation(word: str) -> str:
    return word.strip("()[]{}<>\"'“”‘’,;:!?").rstrip(".")


def looks_like_path(word: str) -> bool:
    """A word that names a file or directory: has a slash, or a name with an extension."""
    if not word or "://" in word or word.lower() in _NOT_PATHS or not _PATH_CHARS.match(word):
        return False
    if not re.search(r"[A-Za-z0-9_]", word):
        return word in (".", "..", "./", "../")
    if "/" in word:
        return True
    if re.fullmatch(r"(?:[A-Z]\.)+[A-Z]?", word):  # abbreviations such as U.S or E.U.
        return False
    return bool(_EXTENSION.match(word)) or word.lower() in _EXTENSIONLESS_FILES


class _MaskedMessage:
    """The last user message with quoted spans replaced by placeholders, so splitting cannot break them."""

    def __init__(self, text: str):
        self.spans: list[_Span] = []

        def mask(match: re.Match[str]) -> str:
            whole = match.group(0)
            if whole.startswith("[Compacted"):
                span = _Span(whole, "compacted")
            elif match.group(1) is not None:
                span = _Span(match.group(1), "code")
            else:
                span = _Span(match.group(2), "quote")
            self.spans.append(span)
            return f" \x00{len(self.spans) - 1}\x00 "

        self.masked = _QUOTED_SPAN.sub(mask, text)

    def clauses(self) -> list[str]:
        return [clause.strip() for clause in _CLAUSE_BOUNDARY.split(self.masked) if clause and clause.strip()]

    def unmask(self, text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: self.spans[int(m.group(1))].text, text).strip()

    def spans_in(self, text: str) -> list[_Span]:
        return [self.spans[int(m.group(1))] for m in _PLACEHOLDER.finditer(text)]

    def words(self, text: str) -> list[tuple[str, _Span | None]]:
        """Words of a masked clause; a placeholder word comes back as its span."""
        result: list[tuple[str, _Span | None]] = []
        for raw in text.split():
            placeholder = _PLACEHOLDER.fullmatch(raw)
            if placeholder:
                span = self.spans[int(placeholder.group(1))]
                result.append((span.text, span))
            else:
                result.append((_strip_punctuation(raw), None))
        return result


def _path_words(masked: _MaskedMessage, text: str) -> list[str]:
    """Paths mentioned in a stretch of a masked clause (quoted paths included)."""
    paths = []
    for word, span in masked.words(text):
        if span is not None and span.kind == "compacted":
            continue
        candidate = word.strip() if span is not None else word
        if looks_like_path(candidate):
            paths.append(candidate)
    return paths


def _first_quoted(masked: _MaskedMessage, text: str) -> str | None:
    for span in masked.spans_in(text):
        if span.kind in ("code", "quote"):
            return span.text
    return None


def _word_after(words: list[tuple[str, _Span | None]], markers: set[str], skip: set[str]) -> str | None:
    """The first meaningful word after one of `markers` (e.g. the path after "in")."""
    for position, (word, span) in enumerate(words):
        if span is None and word.lower() in markers:
            for candidate, candidate_span in words[position + 1 :]:
                if candidate_span is None and candidate.lower() in skip:
                    continue
                if candidate:
                    return candidate
            return None
    return None


def _compacted_ids_in(text: str) -> list[str]:
    return _COMPACTED_ID.findall(text)


def _latest_compacted_id(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "tool":
            found = _compacted_ids_in(message_text(message))
            if found:
                return found[-1]
    return None


def _extract_intents(masked: _MaskedMessage, clause: str, after: str, messages: list[dict[str, Any]]) -> list[_Intent]:
    """extract_compacted_tool_result for ids named in the clause (or the latest reclaimed one)."""
    ids: list[str] = []
    for span in masked.spans_in(clause):
        if span.kind == "compacted":
            ids.extend(_compacted_ids_in(span.text))
        elif re.fullmatch(r"[A-Za-z0-9_-]{4,}", span.text) and re.search(r"[0-9_]", span.text):
            ids.append(span.text)
    for match in _ID_TOKEN.finditer(masked.unmask(after)):
        token = match.group(1) or match.group(0)
        if token not in ids:
            ids.append(token)
    if not ids and _MENTIONS_COMPACTION.search(clause):
        latest = _latest_compacted_id(messages)
        if latest:
            ids.append(latest)
    return [_Intent("extract_compacted_tool_result", {"toolcall_id": toolcall_id}) for toolcall_id in ids]


def _history_intent(masked: _MaskedMessage, trigger: str, after: str) -> list[_Intent]:
    """search_history for "search the history for X", read_history_entry for "read history entry N"."""
    if not trigger.lower().startswith(("search", "grep", "look")):
        number = re.search(r"\d+", masked.unmask(after))
        return [_Intent("read_history_entry", {"id": int(number.group())})] if number else []
    query = _first_quoted(masked, after)
    if query is None:
        query = re.sub(r"^\s*(?:for|about|on)\b", "", masked.unmask(after), flags=re.I).strip().rstrip(".!?").strip()
    return [_Intent("search_history", {"query": query})] if query else []


def _run_intent(masked: _MaskedMessage, after: str) -> list[_Intent]:
    command = _first_quoted(masked, after)
    if command is None:
        command = masked.unmask(after)
        command = re.sub(r"^(?:the\s+)?(?:command|shell command)\s*:?\s*", "", command, flags=re.I)
        command = command.strip().lstrip(":").rstrip(".!?").strip()
    if not command:
        return []
    return [_Intent("run_command", {"command": command})]


def _search_intent(masked: _MaskedMessage, after: str, trigger_word: str) -> list[_Intent]:
    words = masked.words(after)
    pattern = _first_quoted(masked, after)
    pattern_position = None
    if pattern is None:
        for position, (word, span) in enumerate(words):
            if span is None and (word.lower() in _SEARCH_FILLER or word.startswith("-")):
                continue  # filler words and grep options are not the pattern
            if word:
                pattern, pattern_position = word, position
                break
    else:
        for position, (word, span) in enumerate(words):
            if span is not None and span.text == pattern:
                pattern_position = position
                break
    if not pattern:
        return []
    path = _word_after(words, {"in", "under", "inside", "within"}, {"the", "a", "directory", "folder", "file", "dir"})
    if path is None and pattern_position is not None:
        # `grep PATTERN DIR` names its directory positionally; otherwise only a path-looking word counts.
        positional = trigger_word.lower() == "grep"
        later = [word for word, span in words[pattern_position + 1 :] if word and (positional or looks_like_path(word))]
        path = later[0] if later else None
    return [_Intent("search_text", {"pattern": pattern, "path": path or "."})]


def _list_intent(masked: _MaskedMessage, after: str, trigger_word: str) -> list[_Intent]:
    words = masked.words(after)
    paths = [word for word, _ in words if looks_like_path(word)]
    path = paths[0] if paths else None
    if path is None:
        path = _word_after(words, {"in", "under", "inside", "of", "at", "from"}, _LIST_FILLER)
    if path is None:
        meaningful = [word for word, span in words if word and (span is not None or word.lower() not in _LIST_FILLER)]
        if len(meaningful) == 1 and (trigger_word.lower() == "ls" or len(words) <= 2):
            path = meaningful[0]
    return [_Intent("list_directory", {"path": path or "."})]


def _write_intent(masked: _MaskedMessage, after: str) -> list[_Intent]:
    match = re.search(r"^(?P<middle>.*?)\b(?:to|into|in)\s+(?P<target>\S+)\s*$", after, re.I | re.S)
    if match is None:
        return []
    target_words = masked.words(match["target"])
    if not target_words:
        return []
    path = target_words[0][0]
    if not looks_like_path(path):
        return []
    middle = match["middle"]
    content = _first_quoted(masked, middle)
    if content is None:
        content = masked.unmask(middle).strip().strip("'\"")
    return [_Intent("write_file", {"path": path, "content": content})]


def _clause_intents(
    masked: _MaskedMessage, clause: str, previous_verb: str | None, messages: list[dict[str, Any]]
) -> tuple[list[_Intent], str | None]:
    """Intents of one clause, and the verb later verb-less clauses inherit."""
    found = []
    for verb, pattern in _TRIGGERS:
        match = pattern.search(clause)
        if match:
            found.append((match.start(), verb, match))
    found.sort(key=lambda item: item[0])
    for _, verb, match in found:
        after = clause[match.end() :]
        if verb == "history":
            intents = _history_intent(masked, match.group(0), after)
        elif verb == "extract":
            intents = _extract_intents(masked, clause, after, messages)
        elif verb == "run":
            intents = _run_intent(masked, after)
        elif verb == "search":
            intents = _search_intent(masked, after, match.group(0))
        elif verb == "list":
            intents = _list_intent(masked, after, match.group(0))
        else:
            intents = _write_intent(masked, after)
        if intents:
            return intents, verb
    compacted = [span for span in masked.spans_in(clause) if span.kind == "compacted"]
    if compacted:
        return _extract_intents(masked, clause, "", messages), "extract"
    if previous_verb in ("run", "search"):
        quoted = _first_quoted(masked, clause)
        if quoted is not None:
            if previous_verb == "run":
                return [_Intent("run_command", {"command": quoted})], previous_verb
            return [_Intent("search_text", {"pattern": quoted, "path": "."})], previous_verb
    intents = []
    for path in _path_words(masked, clause):
        if path.endswith("/"):
            intents.append(_Intent("list_directory", {"path": path}))
        else:
            intents.append(_Intent("read_file", {"path": path}))
    return intents, ("read" if intents else previous_verb)


def plan_intents(text: str, messages: list[dict[str, Any]]) -> list[_Intent]:
    """Every tool request in a user message, in the order they appear, without duplicates."""
    masked = _MaskedMessage(text)
    intents: list[_Intent] = []
    seen: set[str] = set()
    previous_verb: str | None = None
    for clause in masked.clauses():
        clause_intents, previous_verb = _clause_intents(masked, clause, previous_verb, messages)
        for intent in clause_intents:
            key = intent.name + json.dumps(intent.arguments, sort_keys=True)
            if key not in seen:
                seen.add(key)
                intents.append(intent)
    return intents


_REQUIRED_FALLBACKS = {"offset": 0, "limit": 200, "timeout": 30, "path": ".", "content": "", "pattern": ""}


def complete_arguments(arguments: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Fill parameters the offered schema requires but the words did not give (its default, or a safe value)."""
    completed = dict(arguments)
    properties = schema.get("properties")
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if not isinstance(name, str) or name in completed:
            continue
        spec = properties.get(name, {}) if isinstance(properties, Mapping) else {}
        if isinstance(spec, Mapping) and "default" in spec:
            completed[name] = spec["default"]
        elif name in _REQUIRED_FALLBACKS:
            completed[name] = _REQUIRED_FALLBACKS[name]
        else:
            kind = str(spec.get("type")) if isinstance(spec, Mapping) else ""
            completed[name] = {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}.get(kind, "")
    return completed


# ---------------------------------------------------------------------------------------------------
# Long replies

_LONG_TOKENS = re.compile(
    r"\b(?:write|generate|produce|stream|emit|give|say|output|reply|respond|send)"
    r"(?:\s+(?:me|us|a|an|the|reply|response|answer|text|of|about|exactly|with|back|out|some|at|least|long|story))*"
    r"\s+(\d[\d,_]*)\s*tokens?\b",
    re.I,
)
_COUNT_TO = re.compile(r"\bcount(?:\s+from\s+1)?\s+to\s+(\d[\d,_]*)\b", re.I)


def _long_reply_source(text: str) -> TextSource | None:
    match = _LONG_TOKENS.search(text)
    if match:
        count = int(re.sub(r"[,_]", "", match.group(1)))
        if count >= 1:
            return FillerTokens(min(count, MAX_LONG_REPLY_TOKENS))
    match = _COUNT_TO.search(text)
    if match:
        last = int(re.sub(r"[,_]", "", match.group(1)))
        if last >= 1:
            return CountingText(min(last, MAX_LONG_REPLY_TOKENS))
    return None


# ---------------------------------------------------------------------------------------------------
# Answers in text

_ERROR_LINE = re.compile(
    r"\[Error\]|\berror\b|exception|traceback|no such file|not found|permission denied|failed", re.I
)


def _call_subject(arguments: Mapping[str, Any]) -> str:
    for key in ("path", "command", "pattern", "toolcall_id", "query"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def describe_tool_result(name: str, arguments: Mapping[str, Any], text: str, excerpt_chars: int = 160) -> str:
    """One line saying what a tool returned: size, and a quoted excerpt or the quoted error."""
    subject = _call_subject(arguments)
    label = f"`{name}`" + (f" {code(subject, 120)}" if subject else "")
    stripped = text.strip()
    compacted = _compacted_ids_in(stripped)
    if stripped.startswith("[Compacted, ID:") and compacted:
        return (
            f"{label}: that result was compacted earlier (ID {code(compacted[0])}); `extract_compacted_tool_result` "
            "can fetch it again."
        )
    if stripped.startswith("[Error]") or (stripped and _ERROR_LINE.search(stripped.splitlines()[0])):
        return f"{label} failed; the tool said {quote_tool_text(stripped, excerpt_chars)}."
    size = f"{len(text):,} characters in {count_lines(text):,} line{'s' if count_lines(text) != 1 else ''}"
    if not stripped:
        return f"{label} returned nothing (0 characters)."
    return f"{label} returned {size}; it begins {quote_tool_text(stripped, excerpt_chars)}."


def _answer_tool_results(tail: list[dict[str, Any]]) -> str:
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in tail:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                calls[call.get("id", "")] = (function.get("name", "tool"), parse_arguments(function.get("arguments")))
    lines = ["Here is what the tools returned (xun-offline, a scripted demo model, quoting the tool output):"]
    for message in tail:
        if message.get("role") != "tool":
            continue
        name, arguments = calls.get(message.get("tool_call_id", ""), ("tool", {}))
        lines.append("- " + describe_tool_result(name, arguments, message_text(message)))
    lines.append("That is everything the tools returned for this request.")
    return "\n".join(lines)


def _plain_answer(text: str, unavailable: list[str]) -> str:
    said = quote_words(text, 200) if text.strip() else "nothing"
    if unavailable:
        names = ", ".join(dict.fromkeys(unavailable))
        return (
            f"I would call {names} for this, but the request offers no such tool, so I answer in text. "
            f"(xun-offline, a deterministic scripted demo model, not an LLM; you said {said}.)"
        )
    return (
        f"xun-offline here: a deterministic scripted demo model, not an LLM. You said {said}. "
        "Mention a file path and I read it; say list, search (or grep), run `a command`, or write … to a file, "
        'and I call the matching tool when the request offers it. For a long turn, say "append the numbers 1 to N '
        'to steps.txt" or "write files step1 to stepN" (optionally "of C characters"): one tool call a step, the '
        "next one read from what the request shows done."
    )


# ---------------------------------------------------------------------------------------------------
# The decision


def decide_reply(request: ChatRequest, with_reasoning: bool = False, useless_summaries: bool = False) -> Reply:
    """The scripted model's whole decision for one request (deterministic). With `useless_summaries`, a
    summary request gets the eight sections with nothing in them (a summarizer that fails its job)."""
    messages = request.messages
    user_index = last_user_index(messages)
    if user_index is None:
        reply = Reply(FixedText(_plain_answer("", [])))
        return _with_reasoning(reply, "There is no user message, so I say what I am.", with_reasoning)
    user_text = message_text(messages[user_index])
    tail = messages[user_index + 1 :]

    if is_summary_request(user_text):
        summary = useless_summary() if useless_summaries else write_summary(messages[:user_index], user_text)
        reply = Reply(FixedText(summary))
        note = (
            f"This is a compaction summary request; I condense the {user_index} earlier messages into the eight "
            "sections."
        )
        return _with_reasoning(reply, note, with_reasoning)

    task = read_task(user_text)
    if task is not None and step_call(task, 1)[0] in request.offered_tool_names:
        step = next_step(task, messages, user_index)
        if step is None:
            return _with_reasoning(
                Reply(FixedText(final_answer(task))), f"All {task.steps} steps show as done; I answer.", with_reasoning
            )
        name, arguments = step_call(task, step)
        call = PlannedToolCall(
            id=tool_call_id(request_fingerprint(request), 0), name=name, arguments=json.dumps(arguments)
        )
        note = f"A task of {task.steps} steps; the lowest step I cannot see done in this request is {step}."
        return _with_reasoning(Reply(tool_calls=[call]), note, with_reasoning)

    long_source = _long_reply_source(user_text)
    if long_source is not None:
        note = "The user asked for a long reply; I generate it piece by piece."
        return _with_reasoning(Reply(long_source), note, with_reasoning)

    if any(message.get("role") == "tool" for message in tail):
        note = "The tool results for this request are in; I answer from them and call nothing more."
        return _with_reasoning(Reply(FixedText(_answer_tool_results(tail))), note, with_reasoning)

    explicit = _USE_TOOL.search(user_text)
    if explicit:
        return _with_reasoning(*_explicit_call(request, user_text, explicit), with_reasoning)

    missing = _MISSING_TOOL.search(user_text)
    if missing:
        call = PlannedToolCall(id=tool_call_id(request_fingerprint(request), 0), name=missing.group(1), arguments="{}")
        note = f"Asked to misbehave: I call {call.name}, offered or not."
        return _with_reasoning(Reply(tool_calls=[call]), note, with_reasoning)

    intents = plan_intents(user_text, messages)
    offered = request.offered_tool_names
    usable = [intent for intent in intents if intent.name in offered]
    unavailable = [intent.name for intent in intents if intent.name not in offered]
    if usable and not request.parallel_tool_calls:
        usable = usable[:1]
    if usable:
        fingerprint = request_fingerprint(request)
        calls = [
            PlannedToolCall(
                id=tool_call_id(fingerprint, position),
                name=intent.name,
                arguments=json.dumps(
                    complete_arguments(intent.arguments, request.tool_schema(intent.name)), ensure_ascii=False
                ),
            )
            for position, intent in enumerate(usable)
        ]
        if _BROKEN_ARGUMENTS.search(user_text):
            for call in calls:
                call.arguments = call.arguments[: len(call.arguments) // 2]
        described = ", ".join(f"{call.name}({one_line(call.arguments)})" for call in calls)
        note = f"The last user message asks for {len(calls)} tool call{'s' if len(calls) != 1 else ''}: {described}."
        return _with_reasoning(Reply(tool_calls=calls), note, with_reasoning)

    note = "No tool is needed or offered for these words; I answer in text."
    return _with_reasoning(Reply(FixedText(_plain_answer(user_text, unavailable))), note, with_reasoning)


def _explicit_call(request: ChatRequest, text: str, match: re.Match[str]) -> tuple[Reply, str]:
    """ "use the tool NAME with {json}": that call exactly (an offered tool only), or why not, in text."""
    name = match.group(1)
    if name not in request.offered_tool_names:
        offered = ", ".join(sorted(request.offered_tool_names)) or "none"
        answer = (
            f"The request offers no tool named `{name}`, so I call nothing (offered: {offered}). "
            "(xun-offline, a deterministic scripted demo model, not an LLM.)"
        )
        return Reply(FixedText(answer)), f"{name} is not offered; I say so."
    arguments: Any = {}
    rest = text[match.end() :]
    if rest.startswith("{"):
        try:
            arguments, _ = json.JSONDecoder().raw_decode(rest)
        except ValueError as exc:
            answer = (
                f"The JSON after `{name}` is not valid ({exc}); send a JSON object, e.g. "
                f'use the tool {name} with {{"key": "value"}}. (xun-offline, a scripted demo model.)'
            )
            return Reply(FixedText(answer)), "The arguments are not valid JSON; I say so."
    if not isinstance(arguments, dict):
        arguments = {}
    arguments = complete_arguments(arguments, request.tool_schema(name))
    call = PlannedToolCall(
        id=tool_call_id(request_fingerprint(request), 0), name=name, arguments=json.dumps(arguments, ensure_ascii=False)
    )
    return Reply(tool_calls=[call]), f"Asked to use {name}; I call it with {one_line(call.arguments)}."


def _with_reasoning(reply: Reply, note: str, with_reasoning: bool) -> Reply:
    if with_reasoning:
        reply.reasoning = "Scripted reasoning (xun-offline, not an LLM): " + note
    return reply
