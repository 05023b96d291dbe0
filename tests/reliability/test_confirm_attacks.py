"""Issue 13, items 7 and 8: approvals only of what the user saw, and only by keys meant as answers.

Item 8, the attack: keys typed while the confirmation appears (" thanks" at the end of a sentence) were
taken as answers, and `a` meant "allow once" in the app but "always" in `xun run`. In the real app
(Textual's pilot driving `XunApp` on the offline model) and in a real `xun run` on a pseudo-terminal,
keys typed ahead must answer nothing, and the same key must mean the same answer in both.

Item 7, the attack: a 34-line command whose last line was hidden behind "... (11 more lines)" was
approved; a write preview cut the middle out of a large file. The real tools, with the real terminal
prompt on a pseudo-terminal and the real dialog, must show every line, and refuse what is too large.
"""

from __future__ import annotations

import asyncio
import io
import os
import pty
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xun.agent.config import XunConfig
from xun.cli.console import TerminalConfirm, TextPrinter
from xun.agent.tools import CONFIRM_KEYS, Decision, ToolContext, default_toolbox
from xun.agent.tools.builtin import MAX_REVIEW_LINES, _command_confirmation
from xun.tui.app import XunApp
from xun.tui.screens.confirm import ConfirmScreen

from .helpers import submit, typing_fast, wait_until


async def finish(pilot, action) -> None:
    """Press the answer and wait until the turn is over."""
    before = pilot.app.work.finished
    await action()
    await wait_until(pilot, lambda: pilot.app.work.finished > before and pilot.app.work.busy is None, what="the turn")


SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")


# ----------------------------------------------------------------------------------------- item 8, app


async def test_keys_typed_as_the_dialog_opens_do_not_answer_it(offline_server, session_factory, tmp_path):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "run `touch pwned`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        screen = app.screen
        with typing_fast(screen):
            for key in (" ", "t", "h", "a", "n", "k", "s", "y", "enter"):  # still typing: " thanks", then more
                await pilot.press(key)
            for _ in range(16):  # typing goes on for 1.6 s: the dialog must stay unarmed all along
                await pilot.pause(0.1)
                await pilot.press("t")
                assert app.screen is screen and not screen.armed
        assert not (tmp_path / "pwned").exists()
        await wait_until(pilot, lambda: screen.armed, what="the dialog to take answers after the keys stop")
        assert app.screen is screen and not (tmp_path / "pwned").exists()
        assert app.main.prompt.text == "", (
            "keys typed at the dialog never reach the prompt behind it (a newcomer's trial)"
        )
        await finish(pilot, lambda: pilot.press("enter"))  # Enter on the focused button: the default, deny
        assert app.main.prompt.text == " thanksy" + "t" * 16, (
            "once it closed, what was typed is in the prompt, not sent"
        )
        assert "thanks" not in " ".join(m.text for m in app.conversation.messages if m.role == "user")
    assert not (tmp_path / "pwned").exists()


async def test_a_sentence_typed_once_the_dialog_is_ready_does_not_answer_it(offline_server, session_factory, tmp_path):
    """Someone typing their next prompt, not looking: "turn 8: read notes" holds an "n" (deny) and an "s"
    (allow for the session) after other letters; the first letter that is no answer takes the dialog back to
    waiting, and a lone answer key after a pause still answers."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "run `touch pwned`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        screen = app.screen
        await wait_until(pilot, lambda: screen.armed, what="the dialog to take answers")
        with typing_fast(screen):
            for key in "turn 8: read notes and s":
                await pilot.press("space" if key == " " else key)
                assert app.screen is screen and not screen.armed, f"{key!r} found the dialog ready"
            assert not (tmp_path / "pwned").exists()
            assert screen.query_one("#confirm-box").border_subtitle == ConfirmScreen.WAITING
        await wait_until(pilot, lambda: screen.armed, what="the dialog to take answers again")
        assert app.main.prompt.text == "", "what was typed is kept out of the prompt behind the dialog"
        await finish(pilot, lambda: pilot.press("y"))
        assert app.main.prompt.text == "turn 8: read notes and s", (
            "once it closed, it goes on into the prompt, not sent"
        )
    assert (tmp_path / "pwned").exists(), "a lone y after the pause allowed it once"


async def test_the_app_keys_are_the_command_line_keys(offline_server, session_factory, tmp_path):
    assert {k: d for k, d in CONFIRM_KEYS.items()} == {
        "y": Decision.ALLOW_ONCE,
        "s": Decision.ALLOW_SESSION,
        "n": Decision.DENY,
    }
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "run `touch by-a`")
        await wait_until(
            pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.armed, what="the confirmation"
        )
        await pilot.press("a")  # "allow once" before, "always" in xun run: now no answer (the dialog waits again)
        await pilot.pause(0.3)
        assert isinstance(app.screen, ConfirmScreen) and not (tmp_path / "by-a").exists()
        await wait_until(pilot, lambda: app.screen.armed, what="the dialog to take answers again")
        await finish(pilot, lambda: pilot.press("y"))
    assert (tmp_path / "by-a").exists()


# ----------------------------------------------------------------------------------------- item 8, CLI


def _xun_on_a_terminal(tmp_path: Path, prompt: str, before: bytes, answer: bytes) -> tuple[int, str]:
    """`xun run PROMPT` with a pseudo-terminal as stdin: `before` is typed at once (ahead of the question),
    `answer` once the question is on the screen. Returns the exit code and stderr."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "xun", "run", prompt],
            cwd=tmp_path,
            env=env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(slave)
        os.write(master, before)
        selector = selectors.DefaultSelector()
        selector.register(process.stderr, selectors.EVENT_READ)
        buffer = b""
        deadline = time.monotonic() + 30
        while b"Allow?" not in buffer and time.monotonic() < deadline:
            if selector.select(deadline - time.monotonic()):
                chunk = os.read(process.stderr.fileno(), 4096)
                if not chunk:
                    break
                buffer += chunk
        assert b"Allow?" in buffer, buffer
        time.sleep(0.5)
        assert process.poll() is None, "the typed-ahead keys answered the question"
        os.write(master, answer)
        _, rest = process.communicate(timeout=30)
        return process.returncode, (buffer + rest).decode(errors="replace")
    finally:
        os.close(master)


