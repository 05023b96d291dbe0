"""`xun` as a user runs it: the real command in a real terminal (tmux), for what Pilot cannot see (the
terminal's own bytes, bracketed paste, the process's exit status)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import SLACK

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS", "NO_COLOR", "TMUX")


class Terminal:
    """One tmux session running `python -m xun --offline ARGS` in `workdir`; `exit_code` once it has quit.

    Each terminal has a tmux server of its own (`-L`), killed with it: tests running side by side share no
    server process, and nothing a test started outlives it."""

    def __init__(self, root: Path, *args: str, size: tuple[int, int] = (160, 48), env: dict[str, str] | None = None):
        if shutil.which("tmux") is None:
            pytest.skip("tmux is not installed")
        self.workdir = root / "work"
        self.home = root / "home"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        self._status = root / "exit-status"
        self.name = f"xun-test-{uuid.uuid4().hex[:8]}"
        environment = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        environment.update(
            HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"), TERM="xterm-256color", **(env or {})
        )
        command = " ".join(shlex.quote(part) for part in (sys.executable, "-m", "xun", "--offline", *args))
        script = f"{command}; echo $? > {shlex.quote(str(self._status))}; sleep 600"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items() if k.isidentifier())
        width, height = size
        self.tmux(
            "new-session",
            "-d",
            "-s",
            self.name,
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(self.workdir),
            f"env -i {exports} sh -c {shlex.quote(script)}",
        )
        self._socket = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def tmux(self, *args: str) -> str:
        """A tmux command to this terminal's own server; its output."""
        return subprocess.run(["tmux", "-L", self.name, *args], check=True, capture_output=True, text=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def wait_for(self, predicate: Callable[[str], object], timeout: float = 20, what: str = "") -> str:
        deadline = time.monotonic() + timeout * SLACK
        while True:
            screen = self.screen()
            if predicate(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or predicate}; the screen:\n{screen}")
            time.sleep(0.1)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def paste(self, text: str) -> None:
        """A bracketed paste, as a terminal sends one (tmux turns the LF of the buffer into CR)."""
        buffer = f"{self.name}-paste"
        self.tmux("set-buffer", "-b", buffer, text)
        self.tmux("paste-buffer", "-p", "-d", "-b", buffer, "-t", self.name)

    @property
    def exit_code(self) -> int | None:
        try:
            return int(self._status.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def wait_exit(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout * SLACK
        while self.exit_code is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"xun did not exit; the screen:\n{self.screen()}")
            time.sleep(0.1)
        return self.exit_code

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True)
        self._socket.unlink(missing_ok=True)


@pytest.fixture
def terminal(tmp_path: Path):
    """`terminal(*args, size=..., env=...)` starts xun in tmux; every session is killed after the test."""
    started: list[Terminal] = []

    def start(*args: str, size: tuple[int, int] = (160, 48), env: dict[str, str] | None = None) -> Terminal:
        term = Terminal(tmp_path / f"t{len(started)}", *args, size=size, env=env)
        started.append(term)
        return term

    yield start
    for term in started:
        term.close()
