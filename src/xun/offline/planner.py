"""Multi-step work for the offline model: one tool call a step, each next step read from the request.

Two prompts start a long turn (one tool call per step, so a turn of N steps takes N model calls):

- "append the numbers 1 to N to steps.txt": `run_command` with `echo K >> steps.txt`;
- "write files step1 to stepN" (optionally "of C characters"): `write_file` of `stepK.txt`, C characters
  (default 3,000).

Like an LLM, the planner remembers nothing between requests: it reads the steps it can see done anywhere in
the request but the prompt itself (the arguments and results of write_file and run_command calls, and
summary or ledger text in system messages, including the "Steps done" lines the offline summary writes and
the runs of xun's turn ledger, "first … last", read as every step between; a call whose result is an
"[Error]", or a call the user stopped before it ran, does not count), issues the lowest step not seen, and
answers in text once all N are seen. So a record lost to compaction shows up as a repeated step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Any

from xun.offline.quoting import message_text

DEFAULT_FILE_CHARS = 3000
MAX_STEPS = 100_000
MAX_FILE_CHARS = 1_000_000

_APPEND = re.compile(r"\bappend the numbers 1 to (\d{1,6}) to ([\w./-]+?)[.,;!]?(?=\s|$)", re.I)
_WRITE = re.compile(
    r"\bwrite files step1\s*(?:to|\.\.\.|…|-|through)\s*step(\d{1,6})(?:\s+of\s+([\d,_]{1,9})\s+char(?:acter)?s)?", re.I
)
_PROGRESS = re.compile(r"Steps done \((echo K >> [\w./-]+|write_file stepK\.txt)\): ([\d ,\-]+)")
_ECHO = re.compile(r"echo (\d{1,6}) >> ([\w./-]+)")
_STEP_FILE = re.compile(r"\bstep(\d{1,6})\.txt\b")
_LEDGER_RUN = re.compile(
    r'first \w+="(?:echo (\d{1,6}) >> ([\w./-]+)|step(\d{1,6})\.txt)[^\n]*? … last \w+="(?:echo (\d{1,6}) >> '
    r"[\w./-]+|step(\d{1,6})\.txt)"
)
"""A merged line of xun's turn ledger: a run of calls from its first to its last, all of which ran."""


@dataclass(frozen=True)
class Task:
    """A long task read from a prompt: `kind` is "append" or "write"."""

    kind: str
    steps: int
    target: str = "steps.txt"
    file_chars: int = DEFAULT_FILE_CHARS

    @property
    def label(self) -> str:
        """The name the progress lines give this kind of step."""
        return f"echo K >> {self.target}" if self.kind == "append" else "write_file stepK.txt"


def read_task(text: str) -> Task | None:
    """The long task a user message asks for, or None."""
    if match := _APPEND.search(text):
        return Task("append", min(int(match.group(1)), MAX_STEPS), match.group(2))
    if match := _WRITE.search(text):
        chars = int(re.sub(r"[,_]", "", match.group(2))) if match.group(2) else DEFAULT_FILE_CHARS
        return Task("write", min(int(match.group(1)), MAX_STEPS), file_chars=min(max(chars, 1), MAX_FILE_CHARS))
    return None


def _not_done(result: str) -> bool:
    """An error, or a call the user stopped before it ran ("[Cancelled] … it did not run.")."""
    return result.startswith("[Error]") or (result.startswith("[Cancelled]") and "did not run" in result)


STEP_TOOLS = frozenset({"write_file", "run_command"})
"""The tools whose results tell of a step done; another's (a listing naming step1.txt) proves nothing."""


def _failed_calls(messages: list[dict[str, Any]]) -> set[str]:
    """Ids of the calls whose result in the request does not show a step done: an error, a call stopped
    before it ran, or a call of a tool that does no step (a directory listing may show files an earlier
    session left, which are not this turn's steps)."""
    stepping = {
        str(call.get("id"))
        for m in messages
        for call in m.get("tool_calls") or ()
        if isinstance(call, dict)
        and isinstance(call.get("function"), dict)
        and call["function"].get("name") in STEP_TOOLS
    }
    return {
        str(m.get("tool_call_id"))
        for m in messages
        if m.get("role") == "tool" and (_not_done(message_text(m)) or str(m.get("tool_call_id")) not in stepping)
    }


