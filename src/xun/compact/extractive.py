"""Checking a model's summary, and xun's own summary for when a model cannot write one.

A weak model (a 135M one on a small window, say) writes summaries that are cut off, that have none of the
required sections, or that are longer than what they replace. Applying one would erase the task from the
context, so compaction checks every summary (`summary_problem`) and, when the model fails twice, writes
a deterministic extractive summary instead (`extractive_summary`): the user's prompts word for word (the
newest alone, cut in its middle, when the room is that small), the file paths, commands, error lines, tool
names and ids, and where the originals are. No model is involved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from xun.context.messages import Message, RawOpenAIMessage, SystemPrompt, UserMessage, content_text

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
_HEADING = re.compile(r"^\s{0,3}#{1,4}\s*\**`?([a-z_]+)`?\**\s*:?\s*$", re.MULTILINE)
_PATH = re.compile(
    r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.-])[\w-]+\.(?:py|md|txt|json|toml|yaml|yml|"
    r"js|ts|tsx|jsx|rs|go|c|h|cpp|hpp|java|rb|sh|cfg|ini|lock|html|css|sql|csv)\b"
)
_ERROR = re.compile(r"\b(error|exception|traceback|failed|fatal|denied|not found)\b", re.IGNORECASE)
_PATH_KEYS = ("path", "file", "filename", "directory", "dir", "cwd")
_CONSTRAINT = re.compile(r"\b(?:never|always|don't|do not|must(?: not)?|avoid|only|prefer|keep)\b", re.IGNORECASE)
_CLAUSE = re.compile(r"(?<=[.;!?\n])\s+")
MAX_ITEMS = 40
MAX_LINE = 200
CUT_NOTE = "\n…(the rest of this earlier summary is kept in the session file's summaries)"
PROMPT_CUT_NOTE = "characters of this prompt are cut here; the whole is in the offload log"
PROMPT_END = 120
"""Characters kept at each end of the one prompt a summary too small for it still quotes."""


def _cut_middle(text: str, size: int) -> str:
    """`text` in about `size` characters: its start and its end (PROMPT_END each at least), the middle
    named as cut. The last resort of a summary that must fit a small window."""
    half = max(PROMPT_END, (size - len(PROMPT_CUT_NOTE) - 16) // 2)
    if 2 * half >= len(text):
        return text
    return f"{text[:half]} …[{len(text) - 2 * half:,} {PROMPT_CUT_NOTE}]… {text[-half:]}"


def summary_problem(text: str, finish_reason: str | None, limit: int | None = None) -> str | None:
    """Why a model's summary cannot be applied as it is (None: it can); `limit` is its `max_tokens`."""
    if finish_reason == "length":
        return f'the summary was cut off at its token limit{f" of {limit:,}" if limit else ""} (finish_reason "length")'
    if not text.strip():
        return "the summary is empty"
    found = {match.group(1).lower() for match in _HEADING.finditer(text)}
    missing = [name for name in SECTIONS if name not in found]
    if missing:
        return f"the summary lacks the required sections {', '.join(missing)}"
    return None


def _clip(text: str, limit: int = MAX_LINE) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
    return list(seen)


def _calls(message: Message) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, id, parsed arguments) of an assistant message's tool calls."""
    if not isinstance(message, RawOpenAIMessage):
        return []
    out = []
    for call in message.raw.get("tool_calls") or ():
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {}
        out.append(
            (str(function.get("name", "?")), str(call.get("id", "")), arguments if isinstance(arguments, dict) else {})
        )
    return out


