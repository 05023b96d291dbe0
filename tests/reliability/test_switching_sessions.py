"""Switching sessions in the app takes the session's lock like `--resume`
and releases the one it leaves; "allow for this session" ends with the session (and with /clear)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable

from xun.agent.launch import open_session
from xun.context.sessions import SessionStore
from xun.tui.app import XunApp
from xun.tui.screens.sessions import SessionsScreen

from tui.helpers import submit, turn, wait_until

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")


@pytest.fixture(autouse=True)
def _no_user_settings(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))
    for name in SCRUBBED:
        monkeypatch.delenv(name, raising=False)


def _xun_run(workdir: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xun", "run", *argv],
        cwd=workdir,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _user_prompts(path: Path) -> list[str]:
    head = json.loads(path.read_text().splitlines()[0])
    return [m["text"] for m in head["messages"] if m.get("kind") == "user"]


async def _switch(pilot, app, ident: str) -> None:
    await submit(pilot, "/sessions")
    await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
    ids = [info.conversation_id for info in app.screen.sessions]
    app.screen.query_one(DataTable).move_cursor(row=ids.index(ident))
    await pilot.press("enter")


async def test_a_switch_takes_the_lock_releases_the_old_one_and_ends_session_permissions(offline_server, tmp_path):
    store = SessionStore(tmp_path)
    target = store.new()
    target.conversation_id = "target-session"
    target.add_user_message("what was I doing")
    target.add_agent_message({"role": "assistant", "content": "an answer"})
    store.save(target)
    session = open_session(tmp_path, base_url=offline_server.base_url, overrides=[], environ={})
    app = XunApp(session)
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            await turn(pilot, "hello")
            left = app.conversation.conversation_id
            app.agent.toolbox.allow_for_session("run_command")
            await _switch(pilot, app, "target-session")
            await wait_until(pilot, lambda: app.conversation.conversation_id == "target-session", what="the switch")
            assert app.agent.toolbox.allowed_for_session() == frozenset(), (
                "'allow for this session' outlived the session"
            )
            # another process on the session the app now has: refused, naming the app's process
            other = await asyncio.to_thread(_xun_run, tmp_path, "--resume", "target-session", "--", "x")
            assert other.returncode == 1, other.stdout + other.stderr
            assert f"session target-session is open in another xun process (pid {os.getpid()}" in other.stderr
            # the session left is free again, and its lock file is gone (a newcomer found them piling up)
            assert not (store.root / f"{left}.lock").exists()
            freed = await asyncio.to_thread(_xun_run, tmp_path, "--resume", left, "--", "y")
            assert freed.returncode == 0, freed.stderr
            await turn(pilot, "after the switch")
            app.agent.toolbox.allow_for_session("run_command")
            await submit(pilot, "/clear")
            await wait_until(
                pilot, lambda: not app.agent.toolbox.allowed_for_session(), what="/clear to end permissions"
            )
            await pilot.press("ctrl+q")
            await wait_until(pilot, lambda: app.return_code is not None)
    finally:
        session.close()
    assert not list(store.root.glob("*.lock")), "a clean exit leaves no lock file"
    assert _user_prompts(store.path_for(left)) == ["hello", "y"], "the other process's turn was lost"
    # the app's turn is in the file (before /clear saved the fresh start) and no foreign turn was overwritten
    assert "x" not in _user_prompts(store.path_for("target-session"))
