"""xun against a real llama.cpp server (llama-cpp-python, SmolLM2-135M, a 2,048-token window).

What the server itself saw is the judge: its access log counts the chat requests, its own errors count the
requests that did not fit, and its `usage` counts a prompt. The tests assert on mechanism (nothing over the
window, a clear error, summaries checked before they are applied, an estimate close to the server's
count), never on what the model writes.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from cli.helpers import Cli
from xun.agent.loop import Agent
from xun.agent.config import XunConfig
from xun.context.conversation import Conversation
from xun.compact.extractive import summary_problem
from xun.agent.launch import open_session

from .conftest import INSTALL, N_CTX, LlamaServer, missing

if missing() is not None:
    pytest.skip(f"real llama.cpp server: {missing()}; install it with: {INSTALL}", allow_module_level=True)

TOPICS = ("the parser", "the build", "the test suite", "the release notes", "the cache", "the web client",
          "the database schema", "the logging", "the command line", "the configuration", "the packaging", "the docs")


def prompt(turn: int, chars: int = 1000) -> str:
    """About `chars` characters of a realistic, varied note for turn `turn`."""
    topic = TOPICS[turn % len(TOPICS)]
    words = (f"Turn {turn}: a note about {topic}. The file src/module_{turn}.py holds the code for {topic}; "
             f"run `make test-{turn}` after changing it. Keep the behaviour of {topic} as it is, and tell me "
             "in one sentence what you would check first. ")
    return (words * (chars // len(words) + 1))[:chars]


def real_args(server: LlamaServer, *extra: str) -> list[str]:
    return ["--base-url", server.base_url, "--model", "smollm2", "--set", "model.temperature=0", *extra]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_twelve_resumed_turns_fit_the_window_and_summaries_happen(llama_server: LlamaServer, cli: Cli):
    mark = llama_server.mark()
    settings = ("--set", f"model.context_window={N_CTX}", "--set", "auto_compact.token_threshold=1200")
    events: list[dict] = []
    for turn in range(12):
        resume = ("--resume",) if turn else ()
        result = cli("run", "--json", *real_args(llama_server, *settings), *resume, "--", prompt(turn), timeout=600)
        result.check(0)
        events += result.events
    assert [e["status"] for e in events if e["type"] == "turn_finished"] == ["ok"] * 12
    assert any(e["type"] == "summary_finished" and e["status"] == "compacted" for e in events)
    assert llama_server.overflows(mark) == [], "the server refused a request as longer than its window"
    before_calls = [e for e in events if e["type"] == "usage" and e["source"] == "estimate"]
    assert before_calls and all(e["context_window"] == N_CTX for e in before_calls)
    # every summary that was applied has the required sections: a bad one was retried, then replaced
    saved = cli.only_session()
    assert saved["messages"][0]["is_compressed"] and summary_problem(saved["messages"][0]["content"], None) is None


def test_an_unknown_window_is_learned_once_and_then_kept(llama_server: LlamaServer, cli: Cli):
    """llama-cpp-python does not say its window: the first overflow (a 200 stream with no data) teaches
    it, the turn still succeeds, and later sessions start from what was learned."""
    mark = llama_server.mark()
    turns = []
    for turn in range(10):
        resume = ("--resume",) if turn else ()
        turns.append(cli("run", "--json", *real_args(llama_server), *resume, "--", prompt(turn), timeout=600).check(0))
    refused = llama_server.overflows(mark)
    assert len(refused) <= 1, refused
    warnings = [w["message"] for t in turns for w in t.of("warning")]
    if refused:
        assert any("too long" in w and "window" in w for w in warnings), warnings
        learned = [e for t in turns for e in t.of("usage") if e["context_window"]]
        assert learned and learned[-1]["context_window"] < N_CTX and "assumed" in learned[-1]["window_source"]
    assert all(t.events[-1]["status"] == "ok" for t in turns)


def test_a_prompt_that_cannot_fit_is_refused_and_nothing_is_sent(llama_server: LlamaServer, cli: Cli):
    settings = ("--set", f"model.context_window={N_CTX}")
    cli("run", "--json", *real_args(llama_server, *settings), "--", "Say hello.", timeout=300).check(0)
    before = cli.only_session()["messages"]
    mark = llama_server.mark()
    huge = prompt(99, chars=17_000)
    result = cli("run", "--json", *real_args(llama_server, *settings), "--resume", "--", huge, timeout=300).check(1)
    error = result.of("error")[0]["message"]
    assert re.search(r"about [\d,]+ tokens are needed and [\d,]+ are available \(window 2,048", error), error
    assert "nothing was sent" in error
    assert llama_server.chat_requests(mark) == 0
    assert result.events[-1]["status"] == "error" and result.events[-1]["restored_prompt"] == huge
    assert cli.only_session()["messages"] == before, "the prompt that was never sent is not in the session"
    text = cli("run", *real_args(llama_server, *settings), "--resume", "--", huge, timeout=300)
    assert text.returncode == 1 and "xun: " in text.stderr and "2,048" in text.stderr


class MeasuredAgent(Agent):
    """Before each model call, asks the server what the exact request costs (a one-token, non-streamed
    copy of it), next to xun's own estimate."""

    server: LlamaServer
    rows: list[tuple[int, int, int]]

    async def _stream_once(self):
        request = self._request(stream=False)
        counted = await asyncio.to_thread(self.server.prompt_tokens, request["messages"])
        self.rows.append((len(self.conversation.messages), self.request_tokens(), counted))
        return await super()._stream_once()


