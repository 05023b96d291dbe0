"""`xun.tui.run(session)`, what plain `xun` calls, and what the header says about the model."""

from __future__ import annotations

import sys
from pathlib import Path

from xun.launch import open_session
from xun.tui import run
from xun.tui.app import XunApp

from .helpers import turn, wait_until


def test_run_returns_zero_after_a_quit_and_saves(offline_server, tmp_path: Path):
    session = open_session(tmp_path, base_url=offline_server.base_url, environ={})
    seen: dict[str, object] = {}

    async def drive(pilot) -> None:
        await turn(pilot, "hello from run")
        seen["reply"] = pilot.app.agent.last_reply()
        await pilot.press("ctrl+q")

    try:
        code = run(session, headless=True, size=(100, 30), auto_pilot=drive)
    finally:
        session.close()
    assert code == 0
    assert "hello from run" in str(seen["reply"])
    saved = session.store.load(session.conversation.conversation_id)
    assert [m.role for m in saved.messages][-2:] == ["user", "assistant"]


def test_importing_the_package_does_not_import_textual():
    import subprocess

    code = "import sys, xun.tui; print('textual' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


async def test_the_offline_demo_model_has_a_badge(tmp_path: Path):
    with open_session(tmp_path, offline=True, environ={}) as session:
        app = XunApp(session)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            badge = app.query_one("#provider")
            assert badge.has_class("badge") and "offline demo model" in str(badge.render())
            assert "xun-offline" in str(app.query_one("#model-name").render())
            assert "scripted, not an LLM" in app.query_one("#welcome").text


async def test_another_server_shows_its_address(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        provider = app.query_one("#provider")
        assert not provider.has_class("badge")
        assert offline_server.base_url in str(provider.render())
        assert app.header.status == "ready"
        await turn(pilot, "hello")
        await wait_until(pilot, lambda: app.header.status == "ready")