def _message_texts(message: dict[str, Any], failed: Set[str] = frozenset()) -> Iterable[str]:
    if not (message.get("role") == "tool" and str(message.get("tool_call_id")) in failed):
        yield message_text(message)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if (
            isinstance(function, dict)
            and isinstance(function.get("arguments"), str)
            and str(call.get("id")) not in failed
        ):
            yield function["arguments"]


def _ranges(text: str) -> Iterable[int]:
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit():
            stop = int(last) if last.isdigit() else int(first)
            yield from range(int(first), min(stop, int(first) + MAX_STEPS) + 1)


def steps_seen(texts: Iterable[str]) -> dict[str, set[int]]:
    """The step numbers each kind of step (by its label) shows as done in these texts."""
    seen: dict[str, set[int]] = {}
    for text in texts:
        if "step" not in text and "echo" not in text:
            continue
        for match in _PROGRESS.finditer(text):
            seen.setdefault(match.group(1), set()).update(_ranges(match.group(2)))
        for match in _ECHO.finditer(text):
            seen.setdefault(f"echo K >> {match.group(2)}", set()).add(int(match.group(1)))
        for match in _STEP_FILE.finditer(text):
            seen.setdefault("write_file stepK.txt", set()).add(int(match.group(1)))
        for match in _LEDGER_RUN.finditer(text):
            first, target, first_file, last, last_file = match.groups()
            if first and last:
                seen.setdefault(f"echo K >> {target}", set()).update(
                    range(int(first), min(int(last), int(first) + MAX_STEPS) + 1)
                )
            elif first_file and last_file:
                seen.setdefault("write_file stepK.txt", set()).update(
                    range(int(first_file), min(int(last_file), int(first_file) + MAX_STEPS) + 1)
                )
    return seen


def compact_ranges(numbers: Iterable[int]) -> str:
    """ "1-80, 82" for {1..80, 82}."""
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    parts = [str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]
    return ", ".join(parts)


def progress_lines(messages: list[dict[str, Any]]) -> list[str]:
    """The "Steps done" lines a faithful summary of `messages` carries (read back by the planner)."""
    failed = _failed_calls(messages)
    seen = steps_seen(text for message in messages for text in _message_texts(message, failed))
    return [f"Steps done ({label}): {compact_ranges(numbers)}" for label, numbers in sorted(seen.items()) if numbers]


def next_step(task: Task, messages: list[dict[str, Any]], prompt_index: int) -> int | None:
    """The lowest step of `task` not seen done in the request (the prompt excluded), or None when all are."""
    failed = _failed_calls(messages)
    texts = (
        text
        for index, message in enumerate(messages)
        if index != prompt_index
        for text in _message_texts(message, failed)
    )
    done = steps_seen(texts).get(task.label, set())
    for step in range(1, task.steps + 1):
        if step not in done:
            return step
    return None


def step_call(task: Task, step: int) -> tuple[str, dict[str, Any]]:
    """The tool and arguments of one step."""
    if task.kind == "append":
        return "run_command", {"command": f"echo {step} >> {task.target}"}
    line = f"step {step} of {task.steps}\n"
    content = (line * (task.file_chars // len(line) + 1))[: task.file_chars]
    return "write_file", {"path": f"step{step}.txt", "content": content}


def final_answer(task: Task) -> str:
    what = (
        f"appended the numbers 1 to {task.steps} to {task.target}"
        if task.kind == "append"
        else f"wrote step1.txt to step{task.steps}.txt"
    )
    return f"All {task.steps} steps are done: I {what}, one tool call a step. (xun-offline, a scripted demo model.)"
