"""A model server's bodies cannot take the client's memory: real `xun run` against `HostileServer`.

Each attack sends a body with no end (or a huge one), generated on the fly: an error body, one SSE line, one
SSE event of short lines, one complete 200 MB line, a gzip-compressed endless line, endless headers, and an
endless JSON reply to the non-streamed calibration request. `xun run` runs as a subprocess under an
address-space cap (RLIMIT_AS 1 GB: before the bounds each attack ran into it), and its peak resident memory
is read from `wait4`. Each run must end within a bounded time, with a clear error (or, for the calibration,
a normal reply), keep the user's message in a session that loads, and stay under PEAK.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from cli.helpers import FAST_RETRIES, Cli
from hypothesis import given, settings
from hypothesis import strategies as st

from xun.agent import bounded_http
from xun.context.conversation import Conversation

from .hostile_server import HostileServer

ADDRESS_SPACE = 1024 * 1024 * 1024
PEAK = 300 * 1024 * 1024
"""Most resident memory a run may reach (an ordinary `xun run` takes about 80 MB)."""
WITHIN = 40.0
"""Seconds a run may take in all (a busy 2-core machine; a bounded run takes a few)."""


MEASURED = f"""
import os, resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))
process = subprocess.Popen([sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""
"""Runs Python with the arguments after the first under the address-space cap, and writes its peak RSS (bytes)
to the file named first. The command is this small launcher's child: Linux keeps a process's peak across
`exec`, so a child of pytest itself would report pytest's own peak."""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    peak: int
    """Peak resident memory of the process, in bytes."""
    took: float
    requests: int
    saved: list[tuple[str, str]]
    """Role and text of each message of the saved session, as loaded back."""

    def prompt_kept(self) -> bool:
        """The turn failed and kept the user's message: the session ends with it."""
        return bool(self.saved) and self.saved[-1] == ("user", "hello")

    def error_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.startswith("[error]")]
        assert len(lines) == 1, self.stderr[-3000:]
        return lines[0]


def _capped(arguments: list[str], cwd, env: dict[str, str], out, err) -> tuple[int, int, float]:
    """Python with `arguments` under the address-space cap: its exit code, peak RSS (bytes) and time."""
    peak = out.with_name("peak")
    with out.open("w") as stdout, err.open("w") as stderr:
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-c", MEASURED, str(peak), *arguments],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=3 * WITHIN)
        except subprocess.TimeoutExpired:  # a run that hangs fails the test, not the suite
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
    return code, int(peak.read_text() or 0) if peak.exists() else 0, time.monotonic() - started


def _head(path) -> str:
    """The start of an output (a reply of hundreds of MB printed whole must not fill the test's memory)."""
    with path.open("rb") as handle:
        return handle.read(64 * 1024).decode(errors="replace")


def _attack(tmp_path, mode: str) -> Run:
    """`xun run hello` against `HostileServer(mode)`, capped, its peak memory measured by `wait4`."""
    cli = Cli(tmp_path)
    server = HostileServer(mode)
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    try:
        command = cli.command(
            "run", *FAST_RETRIES, "--set", "provider.timeout=5", "--base-url", server.base_url, "hello"
        )
        code, peak, took = _capped(command[1:], cli.workdir, cli.environment({"OPENAI_API_KEY": "sk-test"}), out, err)
    finally:
        server.stop()
    [session] = cli.session_files()
    saved = [(m["role"], str(m.get("content"))) for m in Conversation().load(session).completion_params()]
    return Run(code, _head(out), _head(err), peak, took, server.requests, saved)


def _bounded(run: Run) -> None:
    assert 0 < run.peak < PEAK, f"peak RSS {run.peak / 2**20:.0f} MB\n{run.stderr[-3000:]}"
    assert run.took < WITHIN, f"took {run.took:.1f} s\n{run.stderr[-3000:]}"


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("endless-line", "the server sent an SSE line over 8 MB"),
        ("giant-line:200", "the server sent an SSE line over 8 MB"),
        ("many-lines", "the server sent an SSE event over 8 MB"),
        ("gzip-line", "the server sent a gzip-compressed reply, which xun did not ask for"),
    ],
)
def test_an_over_long_stream_is_refused_at_once_and_keeps_the_prompt(tmp_path, mode, words):
    """Past the cap the reply is dropped and not retried: a server that sends such a line sends it again."""
    run = _attack(tmp_path, mode)
    _bounded(run)
    assert run.code == 1, run.stderr[-3000:]
    error = run.error_line()
    assert words in error and "not retried" in error, error
    assert len(error) < 400, error
    assert run.requests == 1 and "[retry]" not in run.stderr, run.stderr[-3000:]
    assert run.prompt_kept(), run.saved


