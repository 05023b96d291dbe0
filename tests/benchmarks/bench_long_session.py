"""Benchmark of long sessions as the user runs them (a script: `python3 tests/benchmarks/bench_long_session.py`).

`xun --offline --resume ID` runs in a real terminal (tmux, its own server `-L longblocks-bench-PID`, HOME
and XDG folders in a temporary folder); keys go in with `send-keys`, and each figure is the time until
`capture-pane` (polled every 10 ms) shows what the step should show. One JSON line per figure.

Sessions are written as files (`SessionStore`, as xun saves them): N messages, 4 a round (a prompt
"question i of R: …", a read_file call, its 40-line result, an answer); two tier-2 summaries at a third and
two thirds of the rounds put those turns in the offload log (and the history index), a third leaves the last
CONTEXT_ROUNDS rounds in the context where the session is long enough (its threshold would have), and old
results are reclaimed, as in a session of weeks. For each size, with the view at the newest turn, then after Home:

* open (newest view only): launch until the newest prompt is on screen;
* key_p95 / key_streaming_p95: a character typed into the prompt until it shows (each 50 ms; p95), idle
  and while `write 300000 tokens` streams from the offline model (at --stream-rate tokens a second); after
  Home, sending that prompt takes the view to its end, so PageUp (from the prompt) takes it 20 pages up first;
  idle, the median of KEY_RUNS p95s of --keys keys each; while streaming, the median of STREAM_RUNS replies' p95;
* resize: 120x40 to 100x30 and back, until the app has drawn the new size (mean of the two);
* f4: the side panel hidden and shown again (mean of the two; the median of F4_RUNS such pairs);
* home (newest view only): Home in the chat until the first prompt ("question 0 of R") is on screen; when
  the screen stops changing without it, Home is pressed again (a user would), up to --home-limit seconds;
* end (after Home, and the F9 jump to the middle): End until the newest prompt shows again (the median of
  END_RUNS, Home between them);
* f9: F9 until the recall screen shows, then a query (`module_M.py` of the middle round, which the second
  summary took out) until its first result shows; f9_jump: the key in --jump-key (Ctrl+G, "show in the
  chat") until the recall screen has closed and that round (read from the offload log) is at the chat's top;
  each the median of F9_RUNS, the view taken back (End, or Home) between them;
* rss_mb / hwm_mb: VmRSS and VmHWM of the xun process (/proc/PID/status).

Item 3 of the same issue, long blocks: a session of --blocks-base messages whose newest turn holds a
50,000-line prompt, a read_file result of 800k characters and an 800k-character reply, against the same
session without them: resize, and page_up (PageUp from the prompt until the view has moved; median).

Targets, printed at the end against each figure: every figure at the largest size within 1.3x of the same
figure at the smallest; home under 0.5 s; key_streaming_p95 under 50 ms; resize under 0.3 s; with long
blocks, resize and page_up within 1.3x of the session without them.
Options: --sizes 500,5000,30000, --quick (500 and 5000, fewer keys, a shorter Home limit), --keys N,
--home-limit S, --no-blocks, --blocks-only, --src DIR (the xun source tree to run; default this checkout's).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
SRC = HERE.parents[2] / "src"
SOCKET = f"longblocks-bench-{os.getpid()}"
POLL = 0.01
FOCUS_CHAIN = 12
"""Shift+Tab presses that go round every focusable pane of the main screen at least once."""
SIZE = (120, 40)
SMALL = (100, 30)
F9_RUNS = 3
"""F9's open, search and jump are each timed this many times a view (the median is the figure): one sample
moved by half from run to run."""
KEY_RUNS = 3
"""Idle keys are timed in this many sets of --keys (the median of their p95s is the figure): the screen is read
every 10 ms, and one p95 of 40 keys moved between 19 and 25 ms from set to set at either size."""
END_RUNS = 5
"""End is timed this many times after Home (the median is the figure): the first after the F9 jumps too, the
others after Home alone. End's times fall in two groups at either size, about 45 and about 62 ms (a frame
apart), one or the other by chance: of three, the median moved between 0.043 and 0.062 s at 500 messages."""
F4_RUNS = 5
"""Times the side panel is hidden and shown a view (the median pair is the figure): one pair moved between 40
and 62 ms from run to run at either size."""
STREAM_RUNS = 5
"""Replies streamed a view, each with its own keys (the figure is the median of their p95s): one p95 of 40 keys
is their third slowest, and it moved between 18 and 48 ms from run to run at either size. At the newest turn
about one key in twenty meets an update of the reply (it is in view, updated at least once a second while
keys come), so one reply's p95 falls on either side of that edge; of three, the median still did (23.4 and
36.4 ms at 500 in two runs, 19.7 and 31.3 ms at 30,000)."""
CONTEXT_ROUNDS = 40
"""Rounds left in the context by the newest summary: a session of weeks keeps what its threshold allows, the
same at every length (the smallest session keeps its last third, about as many)."""
FILLER = "the fox ran far"
"""What the offline model's long replies are made of: a reply is streaming once it is on screen."""


