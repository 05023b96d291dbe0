"""`xun --offline` started as a user starts it, in a real terminal (tmux): the first screen shows the gauge
with its figures, and Ctrl+Q quits with status 0. Correctness only; the time to that screen is measured by
tests/benchmarks/bench_first_frame.py."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

SRC = Path(__file__).resolve().parents[2] / "src"
GAUGE = re.compile(r"─ context ─.*\n.*\b[\d.]+k? / [\d.]+k \(\d+%\)")
"""The gauge's pane title, and under it the estimate against the threshold ("1.2k / 192k (1%)")."""


class Terminal:
    """One tmux session on a private server (its own socket): nothing else's tmux is touched."""

    def __init__(self, name: str) -> None:
        self.socket = f"{name}-{os.getpid()}"
        self.name = name

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False).stdout

    def start(self, command: str, cwd: Path, size: tuple[int, int] = (120, 40)) -> None:
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd), command)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def wait_for(self, what: str, found, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if found(screen):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{what} never showed; the screen:\n{self.screen()}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def terminal():
    term = Terminal("xun-start")
    yield term
    term.close()


def test_xun_offline_shows_the_gauge_on_its_first_screen_and_quits_cleanly(terminal: Terminal, tmp_path: Path):
    home = tmp_path / "config"
    work = tmp_path / "work"
    work.mkdir()
    command = (
        f"env -u OPENAI_API_KEY -u XUN_HOME -u COLUMNS -u LINES XDG_CONFIG_HOME={shlex.quote(str(home))} "
        f"PYTHONPATH={shlex.quote(str(SRC))} {shlex.quote(sys.executable)} -m xun --offline; "
        "echo EXIT-STATUS=$?; sleep 60"
    )
    terminal.start(command, work)
    screen = terminal.wait_for("the gauge with its figures", GAUGE.search)
    assert "offline demo model" in screen
    screen = terminal.wait_for("the open session", lambda s: re.search(r"session [0-9a-f]{32}\s+ready", s))
    assert GAUGE.search(screen), screen
    terminal.tmux("send-keys", "-t", terminal.name, "C-q")
    screen = terminal.wait_for("the exit status", lambda s: "EXIT-STATUS=" in s)
    assert "EXIT-STATUS=0" in screen, screen
