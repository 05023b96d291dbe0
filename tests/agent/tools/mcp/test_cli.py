"""`xun run --json` and `xun mcp list` with MCP servers in the user config, as real subprocesses; the
offline model calls the tools on an explicit request ("use the tool NAME with {json}")."""

from __future__ import annotations

import json
import os
import selectors
import signal
import time

import pytest
import tomli_w

from cli.helpers import Cli

from .conftest import make_repository


@pytest.fixture
def cli(tmp_path) -> Cli:
    return Cli(tmp_path)


def wait_for_output(process, needle: str, timeout: float = 60) -> str:
    """stdout of a running process until it contains `needle`, read from the file descriptor itself (a
    buffered reader could hold the awaited line while `select` says there is nothing more to read)."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout.fileno(), selectors.EVENT_READ)
    seen = b""
    deadline = time.monotonic() + timeout
    while needle.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(left):
            process.kill()
            pytest.fail(f"{needle!r} did not come within {timeout}s; got {seen.decode(errors='replace')!r}")
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            pytest.fail(f"the process ended before {needle!r}; got {seen.decode(errors='replace')!r}")
        seen += chunk
    return seen.decode()


def configure(cli: Cli, tables: dict) -> None:
    path = cli.home / ".config" / "xun" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps({"mcp": {"servers": tables}}), encoding="utf-8")


def test_run_json_lists_and_calls_time_and_git_tools(cli, servers):
    repo = make_repository(cli.workdir / "repo")
    configure(
        cli,
        {
            "time": servers.time(trust=True),
            "git": servers.git(repo, trust=True),
            "broken": servers.fault("crash-at-start"),
        },
    )
    done = cli("run", "--json", 'use the tool git__git_log with {"repo_path": "' + str(repo) + '"}', timeout=90).check()
    states = {(e["name"], e["state"]) for e in done.of("mcp_server")}
    assert {
        ("time", "ready"),
        ("git", "ready"),
        ("broken", "failed"),
        ("time", "stopped"),
        ("git", "stopped"),
    } <= states
    [finished] = done.of("tool_call_finished")
    assert finished["name"] == "git__git_log" and not finished["is_error"]
    session = cli.only_session()
    results = [m for m in session["messages"] if m.get("raw", m).get("role") == "tool"]
    assert "Second commit mentions zebras" in json.dumps(results)
    assert "git__git_log" in done.of("assistant_message")[-1]["content"]  # the model quoted the result
    # the session stays usable with a failed server: the turn finished normally
    assert done.of("turn_finished")[-1]["status"] == "ok"
    assert servers.alive() == []

    asked = cli("run", "--json", 'use the tool time__get_current_time with {"timezone": "UTC"}', timeout=90).check()
    assert not asked.of("tool_call_finished")[0]["is_error"]
    assert servers.alive() == []


def test_untrusted_server_is_refused_without_a_terminal_and_allowed_with_yes(cli, servers):
    configure(cli, {"time": servers.time()})
    refused = cli("run", "--json", 'use the tool time__get_current_time with {"timezone": "UTC"}', timeout=90).check()
    [finished] = refused.of("tool_call_finished")
    assert finished["is_error"] and "confirmation" in finished["error"]
    assert any("MCP tools with --yes" in w["message"] for w in refused.of("warning"))
    allowed = cli(
        "run", "--json", "-y", 'use the tool time__get_current_time with {"timezone": "UTC"}', timeout=90
    ).check()
    assert not allowed.of("tool_call_finished")[0]["is_error"]


def test_an_untrusted_project_file_cannot_add_servers(cli, servers):
    (cli.state).mkdir()
    (cli.state / "config.toml").write_text(tomli_w.dumps({"mcp": {"servers": {"evil": servers.fault()}}}))
    done = cli.inproc("run", "--json", "hello")
    assert done.returncode == 0, done.stderr
    assert "mcp.servers.evil.command" in done.stderr and "xun trust" in done.stderr
    assert not [e for e in map(json.loads, done.stdout.splitlines()) if e["type"] == "mcp_server"]
    assert servers.alive() == []
    (cli.state / "config.toml").write_text(tomli_w.dumps({"mcp": {"servers": {"evil": servers.fault(trust=True)}}}))
    assert cli.inproc("trust").returncode == 0
    refused = cli.inproc("run", "hello")  # trusted or not, a project file cannot let tools skip the question
    assert refused.returncode == 2 and "mcp.servers.evil.trust" in refused.stderr
    assert servers.alive() == []


def test_header_values_come_from_the_environment_only(cli):
    done = cli.inproc("config", "set", "--user", "mcp.servers.web.url", "http://127.0.0.1:9/mcp")
    assert done.returncode == 0, done.stderr
    leaked = cli.inproc(
        "config",
        "set",
        "--user",
        "mcp.servers.web.headers",
        '{Authorization = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"}',
    )
    assert leaked.returncode == 2 and "abcdefghijklmnop" not in leaked.stderr + leaked.stdout
    assert "abcdefghijklmnop" not in (cli.home / ".config" / "xun" / "config.toml").read_text()
    named = cli.inproc("config", "set", "--user", "mcp.servers.web.headers", '{Authorization = "WEB_TOKEN"}')
    assert named.returncode == 0, named.stderr
    listed = cli.inproc("mcp", "list", "--json")  # the variable is not set: a failed server, named why
    assert listed.returncode == 1
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["state"] == "failed" and "WEB_TOKEN" in row["reason"] and "not set" in row["reason"]


def test_mcp_list_shows_servers_tools_and_their_tokens(cli, servers):
    configure(cli, {"f": servers.fault(trust=True), "dead": servers.fault("crash-at-start")})
    done = cli("mcp", "list", "--json", timeout=60)
    assert done.returncode == 1  # one server failed
    rows = {row["name"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert rows["f"]["state"] == "ready" and rows["f"]["trust"] is True
    assert {t["name"] for t in rows["f"]["tools"]} >= {"f__echo", "f__big", "f__crash"}
    assert rows["f"]["definition_tokens"] == pytest.approx(sum(t["tokens"] for t in rows["f"]["tools"]), abs=20)
    assert any(s.startswith("bad_schema:") for s in rows["f"]["skipped"])
    assert rows["dead"]["state"] == "failed" and "crashing at start" in rows["dead"]["reason"]
    text = cli("mcp", "list", timeout=60)
    assert "f  ready with 8 tools" in text.stdout and "f__echo  ~" in text.stdout and "dead  failed:" in text.stdout
    assert servers.alive() == []


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_during_a_call_leaves_no_server_behind(cli, servers, signum, code):
    configure(cli, {"f": servers.fault(trust=True), "time": servers.time()})
    process = cli.popen("run", "--json", 'use the tool f__slow with {"seconds": 120}')
    wait_for_output(process, '"tool_call_started"')
    assert len(servers.alive()) == 2
    process.send_signal(signum)
    process.wait(timeout=30)
    assert process.returncode == code, process.stderr.read()
    deadline = time.monotonic() + 5
    while servers.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert servers.alive() == []
    assert "interrupted; session" in process.stderr.read()