def emit(figure: str, **values: object) -> None:
    print(json.dumps({"figure": figure, **values, "load_average": round(os.getloadavg()[0], 1)}), flush=True)


def tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True)


# ---------------------------------------------------------------------------------------------- sessions


def prompt_text(i: int, rounds: int) -> str:
    return f"question {i} of {rounds}: read src/module_{i}.py and tell me what it does"


def build_session(workdir: Path, messages: int, long_blocks: bool = False) -> tuple[str, int]:
    """A saved session of `messages` messages (and the long turn, with `long_blocks`); its id and rounds."""
    sys.path.insert(0, str(SRC))
    from xun.context.sessions import SessionStore

    store = SessionStore(workdir)
    conversation = store.new()
    conversation.conversation_id = f"long-{messages}{'-blocks' if long_blocks else ''}"
    rounds = messages // 4
    summaries = {rounds // 3, 2 * rounds // 3} - {0}
    if rounds - CONTEXT_ROUNDS > 2 * rounds // 3 + CONTEXT_ROUNDS:
        summaries.add(rounds - CONTEXT_ROUNDS)  # the threshold bounds the context, whatever the session's length
    for i in range(rounds):
        if i in summaries:
            result = conversation.compact(
                lambda condensed: (
                    f"The user asked about {len(condensed)} messages' worth of modules; each defines forty functions."
                ),
                keep_recent=8,
            )
            assert result.offload_path, result.message
        conversation.add_user_message(prompt_text(i, rounds))
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i:05d}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{i}.py"})},
                    }
                ],
            }
        )
        conversation.add_tool_result(
            f"call_{i:05d}",
            f"[src/module_{i}.py: lines 1-40 of 40]\n"
            + "".join(f"{n:6d}\tdef function_{n}(value):  # returns the value times {n}\n" for n in range(1, 41)),
        )
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": (
                    f"`src/module_{i}.py` defines **40 functions**; each multiplies its argument:\n\n"
                    f"- `function_1` returns the value\n- `function_40` returns forty times the value\n"
                ),
            }
        )
        if i % 500 == 499:
            conversation.reclaim_tool_results(keep_max=12, write_index=False)
    if long_blocks:
        conversation.add_user_message("\n".join(f"pasted line {n} of 50000" for n in range(50_000)))
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_big",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": "words.txt"})},
                    }
                ],
            }
        )
        conversation.add_tool_result("call_big", "".join(f"word{n} " for n in range(100_000)))
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": "The words:\n\n" + "".join(f"term{n} " for n in range(100_000)) + "\n\nThat is all.",
            }
        )
    conversation.record_usage(150_000)
    conversation.reclaim_tool_results(keep_max=12)
    store.save(conversation)
    return conversation.conversation_id, rounds


# ---------------------------------------------------------------------------------------------- terminal


