"""A server's token counts are believed only when they can be true of what they count (`believable_count`).

Each test drives the real agent over real HTTP through several turns against `CountingServer`, a vLLM-like
server with a window of 8,192 that counts honestly unless told to lie, with the compaction threshold at
6,000: the turns must all go, compaction must still happen below the window, and no request over the
window may be sent. The lies: its tokenize endpoints (`/extras/tokenize/count`, `/tokenize`) answering
±10^9; the `usage` of every reply; its answer to the calibration's `max_tokens=1` request, which
`estimates.json` keeps for later sessions.
"""

from __future__ import annotations

import json

import pytest
from tui.helpers import turn, wait_until

from xun.agent.launch import open_session
from xun.agent.tools import Toolbox
from xun.agent.window import LearnedEstimates
from xun.tui.app import XunApp

from .helpers import make_agent
from .hostile_server import CountingServer, honest_usage

WINDOW = 8192
THRESHOLD = 6000
BUDGET = WINDOW - WINDOW // 8
"""The most a request may hold: the window less the reply's reserve (an eighth of it)."""
NOT_BELIEVED = "so xun does not believe it"


@pytest.fixture
def server():
    counting = CountingServer(WINDOW)
    yield counting
    counting.stop()


def session(server, workdir):
    agent, rec, _ = make_agent(server, workdir, auto_compact__token_threshold=THRESHOLD)
    agent.toolbox = Toolbox()  # the counting server counts message text only
    return agent, rec


def prompt(turn: int) -> str:
    """About a thousand tokens: six turns reach the threshold."""
    return f"turn {turn}: " + "notes about the parser and its tests " * 105


async def turns(agent, first: int, count: int) -> list:
    return [await agent.run(prompt(turn)) for turn in range(first, first + count)]


def assert_compacted_below_the_window(server, rec, finished) -> None:
    assert [f.status for f in finished] == ["ok"] * len(finished), [f.error for f in finished]
    assert server.refused == [], "a request over the window was sent"
    assert rec.of("summary_finished"), "compaction happened"
    assert max(server.prompts) <= BUDGET


def said_once(rec) -> int:
    return len([w for w in rec.of("warning") if NOT_BELIEVED in w.message])


def stored_measure(server) -> dict | None:
    entries = json.loads(LearnedEstimates().path.read_text()) if LearnedEstimates().path.exists() else {}
    return entries.get(f"{server.base_url} xun-offline")


@pytest.mark.parametrize("endpoint", ["/extras/tokenize/count", "/tokenize"])
@pytest.mark.parametrize("lie", [10**9, -(10**9)])
@pytest.mark.parametrize("when", ["always", "after the calibration"])
async def test_a_tokenizer_count_that_cannot_be_true_is_not_believed(endpoint, lie, when, server, tmp_path):
    """10^9 made every turn fail ("about 1,000,001,189 tokens are needed"); -10^9 turned compaction off in
    effect, until a request over the window was sent and refused. Lying from the calibration on, or only
    in the counts of each request before it is sent: xun's own estimate stands in, and it says so once."""
    server.tokenize_paths = {endpoint}
    if when == "always":
        server.count = lambda tokens: lie
    agent, rec = session(server, tmp_path)
    finished = await turns(agent, 0, 1)
    server.count = lambda tokens: lie
    finished += await turns(agent, 1, 8)
    assert_compacted_below_the_window(server, rec, finished)
    assert said_once(rec) == 1


