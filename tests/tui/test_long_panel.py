"""The side panel of a session of weeks: the recoverable results and the compaction log list thousands of rows
but mount a page of them (`PagedTable`), so a resize or F4 costs the same at any length; the cursor pages
through all of them, Ctrl+Home and Ctrl+End reach the ends, the title says which rows are mounted, and the
filter searches every row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xun.context.sessions import SessionStore
from xun.tui.app import XunApp
from xun.tui.screens.inspector import InspectorScreen

from .helpers import wait_until
from .long_sessions import add_round
from .terminal import Terminal, terminal  # noqa: F401 - a fixture

# ruff: noqa: F811 - the tests take the imported `terminal` fixture as a parameter

PAGE_ROWS = 100
"""Rows a page holds, unless four screens of the table hold more (`xun.tui.widgets.paged_table`)."""
ROUNDS = 1_200
KEPT = 12
RESULTS = ROUNDS - KEPT


def reclaimed_session(workdir: Path, rounds: int = ROUNDS) -> str:
    """`rounds` rounds of a read_file call each, all but the newest KEPT results reclaimed; its id."""
    store = SessionStore(workdir)
    conversation = store.new()
    conversation.conversation_id = "many-results"
    for i in range(rounds):
        add_round(conversation, i)
    conversation.compact_toolcall(keep_max=KEPT, write_index=False)
    conversation.record_usage(60_000)
    store.save(conversation)
    return conversation.conversation_id


async def resumed(pilot, app: XunApp) -> None:
    await wait_until(
        pilot,
        lambda: len(app.main.recoverable.records) == RESULTS and app.main.recoverable.shown,
        what="the results listed",
    )


@pytest.mark.long
async def test_the_recoverable_results_mount_a_page_and_the_cursor_pages_through_all(
    offline_server, session_factory, tmp_path: Path
):
    ident = reclaimed_session(tmp_path)
    app = XunApp(session_factory(offline_server, resume=ident))
    async with app.run_test(size=(140, 44)) as pilot:
        await resumed(pilot, app)
        listing, table = app.main.recoverable, app.main.recoverable.table
        assert table.row_count <= max(PAGE_ROWS, 4 * table.size.height) < RESULTS
        assert listing.border_title == f"recoverable results · rows 1–{table.row_count} of {RESULTS:,}"
        assert listing.border_subtitle.startswith(f"{RESULTS:,} results · ")  # counts read with their commas
        newest_first = [f"call_{i}" for i in reversed(range(RESULTS))]
        assert listing.shown == newest_first  # every row is listed, a page of them mounted

        await pilot.press("f8")
        await wait_until(pilot, lambda: table.has_focus, what="the list focused")
        first_page = table.row_count
        for _ in range(first_page - 1):
            await pilot.press("down")
        assert table.position == first_page - 1 and table.page_start == 0
        await pilot.press("down")  # past the page's last row: the next page is mounted around the cursor
        assert table.position == first_page and table.page_start > 0
        assert listing.selected_id == newest_first[first_page]
        assert f"rows {table.page_start + 1:,}–" in str(listing.border_title)
        await pilot.press("up")
        assert listing.selected_id == newest_first[first_page - 1]

        await pilot.press("ctrl+end")
        assert listing.selected_id == "call_0" and table.position == RESULTS - 1
        assert (
            listing.border_title == f"recoverable results · rows {RESULTS - table.row_count + 1:,}–{RESULTS:,} of 1,188"
        )
        await pilot.press("up")
        assert listing.selected_id == "call_1"
        await pilot.press("enter")  # the inspector opens the row under the cursor, far from the first page
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen), what="the inspector")
        assert app.screen.record.tool_call_id == "call_1"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, InspectorScreen), what="the inspector closed")

        table.focus()
        await pilot.press("ctrl+home")
        assert listing.selected_id == newest_first[0] and table.page_start == 0

        await pilot.resize_terminal(100, 30)  # a resize mounts the page again, never every row
        await pilot.resize_terminal(140, 44)
        await pilot.pause()
        assert table.row_count <= max(PAGE_ROWS, 4 * table.size.height) and listing.selected_id == newest_first[0]


async def test_the_filter_searches_every_row_not_only_the_page(offline_server, session_factory, tmp_path: Path):
    ident = reclaimed_session(tmp_path)
    app = XunApp(session_factory(offline_server, resume=ident))
    async with app.run_test(size=(140, 44)) as pilot:
        await resumed(pilot, app)
        listing, table = app.main.recoverable, app.main.recoverable.table
        mounted = {table.get_row_at(row)[-1].plain for row in range(table.row_count)}
        assert "call_7" not in mounted  # an old result, not on the first page
        await pilot.press("f8")
        await pilot.press(*"src/file7.py")
        await wait_until(pilot, lambda: listing.shown == ["call_7"], what="the old result found")
        assert table.row_count == 1 and listing.border_title == "recoverable results"
        assert str(listing.border_subtitle).startswith(f"1 of {RESULTS:,} shown")
        await pilot.press("escape")
        await wait_until(pilot, lambda: len(listing.shown) == RESULTS, what="the filter cleared")


async def test_the_compaction_log_mounts_a_page_of_a_long_log(offline_server, session_factory, tmp_path: Path):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.main.prompt.has_focus, what="the session")
        log = app.main.log_pane
        records = [
            {
                "type": "tool_results_reclaimed",
                "count": i + 1,
                "tokens_before": 9_000,
                "tokens_after": 8_000,
                "time": 1_700_000_000 + i,
                "ids": [f"call_{i}"],
                "trigger": "auto",
            }
            for i in range(2_000)
        ]
        log.load(records)
        assert len(log.entries) == 2_000 and log.row_count <= max(PAGE_ROWS, 4 * log.size.height) < 2_000
        assert log.highlighted is log.entries[-1]  # the newest event, as before
        assert log.border_title == f"compaction log · rows {2_001 - log.row_count:,}–2,000 of 2,000"
        log.focus()
        await pilot.press("ctrl+home")
        assert log.highlighted is log.entries[0] and log.highlighted.count == "1 result"
        await pilot.press("ctrl+end")
        log.add_record({**records[0], "count": 7, "ids": ["call_new"]})  # a new event: the cursor follows it
        assert log.highlighted is log.entries[-1] and log.highlighted.calls == ("call_new",)
        assert log.border_title.endswith("of 2,001")


def test_in_a_real_terminal_ctrl_end_reaches_the_oldest_of_thousands_of_results(terminal, tmp_path: Path):
    """`xun --resume` of a session with 1,188 reclaimed results, as a user sees it: the list's title says
    which rows are mounted, F8 then Ctrl+End reaches the oldest result, and a resize redraws at once."""
    workdir = tmp_path / "t0" / "work"  # where the fixture's first terminal runs
    workdir.mkdir(parents=True)
    ident = reclaimed_session(workdir)
    term: Terminal = terminal("--resume", ident, size=(160, 48))
    term.wait_for(lambda screen: f"rows 1–100 of {RESULTS:,}" in screen, what="the list's first page")
    term.keys("F8")
    term.keys("C-End")
    last_rows = re.compile(rf"rows [0-9,]+–{RESULTS:,} of {RESULTS:,}")  # the window's size follows the pane's height
    term.wait_for(lambda screen: last_rows.search(screen), what="the last page")
    term.wait_for(lambda screen: "file0.py" in screen, what="the oldest result on screen")
    term.tmux("resize-window", "-t", term.name, "-x", "120", "-y", "40")
    term.wait_for(
        lambda screen: screen.split("\n")[1].rstrip().endswith("╮") and len(screen.split("\n")[1].rstrip()) == 120,
        timeout=10,
        what="the app redrawn at 120 columns",
    )
    term.keys("C-q")
    assert term.wait_exit() == 0
