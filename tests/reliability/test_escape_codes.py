"""Issue 22, item 6 (the command line): escape codes from sessions, offload logs and config keys reached the
terminal raw. `xun history`, `xun history search`, `xun sessions`, a config error and the untrusted-folder
warning printed a title change (`ESC ] 0 ; … BEL`), a screen clear (`ESC [ 2 J`), an OSC 52 clipboard write
and C1 controls as they were. Each command runs as a real process on hostile files; its output may hold no
control character but newline and tab (as characters: UTF-8 continuation bytes are not C1 controls)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HOSTILE = "PWN\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07\x1bPq#0\x1b\\\x9b31m\x9d0;C1\x9c\x7fEND"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def xun(folder: Path, *argv: str, home: Path) -> subprocess.CompletedProcess:
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME")
    }
    env["XDG_CONFIG_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "xun", *argv], cwd=folder, env=env, capture_output=True, timeout=120)


def clean(result: subprocess.CompletedProcess) -> str:
    text = (result.stdout + result.stderr).decode("utf-8")
    found = CONTROL.search(text)
    assert found is None, f"raw {found.group()!r} in {text!r}"
    return text


@pytest.fixture
def folder(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_sessions_and_history_show_escape_codes_visibly(folder, tmp_path):
    home = tmp_path / "config"
    ran = xun(folder, "run", "--offline", f"remember {HOSTILE}", home=home)
    assert ran.returncode == 0, ran.stderr
    listing = clean(xun(folder, "sessions", home=home))
    assert "PWN\\x1b]0;PWNED-TITLE\\x07" in listing
    clean(xun(folder, "sessions", "--json", home=home))
    [session] = [json.loads(line) for line in xun(folder, "sessions", "--json", home=home).stdout.splitlines()]
    assert HOSTILE in session["title"]  # the JSON still says exactly what was typed
    log = Path(xun(folder, "history", session["id"], "--path", home=home).stdout.decode().strip())
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(f"# offload log\n\nan original: {HOSTILE}\n".encode() + b"bad byte \xff\n")
    shown = clean(xun(folder, "history", session["id"], home=home))
    assert "\\x1b[2J" in shown and "\\x9b31m" in shown and "\\xff" in shown
    clean(xun(folder, "history", "--reindex", home=home))
    clean(xun(folder, "history", "search", "original", home=home))
    clean(xun(folder, "history", "search", "original", "--json", home=home))


def test_a_hostile_config_key_in_the_warning_and_in_errors(folder, tmp_path):
    home = tmp_path / "config"
    (folder / ".xun").mkdir()
    key = json.dumps(f"base_url{HOSTILE}")
    (folder / ".xun" / "config.toml").write_text(f'[provider]\n{key} = "http://127.0.0.1:9/v1"\n')
    warned = clean(xun(folder, "run", "--offline", "hi", home=home))
    assert "may not set provider.base_url" in warned and "\\x1b]0;PWNED-TITLE" in warned
    (folder / ".xun" / "config.toml").write_text(f"[model]\ncontext_window = {json.dumps(HOSTILE)}\n")
    failed = xun(folder, "run", "--offline", "hi", home=home)
    assert failed.returncode != 0
    assert "configuration error" in clean(failed)
    clean(xun(folder, "config", "show", home=home))
    clean(xun(folder, "config", "show", "--json", home=home))