def extractive_summary(messages: list[Message], *, reason: str, offload_hint: str, max_chars: int) -> str:
    """A summary of `messages` made of what they literally say, in the required sections, at most
    `max_chars` long when it can be: when it must be cut, the newest prompts and facts are kept first, an
    earlier summary it carries forward is cut at its end, and last of all the one prompt left in its middle."""
    previous = ""
    prompts: list[str] = []
    paths: list[str] = []
    commands: list[str] = []
    tools: list[str] = []
    errors: list[str] = []
    constraints: list[str] = []  # the user's rules ("never …", "always …"): kept longer than old prompts
    for message in messages:
        if isinstance(message, SystemPrompt):
            if message.is_summary:
                previous = message.content
            continue
        if isinstance(message, UserMessage):
            prompts.append(message.text)
            constraints += [_clip(c.strip()) for c in _CLAUSE.split(message.text) if _CONSTRAINT.search(c)]
            paths += _PATH.findall(message.text)
            continue
        raw = message.raw if isinstance(message, RawOpenAIMessage) else {}
        for name, call_id, arguments in _calls(message):
            tools.append(f"{name} (id {call_id})")
            paths += [str(v) for k, v in arguments.items() if k in _PATH_KEYS and isinstance(v, str)]
            if isinstance(arguments.get("command"), str):
                commands.append(arguments["command"])
        if raw.get("role") == "tool":
            text = content_text(raw.get("content"))
            errors += [_clip(line) for line in text.splitlines()[:400] if _ERROR.search(line)][:5]
    paths, commands, tools, errors = (_unique(x)[-MAX_ITEMS:] for x in (paths, commands, tools, errors))
    constraints = _unique(constraints)[-MAX_ITEMS:]

    def bullets(items: list[str], code: bool = False) -> str:
        return "\n".join(f"- `{_clip(i)}`" if code else f"- {i}" for i in items) or "- (none)"

    def render(prompt_items: list[str], fact_cut: int, rules: list[str]) -> str:
        left_out = len(prompts) - len(prompt_items)
        quoted = "\n".join(f"- {json.dumps(p, ensure_ascii=False)}" for p in prompt_items) or "- (none)"
        if left_out:
            quoted = f"- ({left_out} earlier prompts are in the offload log)\n" + quoted

        def keep(items: list[str]) -> list[str]:  # newest last
            return items[-fact_cut:] if fact_cut else []

        return "\n\n".join(
            [
                "## system_context\n"
                + (f"Earlier summary, carried forward:\n{previous}" if previous else "- (no earlier summary)"),
                f"## overview\nxun wrote this summary itself because {reason}. {len(messages)} messages were "
                "condensed; "
                f"their originals are in {offload_hint}, and search_history finds them by their words.",
                "## key_facts\nFiles:\n"
                + bullets(keep(paths), True)
                + "\nCommands run:\n"
                + bullets(keep(commands), True)
                + "\nTool calls:\n"
                + bullets(keep(tools))
                + "\nError lines in tool results:\n"
                + bullets(keep(errors), True),
                "## user_preferences\nThe user's rules, word for word (from the prompts):\n"
                + bullets([json.dumps(r, ensure_ascii=False) for r in rules]),
                "## decisions\n- (not extracted)",
                "## pending_tasks\nThe user's prompts, word for word, oldest first:\n" + quoted,
                "## open_questions\n- (not extracted)",
                "## tone_context\n- (not extracted)",
            ]
        )

    prompt_items, fact_cut, rules = list(prompts), MAX_ITEMS, list(constraints)
    text = render(prompt_items, fact_cut, rules)
    while len(text) > max_chars:  # shed old facts, then old prompts, old rules, and last the end of the earlier summary
        if fact_cut > 3:
            fact_cut //= 2
        elif len(prompt_items) > 1:
            prompt_items.pop(0)
        elif len(rules) > 1:
            rules.pop(0)
        elif fact_cut:
            fact_cut = 0
        elif previous and not previous.endswith(CUT_NOTE):
            keep = max(0, len(previous) - (len(text) - max_chars) - len(CUT_NOTE))
            previous = previous[:keep] + CUT_NOTE
        elif (
            len(prompt_items) == 1 and PROMPT_CUT_NOTE not in prompt_items[0] and len(prompt_items[0]) > 2 * PROMPT_END
        ):
            prompt_items[0] = _cut_middle(prompt_items[0], len(prompt_items[0]) - (len(text) - max_chars))
        else:
            break
        text = render(prompt_items, fact_cut, rules)
    return text
