"""A real OpenAI-compatible HTTP server on loopback that misbehaves on purpose (issue 13, items 3 and 12).

`HostileServer(mode)` streams chat completions the way the openai SDK expects (SSE chunks, then
`[DONE]`) but with one flaw chosen by `mode`:
- `surrogate`: the reply's text holds a lone surrogate, JSON-escaped (`"\\ud83d"`);
- `usage:N`: the reply is fine and reports `total_tokens` N (e.g. -999999 or 10**15);
- `bad-utf8`: the first request gets a chunk with bytes that are not UTF-8; later ones are fine;
- `trickle`: headers, then one byte every 50 ms, forever (each gap is short, the whole never ends);
- `calls:N:COMMAND`: the first reply asks for N `run_command` calls of COMMAND at once; later ones are text.
Bodies with no end (or huge ones), generated on the fly until the client hangs up:
- `error-flood`: HTTP 500 with a chunked JSON error body whose message never ends;
- `endless-line`: one SSE `data:` line that never ends;
- `many-lines`: one SSE event of short `data:` lines that never ends (no blank line);
- `giant-line:MB`: one complete SSE line holding MB megabytes of content in one delta, then a proper end;
- `gzip-line`: an endless SSE line, gzip-compressed (a few kB on the wire per hundred MB of text);
- `header-flood`: a 200 whose headers never end;
- `long-reply:MB`: an honest reply of MB megabytes, in deltas of 256 kB, its lines ended by CRLF;
- `json-flood`: a non-streamed request gets an endless JSON body (streamed ones a fine reply), and the
  llama-cpp-python count endpoint answers, so a new session calibrates with a non-streamed request.
`requests` counts the chat requests (anything else gets a 404); `stop()` ends the server and its threads.

`CountingServer` counts tokens (its tokenize endpoints, each reply's `usage`, the calibration's probe) and
says its window; a test makes any of those counts lie.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "hostile",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _usage(total: int) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "hostile",
        "choices": [],
        "usage": {"prompt_tokens": total, "completion_tokens": 0, "total_tokens": total},
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


PIECE = 64 * 1024
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
OPEN_LINE = _chunk({"role": "assistant", "content": "PLACEHOLDER"}).split(b"PLACEHOLDER")[0]
"""An SSE line up to the start of the content's text: what follows is the text, then the line's end."""


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class HostileServer:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if outer.mode == "json-flood" and self.path.rstrip("/").endswith("/extras/tokenize/count"):
                    answer = b'{"count": 40}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):  # xun asking for a tokenizer
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.requests += 1
                number = outer.requests
                self.close_connection = True
                if outer.flood(self.wfile, json.loads(body).get("stream") is True):
                    return
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

    def flood(self, out, streamed: bool) -> bool:
        """The endless (or huge) replies, written raw; False when the mode is not one of them."""
        mode, _, arg = self.mode.partition(":")
        if mode == "json-flood" and streamed:
            return False
        heads = {
            "error-flood": (
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            ),
            "endless-line": SSE_HEAD + b"\r\n",
            "many-lines": SSE_HEAD + b"\r\n",
            "giant-line": SSE_HEAD + b"\r\n",
            "gzip-line": SSE_HEAD + b"Content-Encoding: gzip\r\n\r\n",
            "header-flood": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n",
            "json-flood": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
            "long-reply": SSE_HEAD + b"\r\n",
        }
        if mode not in heads:
            return False
        first, piece, pieces = b"", b"a" * PIECE, None
        if mode == "error-flood":
            first, piece = _chunked(b'{"error": {"message": "'), _chunked(b"x" * PIECE)
        elif mode in ("endless-line", "gzip-line"):
            first = OPEN_LINE
        elif mode == "many-lines":
            first, piece = _chunk({"role": "assistant", "content": "Hi"})[:-1], b"data: " + b"a" * 1000 + b"\n"
        elif mode == "giant-line":
            first, pieces = OPEN_LINE, int(arg) * 1024 * 1024 // PIECE
        elif mode == "header-flood":
            piece = b"X-Padding: " + b"a" * 1000 + b"\r\n"
        elif mode == "json-flood":
            first = b'{"id": "'
        elif mode == "long-reply":
            first = _chunk({"role": "assistant", "content": ""}).replace(b"\n", b"\r\n")
            piece = _chunk({"content": "b" * PIECE * 4}).replace(b"\n", b"\r\n")
            pieces = int(arg) * 1024 * 1024 // (PIECE * 4)
        if mode == "gzip-line":
            packer = zlib.compressobj(1, zlib.DEFLATED, 31)
            first = packer.compress(first) + packer.flush(zlib.Z_SYNC_FLUSH)
            piece = b"".join(packer.compress(piece) for _ in range(256)) + packer.flush(zlib.Z_SYNC_FLUSH)
        try:
            out.write(heads[mode] + first)
            sent = 0
            while not self.stopping.is_set() and (pieces is None or sent < pieces):
                out.write(piece)
                sent += 1
            if mode == "giant-line":
                out.write(b'"}, "finish_reason": null}]}\n\n')
            if mode in ("giant-line", "long-reply"):
                out.write(_chunk({}, "stop") + _usage(42) + b"data: [DONE]\n\n")
            out.flush()
        except OSError:  # the client hung up: what a bounded client does
            pass
        return True

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
                out.write(
                    _chunk(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": f"call_{index}",
                                    "type": "function",
                                    "function": {"name": "run_command", "arguments": json.dumps({"command": command})},
                                }
                            ],
                        }
                    )
                )
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


SUMMARY_SECTIONS = (
    "system_context",
    "overview",
    "key_facts",
    "user_preferences",
    "decisions",
    "pending_tasks",
    "open_questions",
    "tone_context",
)


def _text_chars(message: dict) -> int:
    """Characters of one chat message's text: its content and its calls' names and arguments."""
    content = message.get("content")
    chars = len(content) if isinstance(content, str) else len(json.dumps(content)) if content else 0
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        chars += len(function.get("name") or "") + len(function.get("arguments") or "")
    return chars


def text_tokens(chars: int) -> int:
    """The counting server's tokenizer: four characters a token."""
    return -(-chars // 4)


def honest_usage(prompt: int, completion: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class CountingServer:
    """A vLLM-like server on loopback that counts tokens honestly unless a test tells it to lie.

    Honest: four characters of text a token, five tokens a message and three a request; `/v1/models` says
    the `window` (`max_model_len`); `/extras/tokenize/count` and `/tokenize` count text (`{"count": N}`); a
    chat request over the window (its prompt and `max_tokens`) is refused as vLLM refuses it; a summary
    request gets the eight sections; every reply reports its `usage`. The lies, set by the test:
    - `count(tokens)`: what the tokenize endpoints answer for text of `tokens` tokens;
    - `probe(tokens)`: the `usage.prompt_tokens` of a `max_tokens=1` request (xun's calibration);
    - `usage(prompt, completion)`: the `usage` of every other reply (None: it streams none).
    `prompts` holds the honest prompt tokens of every chat request answered, `refused` of every one refused.
    """

    def __init__(self, window: int = 8192) -> None:
        self.window = window
        self.count = lambda tokens: tokens
        self.probe = lambda tokens: tokens
        self.usage = honest_usage
        self.tokenize_paths = {"/extras/tokenize/count", "/tokenize"}
        """The tokenize endpoints that answer (the others are not found)."""
        self.prompts: list[int] = []
        self.refused: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "xun-offline", "max_model_len": outer.window}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                path = self.path.rstrip("/")
                if path in outer.tokenize_paths:
                    text = body.get("input") if path.startswith("/extras") else body.get("prompt", body.get("content"))
                    self._send(200, {"count": outer.count(text_tokens(len(text or "")))})
                elif path == "/v1/chat/completions":
                    outer.chat(self, body)
                else:
                    self._send(404, {"error": {"message": "not found"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def chat(self, handler, body: dict) -> None:
        messages = body.get("messages") or []
        prompt = 3 + sum(5 + text_tokens(_text_chars(m)) for m in messages)
        prompt += sum(text_tokens(len(json.dumps(tool, separators=(",", ":")))) for tool in body.get("tools") or ())
        limit = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        if prompt + limit > self.window:
            self.refused.append(prompt)
            message = (
                f"This model's maximum context length is {self.window} tokens. However, you requested "
                f"{prompt + limit} tokens ({prompt} in the messages, {limit} in the completion). Please reduce "
                "the length of the messages or completion."
            )
            handler._send(
                400, {"object": "error", "code": 400, "type": "BadRequestError", "param": None, "message": message}
            )
            return
        self.prompts.append(prompt)
        last = json.dumps(messages[-1]) if messages else ""
        text = "\n".join(f"## {name}\n- kept" for name in SUMMARY_SECTIONS) if "system_context" in last else "Noted."
        if limit == 1:  # the calibration's probe
            usage = honest_usage(self.probe(prompt), 1)
        else:
            usage = self.usage(prompt, text_tokens(len(text)))
        if not body.get("stream"):
            message = {"role": "assistant", "content": text[:4] if limit == 1 else text}
            handler._send(
                200,
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "xun-offline",
                    "choices": [{"index": 0, "finish_reason": "length" if limit == 1 else "stop", "message": message}],
                    "usage": usage,
                },
            )
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        out = handler.wfile
        out.write(_chunk({"role": "assistant", "content": text}))
        out.write(_chunk({}, "stop"))
        tail = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "xun-offline",
            "choices": [],
            "usage": usage,
        }
        out.write(b"data: " + json.dumps(tail).encode() + b"\n\n")
        out.write(b"data: [DONE]\n\n")
        out.flush()
        handler.close_connection = True

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