class PacedServer:
    """The offline model server on its own, streaming at `rate` tokens a second (`xun --offline` starts one
    that streams as fast as it can); xun is pointed at it as at any OpenAI-compatible server."""

    def __init__(self, src: Path, rate: float) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "xun.offline", "--port", str(self.port), "--tokens-per-second", str(rate)],
            env={**os.environ, "PYTHONPATH": str(src)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise SystemExit("the offline server did not start")

    @property
    def environment(self) -> dict[str, str]:
        return {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.port}/v1",
            "OPENAI_API_KEY": "offline",
            "XUN_MODEL": "xun-offline",
        }

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class Xun:
    """One `xun --resume ID` (on the offline model) in its own tmux session; every wait polls the screen
    every 10 ms."""

    def __init__(self, root: Path, workdir: Path, src: Path, *args: str, server: PacedServer | None = None) -> None:
        home = root / "home"
        home.mkdir(exist_ok=True)
        self.name = f"x{time.monotonic_ns()}"
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "TERM": "xterm-256color",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(src),
            "LANG": "C.UTF-8",
            **(server.environment if server is not None else {}),
        }
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        offline = () if server is not None else ("--offline",)
        command = " ".join(shlex.quote(part) for part in (sys.executable, "-m", "xun", *offline, *args))
        self.started = time.perf_counter()
        tmux(
            "new-session",
            "-d",
            "-s",
            self.name,
            "-x",
            str(SIZE[0]),
            "-y",
            str(SIZE[1]),
            "-c",
            str(workdir),
            f"env -i {exports} sh -c {shlex.quote(command + '; sleep 600')}",
        )
        self.size = SIZE

    def screen(self) -> str:
        return tmux("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        tmux("send-keys", "-t", self.name, "-l", text)

    def until(self, predicate: Callable[[str], object], timeout: float, since: float | None = None) -> float | None:
        """Seconds from `since` (now) until the screen satisfies `predicate`; None after `timeout`, the screen
        then printed to stderr (a figure that timed out says what the app showed instead)."""
        start = time.perf_counter() if since is None else since
        while True:
            screen = self.screen()
            if predicate(screen):
                return time.perf_counter() - start
            if time.perf_counter() - start > timeout:
                print(f"timed out after {timeout:g} s; the screen:\n{screen}", file=sys.stderr, flush=True)
                return None
            time.sleep(POLL)

    def timed(
        self, action: Callable[[], object], predicate: Callable[[str], object], timeout: float = 30
    ) -> float | None:
        start = time.perf_counter()
        action()
        return self.until(predicate, timeout, since=start)

    def settle(self, quiet: float = 0.3, timeout: float = 30) -> None:
        """Until the screen has not changed for `quiet` seconds."""
        last, since, deadline = None, time.perf_counter(), time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            screen = self.screen()
            if screen != last:
                last, since = screen, time.perf_counter()
            elif time.perf_counter() - since >= quiet:
                return
            time.sleep(POLL)

    def resize(self, width: int, height: int) -> None:
        tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))
        self.size = (width, height)

    def drawn_at_size(self, screen: str) -> bool:
        """The app has drawn the terminal's size: its top border reaches the right edge, its key bar the bottom."""
        lines = screen.split("\n")
        width, height = self.size
        return (
            len(lines) >= height
            and len(lines[1].rstrip()) == width
            and lines[1].rstrip().endswith("╮")
            and "Help" in lines[height - 1]
        )

    def pid(self) -> int | None:
        """The xun process: the Python child of the pane's shell."""
        shell = tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").stdout.strip()
        if not shell.isdigit():
            return None
        todo = [int(shell)]
        while todo:
            pid = todo.pop()
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"python" in command[0] and b"xun" in command:
                return pid
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                todo += [int(child) for child in task.read_text().split()]
        return None

    def memory(self) -> dict[str, float]:
        """VmRSS and VmHWM of the xun process, in MB."""
        pid = self.pid()
        figures: dict[str, float] = {}
        if pid is None:
            return figures
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures[key] = round(int(value.split()[0]) / 1024, 1)
        return figures

    def close(self) -> None:
        tmux("kill-session", "-t", self.name)


# ------------------------------------------------------------------------------------------------ steps


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def median_p95(sets: list[list[float]]) -> tuple[float | None, list[float | None]]:
    """The median of the sets' p95s (seconds), and each p95 in ms, as a figure's `each` shows them."""
    each = [p95(latencies) for latencies in sets]
    found = [value for value in each if value is not None]
    shown = [None if value is None else round(value * 1000, 1) for value in each]
    return (statistics.median(found) if found else None), shown


KEYS_PER_LINE = 40
"""Keys typed before the prompt is cleared: more would wrap the prompt's line, and a key is found by the
typed text on one line."""


def key_latencies(x: Xun, count: int) -> list[float]:
    """Characters typed into the prompt one by one, each until it shows, in lines of at most KEYS_PER_LINE (the
    prompt cleared after each)."""
    latencies: list[float] = []
    while len(latencies) < count:
        typed = "KEYS:"
        x.type(typed)
        if x.until(lambda screen: typed in screen, 10) is None:
            return latencies  # the prompt does not have the focus
        for n in range(min(KEYS_PER_LINE, count - len(latencies))):
            typed += "abcdefghijklmnopqrstuvwxyz"[n % 26]
            start = time.perf_counter()
            x.type(typed[-1])
            seconds = x.until(lambda screen: typed in screen, 10, since=start)
            latencies.append(seconds if seconds is not None else 10.0)
            time.sleep(max(0.0, 0.05 - (time.perf_counter() - start)))
        x.keys("C-u")
        x.keys("C-u")
        x.until(lambda screen: "KEYS:" not in screen, 5)
    return latencies