def test_the_command_line_ignores_typed_ahead_keys_and_a_is_not_an_answer(tmp_path):
    code, stderr = _xun_on_a_terminal(tmp_path, "run `touch pwned`", b"y\ny\ns\n", b"a\n")
    assert code == 0 and "the user declined" in stderr
    assert not (tmp_path / "pwned").exists()
    code, stderr = _xun_on_a_terminal(tmp_path, "run `touch made`", b"", b"y\n")
    assert code == 0 and (tmp_path / "made").exists()


# ----------------------------------------------------------------------------------------- item 7


def _context(tmp_path: Path, confirm) -> ToolContext:
    return ToolContext.from_config(XunConfig(), workdir=tmp_path, confirm=confirm, environ={})


async def test_the_terminal_shows_every_line_of_a_long_command(tmp_path):
    command = "\n".join([f"echo line {i}" for i in range(1, 34)] + ["touch hidden-last-line"])
    master, slave = pty.openpty()
    err = io.StringIO()
    try:
        os.write(master, b"n\n")  # typed ahead: discarded
        confirm = TerminalConfirm(TextPrinter(out=io.StringIO(), err=err, color=False), stdin=os.fdopen(slave, "r"))

        async def answer_no_after_asking(request):
            task = asyncio.ensure_future(confirm(request))
            for _ in range(200):
                if "Allow?" in err.getvalue():
                    break
                await asyncio.sleep(0.02)
            os.write(master, b"n\n")
            return await asyncio.wait_for(task, 20)

        outcome = await default_toolbox().call(
            "run_command", {"command": command}, _context(tmp_path, answer_no_after_asking)
        )
    finally:
        os.close(master)
    shown = err.getvalue()
    assert outcome.denied and not (tmp_path / "hidden-last-line").exists()
    assert "touch hidden-last-line" in shown and "more lines" not in shown
    assert all(f"echo line {i}" in shown for i in range(1, 34))


async def test_the_dialog_holds_the_whole_command_and_scrolls_to_its_end(offline_server, session_factory, tmp_path):
    command = "\n".join([f"echo line {i}" for i in range(1, 60)] + ["touch hidden-last-line"])
    request = _command_confirmation({"command": command}, _context(tmp_path, None))
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ConfirmScreen(request)
        await app.push_screen(screen)
        await pilot.pause()
        preview = screen.query_one("#confirm-preview")
        shown = screen.query_one("#confirm-preview-text").render()
        assert "touch hidden-last-line" in getattr(shown, "plain", str(shown))
        assert preview.max_scroll_y > 0  # taller than the dialog: it scrolls
        preview.scroll_end(animate=False)
        await pilot.pause()
        assert preview.scroll_y == preview.max_scroll_y
        lines = [line.rstrip() for line in app.export_screenshot().replace("&#160;", " ").splitlines()]
        assert any("touch hidden-last-line" in line for line in lines)
        assert "more lines" not in request.preview and request.preview.count("\n") >= 60


async def test_a_write_too_large_to_review_is_refused_and_a_large_one_is_shown_whole(tmp_path):
    asked = []

    async def allow(request):
        asked.append(request)
        return Decision.ALLOW_ONCE

    huge = "".join(f"row {i}\n" for i in range(MAX_REVIEW_LINES + 10))
    outcome = await default_toolbox().call(
        "write_file", {"path": "huge.txt", "content": huge}, _context(tmp_path, allow)
    )
    assert outcome.is_error and "too large to show for review" in outcome.text and asked == []
    assert not (tmp_path / "huge.txt").exists()

    old = "".join(f"row {i}\n" for i in range(3000))
    (tmp_path / "big.txt").write_text(old)
    new = old.replace("row 1500\n", "row 1500 CHANGED IN THE MIDDLE\n").replace("row 2\n", "row two\n")
    outcome = await default_toolbox().call("write_file", {"path": "big.txt", "content": new}, _context(tmp_path, allow))
    assert not outcome.is_error and (tmp_path / "big.txt").read_text() == new
    [request] = asked
    assert "+row 1500 CHANGED IN THE MIDDLE" in request.preview and "+row two" in request.preview
    assert "[..." not in request.preview and "characters cut" not in request.preview


@pytest.fixture
def session_factory(tmp_path):
    from xun.agent.launch import open_session

    opened = []

    def make(server, *overrides):
        session = open_session(tmp_path, base_url=server.base_url, overrides=list(overrides), environ={})
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()
