"""xun's estimate of a request before it is sent, next to the server's own count of that request (the
reply's `usage.prompt_tokens`): shared by test_llama_cpp.py and tests/benchmarks/bench_estimate.py.

The session is a user's: the default tools, no window configured (discovered, or learned), a threshold
low enough that summaries happen (their requests are measured too: the summarizer is the same class).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from xun.agent.config import XunConfig
from xun.agent.loop import Agent
from xun.agent.window import LearnedEstimates, LearnedWindows
from xun.context.conversation import Conversation

from .conftest import REPLY_TOKENS, SUMMARY_TOKENS

TOPICS = (
    "the parser",
    "the build",
    "the test suite",
    "the release notes",
    "the cache",
    "the web client",
    "the database schema",
    "the logging",
    "the command line",
    "the configuration",
    "the packaging",
    "the docs",
)


def prompt(turn: int, chars: int = 1000) -> str:
    """About `chars` characters of a realistic, varied note for turn `turn`."""
    topic = TOPICS[turn % len(TOPICS)]
    words = (
        f"Turn {turn}: a note about {topic}. The file src/module_{turn}.py holds the code for {topic}; "
        f"run `make test-{turn}` after changing it. Keep the behaviour of {topic} as it is, and tell me "
        "in one sentence what you would check first. "
    )
    return (words * (chars // len(words) + 1))[:chars]


@dataclass(slots=True)
class Row:
    """One model call: xun's estimate before it, the server's count, and whether it was a summary's."""

    estimate: int
    counted: int
    summary: bool

    @property
    def error(self) -> float:
        return (self.estimate - self.counted) / self.counted


def server_count(base_url: str, request: dict) -> int:
    """The server's count of `request`'s prompt: the same messages and tools sent unstreamed for one token,
    its `usage.prompt_tokens` (llama-cpp-python reports usage only there, never in a stream)."""
    body = {"model": request["model"], "messages": request["messages"], "max_tokens": 1, "temperature": 0}
    if request.get("tools"):
        body["tools"] = request["tools"]
    sent = urllib.request.Request(
        f"{base_url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(sent, timeout=300) as response:
        return int(json.loads(response.read())["usage"]["prompt_tokens"])


class MeasuredAgent(Agent):
    """Keeps, for each model call, the estimate the window check judged and the server's count of it: the
    reply's `usage.prompt_tokens`, or (a server that reports no usage in a stream) its count of the same
    request sent unstreamed."""

    rows: list[Row]

    async def _stream_once(self):
        estimate, request = self.request_tokens(), self.request(stream=False)
        reply = await super()._stream_once()
        if reply.usage is not None and reply.usage.prompt_tokens:
            counted = int(reply.usage.prompt_tokens)
        else:
            counted = await asyncio.to_thread(server_count, self.config.provider.base_url, request)
        self.rows.append(Row(estimate, counted, self.bills_to is not None))
        return reply

    @classmethod
    def inherit(cls, agent, *args, **kwargs):
        child = super().inherit(agent, *args, **kwargs)
        child.rows = agent.rows  # the summarizer's calls are measured into the same list
        return child


@dataclass(slots=True)
class Measured:
    rows: list[Row] = field(default_factory=list)
    window_source: str = ""
    summaries: int = 0


async def measure_session(
    base_url: str, state: Path, work: Path, requests: int = 12, threshold: int = 1200, chars: int = 1000
) -> Measured:
    """Turns of ~`chars` characters until `requests` calls were measured; the learned windows and
    estimates live in `state` (a fresh folder: nothing remembered from elsewhere)."""
    config = XunConfig()
    config.provider.base_url = base_url
    config.model.name = "smollm2"
    config.model.temperature = 0
    config.model.output_reserve = REPLY_TOKENS
    config.compression.max_tokens = SUMMARY_TOKENS
    config.auto_compact.token_threshold = threshold
    agent = MeasuredAgent(config, conversation=Conversation(offload_dir=work / "history"), workdir=work, environ={})
    agent.rows = []
    agent.learned_windows = LearnedWindows(state / "windows.json")
    agent.learned_estimates = LearnedEstimates(state / "estimates.json")
    agent.system("You are a careful assistant. Answer in one short sentence.")
    measured = Measured(agent.rows)
    try:
        turn = 0
        while len(agent.rows) < requests and turn < 3 * requests:
            finished = await agent.run(prompt(turn, chars))
            assert finished.status == "ok", finished.error
            turn += 1
    finally:
        await agent.aclose()
    measured.window_source = agent.window.describe()
    measured.summaries = sum(1 for row in agent.conversation.compaction_log if row.get("type") == "summary_finished")
    return measured
