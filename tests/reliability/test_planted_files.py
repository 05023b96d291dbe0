"""Files planted in a cloned repo's `.xun`, run against the real `xun`.

A session whose `draft` is 30 MB (a million lines): the app drew it all in the prompt on resume and took
1.1 GB. Offload logs with one 300 MB entry and 200,000 small ones: `xun history --reindex` read each log
whole, held every row at once and indexed every character (2 GB, a 399 MB index). `.xun/sessions` (or
`.xun` itself) as a link to another folder: sessions, MCP logs and settings were written there.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

import pytest
import tomli_w

from xun.base import paths
from xun.context.conversation import Conversation
from xun.context.sessions import SessionStore

from cli.helpers import Cli
from agent.tools.mcp.conftest import Servers, need_module
from tui.terminal import Terminal

MiB = 1024 * 1024


def _xun_pid(workdir: Path) -> int:
    """The pid of the `python -m xun` process running in `workdir`."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            command = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            if b"xun" in command and b"-m" in command and os.readlink(Path(entry.path, "cwd")) == str(workdir):
                return int(entry.name)
        except OSError:
            continue
    raise AssertionError(f"no xun process runs in {workdir}")


def _peak_bytes(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_30_mb_draft_comes_back_folded_and_the_app_stays_small(tmp_path):
    """A session file's draft of a million lines (29 MB) comes back as one paste marker, the app's peak
    memory stays under 512 MB on resume (1.1 GB when it was drawn in the prompt), and the draft is whole
    in the session file after a quit: nothing of it is lost."""
    draft = "".join(f"line {number:07d} of a planted draft\n" for number in range(1_000_000))
    conversation = Conversation()
    conversation.draft = draft
    root = tmp_path / "t"
    session = paths.sessions_dir(root / "work") / f"{conversation.conversation_id}.json"
    session.parent.mkdir(parents=True)
    conversation.dump(session)
    term = Terminal(root, "--resume")
    try:
        screen = term.wait_for(lambda text: "what the prompt held when xun quit" in text, timeout=90, what="the draft")
        peak = _peak_bytes(_xun_pid(term.workdir))
        assert peak < 512 * MiB, f"peak {peak / MiB:.0f} MB on resume"
        assert "[pasted 1,000,000 lines #1]" in screen and "line 0999999" not in screen
        term.keys("C-q")
        assert term.wait_exit(90) == 0
    finally:
        term.close()
    assert Conversation().load(session).draft == draft.strip("\n")


def _capped_run(cli: Cli, *args: str, limit: int) -> subprocess.CompletedProcess:
    """`xun ARGS` with its address space capped at `limit` bytes (RLIMIT_AS)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        cli.command(*args),
        cwd=cli.workdir,
        env=cli.environment(None),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=cap,
    )


def _plant_offload_logs(workdir: Path) -> Path:
    """`big.md`: one entry of 300 MB on one line ("needle", sparse zeros, "farword"); `many.md`: 200,000
    one-line entries."""
    folder = paths.offload_dir(workdir)
    folder.mkdir(parents=True)
    head = "## Offloaded at 2026-01-01T00:00:00.000Z\n\n<!-- xun conversation {}, 1 entries -->\n\n"
    with open(folder / "big.md", "wb") as log:
        log.write((head.format("big") + "Tool (read_file, id call_1): needle ").encode())
        log.seek(300 * MiB)
        log.write(b" farword\n\nHuman: after the big one\n")
    with open(folder / "many.md", "w") as log:
        log.write(head.format("many"))
        log.writelines(f"Human: small entry {number} about topic{number % 100}\n" for number in range(200_000))
    return folder


@pytest.mark.long
def test_planted_offload_logs_are_indexed_as_a_stream_with_each_entry_capped(tmp_path):
    """A new index filling itself from the logs the first time it opens (`xun history search`), then `xun
    history --reindex`, each in 768 MB of address space (the reindex took 1.4 to 2 GB): the big entry is
    found by its first word and not by one past the cap, the cut is said once, every small entry is
    indexed, and the index stays small (399 MB before)."""
    cli = Cli(tmp_path)
    folder = _plant_offload_logs(cli.workdir)
    index = paths.history_db_path(cli.workdir)
    for args in (("history", "search", "needle"), ("history", "--reindex")):
        done = _capped_run(cli, *args, limit=768 * MiB)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stderr.count("1 entry is longer than 1,048,576 characters") == 1, done.stderr
        assert str(folder / "big.md") in done.stderr
        assert index.stat().st_size < 100 * MiB
    assert "reindexed 200002 entries from 2 offload logs" in done.stdout
    found = cli("history", "search", "needle", "--json").check()
    assert [hit["session"] for hit in found.events] == ["big"]
    assert cli("history", "search", "farword", "--json").check().events == []
    assert [hit["snippet"] for hit in cli("history", "search", "199999", "--json").check().events] == [
        "small entry 199999 about topic99"
    ]
    assert len(cli("history", "search", "after", "big", "--json").check().events) == 1


STALE = ".old.json.abcdefgh.tmp"  # the name of a session save's temporary file, left an hour ago


@pytest.mark.parametrize("linked", [".xun", ".xun/sessions"])
def test_a_linked_state_folder_is_refused_and_nothing_is_written_through_it(tmp_path, linked):
    """`.xun` (or `.xun/sessions`) in a clone is a link to another folder: `xun run`, `xun sessions` (and
    `xun config set` for `.xun`) stop naming the link; `xun mcp list` (the user's own server) runs it without its log;
    the folder the link leads to keeps only what it had (no `<id>.json`, `sessions/`, `mcp/` or
    `config.toml`; its old temporary file is not cleaned up either)."""
    cli = Cli(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / STALE).write_text("the victim's file")
    hour_ago = time.time() - 3600
    os.utime(victim / STALE, (hour_ago, hour_ago))
    link = cli.workdir / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    runs = [cli("--offline", "run", "hello", timeout=60), cli("sessions")]
    if linked == ".xun":
        runs.append(cli("config", "set", "model.name", "evil"))
    for done in runs:
        assert done.returncode == 1, f"{done.args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "symbolic link" in done.stderr and str(link) in done.stderr, f"{done.args}: {done.stderr}"
    if linked == ".xun":  # the server runs without its log, as with a planted `.xun/mcp/time.log` link
        need_module("mcp_server_time", "mcp-server-time")
        config = cli.home / ".config" / "xun" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(tomli_w.dumps({"mcp": {"servers": {"time": Servers(tmp_path).time(trust=True)}}}))
        assert "time  ready" in cli("mcp", "list", timeout=90).check().stdout
    assert SessionStore(cli.workdir).remove_stale_temp_files() == 0
    assert sorted(path.name for path in victim.iterdir()) == [STALE]
    assert (victim / STALE).read_text() == "the victim's file"
