"""F9 on a large index: the recall screen opens with the index's counts without reading its rows (a session
of weeks indexes tens of thousands), and the counts it shows are right."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from textual.widgets import Label

from xun.context import recall
from xun.context.recall import RecallIndex
from xun.context.reclaimed import ReclaimedToolResult
from xun.tui.app import XunApp
from xun.tui.screens.recall import RecallScreen

from .helpers import wait_until

ROWS = 10_000


def big_index(workdir: Path) -> None:
    index = RecallIndex(workdir)
    for start in range(0, ROWS, 2_500):
        results = [
            (ReclaimedToolResult(f"call_{i}", "read_file", f'{{"path": "f{i}.py"}}', 40), f"the result of call {i}")
            for i in range(start, start + 2_500)
        ]
        assert index.index_reclaimed("weeks-ago", results) is None


async def test_f9_opens_without_reading_the_whole_index(offline_server, session_factory, tmp_path: Path, monkeypatch):
    big_index(tmp_path)
    app = XunApp(session_factory(offline_server))
    steps = [0]
    connect = sqlite3.connect

    def counting(*args, **kwargs):
        """Every connection counts the SQLite virtual-machine steps it executes: its work, row by row."""
        db = connect(*args, **kwargs)

        def step() -> int:
            steps[0] += 1
            return 0

        db.set_progress_handler(step, 1)
        return db

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.prompt.has_focus, what="the session")
        monkeypatch.setattr(recall.sqlite3, "connect", counting)
        await pilot.press("f9")
        await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="the recall screen")
        status = app.screen.query_one("#recall-status", Label)
        await wait_until(pilot, lambda: "indexed here" in str(status.render()), what="the counts")
        assert "0 offloaded messages and 10,000 reclaimed results indexed here" in str(status.render())
        assert 0 < steps[0] < ROWS // 2, steps  # counting the entries themselves took over 10 steps a row