def resize_seconds(x: Xun) -> float | None:
    """Mean of a resize to 100x30 and back to 120x40, each until the app has drawn the new size."""
    times = []
    for size in (SMALL, SIZE):
        times.append(x.timed(lambda: x.resize(*size), x.drawn_at_size, 30))
        x.settle(0.2)
    return None if None in times else statistics.mean(times)  # type: ignore[arg-type]


def f4_seconds(x: Xun) -> list[float]:
    """Means of hiding the side panel and showing it again, F4_RUNS times (a pair that timed out is left out)."""
    pairs = []
    for _ in range(F4_RUNS):
        hidden = x.timed(lambda: x.keys("F4"), lambda screen: "─ context ─" not in screen, 30)
        x.settle(0.2)
        shown = x.timed(lambda: x.keys("F4"), lambda screen: "─ context ─" in screen, 30)
        x.settle(0.2)
        if hidden is not None and shown is not None:
            pairs.append((hidden + shown) / 2)
    return pairs


def chat_keys_offered(screen: str) -> bool:
    """The key bar (the bottom line) offers the chat's keys: the chat has the focus."""
    return "Open/fold" in screen.rstrip("\n").rsplit("\n", 1)[-1]


def focus_chat(x: Xun) -> None:
    """Shift+Tab from the prompt (again, from wherever the focus was, until the chat has it); nothing when
    the chat has it already (from there Shift+Tab would leave it). The focus can be anywhere in the side
    panel (once, after the F9 jumps, it was in the recoverable list's filter, which then took End and every
    later key), so Shift+Tab goes round the whole chain; a chat it never reaches ends the run, rather than
    sending the keys to another pane."""
    x.settle(0.2)  # a screen that just closed moves the focus, and the key bar says so, after a frame
    for _ in range(FOCUS_CHAIN):
        if chat_keys_offered(x.screen()):
            return
        x.keys("BTab")
        x.settle(0.3)
    if not chat_keys_offered(x.screen()):
        raise SystemExit(f"the chat never took the focus; the screen:\n{x.screen()}")


def focus_prompt(x: Xun) -> None:
    x.keys("Tab")
    x.until(lambda screen: not chat_keys_offered(screen), 5)


def go_home(x: Xun, marker: str, limit: float) -> tuple[float | None, int]:
    """Home in the chat until `marker` shows, pressing it again whenever the screen stops changing
    without it; the seconds (None past `limit`) and the presses."""
    start = time.perf_counter()
    presses = 0
    while time.perf_counter() - start < limit:
        x.keys("Home")
        presses += 1
        last, quiet_since = None, time.perf_counter()
        while time.perf_counter() - start < limit:
            screen = x.screen()
            if marker in screen:
                return time.perf_counter() - start, presses
            if screen != last:
                last, quiet_since = screen, time.perf_counter()
            elif time.perf_counter() - quiet_since > 0.3:
                break  # nothing moves and the first prompt is not there: press again
            time.sleep(POLL)
    return None, presses


def chat_bottom_line(screen: str) -> str:
    """The chat's last line of text on screen (above its bottom border), as it shows with the view at its end;
    the scrollbar's thumb, drawn in the row's last cells, is not text."""
    lines = screen.split("\n")
    at = next(i for i, line in enumerate(lines) if "in the context" in line)
    texts = (line.split("│")[1].rstrip(" " + SCROLLBAR_CELLS) for line in reversed(lines[:at]))
    return next(text.strip() for text in texts if text.strip())


SCROLLBAR_CELLS = "▁▂▃▄▅▆▇█▔"


def in_chat(screen: str, text: str) -> bool:
    """`text` is in the chat's column (left of the side panel, whose recoverable results name files too)."""
    lines = screen.split("\n")
    top = next((line for line in lines if "╭─ chat " in line), "")
    width = top.find("╮") + 1 if "╮" in top else len(top)
    return any(text in line[:width] for line in lines)


