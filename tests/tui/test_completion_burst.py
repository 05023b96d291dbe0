"""A slash command typed in one burst runs as typed: Enter never takes a completion computed for an
earlier, shorter text (the menu follows the text one message later, so a burst outruns it)."""

from __future__ import annotations

from textual import events

from xun.tui.app import XunApp
from xun.tui.widgets.notice_block import NoticeBlock

from .helpers import wait_until


def burst(app: XunApp, *keys: str) -> None:
    """Keys as a terminal delivers a fast burst: all queued before the app handles the first."""
    for key in keys:
        character = key if len(key) == 1 else None
        event = events.Key(
            key if len(key) > 1 else {" ": "space", ".": "full_stop", "/": "slash"}.get(key, key),
            character if key != "enter" else "\r",
        )
        event.set_sender(app)
        app._driver.send_message(event)


async def test_a_command_typed_in_one_burst_runs_with_its_argument(offline_server, session_factory, tmp_path):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        await pilot.press(*"/re")  # typed at a person's pace: the menu offers /recall first
        assert app.main.prompt.menu.is_open
        burst(app, *"nder out.html", "enter")
        await wait_until(
            pilot,
            lambda: (tmp_path / "out.html").exists() or app.main.prompt.text.strip(),
            what="the export or text left in the prompt",
        )
        await pilot.pause()
        assert app.main.prompt.text == "", f"the prompt holds {app.main.prompt.text!r}: a stale completion was taken"
        assert (tmp_path / "out.html").exists()
        assert any("out.html" in block.text for block in app.main.chat.query(NoticeBlock))


async def test_enter_on_a_partial_command_in_a_burst_completes_as_when_typed_slowly(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        await pilot.pause()
        burst(app, *"/rend", "enter")
        await wait_until(
            pilot,
            lambda: app.main.prompt.text == "/render ",
            timeout=3,
            what="Enter to take the completion of the text as it is, /render",
        )
