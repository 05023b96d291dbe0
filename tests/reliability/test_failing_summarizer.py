"""A summarizer that always fails (an overloaded server answers every summary request with HTTP 500),
over real HTTP with the stateless planner of `tests/agent/planner.py`: the server tells the summary
requests (no tools offered) from the turn's own calls, fails the first, and counts every request whose
prompt is over the window.

Three failed summaries pause the model's summaries. The pause stopped reclaims too: a long turn then grew
past the window with reclaimable results still in it, the window guard's summary failed as well, and the
turn ended ("the context does not fit"). Reclaims and the window guard must go on through the pause, and
where a summary is needed and the model gives none, xun's own (extractive) summary stands in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.tui.widgets.compaction_log import entry_from_record

from tests.agent.helpers import make_agent
from tests.agent.planner import StepPlanner

WINDOW = 4096


@pytest.fixture
def planner_factory():
    started: list[StepPlanner] = []

    def start(*args, **kwargs) -> StepPlanner:
        planner = StepPlanner(*args, window=WINDOW, failing_summaries=True, **kwargs)
        planner.server.start()
        started.append(planner)
        return planner

    yield start
    for planner in started:
        planner.server.stop()


def write_step_files(folder: Path, count: int, chars: int) -> None:
    """stepK.txt of about `chars` characters each: what a `read_file` planner reads."""
    for k in range(1, count + 1):
        (folder / f"step{k}.txt").write_text(
            "".join(f"step {k}, line {j}: some words to read\n" for j in range(chars // 36))
        )


def own_summaries(agent) -> list[dict]:
    return [
        r for r in agent.conversation.compaction_log if r["type"] == "summary_finished" and r["method"] == "extractive"
    ]


@pytest.mark.long
async def test_a_turn_of_300_rounds_completes_while_every_summary_request_fails(planner_factory, tmp_path):
    write_step_files(tmp_path, 300, 700)
    planner = planner_factory(300, "read_file")
    agent, rec = make_agent(
        planner.server, tmp_path, auto_confirm=True, model__context_window=WINDOW, auto_compact__token_threshold=2500
    )
    finished = await agent.run(planner.task(), max_iterations=350)
    assert finished.status == "ok", finished.error
    assert planner.issued == list(range(1, 301))  # every step once, in order
    assert planner.over == [] and planner.peak <= WINDOW  # no request over the window
    log = agent.conversation.compaction_log
    assert any(r["type"] == "tool_results_reclaimed" and r["count"] for r in log)
    assert own_summaries(agent) and not [r for r in log if r["type"] == "summary_finished" and r["method"] == "model"]
    assert all(r["own_because"] for r in own_summaries(agent))
    # the pause doubles (10, 20, 40, 80, 160 calls): a few failed requests in 300 calls, never one a call
    assert 0 < planner.failed_summaries <= 10 * agent.config.retry.attempts


async def test_reclaims_go_on_during_the_pause(planner_factory, tmp_path):
    """The issue's turn: large `read_file` results, a summarizer that fails. During the pause no reclaim
    ran, the request grew to the window with the reclaimable results in it, and the turn died."""
    write_step_files(tmp_path, 60, 700)
    planner = planner_factory(60, "read_file")
    agent, rec = make_agent(
        planner.server,
        tmp_path,
        auto_confirm=True,
        model__context_window=WINDOW,
        auto_compact__token_threshold=2500,
        retry__attempts=1,
    )
    finished = await agent.run(planner.task(), max_iterations=100)
    assert finished.status == "ok", finished.error
    assert planner.calls == 61 and planner.over == []
    kinds = [
        e.type
        for e in rec.events
        if e.type in ("tool_results_reclaimed", "compaction_failed", "summary_finished")
        or (e.type == "warning" and "pauses" in e.message)
    ]
    pause = kinds[kinds.index("warning") + 1 :]
    pause = pause[: pause.index("compaction_failed")]  # up to the model's next try
    assert "tool_results_reclaimed" in pause and "summary_finished" in pause
    assert all("paused" in r["own_because"] for r in own_summaries(agent))


async def test_the_window_guard_writes_xuns_own_summary_when_the_models_fails(planner_factory, tmp_path):
    """The threshold at 99% of the window: the window guard, not the policy, compacts. Its summary fails
    (the turn died there, with results it could still reclaim); xun's own stands in, and its failures
    pause the model's summaries as the policy's do."""
    write_step_files(tmp_path, 40, 1500)
    planner = planner_factory(40, "read_file")
    agent, rec = make_agent(
        planner.server,
        tmp_path,
        auto_confirm=True,
        model__context_window=WINDOW,
        auto_compact__threshold_ratio=0.99,
        retry__attempts=1,
    )
    finished = await agent.run(planner.task(), max_iterations=80)
    assert finished.status == "ok", finished.error
    assert planner.calls == 41 and planner.over == []
    own = own_summaries(agent)
    assert own and "the model's summary failed" in own[0]["own_because"] and "500" in own[0]["own_because"]
    assert any("pauses" in w.message for w in rec.of("warning"))
    assert planner.failed_summaries <= 5  # three, a pause, then one now and then


def test_the_compaction_log_says_a_summary_is_xuns_own_and_why():
    record = {
        "type": "summary_finished",
        "trigger": "auto",
        "condensed": 30,
        "kept": 4,
        "tokens_before": 3000,
        "tokens_after": 900,
        "method": "extractive",
        "why": "a reclaim first replaced nothing",
        "own_because": "the model's summary failed (HTTP 500 from the server): xun wrote its own",
    }
    entry = entry_from_record(record, lambda t: "12:00:00", lambda p: p or "")
    assert entry.kind == "summary" and entry.what.startswith("xun's own summary")
    assert "xun's own extractive summary: the model's summary failed (HTTP 500" in entry.detail()
    assert not entry_from_record(
        {**record, "method": "model"}, lambda t: "12:00:00", lambda p: p or ""
    ).what.startswith("xun's")