def at_chat_top(screen: str, text: str, rows: int = 4) -> bool:
    """`text` is in the chat's first `rows` rows, where a jump puts the block it shows: the jump is done. (Its
    text anywhere in the chat is not enough: the turns mounted around the target, drawn before the view
    scrolls to it, may show it lower down, in another block.)"""
    lines = screen.split("\n")
    at = next((i for i, line in enumerate(lines) if "╭─ chat " in line), None)
    if at is None:
        return False
    width = lines[at].find("╮") + 1 or len(lines[at])
    return any(text in line[:width] for line in lines[at + 1 : at + 1 + rows])


def earlier_line(screen: str) -> str:
    """The chat's line saying how many messages are not loaded yet, if it is on screen."""
    return next((line.strip("│ ") for line in screen.split("\n") if "earlier messages" in line), "")


def streaming_key_latencies(x: Xun, count: int, *, pages_up: int = 0) -> tuple[list[float], bool]:
    """Key latencies while `write 300000 tokens` streams (with `pages_up`, the view first taken that many
    pages up with PageUp from the prompt); whether it still streamed at the end. The turn is cancelled after."""
    x.type("write 300000 tokens")
    x.keys("Enter")
    x.until(lambda screen: FILLER in screen, 30)
    for _ in range(pages_up):
        x.keys("PageUp")
        time.sleep(0.05)
    x.settle(0.2, timeout=10)
    latencies = key_latencies(x, count)
    streaming = "esc Cancel" in x.screen()
    x.keys("Escape")
    x.until(lambda screen: "esc Cancel" not in screen, 30)
    x.settle(0.3)
    return latencies, streaming


def f9_seconds(x: Xun, target: str, ident: str, jump_key: str) -> dict[str, float | None]:
    """F9 until the recall screen shows, the query until its result does, and the jump key until the chat
    shows the target's turn (None when it was in the chat already, or the entry never showed); the recall
    screen is closed after."""
    already = in_chat(x.screen(), target)
    start = time.perf_counter()
    x.keys("F9")
    opened = x.until(lambda screen: "recall ·" in screen, 30, since=start)
    x.type(target)
    searched = x.timed(lambda: None, lambda screen: screen.count(target) >= 2, 30)
    # the highlighted entry is read (in a thread) before the recall screen can show it in the chat
    entry_shown = x.until(lambda screen: f"session {ident}" in screen, 30) is not None
    jumped = None
    if jump_key and entry_shown and not already:
        jumped = x.timed(
            lambda: x.keys(jump_key), lambda screen: "recall ·" not in screen and at_chat_top(screen, target), 30
        )
    if "recall ·" in x.screen():
        x.keys("Escape")
        x.until(lambda screen: "recall ·" not in screen, 10)
    x.settle(0.3)
    return {"f9_open": opened, "f9_search": searched, "f9_jump": jumped}


def page_up_seconds(x: Xun, presses: int = 12) -> list[float]:
    """PageUp from the prompt (the chat scrolls), each until the screen has changed."""
    times = []
    for _ in range(presses):
        before = x.screen()
        seconds = x.timed(lambda: x.keys("PageUp"), lambda screen: screen != before, 10)
        times.append(seconds if seconds is not None else 10.0)
        x.settle(0.15)
    return times


# ------------------------------------------------------------------------------------------------ runs


