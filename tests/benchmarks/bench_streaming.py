"""What a streaming reply costs the screen, in a new session and in long ones, with the view at the newest
and far up (a script: `python3 tests/benchmarks/bench_streaming.py`; one JSON line per size and view).

In process (`run_test`, 160x48), the app resumes a session written as `bench_long_session.py` writes them
(500 and 30,000 messages, two summaries in the offload log) on the offline model, which streams `write
300000 tokens` at --rate tokens a second. Over --seconds of the stream, with the view at the newest (the
reply shows as it streams) and after Home (the reply streams hidden below the window), each line gives:

* frames_per_s: frames the app composed a second (a frame: a display step with an update);
* bytes_per_s: those frames encoded as a terminal gets them (truecolor escape codes), a second;
* frame_cpu_ms_per_s: the CPU time of the screen's update steps (layout, compositing, the display and its
  encoding), in ms a second of the stream: what streaming takes from everything else on the event loop;
* key_p95_ms / key_median_ms: meanwhile, a key posted to the prompt every 50 ms until the first frame after
  the character is in the prompt. Target: key_p95_ms under 50, and every figure at 30,000 messages within
  1.3x of the same figure at 500.

Options: --sizes 500,30000, --rate 500, --seconds 6, --keys 60, --src DIR (the xun source tree to measure;
default this checkout's), --cache DIR (keep the built sessions there and reuse them).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
SIZE = (160, 48)


def emit(figure: str, **values: object) -> None:
    print(json.dumps({"figure": figure, **values, "load_average": round(os.getloadavg()[0], 1)}), flush=True)


def session_for(cache: Path, messages: int) -> tuple[Path, str]:
    """A workdir holding a saved session of `messages` messages (built once into `cache`)."""
    from bench_long_session import build_session

    workdir = cache / f"s{messages}"
    marker = workdir / "session-id"
    if marker.exists():
        return workdir, marker.read_text()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    ident, _ = build_session(workdir, messages)
    marker.write_text(ident)
    return workdir, ident


class FrameMeter:
    """Counts the app's frames, their bytes once encoded, and the CPU time of the screen's update steps."""

    def __init__(self, app: object) -> None:
        from rich.console import Console
        from textual.screen import Screen

        self.frames: list[float] = []
        self.bytes = 0
        self.cpu = 0.0
        console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=SIZE[0])
        display = app._display  # type: ignore[attr-defined]

        def counted_display(screen: object, renderable: object) -> None:
            display(screen, renderable)
            if renderable is not None and hasattr(renderable, "render_segments"):
                self.bytes += len(renderable.render_segments(console).encode())
                self.frames.append(time.perf_counter())

        app._display = counted_display  # type: ignore[attr-defined]
        update = Screen._on_timer_update
        meter = self

        def timed_update(screen: Screen) -> None:
            started = time.thread_time()
            try:
                update(screen)
            finally:
                meter.cpu += time.thread_time() - started

        Screen._on_timer_update = timed_update  # type: ignore[method-assign]

    def reset(self) -> None:
        self.frames.clear()
        self.bytes = 0
        self.cpu = 0.0


async def measure(workdir: Path, ident: str, args: argparse.Namespace, messages: int) -> None:
    from textual import events

    from xun.agent.launch import open_session
    from xun.offline import OfflineServer
    from xun.tui.app import XunApp

    server = OfflineServer(tokens_per_second=args.rate)
    server.start()
    session = open_session(workdir, base_url=server.base_url, resume=ident, environ={})
    app = XunApp(session)
    meter = FrameMeter(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            while app.session is None or app.main.header.status != "ready":
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            for view in ("newest", "far_up"):
                app.main.prompt.load_text("write 300000 tokens")
                app.main.prompt.focus()
                await pilot.press("enter")
                while app.main.chat.reply is None or len(app.main.chat.reply.text) < 2000:
                    await asyncio.sleep(0.01)
                if view == "far_up":
                    app.main.chat.focus()
                    await pilot.press("home")
                    await asyncio.sleep(1.0)
                    app.main.prompt.focus()
                await asyncio.sleep(0.5)
                meter.reset()
                streamed_before = len(app.main.chat.reply.text)
                started = time.perf_counter()
                await asyncio.sleep(args.seconds)
                elapsed = time.perf_counter() - started
                frames, sent, cpu = len(meter.frames), meter.bytes, meter.cpu
                latencies: list[float] = []
                for n in range(args.keys):
                    char = "abcdefghijklmnopqrstuvwxyz"[n % 26]
                    typed = len(app.main.prompt.text)
                    posted = time.perf_counter()
                    app.post_message(events.Key(char, char))
                    while len(app.main.prompt.text) == typed:
                        await asyncio.sleep(0)
                    in_prompt = time.perf_counter()
                    while not meter.frames or meter.frames[-1] < in_prompt:
                        await asyncio.sleep(0)
                    latencies.append(meter.frames[-1] - posted)
                    await asyncio.sleep(max(0.0, 0.05 - (time.perf_counter() - posted)))
                streamed = len(app.main.chat.reply.text) - streamed_before if app.main.chat.reply else 0
                still = app.work.busy == "turn"
                app.action_cancel_turn()
                while app.work.busy is not None:
                    await asyncio.sleep(0.05)
                app.main.prompt.load_text("")
                ordered = sorted(latencies)
                emit(
                    "streaming",
                    messages=messages,
                    view=view,
                    frames_per_s=round(frames / elapsed, 1),
                    bytes_per_s=round(sent / elapsed),
                    frame_cpu_ms_per_s=round(1000 * cpu / elapsed, 1),
                    key_median_ms=round(1000 * statistics.median(ordered), 1),
                    key_p95_ms=round(1000 * ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
                    stream_chars_per_s=round(streamed / (time.perf_counter() - started)),
                    still_streaming=still,
                )
    finally:
        session.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,30000")
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("--src", type=Path, default=HERE.parents[2] / "src")
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args()
    sys.path[:0] = [str(args.src.resolve()), str(HERE.parent)]
    with tempfile.TemporaryDirectory(prefix="bench-streaming-") as folder:
        cache = args.cache or Path(folder)
        for messages in (int(size) for size in args.sizes.split(",")):
            workdir, ident = session_for(cache, messages)
            asyncio.run(measure(workdir, ident, args, messages))


if __name__ == "__main__":
    main()
