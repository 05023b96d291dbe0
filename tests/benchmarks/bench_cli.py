"""Command-line benchmark: whole-process times, one JSON line per figure (not part of the test run).

    python3 tests/benchmarks/bench_cli.py [RUNS]          default: 9 runs per figure

Figures (medians of RUNS runs, each a fresh `sys.executable` process in a temporary working directory
with no API key and a private HOME):

- `python -c pass`: the interpreter's own start, for scale (site-packages `.pth` hooks included);
- `xun --version`: target under 150 ms;
- `xun run --offline "hi"`: one whole offline turn (settings, the in-process offline server, the SDK,
  one streamed completion, saving the session); target under 1 s.

Then `import_ms`: where the time of one offline turn goes (cumulative `-X importtime` of the heaviest
top-level modules), which is what to look at when a target is missed.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS_MS = {"xun --version": 150, "xun run --offline hi": 1000}


def environment(home: Path) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE would have every run compile xun anew; an installed package has its bytecode
    scrubbed = {
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "XUN_MODEL",
        "XUN_HOME",
        "XUN_OFFLINE_FAULTS",
        "PYTHONDONTWRITEBYTECODE",
    }
    env = {k: v for k, v in os.environ.items() if k not in scrubbed}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return env


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed


def figure(name: str, command: list[str], runs: int, cwd: Path, env: dict[str, str]) -> None:
    timed(command, cwd, env)  # warm the page cache and the bytecode cache
    times = [timed(command, cwd, env) for _ in range(runs)]
    median_ms = statistics.median(times) * 1000
    record = {
        "figure": name,
        "median_ms": round(median_ms, 1),
        "min_ms": round(min(times) * 1000, 1),
        "max_ms": round(max(times) * 1000, 1),
        "runs": runs,
    }
    if name in TARGETS_MS:
        record["target_ms"] = TARGETS_MS[name]
        record["met"] = median_ms < TARGETS_MS[name]
    print(json.dumps(record), flush=True)


def import_breakdown(cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "xun", "run", "--offline", "hi"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    top: dict[str, int] = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if match and not match.group(2).startswith(" "):  # top-level imports only
            top[match.group(2)] = int(match.group(1))
    heaviest = dict(sorted(top.items(), key=lambda item: -item[1])[:8])
    print(
        json.dumps(
            {
                "figure": "import_ms (xun run --offline hi, -X importtime, top level)",
                **{name: round(us / 1000, 1) for name, us in heaviest.items()},
            }
        ),
        flush=True,
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    with tempfile.TemporaryDirectory() as tmp:
        cwd, home = Path(tmp) / "work", Path(tmp) / "home"
        cwd.mkdir()
        home.mkdir()
        env = environment(home)
        figure("python -c pass", [sys.executable, "-c", "pass"], runs, cwd, env)
        figure("xun --version", [sys.executable, "-m", "xun", "--version"], runs, cwd, env)
        figure("xun run --offline hi", [sys.executable, "-m", "xun", "run", "--offline", "hi"], runs, cwd, env)
        import_breakdown(cwd, env)


if __name__ == "__main__":
    main()