def run_size(
    root: Path, src: Path, messages: int, args: argparse.Namespace, server: PacedServer | None
) -> dict[str, dict[str, float | None]]:
    """Every figure for one size, by view; each is emitted as it is measured."""
    workdir = root / f"s{messages}"
    workdir.mkdir()
    built = time.perf_counter()
    ident, rounds = build_session(workdir, messages)
    from xun.base.paths import offload_dir

    emit(
        "built",
        messages=messages,
        seconds=round(time.perf_counter() - built, 2),
        offload_bytes=sum(f.stat().st_size for f in offload_dir(workdir).glob("*.md")),
    )
    first, newest = f"question 0 of {rounds}:", f"question {rounds - 1} of {rounds}:"
    target = f"module_{rounds // 2}.py"  # between the two summaries: F9's jump reads it from the offload log
    figures: dict[str, dict[str, float | None]] = {"newest": {}, "after_home": {}}

    def record(view: str, name: str, value: float | None, unit: str = "s", **extra: object) -> None:
        shown = None if value is None else round(value * 1000, 1) if unit == "ms" else round(value, 3)
        if unit == "MB":
            shown = value
        figures[view][name] = shown
        emit(name, messages=messages, view=view, value=shown, unit=unit, **extra)

    x = Xun(root, workdir, src, "--resume", ident, server=server)
    try:
        record("newest", "open", x.until(lambda screen: newest in screen, 120, since=x.started))
        x.until(lambda screen: " ready" in screen.split("\n")[0], 60)
        x.settle(0.5)
        for key, value in x.memory().items():
            record("newest", {"VmRSS": "rss_mb", "VmHWM": "hwm_mb"}[key], value, "MB")
        for view in ("newest", "after_home"):
            if view == "after_home":
                bottom = chat_bottom_line(x.screen())
                focus_chat(x)
                seconds, presses = go_home(x, first, args.home_limit)
                record(
                    view,
                    "home",
                    seconds,
                    presses=presses,
                    limit_s=args.home_limit,
                    reached=seconds is not None,
                    left=earlier_line(x.screen()) if seconds is None else "",
                )
                x.settle(0.3)
                for key, value in x.memory().items():
                    record(view, {"VmRSS": "rss_mb", "VmHWM": "hwm_mb"}[key], value, "MB")
                focus_prompt(x)
            sets = [key_latencies(x, args.keys) for _ in range(KEY_RUNS)]
            median, each = median_p95(sets)
            record(view, "key_p95", median, "ms", keys=[len(latencies) for latencies in sets], each=each)
            record(view, "resize", resize_seconds(x))
            pairs = f4_seconds(x)
            record(view, "f4", statistics.median(pairs) if pairs else None, each=[round(pair, 3) for pair in pairs])
            samples: dict[str, list[float]] = {"f9_open": [], "f9_search": [], "f9_jump": []}
            for attempt in range(F9_RUNS):
                if attempt:  # the view back where it was: at the newest turn, or at the first prompt
                    focus_chat(x)
                    if view == "newest":
                        x.timed(lambda: x.keys("End"), lambda screen: newest in screen, 30)
                    else:
                        go_home(x, first, args.home_limit)
                    focus_prompt(x)
                    x.settle(0.3)
                for name, sample in f9_seconds(x, target, ident, args.jump_key).items():
                    if sample is not None:
                        samples[name].append(sample)
            for name, values in samples.items():
                middle = statistics.median(values) if values else None
                record(view, name, middle, runs=len(values), each=[round(sample, 3) for sample in values])
            if view == "after_home":
                focus_chat(x)
                ends = []
                for attempt in range(END_RUNS):
                    if attempt:  # the view back at the first prompt
                        go_home(x, first, args.home_limit)
                        x.settle(0.3)
                    ends.append(x.timed(lambda: x.keys("End"), lambda screen: bottom in screen, 60))
                    x.settle(0.3)
                done = [sample for sample in ends if sample is not None]
                record(
                    view,
                    "end",
                    statistics.median(done) if done else None,
                    line=bottom,
                    each=[None if sample is None else round(sample, 3) for sample in ends],
                )
            if chat_keys_offered(x.screen()):
                focus_prompt(x)
            pages_up = 20 if view == "after_home" else 0  # sending a prompt takes the view to its end
            runs = [streaming_key_latencies(x, args.keys, pages_up=pages_up) for _ in range(STREAM_RUNS)]
            median, each = median_p95([latencies for latencies, _ in runs])
            record(
                view,
                "key_streaming_p95",
                median,
                "ms",
                pages_up=pages_up,
                keys=[len(latencies) for latencies, _ in runs],
                each=each,
                still_streaming=all(streamed for _, streamed in runs),
            )
        for key, value in x.memory().items():
            record("after_home", {"VmRSS": "rss_mb_end", "VmHWM": "hwm_mb_end"}[key], value, "MB")
    finally:
        x.close()
    return figures


