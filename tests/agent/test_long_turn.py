"""Issue 23: one prompt, hundreds of tool rounds, over real HTTP with a stateless planner (it does the
step after the last one it can see done): the turn completes, every step runs exactly once, no request
is over the window, and the summaries cut inside the turn with the ledger beside them."""

from __future__ import annotations

import pytest

from tests.agent.helpers import make_agent
from tests.agent.planner import StepPlanner


@pytest.fixture
def planner_factory():
    started: list[StepPlanner] = []

    def start(*args, **kwargs) -> StepPlanner:
        planner = StepPlanner(*args, **kwargs)
        planner.server.start()
        started.append(planner)
        return planner

    yield start
    for planner in started:
        planner.server.stop()


def steps_written(folder, tool: str) -> list[int]:
    if tool == "run_command":
        return [int(line) for line in (folder / "steps.txt").read_text().split()]
    return sorted(int(p.stem[4:]) for p in folder.glob("step*.txt"))


async def run_long_turn(planner: StepPlanner, tmp_path):
    agent, rec = make_agent(planner.server, tmp_path, auto_confirm=True, model__context_window=4096,
                            auto_compact__token_threshold=2500)
    finished = await agent.run(planner.task(), max_iterations=planner.steps + 50)
    return agent, rec, finished


@pytest.mark.parametrize("faithful", [True, False], ids=["faithful-summary", "useless-summary"])
async def test_a_turn_of_300_commands_completes_with_every_step_once(planner_factory, tmp_path, faithful):
    planner = planner_factory(300, "run_command", faithful=faithful)
    agent, rec, finished = await run_long_turn(planner, tmp_path)
    assert finished.status == "ok", [getattr(e, "reason", getattr(e, "message", "")) for e in rec.of("turn_finished")]
    assert steps_written(tmp_path, "run_command") == list(range(1, 301))  # each exactly once, in order
    assert planner.over == []
    summaries = rec.of("summary_finished")
    assert summaries and all(s.turn_rounds > 0 for s in summaries)  # every summary cut inside the turn
    assert not [e for e in rec.of("compaction_skipped") if "current turn" in e.reason]
    ledger = agent.conversation.messages[0].ledger
    assert ledger is not None and ledger.calls >= 250
    if not faithful:
        assert any(s.method == "extractive" for s in summaries)


async def test_a_turn_of_large_writes_completes(planner_factory, tmp_path):
    planner = planner_factory(80, "write_file", content_chars=3000)
    agent, rec, finished = await run_long_turn(planner, tmp_path)
    assert finished.status == "ok"
    assert steps_written(tmp_path, "write_file") == list(range(1, 81))
    assert planner.over == []
    assert all(len((tmp_path / f"step{i}.txt").read_text()) > 3000 for i in range(1, 81))


async def test_the_dead_end_notice_is_said_once_per_turn_not_once_per_call(planner_factory, tmp_path):
    """A window too small for anything but the newest rounds: compaction cannot get under the threshold;
    it says so once, and the turn goes on."""
    planner = planner_factory(40, "run_command")
    agent, rec = make_agent(planner.server, tmp_path, auto_confirm=True, model__context_window=4096,
                            auto_compact__token_threshold=900)
    finished = await agent.run(planner.task(), max_iterations=100)
    assert finished.status == "ok"
    notices = [e for e in rec.events if e.type in ("compaction_skipped", "compaction_failed") and getattr(e, "trigger", "") == "auto"]
    assert len(notices) <= 1, [e.reason for e in notices]
    assert steps_written(tmp_path, "run_command") == list(range(1, 41))


async def test_a_large_result_is_not_summarised_away_and_read_again(offline_server, tmp_path):
    """The newcomer's loop: with the threshold at 3,000, a third read of an 80-line file ran to
    max_iterations, each summary taking the read away and the model reading it again."""
    (tmp_path / "notes.txt").write_text("".join(f"note line {i}: " + "words " * 10 + "\n" for i in range(80)))
    agent, rec = make_agent(offline_server, tmp_path, auto_compact__token_threshold=3000)
    for _ in range(3):
        finished = await agent.run("read notes.txt", max_iterations=20)
        assert finished.status == "ok" and finished.iterations <= 3, finished
