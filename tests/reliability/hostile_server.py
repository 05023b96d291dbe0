"""A real OpenAI-compatible HTTP server on loopback that misbehaves on purpose (issue 13, items 3 and 12).

`HostileServer(mode)` streams chat completions the way the openai SDK expects (SSE chunks, then
`[DONE]`) but with one flaw chosen by `mode`:
- `surrogate`: the reply's text holds a lone surrogate, JSON-escaped (`"\\ud83d"`);
- `usage:N`: the reply is fine and reports `total_tokens` N (e.g. -999999 or 10**15);
- `bad-utf8`: the first request gets a chunk with bytes that are not UTF-8; later ones are fine;
- `trickle`: headers, then one byte every 50 ms, forever (each gap is short, the whole never ends);
- `calls:N:COMMAND`: the first reply asks for N `run_command` calls of COMMAND at once; later ones are text.
`requests` counts the chat requests (anything else gets a 404); `stop()` ends the server and its threads.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "hostile",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _usage(total: int) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "hostile", "choices": [],
            "usage": {"prompt_tokens": total, "completion_tokens": 0, "total_tokens": total}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class HostileServer:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.rstrip("/").endswith("/chat/completions"):  # xun asking for a tokenizer
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.requests += 1
                number = outer.requests
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    outer.reply(self.wfile, number)
                except OSError:
                    pass
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, out, number: int) -> None:
        mode, _, arg = self.mode.partition(":")
        if mode == "trickle":
            out.write(_chunk({"role": "assistant", "content": "slow"}))
            out.flush()
            while not self.stopping.is_set():
                time.sleep(0.05)
                out.write(b":\n")  # an SSE comment: one more line, never an end
                out.flush()
            return
        text = "a fine reply"
        if mode == "calls" and number == 1:
            count, _, command = arg.partition(":")
            for index in range(int(count)):
                out.write(_chunk({"role": "assistant", "tool_calls": [{
                    "index": index, "id": f"call_{index}", "type": "function",
                    "function": {"name": "run_command", "arguments": json.dumps({"command": command})}}]}))
            out.write(_chunk({}, "tool_calls"))
            out.write(b"data: [DONE]\n\n")
            out.flush()
            return
        if mode == "surrogate":
            raw = _chunk({"role": "assistant", "content": "PLACEHOLDER"}).replace(b"PLACEHOLDER", b"half \\ud83d pair")
            out.write(raw)
        elif mode == "bad-utf8" and number == 1:
            out.write(_chunk({"role": "assistant", "content": "X"}).replace(b'"X"', b'"\xff\xfe bad"'))
        else:
            out.write(_chunk({"role": "assistant", "content": text}))
        out.write(_chunk({}, "stop"))
        out.write(_usage(int(arg) if mode == "usage" else 42))
        out.write(b"data: [DONE]\n\n")
        out.flush()

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
