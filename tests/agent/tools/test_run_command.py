"""run_command: real subprocesses in the workspace; timeouts and cancellation leave no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from xun.agent.tools import Decision
from xun.agent.tools.process import OutputBuffer

from .conftest import Confirmer

# Writes the shell's pid and a background child's pid, then waits on the child.
SPAWN = "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"


async def run(toolbox, ctx, command, **extra):
    return await toolbox.call("run_command", json.dumps({"command": command, **extra}), ctx)


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


async def wait_for_file(path: Path, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not (path.exists() and path.read_text().strip()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        await asyncio.sleep(0.01)


async def test_output_exit_code_and_cwd(toolbox, make_context, workspace):
    outcome = await run(toolbox, make_context(), "pwd; echo out; echo err >&2; exit 4")
    assert not outcome.is_error
    assert outcome.text == f"{workspace.resolve()}\nout\nerr\n\n[exit code 4]"
    quiet = await run(toolbox, make_context(), "true")
    assert quiet.text == "(no output)\n[exit code 0]"


async def test_stdin_is_closed_and_signals_are_reported(toolbox, make_context):
    started = time.monotonic()
    assert (await run(toolbox, make_context(), "cat")).text == "(no output)\n[exit code 0]"
    assert time.monotonic() - started < 5
    assert (await run(toolbox, make_context(), "kill -9 $$")).text.endswith("[killed by signal 9]")


async def test_timeout_kills_the_whole_process_group(toolbox, make_context, workspace):
    started = time.monotonic()
    outcome = await run(toolbox, make_context(), "echo started; " + SPAWN, timeout=0.5)
    assert time.monotonic() - started < 5
    assert outcome.is_error
    assert outcome.text.startswith("[Error] the command timed out after 0.5 s and was killed")
    assert "started" in outcome.text
    for name in ("shell.pid", "child.pid"):
        assert wait_gone(read_pid(workspace / name)), f"{name} survived the timeout"


async def test_default_timeout_comes_from_the_context(toolbox, make_context, workspace):
    outcome = await run(toolbox, make_context(command_timeout=0.3), SPAWN)
    assert outcome.is_error and "timed out after 0.3 s" in outcome.text
    assert wait_gone(read_pid(workspace / "child.pid"))


async def test_cancellation_kills_the_process_group(toolbox, make_context, workspace):
    task = asyncio.create_task(run(toolbox, make_context(), SPAWN))
    await wait_for_file(workspace / "child.pid")
    shell, child = read_pid(workspace / "shell.pid"), read_pid(workspace / "child.pid")
    assert alive(shell) and alive(child)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_gone(shell) and wait_gone(child)


async def test_background_leftovers_do_not_hang_or_survive(toolbox, make_context, workspace):
    started = time.monotonic()
    outcome = await run(toolbox, make_context(), "sleep 30 & echo $! > child.pid; echo done")
    assert time.monotonic() - started < 5
    assert outcome.text == "done\n\n[exit code 0]"
    assert wait_gone(read_pid(workspace / "child.pid"))


async def test_huge_output_is_capped_with_bounded_memory(toolbox, make_context):
    outcome = await run(toolbox, make_context(max_output_chars=5_000), "yes abcdefgh | head -c 3000000; echo; echo END")
    assert not outcome.is_error
    assert len(outcome.text) <= 5_000
    assert outcome.text.startswith("abcdefgh\n") and outcome.text.endswith("END\n\n[exit code 0]")
    assert outcome.truncated_chars > 2_990_000
    assert f"{outcome.truncated_chars:,} characters cut" in outcome.text


def test_output_buffer_counts_exactly():
    buffer = OutputBuffer(100)
    pieces = [f"{i:05d}\n" for i in range(10_000)]
    for piece in pieces:
        buffer.add(piece)
    text, cut = buffer.result()
    whole = "".join(pieces)
    assert text.startswith(whole[:20]) and text.endswith(whole[-10:])
    note_start, note_end = text.index("\n\n[..."), text.index("...]\n\n") + 6
    assert len(text) - (note_end - note_start) + cut == len(whole)
    small = OutputBuffer(100)
    small.add("tiny")
    assert small.result() == ("tiny", 0)


async def test_the_api_key_never_reaches_a_command(toolbox, make_context, monkeypatch):
    key = "sk-test-abcdefghijklmnop123456"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("MY_PROVIDER_KEY", key)
    ctx = make_context(hidden_env=frozenset({"OPENAI_API_KEY", "MY_PROVIDER_KEY"}))
    outcome = await run(toolbox, ctx, 'echo "[$OPENAI_API_KEY][$MY_PROVIDER_KEY]"')
    assert outcome.text.startswith("[][]")
    # And if it is printed some other way, the value is redacted from the result.
    leaky = make_context(redact=(key,))
    outcome = await run(toolbox, leaky, f"echo {key[:10]}{key[10:]}")
    assert key not in outcome.text and "[redacted]" in outcome.text


async def test_ansi_codes_are_stripped(toolbox, make_context):
    outcome = await run(toolbox, make_context(), r"printf '\033[31mred\033[0m plain\n'")
    assert outcome.text.startswith("red plain\n")


async def test_confirmation_shows_the_exact_command_and_cwd(toolbox, make_context, workspace):
    confirmer = Confirmer(Decision.ALLOW_ONCE, Decision.DENY)
    ctx = make_context(auto_confirm=False, confirm=confirmer)
    ran = await run(toolbox, ctx, "echo hi > hi.txt", timeout=9)
    assert not ran.is_error and (workspace / "hi.txt").exists()
    request = confirmer.requests[0]
    root = workspace.resolve()
    assert request.tool == "run_command" and request.kind == "command"
    assert request.title == f"Run in {root}: echo hi > hi.txt"
    assert request.command == "echo hi > hi.txt" and request.cwd == root
    assert request.preview == f"$ echo hi > hi.txt\n\n(in {root}; killed after 9 s)"
    denied = await run(toolbox, ctx, "touch denied.txt")
    assert denied.is_error and denied.denied and not (workspace / "denied.txt").exists()


async def test_hidden_characters_cannot_disguise_a_command(toolbox, make_context):
    confirmer = Confirmer(Decision.DENY)
    sneaky = "echo safe\rrm -rf ~ \x1b[8m\nsecond line"
    await run(toolbox, make_context(auto_confirm=False, confirm=confirmer), sneaky)
    [request] = confirmer.requests
    assert "\n" not in request.title and "\r" not in request.title and "\x1b" not in request.title
    assert request.title.endswith(r"echo safe\rrm -rf ~ \x1b[8m\nsecond line")
    assert "\r" not in request.preview and "\x1b" not in request.preview
    assert request.command == sneaky  # the front end still gets the exact string


async def test_run_command_without_a_way_to_ask_is_refused(toolbox, make_context, workspace):
    outcome = await run(toolbox, make_context(auto_confirm=False), "touch made.txt")
    assert outcome.is_error and outcome.denied and "needs the user's confirmation" in outcome.text
    assert not (workspace / "made.txt").exists()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"command": ""}, "argument 'command'"),
        ({"command": "   "}, "the command is empty"),
        ({"command": "ls", "timeout": 0}, "argument 'timeout'"),
        ({"command": "ls", "timeout": "soon"}, "argument 'timeout'"),
        ({}, "missing required argument 'command'"),
    ],
)
async def test_bad_command_arguments(toolbox, make_context, arguments, expected):
    outcome = await toolbox.call("run_command", json.dumps(arguments), make_context())
    assert outcome.is_error and expected in outcome.text, outcome.text