@pytest.mark.parametrize(
    "lie",
    [
        {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        {"prompt_tokens": 5_000_000, "completion_tokens": 2, "total_tokens": 5_000_002},
        {"prompt_tokens": 900, "completion_tokens": 5_000_000, "total_tokens": 5_000_900},
    ],
    ids=["a tiny prompt", "a huge prompt", "a huge completion"],
)
async def test_a_replys_usage_that_cannot_be_true_of_the_request_is_not_believed(lie, server, tmp_path):
    """Whole numbers under 10^8, so believed before. With no tokenizer to count each request (as OpenAI's
    API), a prompt of 1 token turned compaction off until the server refused a request over its window;
    five million made every turn compact, and billed them."""
    server.tokenize_paths = set()
    server.usage = lambda prompt, completion: lie
    agent, rec = session(server, tmp_path)
    finished = await turns(agent, 0, 9)
    assert_compacted_below_the_window(server, rec, finished)
    assert len(rec.of("summary_finished")) <= 2, "no more summaries than honest counts make"
    assert agent.conversation.usage_totals.get("prompt", 0) < 100_000, "a count not believed is not billed"
    assert "disbelieved" in [e.source for e in rec.of("usage")]
    assert said_once(rec) == 1


async def test_the_gauge_says_the_servers_count_was_not_believed(server, tmp_path, monkeypatch):
    """In the app, a reply's count that could not be true is not shown as "reported": the gauge's line says
    the figure is xun's estimate because the server's count was not believed, and a warning says why."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    server.usage = lambda prompt, completion: {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    session = open_session(tmp_path, base_url=server.base_url, overrides=[], environ={})
    app = XunApp(session)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: app.agent.window.known, what="the window from /v1/models")
            await turn(pilot, prompt(0))
            assert "the server's count was not believed" in app.main.gauge.detail_text()
            assert "reported" not in app.main.gauge.detail_text()
            notices = [n.text for n in app.main.chat.query("NoticeBlock")]
            assert any(NOT_BELIEVED in n for n in notices), notices
    finally:
        session.close()


@pytest.mark.parametrize("lie", [-900_000, 900_000])
async def test_a_hostile_calibration_answer_is_not_kept(lie, server, tmp_path):
    """One answer to the calibration's single-token request was kept as the fixed cost of every request
    (-900,071 or +899,929): the probe's count is judged against the probe's size, and not kept."""
    server.probe = lambda tokens: tokens + lie
    first, rec = session(server, tmp_path)
    finished = await turns(first, 0, 2)
    assert [f.status for f in finished] == ["ok", "ok"], [f.error for f in finished]
    stored = stored_measure(server)
    assert stored is None or abs(stored["fixed_tokens"]) < 100, stored
    assert said_once(rec) == 1
    server.probe = lambda tokens: tokens
    second, rec = session(server, tmp_path)
    assert_compacted_below_the_window(server, rec, await turns(second, 0, 9))


@pytest.mark.parametrize("fixed", [-900_071, 899_929])
async def test_a_poisoned_estimates_file_does_not_survive_the_next_session(fixed, server, tmp_path):
    """What an older xun wrote after one hostile calibration answer: with -900,071 eleven turns went by
    without compaction (8,014 of 8,192); with +899,929 every turn failed "the prompt does not fit", so no
    reply could correct it. Against an honest server, the next session drops it and measures again."""
    LearnedEstimates().path.parent.mkdir(parents=True, exist_ok=True)
    LearnedEstimates().path.write_text(
        json.dumps(
            {
                f"{server.base_url} xun-offline": {
                    "tokens_per_char": 0.25,
                    "fixed_tokens": fixed,
                    "tool_tokens": 0,
                    "replies": 0,
                    "tokenizer": "text",
                }
            }
        )
    )
    agent, rec = session(server, tmp_path)
    assert_compacted_below_the_window(server, rec, await turns(agent, 0, 9))
    stored = stored_measure(server)
    assert stored is None or abs(stored["fixed_tokens"]) < 100, stored
    assert said_once(rec) == 1


async def test_a_believable_but_wrong_calibration_is_dropped_by_the_next_sessions_replies(server, tmp_path):
    """A probe answer within what the probe's size allows (a thousand tokens too many) is kept, and a
    server that streams no usage (llama-cpp-python) never corrects it; the next session's first reply with
    a count contradicts it (less that fixed cost, too little is left for the text), so the measure is
    dropped, forgotten and measured again: one bad calibration cannot outlive a reply."""
    server.probe = lambda tokens: tokens + 1000
    server.usage = lambda prompt, completion: None
    first, _ = session(server, tmp_path)
    assert [f.status for f in await turns(first, 0, 2)] == ["ok", "ok"]
    assert stored_measure(server)["fixed_tokens"] > 900, "believable: kept"
    server.probe = lambda tokens: tokens
    server.usage = honest_usage
    second, rec = session(server, tmp_path)
    assert_compacted_below_the_window(server, rec, await turns(second, 0, 9))
    assert abs(stored_measure(server)["fixed_tokens"]) < 100
    assert said_once(rec) == 1
