"""Enter on a compaction-log row shows its whole detail in a box that scrolls and stays until Esc, at
60x20 too (a toast was cut at the screen's bottom and went away by itself; trial 2, finding 4)."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Static

from xun.tui.app import XunApp

from .helpers import finish, turn, wait_until
from .test_compaction import write_files


async def test_enter_on_a_log_row_opens_its_whole_detail_until_escape(offline_server, session_factory, tmp_path):
    names = write_files(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(60, 20)) as pilot:
        for name in names:
            await turn(pilot, f"read {name}")
        await finish(pilot, lambda: pilot.press("f5"))  # a summary: its detail has many lines
        await finish(pilot, lambda: pilot.press("f6"))  # nothing left to reclaim: a check that changed nothing
        await pilot.press("f4")  # the side panel, hidden below 100 columns
        app.main.log_pane.focus()
        app.main.log_pane.move_cursor(row=0)
        entry = app.main.log_pane.highlighted
        assert entry is not None
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.query(VerticalScroll), what="the detail box")
        detail = app.screen
        shown = str(detail.query_one("#detail-text", Static).render())
        expected = [line for line in entry.detail().splitlines() + app.main.log_pane.unchanged_detail().splitlines()]
        assert len(expected) >= 3
        for line in expected:
            assert " ".join(line.split()) in " ".join(shown.split()), line
        body = detail.query_one(VerticalScroll)
        body.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert body.scroll_y == body.max_scroll_y and body.region.bottom <= 20, "all of it can be scrolled into view"
        await pilot.pause(0.5)
        await pilot.press("down", "j", "up")
        assert app.screen is detail, "it stays until it is closed"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is not detail, what="Esc to close it")