def run_blocks(root: Path, src: Path, messages: int) -> dict[str, dict[str, float | None]]:
    """Resize and PageUp with the long turn at the newest end of the session, and without it."""
    results: dict[str, dict[str, float | None]] = {}
    for long_blocks in (False, True):
        kind = "long_blocks" if long_blocks else "plain"
        workdir = root / f"b{messages}-{kind}"
        workdir.mkdir()
        ident, rounds = build_session(workdir, messages, long_blocks=long_blocks)
        newest = "That is all." if long_blocks else f"question {rounds - 1} of {rounds}:"
        x = Xun(root, workdir, src, "--resume", ident)
        try:
            opened = x.until(lambda screen: newest in screen, 120, since=x.started)
            x.until(lambda screen: " ready" in screen.split("\n")[0], 60)
            x.settle(0.5)
            resizes = [resize_seconds(x) for _ in range(2)]
            pages = page_up_seconds(x)
            memory = x.memory()
        finally:
            x.close()
        results[kind] = {
            "open": opened,
            "resize": max(r for r in resizes if r is not None) if all(resizes) else None,
            "page_up": statistics.median(pages),
        }
        for name, value in results[kind].items():
            emit(
                f"{kind}_{name}",
                messages=messages,
                value=None if value is None else round(value, 3),
                unit="s",
                **({"page_up_max": round(max(pages), 3)} if name == "page_up" else {}),
            )
        emit(f"{kind}_rss_mb", messages=messages, value=memory.get("VmRSS"), hwm_mb=memory.get("VmHWM"), unit="MB")
    return results


def verdicts(
    by_size: dict[int, dict[str, dict[str, float | None]]], blocks: dict[str, dict[str, float | None]]
) -> None:
    """Where each figure stands against its target."""
    if len(by_size) >= 2:
        small, large = min(by_size), max(by_size)
        for view in ("newest", "after_home"):
            for name, base in by_size[small][view].items():
                value = by_size[large][view].get(name)
                ratio = None if not base or value is None else round(value / base, 2)
                emit(
                    "verdict",
                    name=name,
                    view=view,
                    **{f"at_{small}": base, f"at_{large}": value},
                    ratio=ratio,
                    target="within 1.3x of the smallest",
                    ok=ratio is not None and ratio <= 1.3,
                )
    for size, figures in by_size.items():
        for view, view_figures in figures.items():
            for name, limit, unit in (("home", 0.5, "s"), ("key_streaming_p95", 50, "ms"), ("resize", 0.3, "s")):
                if name in view_figures:
                    value = view_figures[name]
                    emit(
                        "verdict",
                        name=name,
                        view=view,
                        messages=size,
                        value=value,
                        target=f"under {limit} {unit}",
                        ok=value is not None and value < limit,
                    )
    if blocks:
        for name in ("resize", "page_up"):
            base, value = blocks["plain"][name], blocks["long_blocks"][name]
            ratio = None if not base or value is None else round(value / base, 2)
            emit(
                "verdict",
                name=f"long_blocks_{name}",
                plain=None if base is None else round(base, 3),
                long_blocks=None if value is None else round(value, 3),
                ratio=ratio,
                target="within 1.3x of the same session without the long blocks",
                ok=ratio is not None and ratio <= 1.3,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,5000,30000")
    parser.add_argument("--quick", action="store_true", help="500 and 5000 messages, 20 keys, Home limit 20 s")
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--home-limit", type=float, default=60.0)
    parser.add_argument(
        "--jump-key",
        default="C-g",
        help="the key (tmux's name) in the recall screen that shows the highlighted result in the chat ('' for none)",
    )
    parser.add_argument(
        "--stream-rate",
        type=float,
        default=500.0,
        help="tokens a second the reply streams at while keys are timed (0: `xun --offline`, unpaced)",
    )
    parser.add_argument("--blocks-base", type=int, default=500)
    parser.add_argument("--no-blocks", action="store_true")
    parser.add_argument("--blocks-only", action="store_true")
    parser.add_argument("--src", type=Path, default=SRC)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.keys, args.home_limit = "500,5000", 20, 20.0
    sizes = [int(size) for size in args.sizes.split(",")]
    src = args.src.resolve()
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed (apt-get install tmux)")
    compileall.compile_dir(str(src), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-long-session-") as folder:
        root = Path(folder)
        tmux("new-session", "-d", "-s", "keeper", "sleep 3600")  # the private server lives until the end
        try:
            server = PacedServer(src, args.stream_rate) if args.stream_rate else None
            try:
                by_size = {} if args.blocks_only else {size: run_size(root, src, size, args, server) for size in sizes}
            finally:
                if server is not None:
                    server.stop()
            blocks = {} if args.no_blocks else run_blocks(root, src, args.blocks_base)
            verdicts(by_size, blocks)
        finally:
            tmux("kill-server")


if __name__ == "__main__":
    main()
