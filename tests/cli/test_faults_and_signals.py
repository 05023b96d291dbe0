"""Server faults become retries then success; SIGINT/SIGTERM during a stream save the session."""

from __future__ import annotations

import json
import signal

import pytest

from xun.agent.loop import CANCELLED_REPLY_MARK

from xun.context.conversation import Conversation

from .helpers import FAST_RETRIES, Cli, read_lines_until


@pytest.mark.parametrize("faults", ["500@1", "disconnect@1", "500@1,truncate@2"])
def test_faults_produce_retry_events_then_success(cli: Cli, faults: str):
    result = cli("run", "--json", *FAST_RETRIES, "hi", env={"XUN_OFFLINE_FAULTS": faults}).check(0)
    retries = result.of("retry")
    assert len(retries) == faults.count(",") + 1
    assert [r["attempt"] for r in retries] == list(range(1, len(retries) + 1))
    assert all(r["attempts"] == 3 and r["reason"] for r in retries)
    types = result.types()
    assert types.index("retry") < types.index("assistant_message")
    assert result.events[-1]["status"] == "ok"
    assert not result.of("error")


def test_retries_in_text_mode_are_one_line_each_on_stderr(cli: Cli):
    result = cli("run", *FAST_RETRIES, "hi", env={"XUN_OFFLINE_FAULTS": "500@1"}).check(0)
    lines = [line for line in result.stderr.splitlines() if line.startswith("[retry]")]
    assert len(lines) == 1 and "HTTP 500" in lines[0] and "try 2 of 3" in lines[0]
    assert "xun-offline" in result.stdout


def _interrupted_run(cli: Cli, signum: int, presses: int = 1) -> tuple[int, list[dict], str]:
    process = cli.popen("run", "--json", "hello there", env={"XUN_OFFLINE_FAULTS": "slow:0.3@1"})
    lines = read_lines_until(process, lambda line: '"text_delta"' in line)
    for _ in range(presses):
        process.send_signal(signum)
    try:
        rest, stderr = process.communicate(timeout=15)
    except Exception:
        process.kill()
        raise
    events = [json.loads(line) for line in [*lines, *rest.splitlines()] if line.strip()]
    return process.returncode, events, stderr


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_slow_stream_saves_the_session(cli: Cli, signum: int, code: int):
    returncode, events, stderr = _interrupted_run(cli, signum)
    assert returncode == code, stderr
    assert events[-1]["type"] == "turn_finished" and events[-1]["status"] == "cancelled"
    assert events[-1]["restored_prompt"] is None  # part of the reply had arrived: the prompt was answered
    assert "Traceback" not in stderr and "interrupted; session" in stderr
    saved = cli.only_session()
    users = [m["text"] for m in saved["messages"] if m["kind"] == "user"]
    assert users == ["hello there"]
    replies = [m["raw"]["content"] for m in saved["messages"] if m.get("raw", {}).get("role") == "assistant"]
    streamed = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert replies == [streamed + CANCELLED_REPLY_MARK]  # the reply so far is kept, marked as cut short


def test_repeated_ctrl_c_still_saves_a_loadable_session(cli: Cli):
    cli("run", "hi").check(0)  # an earlier turn, so the file exists before the interrupted one
    path = cli.session_files()[0]
    process = cli.popen("run", "--json", "--resume", "--", "count to 400", env={"XUN_OFFLINE_FAULTS": "slow:0.3@1"})
    read_lines_until(process, lambda line: '"text_delta"' in line)
    for _ in range(3):
        process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=15)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    conversation = Conversation().load(path)  # parses: the write was atomic and not cut short
    assert [m.text for m in conversation.messages if m.role == "user"] == ["hi", "count to 400"]
    assert not list(path.parent.glob(".*.tmp"))


def test_a_tool_loop_interrupted_between_calls_keeps_a_valid_history(cli: Cli):
    cli.write("a.txt", "alpha\n")
    # The first request answers with a tool call; the second (the answer) streams slowly.
    process = cli.popen("run", "--json", "read a.txt", env={"XUN_OFFLINE_FAULTS": "slow:0.3@2"})
    read_lines_until(process, lambda line: '"text_delta"' in line)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=15)
    assert process.returncode == 130, stderr
    saved = cli.only_session()
    roles = [m.get("raw", {}).get("role", m["kind"]) for m in saved["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]  # the call, its result, and the answer so far
    assert saved["messages"][-1]["raw"]["content"].endswith(CANCELLED_REPLY_MARK)


def _closed_loopback_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when this returns: nothing listens there


def test_a_server_that_cannot_be_reached_is_named_with_a_hint_and_never_the_key(cli: Cli):
    """A stray API key and no server: the retries and the final error say where xun was connecting, and
    that --offline uses the demo model; neither the key nor the URL's query is printed."""
    port = _closed_loopback_port()
    url = f"http://127.0.0.1:{port}/v1?api-key=sk-in-the-query"
    result = cli("run", *FAST_RETRIES, "--base-url", url, "hi", env={"OPENAI_API_KEY": "sk-bogus-secret-key"}).check(1)
    retries = [line for line in result.stderr.splitlines() if line.startswith("[retry]")]
    assert len(retries) == 2 and all(f"(server at http://127.0.0.1:{port}/v1)" in line for line in retries), (
        result.stderr
    )
    [error] = [line for line in result.stderr.splitlines() if line.startswith("[error]")]
    assert f"APIConnectionError: Connection error. (server at http://127.0.0.1:{port}/v1)" in error, error
    assert "`--offline` uses the offline demo model instead" in error, error
    everything = result.stdout + result.stderr
    assert "sk-bogus-secret-key" not in everything and "sk-in-the-query" not in everything


def test_the_address_named_is_the_sdks_and_keeps_no_credentials():
    from xun.agent.config import load_config
    from xun.agent.loop import Agent, server_address

    agent = Agent(load_config(None, [], {}), environ={"OPENAI_API_KEY": "sk-x"})  # no base URL: the OpenAI API
    assert server_address(agent.client().base_url) == "https://api.openai.com/v1"
    assert server_address("https://k:secret@[::1]:8443/v1/?token=t#f") == "https://[::1]:8443/v1"
