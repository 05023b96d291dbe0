"""`xun offline-server` and `python -m xun.offline` as real subprocesses."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time

import openai
import pytest

from xun.offline import main

LISTENING = re.compile(r"^listening on http://127\.0\.0\.1:(\d+)/v1\n$")


def start(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def first_line(process: subprocess.Popen, timeout: float = 10) -> str:
    """The first stdout line, waiting at most `timeout` seconds."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        process.kill()
        pytest.fail("the server printed nothing in time")
    return process.stdout.readline()


def interrupt(process: subprocess.Popen) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("SIGINT did not stop the server")
    return process.returncode, stderr


@pytest.mark.parametrize("command", [["-m", "xun", "offline-server", "--port", "0"], ["-m", "xun.offline"]])
def test_first_line_then_it_serves_then_ctrl_c_exits_0_without_traceback(command):
    process = start(*command)
    try:
        line = first_line(process)
        match = LISTENING.match(line)
        assert match, repr(line)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{match.group(1)}/v1", api_key="k", max_retries=0, timeout=5)
        assert client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}]).choices
    finally:
        returncode, stderr = interrupt(process)
    assert returncode == 0
    assert "Traceback" not in stderr
    assert "not an LLM" in stderr


def test_ctrl_c_during_an_open_stream_still_exits_0(tmp_path):
    process = start("-m", "xun", "offline-server", "--tokens-per-second", "50")
    try:
        port = LISTENING.match(first_line(process)).group(1)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0, timeout=5)
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "write 5000 tokens"}], stream=True
        )
        next(iter(stream))
    finally:
        started = time.monotonic()
        returncode, stderr = interrupt(process)
    assert returncode == 0 and "Traceback" not in stderr
    assert time.monotonic() - started < 5


def test_faults_from_the_environment_and_options(tmp_path):
    process = start("-m", "xun", "offline-server", "--context-window", "50", env={"XUN_OFFLINE_FAULTS": "500@1"})
    try:
        port = LISTENING.match(first_line(process)).group(1)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0, timeout=5)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="context_length_exceeded|maximum context length"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 400}])
    finally:
        interrupt(process)


def test_a_non_loopback_host_is_refused_with_a_clear_error():
    result = subprocess.run(
        [sys.executable, "-m", "xun", "offline-server", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=20
    )
    assert result.returncode == 2
    assert "loopback" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_main_returns_status_codes_instead_of_raising(capsys):
    assert main(["--faults", "nope@1"]) == 2
    assert "unknown kind 'nope'" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "scripted demo model" in capsys.readouterr().out


def test_xun_version_still_works_and_does_not_import_the_server():
    code = "import sys; from xun.cli.main import main; import contextlib, io\nprint('xun.offline' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert result.stdout.strip() == "False"
    version = subprocess.run([sys.executable, "-m", "xun", "--version"], capture_output=True, text=True, timeout=20)
    assert version.returncode == 0 and version.stdout.startswith("xun ")


def test_the_server_package_never_imports_textual():
    code = (
        "import sys, xun.offline, xun.offline.server, xun.offline.model; print(any(m.split('.')[0] == 'textual' for m "
        "in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert result.stdout.strip() == "False"
