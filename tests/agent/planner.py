"""A stateless planner behind a real HTTP server, for long turns: like an LLM it sees only the request,
and it does the step after the last one it can see done (in tool calls, tool results, the summary and
the turn ledger), so a record that compaction lost shows up as a step done twice.

The task: steps 1..N, one tool call each: `run_command` `echo K >> steps.txt`, `write_file` `stepK.txt`
with `content_chars` of content, or `read_file` `stepK.txt` (files the test writes). Summary requests (no
tools offered) get a faithful summary (all eight sections, naming the last step it can see), with
`faithful=False` "ok" (unusable: xun falls back to its own extractive summary), or with
`failing_summaries=True` HTTP 500 every time (an overloaded server's answer; each is counted in
`failed_summaries`). The server counts a request's tokens as its JSON characters
/ 4, reports that as `usage.prompt_tokens`, and refuses a request over `window` the way OpenAI does
(each refusal is kept in `over`).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

from tests.agent.scripted_server import NOT_FOUND, Json, ScriptedServer, Stream

STEP = {
    "run_command": re.compile(r"echo (\d+) >> steps\.txt"),
    "write_file": re.compile(r"step(\d+)\.txt"),
    "read_file": re.compile(r"step(\d+)\.txt"),
}
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


class StepPlanner:
    def __init__(
        self,
        steps: int,
        tool: str = "run_command",
        window: int = 4096,
        content_chars: int = 0,
        faithful: bool = True,
        failing_summaries: bool = False,
    ) -> None:
        self.steps = steps
        self.tool = tool
        self.window = window
        self.content_chars = content_chars
        self.faithful = faithful
        self.failing_summaries = failing_summaries
        self.failed_summaries = 0
        self.pattern = STEP[tool]
        self.peak = 0
        self.over: list[int] = []
        self.summaries = 0
        self.calls = 0
        self.issued: list[int] = []
        """Every step a reply called a tool for, in order (a step lost to compaction shows up twice)."""
        self.server_seconds = 0.0
        self._ids = itertools.count(1)
        self.server = ScriptedServer(self.answer)

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        return len(json.dumps(body.get("messages") or [])) // 4 + len(json.dumps(body.get("tools") or [])) // 4

    def seen_done(self, messages: list[dict[str, Any]]) -> int:
        """The highest step the request shows as done (0: none)."""
        text = json.dumps(messages)
        return max((int(n) for n in self.pattern.findall(text)), default=0)

    def answer(self, method: str, path: str, body: Any) -> Any:
        if method != "POST" or not path.endswith("/chat/completions") or not isinstance(body, dict):
            return NOT_FOUND
        started = time.perf_counter()
        try:
            return self._answer(body)
        finally:
            self.server_seconds += time.perf_counter() - started

    def _answer(self, body: dict[str, Any]) -> Any:
        tokens = self.prompt_tokens(body)
        self.peak = max(self.peak, tokens)
        if tokens > self.window:
            self.over.append(tokens)
            return Json(
                400,
                {
                    "error": {
                        "message": f"This model's maximum context length is {self.window} tokens. "
                        f"However, your messages resulted in {tokens} tokens.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                },
            )
        usage = {"prompt_tokens": tokens, "completion_tokens": 8, "total_tokens": tokens + 8}
        messages = body.get("messages") or []
        if not body.get("tools"):  # a summary request
            self.summaries += 1
            if self.failing_summaries:
                self.failed_summaries += 1
                return Json(500, {"error": {"message": "The server is overloaded", "type": "server_error"}})
            if not self.faithful:
                return Stream(["ok"], usage=usage)
            done = self.seen_done(messages)
            facts = (
                f"- Steps 1 to {done} are done: the last one was `echo {done} >> steps.txt`."
                if self.tool == "run_command"
                else f"- Steps 1 to {done} are done: the last file was step{done}.txt."
            )
            text = "\n".join(f"## {name}\n{facts if name == 'key_facts' else '- (none)'}" for name in SECTIONS)
            return Stream([text], usage=usage)
        self.calls += 1
        step = self.seen_done(messages) + 1
        if step > self.steps:
            return Stream([f"All {self.steps} steps are done."], usage=usage)
        self.issued.append(step)
        if self.tool == "run_command":
            arguments = {"command": f"echo {step} >> steps.txt"}
        elif self.tool == "read_file":
            arguments = {"path": f"step{step}.txt"}
        else:
            arguments = {"path": f"step{step}.txt", "content": f"step {step}\n" + "x" * self.content_chars}
        return Stream([], usage=usage, tool_calls=[(f"call_{next(self._ids)}", self.tool, json.dumps(arguments))])

    def task(self) -> str:
        if self.tool == "run_command":
            return f"Append the numbers 1 to {self.steps} to steps.txt, one run_command call per number."
        if self.tool == "read_file":
            return f"Read the files stepK.txt for K = 1 to {self.steps}, one read_file call per file."
        return f"Write the files stepK.txt for K = 1 to {self.steps}, one write_file call per file."
