"""The app at the sizes people use (160x48, 80x24, 60x20): nothing it says is cut off (issue 25.11 and a
newcomer's trial)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.screens.inspector import InspectorScreen

from .helpers import finish, submit, wait_until, words_cut
from .test_inspector import prepare, reclaimed_app

SIZES = [(160, 48), (80, 24), (60, 20)]


async def open_modal(pilot, app: XunApp, command: str) -> None:
    await submit(pilot, command)
    await wait_until(pilot, lambda: app.screen is not app.screen_stack[0], what=command)
    await pilot.pause(0.1)


@pytest.mark.parametrize("size", SIZES)
async def test_a_modal_s_sentences_wrap_whole(offline_server, session_factory, tmp_path: Path, size):
    """`/mcp`'s "…add [mcp.servers.NAME] to the user co", the inspector's "…or find it with": a Label is as
    wide as its text unless told otherwise, and the box cut it off without an ellipsis."""
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1", "auto_compact.summary_keep_max=2"))
    async with app.run_test(size=size) as pilot:
        for command in ("/mcp", "/sessions"):  # no MCP server, no saved session yet: each says what to do
            await open_modal(pilot, app, command)
            assert words_cut(app.screen) == [], f"{command} at {size}"
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.screen_stack[0])
        await reclaimed_app(pilot, app)
        await finish(pilot, lambda: pilot.press("f5"))  # summarised since: the inspector says why no restore
        call_id = next(iter(app.conversation.compacted_toolcalls))
        app.post_message(m.OpenInspector(call_id))
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen), what="the inspector")
        for key in ("r", "c"):
            await pilot.press(key)
            await pilot.pause(0.1)
            assert words_cut(app.screen) == [], f"the inspector after {key} at {size}"
