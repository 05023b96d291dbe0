"""The turn ledger: xun's own record of the tool calls a summary condensed out of the turn still running.

A summary may cut inside a long turn (one prompt, hundreds of tool rounds), so the model's next call no
longer sees those rounds. Whatever the summarizer wrote (a faithful summary, or "ok"), the ledger, written
by xun from the messages themselves, travels in the summary frame of the system message: each call's tool,
its arguments shortened, ok or error, and its id (the original is in the offload log; `search_history`
finds it). A model that reads it knows what was already done and does not do it twice.

It stays bounded over thousands of rounds: past `max_chars` the oldest entries merge, first runs of the
same tool (one line: the count, how many failed, the first and the last call's arguments, the first and
last id), then any neighbours (the tools counted). The newest DETAILED entries always stay one per call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

ERROR_STEPS = 12
"""How many failed steps a merged entry names (the rest are counted)."""

DETAILED = 4
"""The newest entries that are never merged: the model's most recent steps, one line each."""

ARGUMENT_CHARS = 160
"""How much of one call's arguments an entry shows."""

VALUE_CHARS = 72
"""How much of one argument's value an entry shows."""


def shorten_arguments(arguments: str) -> str:
    """A call's arguments in at most ARGUMENT_CHARS: each value cut to VALUE_CHARS with its full length
    named, so a path or a command head stays readable and a file's content does not fill the ledger."""
    try:
        data = json.loads(arguments) if arguments else {}
    except (TypeError, ValueError):
        data = None
    if isinstance(data, dict):
        parts = []
        for key, value in data.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if len(text) > VALUE_CHARS:
                text = f"{text[:VALUE_CHARS]}…({len(text):,} chars)"
            parts.append(f"{key}={json.dumps(text, ensure_ascii=False)}")
        shown = ", ".join(parts)
    else:
        shown = str(arguments)
    shown = " ".join(shown.split())
    return shown if len(shown) <= ARGUMENT_CHARS else f"{shown[: ARGUMENT_CHARS - 1]}…"


@dataclass(slots=True)
class LedgerEntry:
    """One call, or a run of merged calls (`count` > 1): steps `first`..`last` of the turn."""

    first: int
    last: int
    tools: dict[str, int]
    errors: int
    first_arguments: str
    last_arguments: str
    first_id: str
    last_id: str
    error_steps: list[int] = field(default_factory=list)
    """The failed steps among merged calls (at most ERROR_STEPS named), so a failure is never hidden."""

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def merged_with(self, newer: LedgerEntry) -> LedgerEntry:
        tools = dict(self.tools)
        for name, n in newer.tools.items():
            tools[name] = tools.get(name, 0) + n
        failed = [*self.failed_steps(), *newer.failed_steps()][:ERROR_STEPS]
        return LedgerEntry(
            self.first,
            newer.last,
            tools,
            self.errors + newer.errors,
            self.first_arguments,
            newer.last_arguments,
            self.first_id,
            newer.last_id,
            failed,
        )

    def failed_steps(self) -> list[int]:
        return [self.first] if self.count == 1 and self.errors else list(self.error_steps)

    def render(self) -> str:
        if self.count == 1:
            (tool,) = self.tools
            outcome = "error" if self.errors else "ok"
            return f"#{self.first} {tool}({self.first_arguments}) → {outcome} [id {self.first_id}]"
        tools = ", ".join(f"{name} ×{n}" for name, n in self.tools.items())
        outcome = f"{self.count - self.errors} ok"
        if self.errors:
            named = ", ".join(f"#{step}" for step in self.error_steps)
            more = self.errors - len(self.error_steps)
            outcome += f", {self.errors} failed: {named}" + (f" and {more} more" if more > 0 else "")
        return (
            f"#{self.first}–#{self.last} {tools} ({outcome}): first {self.first_arguments or '-'}"
            f" … last {self.last_arguments or '-'} [ids {self.first_id} … {self.last_id}]"
        )

    def to_json(self) -> list[Any]:
        return [
            self.first,
            self.last,
            self.tools,
            self.errors,
            self.first_arguments,
            self.last_arguments,
            self.first_id,
            self.last_id,
            self.error_steps,
        ]

    @classmethod
    def from_json(cls, data: Any) -> LedgerEntry:
        first, last, tools, errors, first_args, last_args, first_id, last_id, *rest = data
        failed = rest[0] if rest else []
        if not (isinstance(failed, list) and all(type(n) is int for n in failed)):
            raise ValueError("ledger entry error steps should be whole numbers")
        if not (isinstance(tools, dict) and all(isinstance(k, str) and type(v) is int for k, v in tools.items())):
            raise ValueError("ledger entry tools should map names to counts")
        if not all(type(n) is int and n >= 0 for n in (first, last, errors)) or last < first:
            raise ValueError("ledger entry steps should be whole numbers, first <= last")
        if not all(isinstance(s, str) for s in (first_args, last_args, first_id, last_id)):
            raise ValueError("ledger entry arguments and ids should be text")
        return cls(first, last, tools, errors, first_args, last_args, first_id, last_id, failed[:ERROR_STEPS])


