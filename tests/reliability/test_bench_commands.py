"""The command lines of the long runs in `tests/benchmarks/`: `--help` prints the usage, and a bad
argument is a usage error, not a traceback (the scripts take positional numbers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("script", "metavar", "first_words"),
    [
        ("bench_crashes.py", "WORKERS", "Crash run: SIGKILL a real xun session"),
        ("bench_soak.py", "TURNS", "Soak: hundreds of automated turns"),
    ],
)
def test_help_prints_the_usage_and_the_docstring_summary(script, metavar, first_words):
    done = run(script, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {script} [-h] [{metavar}]")
    assert first_words in " ".join(done.stdout.split())
    assert "(default: " in done.stdout


@pytest.mark.parametrize("script", ["bench_crashes.py", "bench_soak.py"])
@pytest.mark.parametrize("argument", ["--bogus", "two", "0", "-3"])
def test_a_bad_argument_is_a_usage_error(script, argument):
    done = run(script, argument)
    assert done.returncode == 2
    assert "usage:" in done.stderr and "Traceback" not in done.stderr
