"""Private folders, a read-only disk, half-sent requests, and `/render` into nowhere.

- `.xun`, `.xun/sessions` and `.xun/conversation_history` are made 0700 (they were 0755: other users could
  list the session ids and read the offload logs' names), whatever the umask.
- `xun history search` on a read-only file system (a real tmpfs remounted read-only) answers from the
  index instead of "unexpected error: RecallError".
- The offline server closes a connection whose request stops half way (it kept a thread forever).
- `/render` into a folder that does not exist says so and makes no folder.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from xun.compact.summary import compact_conversation
from xun.context.conversation import Conversation
from xun.offline import OfflineServer
from xun.tui.export import ExportError, render_transcript

from .helpers import make_agent, write_files

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")


async def _summarised(server, workdir):
    write_files(workdir, 6)
    agent, _, store = make_agent(server, workdir)
    for i in range(1, 7):
        await agent.run(f"please read f{i}.py")
    assert (await compact_conversation(agent, keep_recent=2)).compacted
    store.save(agent.conversation)
    return agent


async def test_xun_folders_are_private(offline_server, tmp_path):
    old = os.umask(0o022)
    try:
        await _summarised(offline_server, tmp_path)
    finally:
        os.umask(old)
    for folder in (".xun", ".xun/sessions", ".xun/conversation_history"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700, folder


async def test_history_search_works_on_a_read_only_file_system(offline_server, tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        workdir = mount / "ws"
        workdir.mkdir()
        await _summarised(offline_server, workdir)
        assert (workdir / ".xun" / "history.db").exists()
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True)
        assert remounted.returncode == 0, remounted.stderr
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
        done = subprocess.run(
            [sys.executable, "-m", "xun", "history", "search", "line"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "line" in done.stdout and "unexpected error" not in done.stderr
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_the_offline_server_closes_a_half_sent_request():
    """Twenty stalled uploads each hold a thread until the idle timeout, then the server hangs up on them."""
    with OfflineServer(idle_timeout=3.0) as server:
        host, port = server.base_url.split("//")[1].split("/")[0].rsplit(":", 1)
        before = threading.active_count()
        sockets = []
        for _ in range(20):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"mod')
            sockets.append(sock)
        peak = before
        until = time.monotonic() + 2.0  # inside the idle timeout: the stalled requests hold their threads
        while time.monotonic() < until and peak < before + 20:
            peak = max(peak, threading.active_count())
            time.sleep(0.02)
        assert peak > before, "the stalled requests never reached the server"
        for sock in sockets:
            sock.settimeout(15)
            try:
                answer = sock.recv(4096)  # the server hangs up (b"") or answers with an error; a hang fails
            except ConnectionResetError:
                answer = b""
            assert answer == b"" or answer.startswith(b"HTTP/1."), answer[:80]
            sock.close()
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= before, "the half-sent requests kept their threads"


def test_render_into_a_missing_folder_says_so_and_makes_nothing(tmp_path):
    conversation = Conversation()
    conversation.add_user_message("hello")
    with pytest.raises(ExportError, match="does not exist"):
        render_transcript(conversation, "no/such/folder/out.md", tmp_path)
    assert not (tmp_path / "no").exists()
    assert render_transcript(conversation, "out.md", tmp_path).read_text().strip()
