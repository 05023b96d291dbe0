"""A long turn of large write_file calls over real HTTP: tier 1 reclaims the old calls' arguments, so the
requests stay under a small window far longer than reclaiming results alone allowed (5 of 80 steps)."""

from __future__ import annotations

import json
import re

import pytest

from xun.agent.tools import Toolbox
from xun.agent.tools.builtin import BUILTIN_TOOLS

from .helpers import make_agent
from .scripted_server import NOT_FOUND, Json, ScriptedServer, Stream

WINDOW, THRESHOLD, STEPS = 4096, 2500, 80
STEP = re.compile(r"out/step(\d+)\.txt")
SUMMARY = "\n".join(
    f"## {name}\n- writing out/stepN.txt files one by one"
    for name in (
        "system_context",
        "overview",
        "key_facts",
        "user_preferences",
        "decisions",
        "pending_tasks",
        "open_questions",
        "tone_context",
    )
)


def content(i: int) -> str:
    return f"# step {i}\n" + "".join(f"line {n} of step {i}\n" for n in range(200))[:3000]


def server_tokens(body) -> int:
    """The scripted server's count: 4 characters a token of message text and call arguments, 5 tokens of
    framing a message, and the tool definitions."""
    chars = len(json.dumps(body.get("tools") or []))
    for message in body["messages"]:
        text = message.get("content")
        chars += len(text) if isinstance(text, str) else len(json.dumps(text or ""))
        chars += sum(len(call["function"]["arguments"]) for call in message.get("tool_calls") or ())
    return -(-chars // 4) + 5 * len(body["messages"])


class Planner:
    """A stateless model: it sees only the request and writes the step after the highest one the request
    shows (a lost record shows as a repeated step); it refuses any request over the window."""

    def __init__(self) -> None:
        self.issued: list[int] = []
        self.sizes: list[int] = []

    def __call__(self, method: str, path: str, body):
        if method != "POST" or not path.endswith("/chat/completions"):
            return NOT_FOUND
        tokens = server_tokens(body)
        self.sizes.append(tokens)
        if tokens > WINDOW:
            return Json(
                400,
                {
                    "error": {
                        "code": 400,
                        "message": "the request exceeds the available context size",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": tokens,
                        "n_ctx": WINDOW,
                    }
                },
            )

        def usage(reply: str) -> dict[str, int]:  # the reply's tokens too: the total counts it
            return {
                "prompt_tokens": tokens,
                "completion_tokens": len(reply) // 4 + 5,
                "total_tokens": tokens + len(reply) // 4 + 5,
            }

        if "system_context" in json.dumps(body["messages"][-1]):
            return Stream([SUMMARY], usage=usage(SUMMARY))
        seen = [int(n) for n in STEP.findall(json.dumps(body["messages"]))]
        step = max(seen, default=-1) + 1
        if step >= STEPS:
            return Stream([f"wrote all {STEPS} files"], usage=usage("wrote all"))
        self.issued.append(step)
        arguments = json.dumps({"path": f"out/step{step}.txt", "content": content(step)})
        return Stream([], "tool_calls", usage(arguments), [(f"call_{step}", "write_file", arguments)])


@pytest.fixture
def planner_server():
    planner = Planner()
    server = ScriptedServer(planner).start()
    yield server, planner
    server.stop()


async def test_a_long_turn_of_large_write_file_calls_reclaims_their_arguments(planner_server, tmp_path):
    server, planner = planner_server
    agent, rec = make_agent(
        server, tmp_path, auto_confirm=True, model__context_window=WINDOW, auto_compact__token_threshold=THRESHOLD
    )
    agent.toolbox = Toolbox([tool for tool in BUILTIN_TOOLS if tool.name == "write_file"])
    finished = await agent.run(f"write the {STEPS} step files in out/, one call each", max_iterations=200)

    assert max(planner.sizes) <= WINDOW, "no request went over the window"
    assert len(planner.issued) == len(set(planner.issued)), "no step was issued twice"
    written = sorted(int(STEP.search(str(p.relative_to(tmp_path))).group(1)) for p in (tmp_path / "out").iterdir())
    assert written == list(range(len(written))) and len(written) >= 40, (
        f"{len(written)} steps (reclaiming results alone: 5)"
    )
    for i in written:
        assert (tmp_path / "out" / f"step{i}.txt").read_text() == content(i)
    reclaims = [e for e in rec.of("tool_results_reclaimed") if e.arguments]
    assert reclaims and all(e.tokens_after < e.tokens_before for e in reclaims)
    assert sum(e.arguments for e in reclaims) >= 30
    # what the model was last sent: old calls name their file and their archived content, as valid JSON
    calls = [call for message in server.chat_bodies()[-1]["messages"] for call in message.get("tool_calls") or ()]
    shown = [json.loads(call["function"]["arguments"]) for call in calls]
    reclaimed = [a for a in shown if "[Compacted, ID: " in a["content"]]
    assert all(STEP.fullmatch(a["path"]) for a in reclaimed)
    # with summaries inside the turn, the last request may hold only the newest rounds (none reclaimed)
    assert reclaimed or rec.of("summary_finished")
    assert all(
        len(call["function"]["arguments"]) < 200 for call in calls[:-1] if "[Compacted" in call["function"]["arguments"]
    )
    conversation = agent.conversation
    for call in calls:
        if "[Compacted" in call["function"]["arguments"]:
            step = int(STEP.search(call["function"]["arguments"]).group(1))
            assert json.loads(conversation.reclaimed_original(f"{call['id']}:arguments"))["content"] == content(step)
    if finished.status == "ok":  # tier 1 with the summaries inside a turn: the whole turn, every step once
        assert written == list(range(STEPS)) and planner.issued == list(range(STEPS))
    else:  # tier 1 alone: the placeholders of 80 rounds still outgrow a 4,096-token window in the end
        assert finished.status == "error"
