"""Snapshots of the screens beyond the panes (SVG files in `snapshots/test_snapshots_screens/`), at 80x24
and 160x48: the recall screen, the compaction preview, ask mode's question and the breakdown of what
fills the context. The same fixed setup as `test_snapshots.py` (its `snapshot_app`: a fixed working
directory and session id, the offline demo model, `Presentation.fixed()`); every `run_before` first
pauses, then drives the app and asserts the state it expects."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from xun.tui.screens.breakdown import BreakdownScreen
from xun.tui.screens.consent import ConsentScreen
from xun.tui.screens.preview import PreviewScreen
from xun.tui.screens.recall import RecallScreen

from .helpers import at_the_end, finish, submit, turn, wait_until
from .test_snapshots import SIZES, read_parts, settle, snapshot_app  # noqa: F401 - the fixture is used by name

AGENTS = "Keep the answers short; quote the files you read.\n"


def settle_all(app) -> None:
    """No notification on any screen: the modal's own, and those the screen under it still shows
    (`clear_notifications` refreshes only the top screen's)."""
    settle(app)
    for screen in app.screen_stack:
        screen.query("Toast").remove()


@pytest.mark.parametrize("size", SIZES)
def test_the_recall_screen(snap_compare, snapshot_app, size):  # noqa: F811
    app = snapshot_app("recall", size, "auto_compact.toolcall_keep_max=1")

    async def run_before(pilot) -> None:
        await pilot.pause()
        await read_parts(pilot, 3)
        await finish(pilot, lambda: pilot.press("f6"))
        await submit(pilot, "/recall context fills")
        await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="the recall screen")
        screen = app.screen
        await wait_until(pilot, lambda: screen.searches >= 1 and screen.entry is not None, what="results and an entry")
        assert len(screen.hits) == 2 and {h.source for h in screen.hits} == {"reclaimed"}
        assert screen.entry.id == screen.hits[0].id and screen.restore_state() == (True, "")
        assert screen.query_one("#recall-results", OptionList).highlighted == 0
        settle_all(app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_the_preview_screen(snap_compare, snapshot_app, size):  # noqa: F811
    app = snapshot_app("preview", size, "auto_compact.toolcall_keep_max=1", "auto_compact.summary_keep_max=4")

    async def run_before(pilot) -> None:
        await pilot.pause()
        await read_parts(pilot, 3)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview")
        screen = app.screen
        assert screen.figures.reclaim.count == 2 and not screen.figures.nothing_to_condense
        assert screen.figures.condensed == 8 and screen.figures.kept == 4
        settle_all(app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_the_ask_modal(snap_compare, snapshot_app, size):  # noqa: F811
    app = snapshot_app(
        "ask",
        size,
        "auto_compact.mode=ask",
        "auto_compact.token_threshold=2400",
        "auto_compact.summary_keep_max=4",
        "auto_compact.ask_timeout=600",
    )

    async def run_before(pilot) -> None:
        await pilot.pause()
        await turn(pilot, "please remember: " + "the quick brown fox jumps " * 80)
        await submit(pilot, "read part0.txt and part1.txt")  # their results put the next call over the threshold
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question")
        await wait_until(pilot, lambda: app.screen.armed, what="the question to take answers")
        assert app.screen.timeout == 600 and app.screen.keep_text
        assert app.screen.query_one("#now").has_focus
        await at_the_end(pilot, app.main.chat, "the chat")  # the question may come while the chat still lays out
        settle_all(app)
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_the_breakdown(snap_compare, snapshot_app, size):  # noqa: F811
    app = snapshot_app(
        "breakdown", size, "auto_compact.toolcall_keep_max=1", "model.context_window=5000", "auto_compact.policy=seed"
    )  # the reclaim by hand only (no early reclaim of the cache-aware policy)
    (app.workdir / "AGENTS.md").write_text(AGENTS)

    async def run_before(pilot) -> None:
        await pilot.pause()
        await read_parts(pilot, 3)
        await finish(pilot, lambda: pilot.press("f6"))
        app.main.gauge.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, BreakdownScreen), what="the breakdown")
        b = app.screen.breakdown
        assert b.part("section", "AGENTS.md") is not None and b.part("placeholders").count == 2
        assert len(b.largest) == 5 and b.window == 5000
        settle_all(app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
