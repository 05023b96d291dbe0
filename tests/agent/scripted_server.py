"""A small real HTTP server whose answers a test scripts: the shapes other servers answer in (their
overflow errors, their model cards, a 200 stream with no data, a summary cut off or without sections).

`ScriptedServer(answer)` calls `answer(method, path, body)` for every request and sends back what it
returns: `Json(status, body)`, `Stream(texts, finish_reason)` (server-sent events), or `EMPTY_STREAM`
(HTTP 200 and an empty body, then the connection closes, as llama-cpp-python does on an overflow). Every request is
kept in `requests` as (method, path, parsed body), and its raw body in `raw_bodies`. Loopback only; stopped by the
fixture.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Json:
    status: int
    body: Any


@dataclass
class Stream:
    texts: list[Any] = field(default_factory=lambda: ["ok"])
    """Each a piece of the reply's text, or a whole delta (`{"tool_calls": [...]}`, `{"reasoning_content": ...}`)."""
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    """(id, name, arguments JSON) of each call the reply makes, streamed after the text."""


EMPTY_STREAM = object()
NOT_FOUND = Json(404, {"error": {"message": "not found"}})


def prompt_chars(body: Any) -> int:
    """Characters of the messages' text in a chat request (what the scripts compare with a limit)."""
    if not isinstance(body, dict):
        return 0
    total = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        total += len(content) if isinstance(content, str) else len(json.dumps(content or ""))
    return total


class ScriptedServer:
    def __init__(self, answer: Callable[[str, str, Any], Any]) -> None:
        self.answer = answer
        self.requests: list[tuple[str, str, Any]] = []
        self.raw_bodies: list[bytes] = []  # every request's body as it came over the wire
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                owner.raw_bodies.append(raw)
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                owner.requests.append((self.command, self.path, body))
                reply = owner.answer(self.command, self.path.split("?")[0], body)
                if reply is EMPTY_STREAM:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b"0\r\n\r\n")  # a whole body with nothing in it
                    self.close_connection = True
                    return
                if isinstance(reply, Stream):
                    self._stream(reply)
                    return
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, reply: Stream) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunks = [
                    {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "delta": text if isinstance(text, dict) else {"content": text},
                                "finish_reason": None,
                            }
                        ],
                    }
                    for text in reply.texts
                ]
                for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
                    call = {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                    chunks.append(
                        {
                            "id": "x",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "m",
                            "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}],
                        }
                    )
                finish = "tool_calls" if reply.tool_calls and reply.finish_reason == "stop" else reply.finish_reason
                chunks.append(
                    {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    }
                )
                if reply.usage is not None:
                    chunks.append(
                        {
                            "id": "x",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "m",
                            "choices": [],
                            "usage": reply.usage,
                        }
                    )
                for chunk in chunks:
                    data = f"data: {json.dumps(chunk)}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                data = b"data: [DONE]\n\n"
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))

            do_GET = do_POST = _handle

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def chat_bodies(self) -> list[Any]:
        return [body for method, path, body in self.requests if method == "POST" and path.endswith("/chat/completions")]

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
