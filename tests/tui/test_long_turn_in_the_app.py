"""In the app: one long turn keeps going through its compactions, and the compaction log says
a summary was inside the turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.tui import messages as m
from xun.tui.app import XunApp

from tests.agent.planner import StepPlanner

from .helpers import of_type, turn


@pytest.mark.long
async def test_a_long_turn_runs_through_its_summaries_and_the_log_says_inside_the_turn(session_factory, tmp_path: Path):
    planner = StepPlanner(60, "run_command")
    planner.server.start()
    try:
        app = XunApp(
            session_factory(
                planner.server,
                "model.context_window=4096",
                "auto_compact.token_threshold=2500",
                "auto_confirm=true",
                "model.name=planner",
            )
        )
        seen: list = []
        async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
            await turn(pilot, planner.task(), timeout=120)
            rows = [entry.line() for entry in app.main.log_pane.entries if entry.kind == "summary"]
            assert rows and all("inside the turn:" in row for row in rows), rows
            assert "ledger" in app.main.log_pane.entries[-1].detail() or any("ledger" in r for r in rows)
            recorded = [e.event for e in of_type(seen, m.CompactionRecorded) if e.event.type == "summary_finished"]
            assert recorded and all(e.turn_rounds > 0 for e in recorded)
        assert [int(n) for n in (tmp_path / "steps.txt").read_text().split()] == list(range(1, 61))
        assert planner.over == []
    finally:
        planner.server.stop()
