"""Snapshots of the app (SVG files in the top-level `snapshots/` folder), at 80x24 and 160x48.

Each state runs against the in-process offline demo model in a fixed working directory (paths show in
confirmations), with a fixed session id and `Presentation.fixed()` (no clock, no measured durations, no
blinking cursor). Every `run_before` first pauses, then drives the app and asserts the state it expects,
so a snapshot can never silently capture the wrong screen.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from xun.agent.launch import Session, open_session
from xun.tui.app import XunApp
from xun.tui.format import Presentation, tokens
from xun.tui.screens.confirm import ConfirmScreen
from xun.tui.screens.help import HelpScreen
from xun.tui.screens.inspector import InspectorScreen
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock

from .helpers import finish, submit, turn, wait_until

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]
WORK_ROOT = Path("/tmp/xun-snapshots")
"""Fixed, not `tempfile.gettempdir()`: the confirmation shows the absolute path, and TMPDIR varies."""
LINES = "".join(f"{i:03d} the context fills up one tool result at a time\n" for i in range(36))
SETTINGS = {"name": "xun", "threshold": 3200, "zones": ["calm", "warning", "alarm"], "keep": [12, 16]}


@pytest.fixture
def snapshot_app() -> Iterator[Callable[..., XunApp]]:
    opened: list[Session] = []

    def make(name: str, size: tuple[int, int], *overrides: str) -> XunApp:
        workdir = WORK_ROOT / f"{name}-{size[0]}x{size[1]}"
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        (workdir / "settings.json").write_text(json.dumps(SETTINGS, indent=2))
        for i in range(3):
            (workdir / f"part{i}.txt").write_text(f"part {i}\n" + LINES)
        (workdir / "notes.md").write_text("# Notes\n\nThe gauge shows tokens.\n")
        session = open_session(workdir, offline=True, overrides=list(overrides), environ={})
        session.conversation.conversation_id = f"snapshot-{name}"
        opened.append(session)
        return XunApp(session, presentation=Presentation.fixed())

    yield make
    for session in opened:
        session.close()


def settle(app: XunApp) -> None:
    """Nothing time-dependent left on screen."""
    app.clear_notifications()


async def read_parts(pilot, count: int = 3) -> None:
    for i in range(count):
        await turn(pilot, f"read part{i}.txt")


@pytest.mark.parametrize("size", SIZES)
def test_empty_start(snap_compare, snapshot_app, size):
    app = snapshot_app("empty", size)

    async def run_before(pilot) -> None:
        await pilot.pause()
        assert app.query_one("#welcome")
        assert app.main.prompt.has_focus and app.main.prompt.text == ""
        # an empty session's next request still carries the system prompt and the tool definitions
        assert app.main.gauge.figures_text() == f"{tokens(app.agent.request_tokens())} / 192k (1%)"
        assert app.query_one("#provider").has_class("badge")
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_near_the_threshold(snap_compare, snapshot_app, size):
    # the gauge's warning zone with nothing compacted: the seed's policy, since the cache-aware one would
    # already have reclaimed early above its low-water mark
    app = snapshot_app("near", size, "model.context_window=4000", "auto_compact.policy=seed")

    async def run_before(pilot) -> None:
        await pilot.pause()
        await read_parts(pilot, 2)
        await turn(pilot, "read settings.json")
        assert app.main.gauge.zone == "warning", app.main.gauge.figures_text()
        assert app.main.gauge.figures_text().endswith(f"/ 3.2k ({round(100 * app.main.gauge.now / 3200)}%) · window 4k")
        assert not app.main.log_pane.entries
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [*SIZES, pytest.param((60, 20), id="60x20")])
def test_after_a_reclaim(snap_compare, snapshot_app, size):
    """Narrow (80 and 60 columns), F8 shows the side panel in the chat's place, at the whole width."""
    app = snapshot_app("reclaim", size, "auto_compact.toolcall_keep_max=1")

    async def run_before(pilot) -> None:
        await pilot.pause()
        await read_parts(pilot, 3)
        await finish(pilot, lambda: pilot.press("f6"))
        assert app.main.log_pane.entries[-1].kind == "reclaim"
        assert len(app.main.recoverable.shown) == 2
        assert sum(b.reclaimed for b in app.main.chat.query(ToolBlock)) == 2
        await pilot.press("f8")
        assert app.main.recoverable.table.has_focus
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_the_inspector(snap_compare, snapshot_app, size):
    app = snapshot_app("inspector", size, "auto_compact.toolcall_keep_max=1")

    async def run_before(pilot) -> None:
        await pilot.pause()
        await turn(pilot, "read settings.json")
        await read_parts(pilot, 1)
        await finish(pilot, lambda: pilot.press("f6"))
        await pilot.press("f8", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen), what="the inspector")
        assert app.screen.language == "json"
        assert app.screen.record.tool_name == "read_file"
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_after_a_summary(snap_compare, snapshot_app, size):
    app = snapshot_app("summary", size, "auto_compact.summary_keep_max=4")

    async def run_before(pilot) -> None:
        await pilot.pause()
        await read_parts(pilot, 3)
        await finish(pilot, lambda: pilot.press("f5"))
        divider = app.main.chat.query(SummaryDivider).last()
        assert divider.state == "done" and "offloaded to .xun/conversation_history/snapshot-summary.md" in divider.text
        assert app.main.log_pane.entries[-1].kind == "summary"
        assert app.main.gauge.history[-1] < app.main.gauge.history[-2]
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [*SIZES, pytest.param((60, 20), id="60x20")])
def test_the_confirmation_modal(snap_compare, snapshot_app, size):
    app = snapshot_app("confirm", size)

    async def run_before(pilot) -> None:
        await pilot.pause()
        await submit(pilot, "write `The gauge shows tokens and the threshold.` to notes.md")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        assert app.screen.request.kind == "diff"
        assert "+The gauge shows tokens and the threshold." in app.screen.request.preview
        await wait_until(pilot, lambda: app.screen.armed, what="the confirmation to take answers")
        deny = app.screen.query_one("#deny")
        assert deny.region.right <= size[0] and deny.region.width >= len("Deny"), "every answer is on screen"
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_the_help_screen(snap_compare, snapshot_app, size):
    app = snapshot_app("help", size)

    async def run_before(pilot) -> None:
        await pilot.pause()
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        settle(app)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
