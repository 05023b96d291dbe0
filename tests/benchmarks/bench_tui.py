"""Benchmark of the full-screen app (a script, not a test: `python3 tests/benchmarks/bench_tui.py`).

Headless (`run_test`), one JSON line per figure, each with its target:

* first_frame_empty: from spawning a fresh Python process until the app's first frame is composed,
  for a new session on the offline demo model, started as `xun` starts it: the app is given a way to
  open the session, draws its first frame (header, empty panes, the prompt taking keys), then opens
  the session in a thread (settings, offline server, agent). Target 0.5 s. `ready_median` is until the
  first frame that shows the open session (model, session id, welcome, gauge); `in_process_median`
  leaves out the interpreter's own start (from the script's first line).
* first_frame_2000: the same for `--resume` of a saved session of 2,000 messages (500 rounds of a
  prompt, a tool call, its result and an answer), opened as `xun` opens it (`SessionOpener`: the
  conversation is read first and shown while the settings and the agent load); the target, 1 s, applies
  to the first frame that shows the transcript (`transcript`); `ready` is until the session takes prompts.
* first_frame_mcp3: first_frame_empty again, with three MCP servers in the user config (mcp-server-time,
  mcp-server-git and the tests' fault server, over stdio), runs interleaved with runs without them: the
  servers start in a worker after the first frame, so the first frame must be unchanged (within noise).
  `servers_ready_median` is until all three are ready (informative: they are real processes).
* first_frame_empty also starts a minimal Textual app (header, scroll, input, footer) the same way,
  interleaved with the app's runs: the target is the app's first frame within 1.5 times of it.
* unpaced_stream: `write 300000 tokens` streamed at full speed: typed keys reach the prompt, and Esc
  stops the turn within 100 ms (until the app is idle again).
* key_latency_streaming: while a reply streams at 500 tokens/s from the offline server, a key is
  posted to the prompt every 50 ms; the latency is from posting the key to the first frame composed
  after the character is in the prompt. Target 50 ms (p95).

A "frame" is a call of the app's display step with a compositor update, the moment a terminal would be
written to; the benchmark also encodes that update to terminal escape codes, as a real terminal needs.
The children run with bytecode caching on (a warm-up run writes it), as an installed package has it;
PYTHONDONTWRITEBYTECODE in the caller's environment would otherwise make every run compile xun anew.
Options: --runs N (first-frame runs each, default 5), --keys N (default 100), --mcp-only (only
first_frame_mcp3).
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # before any other import: the in-process figure starts here
# ruff: noqa: E402 - the imports below come after the clock starts, on purpose

import argparse
import asyncio
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()


def emit(figure: str, **values: object) -> None:
    print(json.dumps({"figure": figure, **values}), flush=True)


def watch_frames(app: object, on_frame) -> None:
    """Call `on_frame()` each time the app composes a frame (and encode it, as a terminal write would)."""
    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=200)
    original = app._display  # type: ignore[attr-defined]

    def display(screen, renderable):
        original(screen, renderable)
        if renderable is not None and hasattr(renderable, "render_segments"):
            renderable.render_segments(console)
            on_frame()

    app._display = display  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ child process


def minimal_child() -> None:
    """Runs in a fresh process: a minimal Textual app (a header, a scroll, an input, a footer), the yardstick
    the app's own first frame is measured against (target: within 1.5 times of it)."""
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.widgets import Footer, Header, Input, Static

    class Minimal(App[None]):
        def compose(self) -> ComposeResult:
            yield Header()
            with VerticalScroll():
                yield Static("hello")
            yield Input(placeholder="type")
            yield Footer()

    app = Minimal()
    first: list[float] = []
    watch_frames(app, lambda: first or first.extend([time.time(), time.perf_counter() - STARTED]))

    async def main() -> None:
        async with app.run_test(size=(120, 40)):
            while not first:
                await asyncio.sleep(0.001)

    asyncio.run(main())
    print(
        json.dumps(
            {
                "frame_at": first[0],
                "in_process": first[1],
                "ready_at": first[0],
                "kind": "minimal",
                "messages": 0,
                "blocks": 0,
            }
        ),
        flush=True,
    )


