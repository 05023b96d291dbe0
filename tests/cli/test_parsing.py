"""`--help` everywhere, `--version` (fast: imports nothing heavy), usage errors as one line, the app entry."""

from __future__ import annotations

import importlib.util
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from xun import __version__
from xun.cli import main as cli_module
from xun.cli.main import main

from .helpers import Cli

HELP_COMMANDS = [
    [],
    ["run"],
    ["sessions"],
    ["history"],
    ["compact"],
    ["config"],
    ["config", "show"],
    ["config", "set"],
    ["config", "unset"],
    ["config", "path"],
]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda c: " ".join(c) or "xun")
def test_help_everywhere(command, capsys):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: xun{' ' if command else ''}{' '.join(command)}")
    for option in ("--offline", "--base-url", "--model", "--set", "--workdir", "--resume", "--debug"):
        assert option in out, (command, option)


def test_help_documents_the_exit_codes(capsys):
    main(["run", "--help"])
    out = capsys.readouterr().out
    for code in ("0    success", "1    the turn failed", "2    bad usage or configuration", "130  interrupted"):
        assert code in out


def test_version_is_fast_and_imports_nothing_heavy(cli: Cli):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "xun", "--version"],
        cwd=cli.workdir,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0 and done.stdout == f"xun {__version__}\n"
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    heavy = {
        "openai",
        "textual",
        "pydantic",
        "httpx",
        "httpx2",
        "xun.agent.loop",
        "xun.agent.launch",
        "xun.agent.config",
        "asyncio",
    }
    assert imported & heavy == set()
    assert "xun.cli.main" in imported


@pytest.mark.parametrize(("preset", "expected"), [(None, "__all__"), ("", ""), ("some_plugin", "some_plugin")])
def test_the_program_starts_without_pydantic_plugins_unless_told(cli: Cli, preset, expected):
    """Looking for pydantic plugins reads every installed package's metadata; xun has none to load."""
    env = {k: v for k, v in cli.env.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if preset is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = preset
    code = (
        "import os, sys; sys.argv = ['xun', '--version']; from xun.cli.main import main; main(); "
        "print(repr(os.environ.get('PYDANTIC_DISABLE_PLUGINS')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cli.workdir, env=env, capture_output=True, text=True, timeout=20, check=True
    )
    assert done.stdout.splitlines()[-1] == repr(expected)


def test_the_cli_module_keeps_its_imports_light():
    source = open(cli_module.__file__, encoding="utf-8").read()
    head = source.split("def ", 1)[0]
    for name in ("openai", "textual", "xun.agent.loop", "xun.agent.launch", "xun.agent.config", "pydantic"):
        assert f"import {name}" not in head and f"from {name}" not in head


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "hi", "--bogus"], "xun run: unrecognized arguments: --bogus (see 'xun run --help')"),
        (
            ["run", "--max-iterations", "0", "hi"],
            "xun run: argument --max-iterations: expected a whole number >= 1, got '0'",
        ),
        (["frobnicate"], "xun: argument COMMAND: invalid choice: 'frobnicate'"),
        (["config", "set", "only-key"], "xun config set: the following arguments are required: VALUE"),
        (["compact", "--keep", "x"], "xun compact: argument --keep: expected a whole number >= 1, got 'x'"),
        # trial F #18: without --resume they ran a new session (one never saved, for --read-only) without a word
        (
            ["--fork", "run", "hi"],
            "xun run: --fork needs --resume [ID]: it continues a copy of a saved session (see 'xun run --help')",
        ),
        (
            ["--read-only"],
            "xun: --read-only needs --resume [ID]: it opens a saved session without saving it (see 'xun --help')",
        ),
        (["run", "hi", "--read-only"], "xun run: --read-only needs --resume [ID]"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(message), err


def test_global_options_work_before_and_after_the_command():
    parser = cli_module.build_parser()
    args = cli_module._merge_global_options(
        parser.parse_args(["--offline", "--set", "a=1", "run", "--set", "b=2", "--model", "m", "hi"])
    )
    assert args.offline is True and args.overrides == ["a=1", "b=2"] and args.model == "m" and args.prompt == "hi"
    args = cli_module._merge_global_options(parser.parse_args(["run", "--offline", "hi"]))
    assert args.offline is True and args.resume is None and args.overrides == []
    args = parser.parse_args(cli_module._prepare_argv(["--resume", "run", "hi"]))
    assert args.resume == "" and args.command == "run" and args.prompt == "hi"
    args = parser.parse_args(["run", "--resume", "abc", "hi"])
    assert args.resume == "abc"
    argv = ["--set", "a=1", "config", "--offline", "--set", "b=2", "show", "--set", "c=3"]
    args = cli_module._merge_global_options(parser.parse_args(argv))
    assert args.overrides == ["a=1", "b=2", "c=3"] and args.offline is True


def test_latest_matches_the_launcher():
    from xun.agent.launch import LATEST

    assert cli_module.LATEST == LATEST


def test_bare_xun_without_a_terminal_says_why_it_cannot_open_the_app(cli: Cli):
    result = cli()
    if importlib.util.find_spec("xun.tui") is None:
        assert result.returncode == 1
        assert (
            result.stderr.strip()
            == "xun: the full-screen app is not built yet; use `xun run PROMPT` (see `xun --help`)"
        )
    else:  # built: stdin is /dev/null here, so it refuses before opening anything
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (
            "xun: the full-screen app needs a terminal on standard input and output; "
            "in scripts use `xun run PROMPT` (see `xun run --help`)"
        )
    assert "Traceback" not in result.stderr
    assert not cli.state.exists()


@pytest.mark.skipif(importlib.util.find_spec("xun.tui") is None, reason="the full-screen app is not built")
def test_bare_xun_on_a_terminal_opens_the_app_on_the_offline_model_and_quits(cli: Cli):
    master, slave = pty.openpty()
    process = cli.popen(stdin=slave, stdout=slave, stderr=slave, env={"TERM": "xterm-256color"}, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b"xun-offline" not in seen:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        assert b"xun-offline" in seen, seen[-500:]  # the app's header names the model
        assert b"offline demo model" in seen  # and its badge says who answers (stderr is under the app's screen)
        deadline = time.monotonic() + 20
        while process.poll() is None and time.monotonic() < deadline:
            os.write(master, b"\x11")  # ctrl+q, again until the app is ready for keys
            end = time.monotonic() + 0.5
            while time.monotonic() < end:  # keep reading, or the app blocks on a full terminal
                if select.select([master], [], [], 0.1)[0]:
                    try:
                        os.read(master, 65536)
                    except OSError:
                        break
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
