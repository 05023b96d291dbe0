"""MCP servers for the tests: two real ones from the package index (`mcp-server-time`, `mcp-server-git`,
in the `test` extra), `@modelcontextprotocol/server-everything` through npx when Node is there, and the
fault server written here with the SDK (`fault_server.py`).

Every server a test starts carries a marker in its environment, so `processes_with(marker)` can tell
whether any of them outlived the session (an orphan)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

FAULT_SERVER = Path(__file__).with_name("fault_server.py")
MARKER_VARIABLE = "XUN_TEST_MCP_MARKER"


def need_module(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{package} is not installed: python3 -m pip install -e '.[test]' installs it")


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds the marker (zombies excluded)."""
    found = []
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


class Servers:
    """Server tables for `[mcp.servers.NAME]`, all marked with one marker."""

    def __init__(self, tmp_path: Path) -> None:
        self.marker = uuid.uuid4().hex
        self.tmp_path = tmp_path

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {MARKER_VARIABLE: self.marker, **(extra or {})}

    def fault(self, mode: str = "serve", **settings: Any) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(FAULT_SERVER), mode], "env": self._env(), **settings}

    def time(self, **settings: Any) -> dict[str, Any]:
        need_module("mcp_server_time", "mcp-server-time")
        return {
            "command": sys.executable,
            "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            "env": self._env(),
            **settings,
        }

    def git(self, repository: Path, **settings: Any) -> dict[str, Any]:
        need_module("mcp_server_git", "mcp-server-git")
        return {
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repository)],
            "env": self._env(),
            **settings,
        }

    def everything(self, **settings: Any) -> dict[str, Any]:
        npx = shutil.which("npx")
        if npx is None:
            pytest.skip("Node is not installed (npx not found): @modelcontextprotocol/server-everything needs it")
        return {
            "command": npx,
            "args": ["-y", "@modelcontextprotocol/server-everything"],
            "env": self._env({"npm_config_update_notifier": "false"}),
            "startup_timeout": 120.0,
            **settings,
        }

    def alive(self) -> list[int]:
        return processes_with(self.marker)


@pytest.fixture
def servers(tmp_path: Path) -> Servers:
    made = Servers(tmp_path)
    yield made
    for pid in made.alive():  # never leave one behind, even when a test failed
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def make_repository(folder: Path) -> Path:
    """A git repository with two commits, made with the git program."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (folder / "notes.txt").write_text("first line\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "First commit: notes")
    (folder / "notes.txt").write_text("first line\nsecond line about zebras\n")
    git("commit", "-q", "-am", "Second commit mentions zebras")
    return folder
