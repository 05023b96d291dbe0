"""Issue 13, items 5 and 11: symbolic links cannot make xun read or write outside the workspace.

Item 5, the attacks, each with a real agent on the offline model or a real `xun` process: `.xun/history.db`
pointing at an outside file (its mode was changed to 0600) or at a missing one (a database was created
there); the offload log `.xun/conversation_history/ID.md` pointing at `~/.bashrc` (the transcript was
appended to it); `AGENTS.md` pointing at a private key (it was sent to the model).

Item 11, the race: a folder of the workspace swapped for a link to an outside folder while `read_file`
runs (83 of 3,000 reads returned the outside file): 3,000 reads against a thread swapping it as fast as
it can must never return the outside file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading

from xun.compact.summary import compact_conversation
from xun.agent.config import XunConfig
from xun.agent.tools import ToolContext, ToolError
from xun.agent.tools.builtin import list_directory, read_file, write_file

from .helpers import make_agent, write_files

PRIVATE = "-----BEGIN OPENSSH PRIVATE KEY----- private"
BASHRC = "# the user's .bashrc\nexport PATH=$HOME/bin:$PATH\n"
SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")


def _outside(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(BASHRC)
    (home / ".bashrc").chmod(0o644)
    (home / "id_rsa").write_text(PRIVATE + "\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return home, workspace


async def test_history_db_linked_outside_is_refused_and_the_outside_file_untouched(offline_server, tmp_path):
    home, workspace = _outside(tmp_path)
    (workspace / ".xun").mkdir()
    os.symlink(home / ".bashrc", workspace / ".xun" / "history.db")
    os.symlink(home / "made-by-sqlite.db", workspace / ".xun" / "history.db-wal")
    write_files(workspace, 6)
    agent, rec, _ = make_agent(offline_server, workspace)
    for i in range(1, 7):
        await agent.run(f"please read f{i}.py")
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted and "symbolic link" in (result.warning or "")
    assert (home / ".bashrc").read_text() == BASHRC
    assert stat.S_IMODE((home / ".bashrc").stat().st_mode) == 0o644
    assert not (home / "made-by-sqlite.db").exists()
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    done = subprocess.run(
        [sys.executable, "-m", "xun", "history", "search", "line"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "symbolic link" in done.stderr and "unexpected error" not in done.stderr
    assert (home / ".bashrc").read_text() == BASHRC


async def test_history_db_linked_to_a_missing_file_creates_nothing(offline_server, tmp_path):
    home, workspace = _outside(tmp_path)
    (workspace / ".xun").mkdir()
    os.symlink(home / "new.db", workspace / ".xun" / "history.db")
    write_files(workspace, 6)
    agent, _, _ = make_agent(offline_server, workspace)
    for i in range(1, 7):
        await agent.run(f"please read f{i}.py")
    await compact_conversation(agent, keep_recent=2)
    assert not (home / "new.db").exists()


async def test_an_offload_log_linked_to_bashrc_is_not_appended_to(offline_server, tmp_path):
    home, workspace = _outside(tmp_path)
    write_files(workspace, 6)
    agent, rec, store = make_agent(offline_server, workspace, conversation_id="linked")
    folder = workspace / ".xun" / "conversation_history"
    folder.mkdir(parents=True)
    os.symlink(home / ".bashrc", folder / "linked.md")
    for i in range(1, 7):
        await agent.run(f"please read f{i}.py")
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted and "symbolic link" in result.warning
    assert (home / ".bashrc").read_text() == BASHRC
    assert agent.conversation.kept_originals  # nothing lost: the originals stay in the session
    store.save(agent.conversation)


async def test_agents_md_linked_to_a_private_key_is_not_sent(offline_server, tmp_path):
    home, workspace = _outside(tmp_path)
    os.symlink(home / "id_rsa", workspace / "AGENTS.md")
    agent, _, _ = make_agent(offline_server, workspace)
    assert (await agent.run("hello")).status == "ok"
    assert PRIVATE not in json.dumps(agent.conversation.completion_params())
    (workspace / "AGENTS.md").unlink()
    (workspace / "real.md").write_text("Use tabs.\n")
    os.symlink("real.md", workspace / "AGENTS.md")  # a link inside the workspace is fine
    await agent.run("hello again")
    assert "Use tabs." in json.dumps(agent.conversation.completion_params())


def test_a_folder_swapped_for_a_link_during_reads_never_leads_out(tmp_path):
    home, workspace = _outside(tmp_path)
    (home / "dir").mkdir()
    (home / "dir" / "secret.txt").write_text("OUTSIDE\n")
    (home / "dir" / "OUTSIDE-listing").write_text("")
    (workspace / "dir").mkdir()
    (workspace / "dir" / "secret.txt").write_text("inside\n")
    os.symlink(home / "dir", workspace / "link")
    context = ToolContext.from_config(XunConfig(), workdir=workspace, environ={})
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():  # dir <-> link, by renames (each one atomic)
            os.rename(workspace / "dir", workspace / "real")
            os.rename(workspace / "link", workspace / "dir")
            os.rename(workspace / "dir", workspace / "link")
            os.rename(workspace / "real", workspace / "dir")

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    outside = refused = inside = 0
    try:
        for i in range(3000):
            try:
                text = read_file("dir/secret.txt", context=context) if i % 2 else list_directory("dir", context=context)
            except ToolError:
                refused += 1
                continue
            if "OUTSIDE" in text:
                outside += 1
            else:
                inside += 1
    finally:
        stop.set()
        swapper.join()
    assert outside == 0, f"{outside} of 3000 reads returned the outside file"
    assert inside > 0 and refused > 0  # the race did happen, and was refused


def test_a_folder_swapped_for_a_link_during_writes_never_writes_outside(tmp_path):
    home, workspace = _outside(tmp_path)
    (home / "dir").mkdir()
    (workspace / "dir").mkdir()
    os.symlink(home / "dir", workspace / "link")
    context = ToolContext.from_config(XunConfig(), workdir=workspace, environ={})
    stop = threading.Event()

    def put(old: str, new: str) -> None:
        try:
            os.rename(workspace / old, workspace / new)
        except OSError:  # a write made `new` (a folder) in the gap between two renames: clear it
            shutil.rmtree(workspace / new, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rename(workspace / old, workspace / new)

    def swap() -> None:
        while not stop.is_set():
            put("dir", "real")
            put("link", "dir")
            put("dir", "link")
            put("real", "dir")

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    written = refused = 0
    try:
        for i in range(1000):
            try:
                write_file(f"dir/new{i}.txt", "x", context=context)
                written += 1
            except ToolError:
                refused += 1
    finally:
        stop.set()
        swapper.join()
    assert sorted(p.name for p in (home / "dir").iterdir()) == [], "a write landed outside the workspace"
    assert written > 0 and refused > 0
