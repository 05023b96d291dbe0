"""Issue 13, item 4: two processes on one session cannot lose a turn.

The attack: two `xun run --resume ID` at once; both said "saved" and only one turn was in the file. Here
the first is a real `xun run` whose (offline, in-process) model streams slowly, so it holds the session
for seconds; the second, started meanwhile, must fail at once with a message naming the first (its pid),
or, with `--fork` or `--read-only`, go on without touching the first one's file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xun.context.conversation import Conversation
from xun.base.errors import SessionLocked
from xun.context import sessions
from xun.context.sessions import SessionLock, SessionStore

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env.update(extra)
    return env


def _xun(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xun", *argv],
        cwd=tmp_path / "ws",
        env=_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _user_prompts(path: Path) -> list[str]:
    head = json.loads(path.read_text().splitlines()[0])
    return [m["text"] for m in head["messages"] if m.get("kind") == "user"]


@pytest.mark.long
def test_a_second_writer_is_refused_naming_the_first_and_may_fork_or_read(tmp_path):
    (tmp_path / "ws").mkdir()
    first = _xun(tmp_path, "run", "first turn")
    assert first.returncode == 0, first.stderr
    [saved] = (tmp_path / "ws" / ".xun" / "sessions").glob("*.json")
    ident = saved.stem
    slow = subprocess.Popen(
        [sys.executable, "-m", "xun", "run", "--resume", ident, "slow turn"],
        cwd=tmp_path / "ws",
        env=_env(tmp_path, XUN_OFFLINE_FAULTS="slow:1.0@1-50"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lock = saved.with_suffix(".lock")
        for _ in range(100):  # until the slow one holds the session
            if lock.exists() and f"pid {slow.pid}" in lock.read_text():
                break
            time.sleep(0.1)
        second = _xun(tmp_path, "run", "--resume", ident, "second turn")
        assert second.returncode == 1
        assert f"session {ident} is open in another xun process (pid {slow.pid}: " in second.stderr
        assert "--fork" in second.stderr and "--read-only" in second.stderr
        forked = _xun(tmp_path, "run", "--resume", ident, "--fork", "forked turn")
        assert forked.returncode == 0, forked.stderr
        read_only = _xun(tmp_path, "run", "--resume", ident, "--read-only", "looking only")
        assert read_only.returncode == 0 and "not saved" in read_only.stderr
        assert slow.poll() is None, "the slow turn ended before the others ran; the test proved nothing"
        out, err = slow.communicate(timeout=60)
        assert slow.returncode == 0, err
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert _user_prompts(saved) == ["first turn", "slow turn"]
    sessions = sorted((tmp_path / "ws" / ".xun" / "sessions").glob("*.json"))
    assert len(sessions) == 2
    [copy] = [p for p in sessions if p != saved]
    assert _user_prompts(copy) == ["first turn", "forked turn"]


def test_a_store_that_does_not_hold_the_lock_cannot_save_over_the_holder(tmp_path):
    holder, other = SessionStore(tmp_path), SessionStore(tmp_path)
    conversation = holder.new()
    conversation.add_user_message("mine")
    holder.lock(conversation.conversation_id)
    holder.save(conversation)
    intruder = Conversation(conversation_id=conversation.conversation_id)
    intruder.add_user_message("theirs")
    try:
        other.save(intruder)
    except SessionLocked as exc:
        assert f"pid {os.getpid()}" in str(exc)
    else:
        raise AssertionError("a second writer saved over a locked session")
    assert _user_prompts(holder.path_for(conversation.conversation_id)) == ["mine"]
    holder.unlock()
    other.save(intruder)  # free again
    assert _user_prompts(holder.path_for(conversation.conversation_id)) == ["theirs"]


def test_a_released_lock_leaves_no_file_and_a_taker_never_holds_a_removed_one(tmp_path, monkeypatch):
    """A clean exit removes its lock file (they piled up in .xun/sessions). The holder removes it before it
    lets go; a taker that opened the file just before that must not hold the removed file while a third
    process locks a new one at the path: it takes the file that is there."""
    store = SessionStore(tmp_path)
    store.lock("s1")
    path = store.root / "s1.lock"
    assert path.exists()
    store.unlock()
    assert not path.exists()

    holder = SessionLock(path, "s1")
    real_open = os.open

    def open_then_the_holder_lets_go(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        if holder.fd is not None:  # between the taker's open and its flock
            holder.release()
        return fd

    monkeypatch.setattr(sessions.os, "open", open_then_the_holder_lets_go)
    taker = SessionLock(path, "s1")
    monkeypatch.undo()
    try:
        assert path.exists() and f"pid {os.getpid()}" in path.read_text()
        try:
            SessionLock(path, "s1")
        except SessionLocked:
            pass
        else:
            raise AssertionError("two holders: the taker held the removed file and a third took the new one")
    finally:
        taker.release()
    assert not path.exists()