def test_an_endless_error_body_is_cut_and_the_status_decides(tmp_path):
    """A 500 whose body never ends: each try reads only the start of it, and a 500 is retried as any 500."""
    run = _attack(tmp_path, "error-flood")
    _bounded(run)
    assert run.code == 1, run.stderr[-3000:]
    error = run.error_line()
    assert "the model call failed after 3 attempts: HTTP 500 from the server" in error, error
    assert "an error body over 256 kB, cut" in error, error
    assert len(error) < 400, error
    assert run.requests == 3
    assert run.prompt_kept(), run.saved


def test_a_long_honest_reply_is_read_whole(tmp_path):
    """A line is bounded, not the stream: 24 MB in deltas of 256 kB (CRLF line ends) is a reply like any other."""
    run = _attack(tmp_path, "long-reply:24")
    _bounded(run)
    assert run.code == 0, run.stderr[-3000:]
    assert run.stdout.startswith("b" * 60_000)
    assert run.requests == 1
    assert run.saved[-2][0] == "user" and run.saved[-1][0] == "assistant" and len(run.saved[-1][1]) == 24 * 1024 * 1024


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(st.lists(st.integers(1, 60), min_size=1, max_size=12), min_size=1, max_size=6),
    ending=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(1, 40), max_size=30),
)
def test_only_the_event_being_sent_counts_however_the_bytes_arrive(events, ending, cuts):
    """Events of lines (their lengths drawn), each ended by a blank line, arriving in pieces of up to 40 bytes:
    no event within the cap is refused, and one past it by more than a piece always is (a line end counts 1)."""
    cap = 150
    stream = b"".join(b"".join(b"d" * length + ending for length in lines) + ending for lines in events)
    largest = max(sum(length + 1 for length in lines) for lines in events)
    count, refused, start = bounded_http._Events(), False, 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounded_http, "MAX_SSE_EVENT", cap)
        try:
            for cut in [*cuts, *[40] * (len(stream) // 40 + 1)]:
                count(stream[start : start + cut])
                start += cut
        except bounded_http.ReplyRefused:
            refused = True
    if largest <= cap:
        assert not refused
    if largest > cap + 40:
        assert refused


def test_a_crlf_split_between_two_reads_ends_one_line_not_the_event(monkeypatch):
    """A server that pauses between CR and LF would otherwise end the event at every line, and grow it forever."""
    monkeypatch.setattr(bounded_http, "MAX_SSE_EVENT", 150)
    count = bounded_http._Events()
    with pytest.raises(bounded_http.ReplyRefused, match="the server sent an SSE event over"):
        for _ in range(100):
            count(b"data: x\r")
            count(b"\n")


def test_endless_headers_are_a_connection_error(tmp_path):
    """Headers are bounded below the SDK (httpcore reads at most 100 kB of them): a dropped connection."""
    run = _attack(tmp_path, "header-flood")
    _bounded(run)
    assert run.code == 1, run.stderr[-3000:]
    assert "the model call failed after 3 attempts: APIConnectionError" in run.error_line()
    assert run.requests == 3
    assert run.prompt_kept(), run.saved


CALIBRATE = """
import asyncio, sys
from xun.agent.calibration import calibrate
from xun.agent.config import XunConfig
from xun.agent.loop import Agent

async def main():
    config = XunConfig()
    config.provider.base_url, config.model.name = sys.argv[1], "hostile"
    agent = Agent(config, environ={})
    agent.system("You are a test.")
    print("calibration:", await calibrate(agent))
    try:
        await agent.client().chat.completions.create(model="hostile", messages=[{"role": "user", "content": "hi"}])
    except Exception as exc:
        print("refused:", type(exc).__name__, exc)
    await agent.aclose()

asyncio.run(main())
"""


def test_an_endless_reply_to_the_calibration_request_is_dropped(tmp_path):
    """The one request whose reply is read whole (the calibration's, for one token) is bounded in all: the
    calibration is best effort and goes without; the same reply to a plain call is a clear error."""
    server = HostileServer("json-flood")
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    try:
        code, peak, took = _capped(["-c", CALIBRATE, server.base_url], tmp_path, dict(os.environ), out, err)
    finally:
        server.stop()
    _bounded(Run(code, _head(out), _head(err), peak, took, server.requests, []))
    assert code == 0, _head(err)
    assert _head(out).splitlines() == ["calibration: None", "refused: ReplyRefused the server sent a reply over 16 MB"]
    assert server.requests == 2