def child(kind: str, workdir: str, resume: str | None) -> None:
    """Runs in a fresh process: start the app as `xun` does, print the wall times of its first frame and
    of the first frame that shows the open session."""
    if kind == "minimal":
        minimal_child()
        return
    import gc

    gc.disable()  # as `xun.tui.run` does until the session shows (the app resumes the collector then)
    from xun.agent.opener import SessionOpener
    from xun.tui.app import XunApp
    from xun.tui.widgets.user_block import UserBlock

    app = XunApp(opener=SessionOpener(workdir, offline=True, resume=resume, environ={}))
    first: list[float] = []
    shown: list[float] = []
    ready: list[float] = []

    def on_frame() -> None:
        moment = [time.time(), time.perf_counter() - STARTED]
        if not first:
            first.extend(moment)
        if resume and not shown and app.screen.query(UserBlock):  # (a frame may come before the chat is composed)
            shown.extend(moment)
        if first and not ready and app.session is not None and app.main.header.status == "ready":
            ready.extend(moment)

    watch_frames(app, on_frame)

    async def main() -> None:
        async with app.run_test(size=(120, 40)):
            while not ready:
                await asyncio.sleep(0.001)
            blocks = len(app.main.chat.children)
            servers_at = None
            mcp = app.session.mcp
            if mcp:
                while not all(s.state in ("ready", "failed") for s in mcp.servers.values()):
                    await asyncio.sleep(0.005)
                if any(s.state != "ready" for s in mcp.servers.values()):
                    raise SystemExit(f"an MCP server failed: {[s.reason for s in mcp.servers.values()]}")
                servers_at = time.time()
        print(
            json.dumps(
                {
                    "frame_at": first[0],
                    "in_process": first[1],
                    "ready_at": ready[0],
                    "kind": kind,
                    "transcript_at": shown[0] if shown else None,
                    "messages": len(app.conversation.messages),
                    "blocks": blocks,
                    "servers_at": servers_at,
                }
            ),
            flush=True,
        )

    try:
        asyncio.run(main())
    finally:
        if app.opened_session is not None:
            app.opened_session.close()