@dataclass(slots=True)
class TurnLedger:
    """The ledger of one turn: its prompt (to know the turn again), the calls condensed so far, entries."""

    prompt: str
    calls: int = 0
    entries: list[LedgerEntry] = field(default_factory=list)
    where: str = ""
    """Where the originals are (the offload log's path), shown in the header."""

    def add_calls(self, calls: list[tuple[str, str, str, bool]], max_chars: int) -> None:
        """Append (tool, arguments, id, is_error) per condensed call, oldest first, then merge to fit."""
        for tool, arguments, call_id, is_error in calls:
            self.calls += 1
            shown = shorten_arguments(arguments)
            self.entries.append(
                LedgerEntry(self.calls, self.calls, {tool: 1}, int(is_error), shown, shown, call_id, call_id)
            )
        self.fit(max_chars)

    def fit(self, max_chars: int) -> None:
        """Merge the oldest entries until the rendered ledger is at most `max_chars` (or nothing merges)."""
        size = len(self.render())
        while size > max_chars and len(self.entries) > 1:
            mergeable = len(self.entries) - DETAILED
            pair = next(
                (
                    i
                    for i in range(max(mergeable - 1, 0))
                    if self.entries[i].tools.keys() == self.entries[i + 1].tools.keys()
                ),
                None,
            )
            if pair is None:
                pair = 0
            older, newer = self.entries[pair], self.entries[pair + 1]
            merged = older.merged_with(newer)
            size += len(merged.render()) - len(older.render()) - len(newer.render()) - 1
            self.entries[pair : pair + 2] = [merged]

    def render(self) -> str:
        prompt = " ".join(self.prompt.split())
        if len(prompt) > 200:
            prompt = prompt[:199] + "…"
        head = (
            f"The turn in progress (the task: {json.dumps(prompt, ensure_ascii=False)}) has made {self.calls:,} tool "
            f"call{'s' if self.calls != 1 else ''} whose messages were summarised away; xun recorded each one here. "
            "Every call listed has already run and its effect has happened: never repeat one. Continue with the "
            "next step after them and after the calls still shown below the summary."
        )
        if self.where:
            head += f" The originals are in the offload log ({self.where}); search_history finds a call by its id."
        return "\n".join([head, *(entry.render() for entry in self.entries)])

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "calls": self.calls,
            "where": self.where,
            "entries": [entry.to_json() for entry in self.entries],
        }

    @classmethod
    def from_json(cls, data: Any) -> TurnLedger:
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str) or type(data.get("calls")) is not int:
            raise ValueError("the turn ledger should be an object with 'prompt' and 'calls'")
        entries = data.get("entries") or []
        if not isinstance(entries, list):
            raise ValueError("the turn ledger's entries should be a list")
        try:
            parsed = [LedgerEntry.from_json(entry) for entry in entries]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a turn ledger entry is malformed ({exc})") from None
        where = data.get("where") or ""
        return cls(data["prompt"], data["calls"], parsed, where if isinstance(where, str) else "")


def condensed_calls(messages: list[Any]) -> list[tuple[str, str, str, bool]]:
    """(tool, arguments, id, is_error) for each tool call among `messages` (raw OpenAI param dicts), in order;
    a call whose result is not among them counts as ok (its result stays in the kept tail)."""
    results: dict[str, str] = {}
    for param in messages:
        if param.get("role") == "tool":
            content = param.get("content")
            results[str(param.get("tool_call_id"))] = content if isinstance(content, str) else json.dumps(content)
    calls = []
    for param in messages:
        for call in param.get("tool_calls") or []:
            function = call.get("function") or {}
            call_id = str(call.get("id", ""))
            result = results.get(call_id, "")
            calls.append(
                (
                    str(function.get("name", "?")),
                    str(function.get("arguments", "")),
                    call_id,
                    result.lstrip().startswith("[Error"),
                )
            )
    return calls
