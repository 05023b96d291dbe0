"""The app at the sizes people use (160x48, 80x24, 60x20): nothing it says is cut off (issue 25.11 and a
newcomer's trial)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.screens.inspector import InspectorScreen
from xun.tui.widgets.key_bar import KeyBar

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


def key_bar_text(app: XunApp) -> tuple[list[str], bool]:
    """The keys on the bar ("f1 Help", …) and whether each is whole inside it."""
    from textual.widgets._footer import FooterKey

    bar = app.query_one(KeyBar)
    keys = [key for key in bar.query(FooterKey) if key.display]
    whole = all(bar.region.x <= key.region.x and key.region.right <= bar.region.right for key in keys)
    return [f"{key.key_display} {key.description}" for key in keys], whole


@pytest.mark.parametrize("size", SIZES)
async def test_the_key_bar_shows_whole_keys_the_most_needed_first(offline_server_factory, session_factory, size):
    """At 60x20 it ended in "f8 Resul" and Ctrl+Q was off the screen."""
    server = offline_server_factory(faults="slow:0.5@1")
    app = XunApp(session_factory(server))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        shown, whole = key_bar_text(app)
        assert whole, shown
        assert shown[0] == "f1 Help" and shown[-1] == "^q Quit", shown
        if size[0] >= 80:
            assert len(shown) == 8, "every key fits from 80 columns"
        await submit(pilot, "hello")  # a turn adds Esc Cancel
        await wait_until(pilot, lambda: "esc Cancel" in key_bar_text(app)[0], what="the cancel key")
        shown, whole = key_bar_text(app)
        assert whole and shown[0] == "f1 Help" and shown[-1] == "^q Quit", shown


async def test_the_key_bar_follows_a_resize(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert len(key_bar_text(app)[0]) == 8
        await pilot.resize_terminal(60, 20)
        await wait_until(pilot, lambda: len(key_bar_text(app)[0]) < 8, what="keys left out")
        shown, whole = key_bar_text(app)
        assert whole and "^q Quit" in shown, shown
        await pilot.resize_terminal(120, 40)
        await wait_until(pilot, lambda: len(key_bar_text(app)[0]) == 8, what="every key back")
