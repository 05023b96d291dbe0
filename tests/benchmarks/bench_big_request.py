"""A model call with 4,000 messages: what it costs before a byte is sent, and whether the app still takes
keys meanwhile (issue 23, item 7). A script, not a test: `python3 tests/benchmarks/bench_big_request.py`.

Figures, one JSON line each:

* `sdk_call_4000`: the time of one `chat.completions.create` with 4,000 messages (1,000 rounds of a
  prompt, a `read_file` call, its 40-line result and an answer) and xun's tool schemas, against a loopback
  server that reads the body and answers at once; the SDK's ordinary path (every parameter through its
  transform: xun before) and xun's path (`xun.agent.sdk_request.untransformed`), median of `--calls`.
* `key_latency_big_request`: the app (headless, `run_test`) resumes that session and sends a prompt to a
  server that accepts the body slowly (`--accept-kbps`, default 1,000 KB/s); from Enter until the server has
  the whole body, a key is posted to the prompt every 50 ms, and the latency is from posting it to the
  first frame composed with the character in the prompt. Target 50 ms (p95). `--old-path` measures the
  same with the SDK's transform put back (what xun did before).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tui import emit, watch_frames  # noqa: E402

ROUNDS = 1000  # 4 messages a round
TARGET_MS = 50

ANSWER = [
    {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}],
    },
    {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    },
]
COMPLETION = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


class SlowServer:
    """Loopback chat server that reads each body at `bytes_per_second` (None: at once) and answers "ok"."""

    def __init__(self, bytes_per_second: float | None) -> None:
        self.receiving = threading.Event()
        self.received = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if "/chat/completions" not in self.path:
                    self.rfile.read(length)
                    self._json(404, {"error": {"message": "not found"}})
                    return
                owner.receiving.set()
                raw, chunk = bytearray(), 16384
                while len(raw) < length:
                    raw += self.rfile.read(min(chunk, length - len(raw)))
                    if bytes_per_second:
                        time.sleep(chunk / bytes_per_second)
                owner.received.set()
                body = json.loads(raw)
                if not body.get("stream"):
                    self._json(200, COMPLETION)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for data in [*(f"data: {json.dumps(c)}\n\n" for c in ANSWER), "data: [DONE]\n\n"]:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data.encode()))
                self.wfile.write(b"0\r\n\r\n")

            def _json(self, status: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def fill(conversation, rounds: int = ROUNDS) -> None:
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
        conversation.add_agent_message({"role": "assistant", "content": f"`src/module_{i}.py` defines 40 functions."})


def sdk_call(calls: int) -> None:
    import openai

    from xun.agent.sdk_request import untransformed
    from xun.agent.tools import default_toolbox
    from xun.context.conversation import Conversation

    conversation = Conversation()
    conversation.set_system_message_content("You are the benchmark agent.")
    fill(conversation)
    request = {
        "model": "m",
        "messages": conversation.completion_params(),
        "tools": default_toolbox().schemas(),
        "max_tokens": 100,
    }
    server = SlowServer(None)

    async def timed(kwargs: dict) -> float:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        await client.chat.completions.create(**kwargs)  # warm the connection
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await client.chat.completions.create(**kwargs)
            times.append(time.perf_counter() - started)
        await client.close()
        return statistics.median(times)

    try:
        before = asyncio.run(timed(request))
        after = asyncio.run(timed(untransformed(request)))
    finally:
        server.stop()
    emit(
        "sdk_call_4000",
        messages=len(request["messages"]),
        body_bytes=len(json.dumps(request)),
        calls=calls,
        sdk_transform_ms=round(before * 1000, 1),
        xun_ms=round(after * 1000, 1),
        speedup=round(before / after, 1),
    )


async def key_latency(accept_bytes_per_second: float, old_path: bool) -> None:
    from textual import events

    import xun.agent.sdk_request as sdk_request
    from xun.agent.launch import open_session
    from xun.context.sessions import SessionStore
    from xun.tui.app import XunApp

    if old_path:
        sdk_request.untransformed = lambda request: request
    server = SlowServer(accept_bytes_per_second)
    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-big-request-") as folder:
        store = SessionStore(Path(folder))
        conversation = store.new()
        fill(conversation)
        store.save(conversation)
        session = open_session(
            folder,
            base_url=server.base_url,
            environ={"OPENAI_API_KEY": "k"},
            resume=conversation.conversation_id,
            overrides=["auto_compact.enabled=false", "model.context_window=100000000"],
        )
        app = XunApp(session)
        frames: list[float] = []
        watch_frames(app, lambda: frames.append(time.perf_counter()))
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.pause(0.5)
                app.main.prompt.load_text("one more question")
                await pilot.press("enter")
                entered = time.perf_counter()
                app.main.prompt.focus()
                n = 0
                while not server.received.is_set() and time.perf_counter() - entered < 120:
                    char = "abcdefghijklmnopqrstuvwxyz"[n % 26]
                    n += 1
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
                sending_s = time.perf_counter() - entered
                app.action_cancel_turn()
                await pilot.pause(0.2)
        finally:
            session.close()
            server.stop()
    if not latencies:
        emit("key_latency_big_request", old_path=old_path, keys=0, error="no key was measured")
        return
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    emit(
        "key_latency_big_request",
        old_path=old_path,
        messages=4 * ROUNDS + 1,
        keys=len(ordered),
        sending_s=round(sending_s, 2),
        body_received=server.received.is_set(),
        ms_median=round(1000 * statistics.median(ordered), 2),
        ms_p95=round(1000 * p95, 2),
        ms_max=round(1000 * ordered[-1], 2),
        target_ms=TARGET_MS,
        ok=p95 <= TARGET_MS / 1000,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5, help="calls per path for sdk_call_4000 (median)")
    parser.add_argument("--accept-kbps", type=float, default=1000, help="how fast the slow server reads a body, KB/s")
    parser.add_argument(
        "--old-path", action="store_true", help="key latency with the SDK's transform put back (xun before)"
    )
    parser.add_argument("--only", choices=("sdk", "keys"), help="one figure only")
    args = parser.parse_args()
    if args.only != "keys":
        sdk_call(args.calls)
    if args.only != "sdk":
        asyncio.run(key_latency(args.accept_kbps * 1000, args.old_path))


if __name__ == "__main__":
    main()
