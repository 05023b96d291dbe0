"""End-to-end helpers: `xun` as a real subprocess in a private workspace, against the offline model.

`cli` (a `Cli`) runs `sys.executable -m xun ...` with the workspace as its working directory, HOME and
XDG_CONFIG_HOME inside the test's tmp dir, and none of the variables that would reach a real provider
or change the state folder (OPENAI_API_KEY, OPENAI_BASE_URL, XUN_MODEL, XUN_HOME, XUN_OFFLINE_FAULTS),
unless a test sets them. Standard input is /dev/null unless a test passes `input`.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS", "NO_COLOR")
FAST_RETRIES = ("--set", "retry.backoff_base=0.01", "--set", "retry.backoff_max=0.02")


@dataclass
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        """stdout parsed as JSON lines; fails the test on any line that is not one JSON object."""
        parsed = []
        for number, line in enumerate(self.stdout.splitlines(), 1):
            try:
                value = json.loads(line)
            except ValueError:
                pytest.fail(f"stdout line {number} is not JSON: {line!r}\nstderr:\n{self.stderr}")
            assert isinstance(value, dict) and isinstance(value.get("type"), str), line
            parsed.append(value)
        return parsed

    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    def check(self, code: int = 0) -> Result:
        assert self.returncode == code, (
            f"exit {self.returncode} (wanted {code})\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )
        return self


@dataclass
class Cli:
    root: Path
    workdir: Path = field(init=False)
    home: Path = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.workdir = self.root / "work"
        self.home = self.root / "home"
        self.workdir.mkdir()
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        self.env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"), PYTHONUNBUFFERED="1")

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "xun", *args]

    def environment(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**self.env, **(env or {})}

    def __call__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        cwd: Path | None = None,
        timeout: float = 30,
    ) -> Result:
        done = subprocess.run(
            self.command(*args),
            cwd=cwd or self.workdir,
            env=self.environment(env),
            text=True,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
        return Result(tuple(args), done.returncode, done.stdout, done.stderr)

    def inproc(self, *args: str, env: dict[str, str] | None = None, input: str = "") -> Result:
        """`xun.cli.main(args)` in this process, for the cheap checks (settings, listings, usage errors):
        the same code as the subprocess, without paying the interpreter's and the SDK's start each time."""
        from xun.cli.main import main

        out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        saved_streams = sys.stdin, sys.stdout, sys.stderr
        try:
            os.environ.clear()
            os.environ.update(self.environment(env))
            os.chdir(self.workdir)
            sys.stdin, sys.stdout, sys.stderr = io.StringIO(input), out, err
            code = main(list(args))
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        out.flush()
        return Result(tuple(args), code, out.buffer.getvalue().decode("utf-8"), err.getvalue())

    def popen(self, *args: str, env: dict[str, str] | None = None, **options: Any) -> subprocess.Popen:
        options.setdefault("stdin", subprocess.DEVNULL)
        options.setdefault("stdout", subprocess.PIPE)
        options.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(self.command(*args), cwd=self.workdir, env=self.environment(env), text=True, **options)

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> Path:
        return self.workdir / ".xun"

    def session_files(self) -> list[Path]:
        return sorted((self.state / "sessions").glob("*.json"))

    def only_session(self) -> dict[str, Any]:
        files = self.session_files()
        assert len(files) == 1, files
        return json.loads(files[0].read_text(encoding="utf-8").splitlines()[0])

    def write(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


def read_lines_until(process: subprocess.Popen, predicate, timeout: float = 15) -> list[str]:
    """stdout lines of a running process until one satisfies `predicate` (bounded by `timeout`)."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not selector.select(max(0.0, deadline - time.monotonic())):
            break
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if predicate(line):
            return lines
    process.kill()
    pytest.fail(f"the awaited output did not come within {timeout}s; got {lines!r}")


def sample_text(label: str, lines: int = 50) -> str:
    """A file of about 3.1 KB (some 880 tokens for the offline tokenizer once read back)."""
    return "\n".join(f"line {i} of {label}: the quick brown fox jumps over the lazy dog" for i in range(lines))


SMALL_THRESHOLD = ("--set", "auto_compact.token_threshold=2500", "--set", "auto_compact.toolcall_keep_max=1")
"""With `sample_text` files read one per turn: a reclaim from the third turn, a summary by the fourth."""