async def test_the_calibrated_estimate_is_within_five_percent_of_the_server(llama_server: LlamaServer, tmp_path: Path):
    config = XunConfig()
    config.provider.base_url = llama_server.base_url
    config.model.name = "smollm2"
    config.model.temperature = 0
    config.model.context_window = N_CTX
    config.auto_compact.token_threshold = 1400
    agent = MeasuredAgent(config, conversation=Conversation(offload_dir=tmp_path / "history"), workdir=tmp_path, environ={})
    agent.server, agent.rows = llama_server, []
    agent.system("You are a careful assistant. Answer in one short sentence.")
    try:
        for turn in range(6):
            finished = await agent.run(prompt(turn, chars=600))
            assert finished.status == "ok", finished.error
    finally:
        await agent.aclose()
    assert agent.knowledge.calibration is not None, "the tokenize endpoint calibrated the estimate"
    print("\nmessages  estimate  server  error")
    for messages, estimate, counted in agent.rows:
        print(f"{messages:8}  {estimate:8}  {counted:6}  {100 * (estimate - counted) / counted:+5.1f}%")
    errors = [abs(estimate - counted) / counted for _, estimate, counted in agent.rows]
    assert len(errors) >= 6 and max(errors) <= 0.05, agent.rows


async def test_f5_in_the_app_summarises_through_the_real_model(llama_server: LlamaServer, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    from xun.tui.app import XunApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    session = open_session(tmp_path, base_url=llama_server.base_url, model="smollm2", environ={},
                           overrides=["model.temperature=0", f"model.context_window={N_CTX}"])
    conversation = session.agent.conversation
    for turn in range(6):  # an earlier conversation, as a resumed session would have it
        conversation.add_user_message(prompt(turn, chars=500))
        conversation.add_agent_message({"role": "assistant", "content": f"I would first check src/module_{turn}.py."})
    conversation.add_user_message("Which files did we talk about?")
    conversation.add_agent_message({"role": "assistant", "content": "Six modules, src/module_0.py to src/module_5.py."})
    mark = llama_server.mark()
    app = XunApp(session)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("f5")
            for _ in range(1200):
                await pilot.pause(0.1)
                kinds = [row.get("type") for row in conversation.compaction_log]
                if "summary_finished" in kinds or "compaction_failed" in kinds:
                    break
            kinds = [row.get("type") for row in conversation.compaction_log]
            assert "summary_finished" in kinds, conversation.compaction_log
            finished = next(r for r in conversation.compaction_log if r["type"] == "summary_finished")
            assert finished["status"] == "compacted"
            summary = conversation.messages[0].content
            assert summary_problem(summary, None) is None, "an unusable summary was applied"
            rejected = [r for r in conversation.compaction_log if r["type"] == "summary_rejected"]
            assert finished["method"] == "model" or len(rejected) >= 2, json.dumps(conversation.compaction_log)
            if finished["method"] == "extractive":  # the user's prompts survive word for word
                assert prompt(5, chars=500)[:200] in summary.replace('\\"', '"')
            assert llama_server.chat_requests(mark) >= 1 and llama_server.overflows(mark) == []
            await pilot.press("ctrl+q")
    finally:
        session.close()
