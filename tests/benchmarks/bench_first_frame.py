"""Benchmark of the first frame as the user sees it (a script, not a test:
`python3 tests/benchmarks/bench_first_frame.py`).

`bench_tui.py` times the app inside `run_test`; this one launches the command the way a user does, in a
real terminal (tmux, 120x40), and times from launch until the text that marks the frame is on the screen
(`tmux capture-pane` every 10 ms, as `shared/bench/first-frame.sh` does). One JSON line per figure:

* first_frame_terminal: `xun --offline` in an empty folder until the gauge's pane ("context") shows,
  against a minimal Textual app (a header, a static text, an input, a footer) launched the same way (`python3`
  from the PATH when `xun` is the command there: both through pyenv's shims, if that is how they are installed),
  runs interleaved (the machine's load hits both alike); medians and their ratio. Target: at most 1.3x.
* resume_50000: `xun --offline --resume` of a session of 50,000 messages (12,500 rounds of a prompt, a
  tool call, its result and an answer; old results reclaimed), until its newest prompt is on the screen,
  interleaved with runs of the minimal app. Target: 0.5 s.

The `xun` launched is this tree's (`PYTHONPATH` is set in the command; `python3 -m xun` when there is no
`xun` command). Its bytecode is written first (`compileall`), as an installed package has it:
`PYTHONDONTWRITEBYTECODE` would otherwise make every run compile xun anew (about 50 ms). The tmux server
is a private one (its own socket), so other tmux sessions are not touched.
Options: --runs N (each, default 9), --rounds N (of the resumed session, default 12500), --only NAME,
--src DIR (the xun source tree to launch, e.g. an older commit's for a comparison; default this checkout's).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
SRC = HERE.parents[2] / "src"
SOCKET = f"xun-bench-{os.getpid()}"
MINIMAL_APP = """\
from textual.app import App
from textual.widgets import Footer, Header, Input, Static
class Minimal(App):
    def compose(self):
        yield Header(); yield Static("READY-MARKER"); yield Input(); yield Footer()
Minimal().run()
"""


def emit(figure: str, **values: object) -> None:
    print(json.dumps({"figure": figure, **values}), flush=True)


def tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True)


def time_to_marker(command: str, marker: str, cwd: Path, timeout: float = 20.0) -> float:
    """Seconds from launching `command` in a new 120x40 tmux window until `marker` is on its screen."""
    name = f"run{time.monotonic_ns()}"
    start = time.perf_counter()
    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", str(cwd), f"{command}; sleep 5")
    try:
        while time.perf_counter() - start < timeout:
            if marker in tmux("capture-pane", "-p", "-t", name).stdout:
                return time.perf_counter() - start
            time.sleep(0.01)
        raise SystemExit(
            f"{marker!r} never showed after launching {command!r}: " + tmux("capture-pane", "-p", "-t", name).stdout
        )
    finally:
        tmux("kill-session", "-t", name)


def xun_command(src: Path, *args: str) -> tuple[str, str]:
    """The command line that launches the xun in `src`, and how (the `xun` command or `python3 -m xun`)."""
    launcher = ["xun"] if shutil.which("xun") else [sys.executable, "-m", "xun"]
    line = f"PYTHONPATH={shlex.quote(str(src))} " + " ".join(shlex.quote(a) for a in [*launcher, *args])
    return line, " ".join(launcher)


def python_command() -> str:
    """How the minimal app is launched: as xun is. The `xun` command found on the PATH goes with the `python3`
    found there (under pyenv both are shims, a shell script that costs tens of ms at each start, the issue's
    `first-frame.sh ... python3 minimal_textual_app.py`); `python3 -m xun` with this interpreter."""
    if shutil.which("xun") and shutil.which("python3"):
        return "python3"
    return sys.executable


def interleaved(
    runs: int, first: tuple[str, str, Path], second: tuple[str, str, Path]
) -> tuple[list[float], list[float]]:
    """`runs` timings of each (command, marker, folder), one of each in turn; one unrecorded warm-up each."""
    for command, marker, cwd in (first, second):
        time_to_marker(command, marker, cwd)
    a, b = [], []
    for _ in range(runs):
        a.append(time_to_marker(*first))
        b.append(time_to_marker(*second))
    return a, b


def big_session(workdir: Path, rounds: int) -> tuple[str, str]:
    """A saved session of 4 x `rounds` messages; its id and the text of its newest prompt."""
    sys.path.insert(0, str(SRC))
    sys.path.insert(0, str(HERE.parent))
    from bench_tui import big_session as build

    ident = build(workdir, rounds=rounds)
    return ident, f"question {rounds - 1}:"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=12_500)
    parser.add_argument("--only", choices=("first_frame_terminal", "resume_50000"))
    parser.add_argument("--src", type=Path, default=SRC)
    args = parser.parse_args()
    src = args.src.resolve()
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed (apt-get install tmux)")
    compileall.compile_dir(str(src), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-first-frame-") as folder:
        root = Path(folder)
        minimal_app = root / "minimal_textual_app.py"
        minimal_app.write_text(MINIMAL_APP)
        python = python_command()
        minimal = (f"{shlex.quote(python)} {shlex.quote(str(minimal_app))}", "READY-MARKER", root)
        tmux("new-session", "-d", "-s", "keeper", "sleep 3600")  # the private server lives until the end
        try:
            if args.only in (None, "first_frame_terminal"):
                empty = root / "empty"
                empty.mkdir()
                command, launcher = xun_command(src, "--offline")
                xun, base = interleaved(args.runs, (command, "context", empty), minimal)
                ratio = statistics.median(xun) / statistics.median(base)
                emit(
                    "first_frame_terminal",
                    seconds_median=round(statistics.median(xun), 3),
                    minimal_textual_median=round(statistics.median(base), 3),
                    ratio_to_minimal=round(ratio, 2),
                    seconds=[round(t, 3) for t in xun],
                    minimal_seconds=[round(t, 3) for t in base],
                    launcher=launcher,
                    minimal_launcher=python,
                    src=str(src),
                    runs=args.runs,
                    load_average=os.getloadavg()[0],
                    target_ratio=1.3,
                    ok=ratio <= 1.3,
                )
            if args.only in (None, "resume_50000"):
                big = root / "big"
                big.mkdir()
                ident, newest = big_session(big, args.rounds)
                size = (big / ".xun" / "sessions" / f"{ident}.json").stat().st_size
                command, launcher = xun_command(src, "--offline", "--resume")
                resume, base = interleaved(args.runs, (command, newest, big), minimal)
                emit(
                    "resume_50000",
                    seconds_median=round(statistics.median(resume), 3),
                    seconds_max=round(max(resume), 3),
                    minimal_textual_median=round(statistics.median(base), 3),
                    ratio_to_minimal=round(statistics.median(resume) / statistics.median(base), 2),
                    messages=4 * args.rounds,
                    session_bytes=size,
                    launcher=launcher,
                    minimal_launcher=python,
                    src=str(src),
                    runs=args.runs,
                    load_average=os.getloadavg()[0],
                    target_seconds=0.5,
                    ok=statistics.median(resume) <= 0.5,
                )
        finally:
            tmux("kill-server")


if __name__ == "__main__":
    main()