def spawn_first_frame(kind: str, workdir: Path, resume: str | None) -> tuple[float, dict]:
    command = [sys.executable, str(HERE), "--child", kind, "--workdir", str(workdir)]
    if resume:
        command += ["--resume", resume]
    from xun.cli.main import NO_PYDANTIC_PLUGINS

    env = {**os.environ, "XDG_CONFIG_HOME": str(workdir / "xdg")}
    for name in ("OPENAI_API_KEY", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    env.setdefault(*NO_PYDANTIC_PLUGINS)  # as the `xun` command starts
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the app did not start:\n{done.stderr[-6000:]}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    facts["ready"] = facts["ready_at"] - started
    if facts.get("transcript_at"):
        facts["transcript"] = facts["transcript_at"] - started
    if facts.get("servers_at"):
        facts["servers_ready"] = facts["servers_at"] - started
    return facts["frame_at"] - started, facts


def mcp_workdir(root: Path) -> Path:
    """A folder whose user config (XDG_CONFIG_HOME=<folder>/xdg) has three MCP servers over stdio."""
    import tomli_w

    folder = root / "mcp3"
    repo = folder / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    config = folder / "xdg" / "xun" / "config.toml"
    config.parent.mkdir(parents=True)
    fault = HERE.parents[1] / "agent" / "tools" / "mcp" / "fault_server.py"
    config.write_text(
        tomli_w.dumps(
            {
                "mcp": {
                    "servers": {
                        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
                        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
                        "fault": {"command": sys.executable, "args": [str(fault)]},
                    }
                }
            }
        )
    )
    return folder


def first_frames_with_mcp(root: Path, runs: int) -> None:
    plain = root / "plain"
    plain.mkdir()
    with_mcp = mcp_workdir(root)
    spawn_first_frame("empty", plain, None)
    spawn_first_frame("mcp3", with_mcp, None)
    pairs = [(spawn_first_frame("empty", plain, None), spawn_first_frame("mcp3", with_mcp, None)) for _ in range(runs)]
    without = [a[0] for a, _ in pairs]
    withs = [b[0] for _, b in pairs]
    emit(
        "first_frame_mcp3",
        seconds_median=round(statistics.median(withs), 3),
        without_mcp_median=round(statistics.median(without), 3),
        difference_median=round(statistics.median(withs) - statistics.median(without), 3),
        ready_median=round(statistics.median(b[1]["ready"] for _, b in pairs), 3),
        servers_ready_median=round(statistics.median(b[1]["servers_ready"] for _, b in pairs), 3),
        runs=runs,
        servers=3,
        target_seconds=0.5,
        ok=statistics.median(withs) <= 0.5,
    )


def big_session(workdir: Path, rounds: int = 500) -> str:
    from xun.context.sessions import SessionStore

    store = SessionStore(workdir)
    conversation = store.new()
    conversation.conversation_id = "bench-2000"
    for i in range(rounds):
        conversation.add_user_message(f"question {i}: read src/module_{i}.py and tell me what it does")
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i:04d}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{i}.py"})},
                    }
                ],
            }
        )
        conversation.add_tool_result(
            f"call_{i:04d}",
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
    conversation.record_usage(150_000)
    conversation.reclaim_tool_results(keep_max=12)
    store.save(conversation)
    return conversation.conversation_id


def first_frames(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tui-") as folder:
        root = Path(folder)
        empty = root / "empty"
        empty.mkdir()
        spawn_first_frame("empty", empty, None)  # warm the file cache and bytecode
        spawn_first_frame("minimal", empty, None)
        results, minimal = [], []
        for _ in range(runs):  # interleaved, so both see the same load on the machine
            results.append(spawn_first_frame("empty", empty, None))
            minimal.append(spawn_first_frame("minimal", empty, None)[0])
        times = [seconds for seconds, _ in results]
        inside = [facts["in_process"] for _, facts in results]
        ready = [facts["ready"] for _, facts in results]
        ratio = statistics.median(times) / statistics.median(minimal)
        emit(
            "first_frame_empty",
            seconds_median=round(statistics.median(times), 3),
            seconds_max=round(max(times), 3),
            in_process_median=round(statistics.median(inside), 3),
            ready_median=round(statistics.median(ready), 3),
            minimal_textual_median=round(statistics.median(minimal), 3),
            ratio_to_minimal=round(ratio, 2),
            runs=runs,
            target_ratio=1.5,
            ok=ratio <= 1.5,
        )

        first_frames_with_mcp(root, runs)

        big = root / "big"
        big.mkdir()
        conversation_id = big_session(big)
        size = (big / ".xun" / "sessions" / f"{conversation_id}.json").stat().st_size
        spawn_first_frame("big", big, conversation_id)
        results = [spawn_first_frame("big", big, conversation_id) for _ in range(runs)]
        times = [seconds for seconds, _ in results]
        shown = [facts["transcript"] for _, facts in results]
        ready = [facts["ready"] for _, facts in results]
        facts = results[-1][1]
        emit(
            "first_frame_2000",
            seconds_median=round(statistics.median(times), 3),
            transcript_median=round(statistics.median(shown), 3),
            transcript_max=round(max(shown), 3),
            ready_median=round(statistics.median(ready), 3),
            ready_max=round(max(ready), 3),
            runs=runs,
            messages=facts["messages"],
            blocks_mounted=facts["blocks"],
            session_bytes=size,
            target_seconds=1.0,
            ok=statistics.median(shown) <= 1.0,
        )


# ----------------------------------------------------------------------------------------- latency


async def key_latency(keys: int) -> None:
    from textual import events

    from xun.agent.launch import open_session
    from xun.offline import OfflineServer
    from xun.tui.app import XunApp

    server = OfflineServer(tokens_per_second=500)
    server.start()
    with tempfile.TemporaryDirectory(prefix="bench-tui-") as folder:
        session = open_session(folder, base_url=server.base_url, environ={})
        app = XunApp(session)
        frames: list[float] = []
        watch_frames(app, lambda: frames.append(time.perf_counter()))
        latencies: list[float] = []
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                app.main.prompt.load_text("write 20000 tokens")
                await pilot.press("enter")
                while app.main.chat.reply is None or len(app.main.chat.reply.text) < 200:
                    await asyncio.sleep(0.01)
                streamed_before = len(app.main.chat.reply.text)
                started = time.perf_counter()
                app.main.prompt.focus()
                for n in range(keys):
                    char = "abcdefghijklmnopqrstuvwxyz"[n % 26]
                    typed = len(app.main.prompt.text)
                    posted = time.perf_counter()
                    app.post_message(events.Key(char, char))
                    while len(app.main.prompt.text) == typed:
                        await asyncio.sleep(0)
                    in_prompt = time.perf_counter()
                    while not frames or frames[-1] < in_prompt:
                        await asyncio.sleep(0)
                    latencies.append(frames[-1] - posted)
                    await asyncio.sleep(max(0.0, 0.05 - (time.perf_counter() - posted)))
                elapsed = time.perf_counter() - started
                streamed = len(app.main.chat.reply.text) - streamed_before if app.main.chat.reply else 0
                still_streaming = app.work.busy == "turn"
                app.action_cancel_turn()
                await pilot.pause(0.2)
        finally:
            session.close()
            server.stop()
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    emit(
        "key_latency_streaming",
        keys=keys,
        ms_median=round(1000 * statistics.median(ordered), 2),
        ms_p95=round(1000 * p95, 2),
        ms_max=round(1000 * ordered[-1], 2),
        stream_tokens_per_second=round(streamed / 4 / elapsed, 1),
        still_streaming=still_streaming,
        target_ms=50,
        ok=p95 <= 0.05,
    )


async def unpaced_stream(keys: int = 20) -> None:
    """Under an unpaced stream (`write 300000 tokens` from the offline server at full speed): the latency of
    a typed key until it is in the prompt, and of Esc until the turn has stopped and the app is idle."""
    from textual import events

    from xun.agent.launch import open_session
    from xun.offline import OfflineServer
    from xun.tui.app import XunApp

    server = OfflineServer()
    server.start()
    with tempfile.TemporaryDirectory(prefix="bench-tui-") as folder:
        session = open_session(folder, base_url=server.base_url, environ={})
        app = XunApp(session)
        latencies: list[float] = []
        try:
            async with app.run_test(size=(160, 48)) as pilot:
                app.main.prompt.load_text("write 300000 tokens")
                await pilot.press("enter")
                while app.main.chat.reply is None or len(app.main.chat.reply.text) < 2000:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(1.0)  # well into the reply
                app.main.prompt.focus()
                for _ in range(keys):
                    typed = len(app.main.prompt.text)
                    posted = time.perf_counter()
                    app.post_message(events.Key("a", "a"))
                    while len(app.main.prompt.text) == typed:
                        await asyncio.sleep(0)
                    latencies.append(time.perf_counter() - posted)
                    await asyncio.sleep(0.05)
                streamed = len(app.main.chat.reply.text) if app.main.chat.reply else 0
                posted = time.perf_counter()
                app.post_message(events.Key("escape", None))
                while app.work.busy is not None:
                    await asyncio.sleep(0.001)
                cancel = time.perf_counter() - posted
        finally:
            session.close()
            server.stop()
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    emit(
        "unpaced_stream",
        keys=keys,
        key_ms_median=round(1000 * statistics.median(ordered), 1),
        key_ms_p95=round(1000 * p95, 1),
        cancel_ms=round(1000 * cancel, 1),
        streamed_chars=streamed,
        target_cancel_ms=100,
        ok=cancel <= 0.1,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--resume", help=argparse.SUPPRESS)
    parser.add_argument("--mcp-only", action="store_true", help="only the first frame with three MCP servers")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workdir, args.resume)
        return
    if args.mcp_only:
        with tempfile.TemporaryDirectory(prefix="bench-tui-") as folder:
            first_frames_with_mcp(Path(folder), args.runs)
        return
    first_frames(args.runs)
    asyncio.run(key_latency(args.keys))
    asyncio.run(unpaced_stream())


if __name__ == "__main__":
    main()
