"""The offline server's HTTP side: OpenAI's chat-completions and models endpoints on loopback.

Built on the standard library's `ThreadingHTTPServer` (one thread per connection, HTTP/1.1 keep-alive),
so it needs no dependency and runs the same under the app, the tests and the command line. Replies are
written as soon as they are generated (server-sent events in chunked transfer encoding), every wait is
bounded and wakes on `stop()`, and every bad request gets an OpenAI-shaped JSON error.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from xun.offline.faults import FAULTS_ENV, Fault, FaultSchedule
from xun.offline.model import FixedText, Reply, decide_reply
from xun.offline.prefix_cache import PrefixCache
from xun.offline.profiles import PROFILES, Profile, null_content_error
from xun.offline.protocol import MODEL_ID, ChatRequest, RequestError, error_body, parse_chat_request
from xun.offline.responses import ReplyMeta, StreamChunk, build_completion, iter_stream_chunks
from xun.offline.tokenizer import count_prompt_tokens, count_text_tokens

logger = logging.getLogger("xun.offline")

REASONING_FIELDS = ("reasoning_content", "reasoning")
MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request body (413 above it); a 200,000-token context is about 1 MB of JSON."""
LARGE_BODY_BYTES = 1024 * 1024
LARGE_BODIES_AT_ONCE = 2
"""Requests with a body over LARGE_BODY_BYTES (or chunked, size unknown) are handled this many at a time,
the others wait: six parallel 61 MB bodies took the server to 3.2 GB."""
_large_bodies = threading.BoundedSemaphore(LARGE_BODIES_AT_ONCE)
STREAM_PIECE_CHARS = 32  # unpaced: up to 8 tokens per content chunk
PACED_PIECE_CHARS = 4  # paced: one token per chunk
FAULT_CHUNKS_BEFORE = 3  # chunks sent before a disconnect or truncate
STALL_CHUNKS_BEFORE = 2
MALFORMED_CHUNK_AT = 2
SLOW_NON_STREAM_FACTOR = 5  # a slow non-streamed reply waits this many chunk delays
STOP_JOIN_SECONDS = 3.0
WAIT_POLL_SECONDS = 0.05
IDLE_TIMEOUT = 60.0
"""Seconds a connection may send nothing (a request half sent, an idle keep-alive) before it is closed:
otherwise every such connection kept a thread forever."""
CACHE_TTL_ENV = "XUN_OFFLINE_CACHE_TTL"
"""Seconds of the simulated prompt cache of an in-process server created without `cache_ttl`; for the
server `xun` starts itself, 0 turns its cache off."""
DEMO_CACHE_TTL = 300.0
"""Seconds of the simulated prompt cache of the demo server `xun` starts itself (a provider's cache lives
about five minutes): a newcomer sees the cache share and the cache-aware policy without configuring it."""
MODEL_CREATED = 1_735_689_600  # 2025-01-01, fixed so /v1/models is deterministic
MODEL_DESCRIPTION = "xun-offline: a deterministic scripted demo model served by xun (not an LLM)."


def _env_cache_ttl(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"${CACHE_TTL_ENV} should be a number of seconds, not {text!r}") from None


def demo_cache_ttl(environ: Mapping[str, str]) -> float | None:
    """The prompt cache of the demo server `xun` starts itself: `$XUN_OFFLINE_CACHE_TTL` seconds (0: none),
    else `DEMO_CACHE_TTL`."""
    text = environ.get(CACHE_TTL_ENV, "").strip()
    return (_env_cache_ttl(text) or None) if text else DEMO_CACHE_TTL


def resolve_loopback(host: str) -> tuple[int, str]:
    """The address family and address to bind for `host`; ValueError unless it is loopback."""
    if not isinstance(host, str) or not host.strip():
        raise ValueError("host must be a loopback address such as 127.0.0.1")
    bare = host.strip().strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        try:
            infos = socket.getaddrinfo(bare, None, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise ValueError(f"cannot resolve host {host!r}: {exc}") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
        if not addresses or not all(candidate.is_loopback for candidate in addresses):
            raise ValueError(
                f"refusing to bind the offline server to {host!r}: it resolves to a non-loopback address; "
                "it listens on loopback only (127.0.0.1 or ::1)"
            ) from None
        address = next((a for a in addresses if a.version == 4), addresses[0])
    if not address.is_loopback:
        raise ValueError(
            f"refusing to bind the offline server to non-loopback host {host!r}: it listens on loopback only "
            "(127.0.0.1 or ::1)"
        )
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    return family, str(address)


class _LoopbackHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that tracks its connections so stop() can end them, and never prints tracebacks."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], family: int, app: OfflineServer):
        self.address_family = family
        self.app = app
        super().__init__(address, _ChatHandler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup (getfqdn can stall for seconds)."""
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(self.server_address)
        self.server_address = self.socket.getsockname()
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line instead of socketserver's traceback on stderr."""
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)


def _phrase(status: int) -> str:
    """The reason phrase of an HTTP status ("" for codes the standard library does not name)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class _ClientGone(Exception):
    """The client closed the connection, or the server is stopping."""


class _ChatHandler(BaseHTTPRequestHandler):
    """One HTTP connection: chat completions, models, and JSON errors for everything else."""

    protocol_version = "HTTP/1.1"
    server_version = "xun-offline/1"
    sys_version = ""
    _chunked = True  # decided per streamed response (HTTP/1.0 clients get raw events)
    server: _LoopbackHTTPServer

    # -- connection bookkeeping -------------------------------------------------------------------

    def setup(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()
        self.connection.settimeout(self.server.app.idle_timeout)
        self.server.app._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.app._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Request lines go to the debug log; headers (Authorization among them) are never logged."""
        logger.debug("%s %s", self.address_string(), format % args)

    # -- writing ----------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError as exc:
            self.close_connection = True
            raise _ClientGone() from exc

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_phrase(status)}", f"Server: {self.server_version}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send_json(self, status: int, body: Any, extra_headers: list[tuple[str, str]] | None = None) -> None:
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        headers += extra_headers or []
        self.log_request(status, len(payload))
        self._write(self._head(status, headers) + payload)

    def _send_request_error(self, error: RequestError) -> None:
        self._send_json(error.status, error.body())

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors from the HTTP layer itself (bad request line, huge headers) as OpenAI-shaped JSON."""
        self.close_connection = True
        text = message or _phrase(code) or "error"
        if explain:
            text = f"{text}: {explain}"
        try:
            self._send_json(code, error_body(text, "invalid_request_error" if code < 500 else "server_error"))
        except _ClientGone:
            pass

    # -- reading ----------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        transfer_encoding = self.headers.get("Transfer-Encoding", "")
        if "chunked" in transfer_encoding.lower():
            return self._read_chunked_body()
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            return b""
        try:
            length = int(length_header)
        except ValueError:
            self.close_connection = True
            raise RequestError(f"Invalid Content-Length header: {length_header!r}.") from None
        if length < 0:
            self.close_connection = True
            raise RequestError(f"Invalid Content-Length header: {length_header!r}.")
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(f"Request body too large: {length} bytes (at most {MAX_BODY_BYTES}).", status=413)
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            raise _ClientGone()
        return body

    def _read_chunked_body(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            if not line:
                raise _ClientGone()
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise RequestError("Malformed chunked request body.") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY_BYTES:
                self.close_connection = True
                raise RequestError(f"Request body too large (at most {MAX_BODY_BYTES} bytes).", status=413)
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    # -- routing ----------------------------------------------------------------------------------

    def _route(self) -> str:
        path = self.path.split("?", 1)[0]
        if path.startswith("http://") or path.startswith("https://"):
            path = "/" + path.split("/", 3)[-1]
        return path.rstrip("/") or "/"

    def _guarded(self, action: Any) -> None:
        """Run a route; a client that left ends quietly, anything unexpected becomes a JSON 500."""
        try:
            action()
        except _ClientGone:
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - the server must answer, never crash
            logger.warning(
                "offline server: internal error on %s %s: %s: %s", self.command, self.path, type(exc).__name__, exc
            )
            self.close_connection = True
            try:
                self._send_json(
                    500,
                    error_body(f"Internal error in the offline server: {type(exc).__name__}: {exc}", "server_error"),
                )
            except _ClientGone:
                pass

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def _method_not_allowed(self) -> None:
        self._guarded(
            lambda: self._refuse(405, f"Method {self.command} is not allowed on {self._route()}.", "method_not_allowed")
        )

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed

    def _refuse(self, status: int, message: str, code: str) -> None:
        if self.headers.get("Content-Length") not in (None, "0") or self.headers.get("Transfer-Encoding"):
            self.close_connection = True  # the unread body must not be taken for the next request
        self._send_json(status, error_body(message, "invalid_request_error", None, code))

    def _get(self) -> None:
        route = self._route()
        app = self.server.app
        if route in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [app.model_card()]})
        elif route in (f"/v1/models/{MODEL_ID}", f"/models/{MODEL_ID}"):
            self._send_json(200, app.model_card())
        elif route == "/props" and app.profile.serves_props:
            settings = {"n_ctx": app.context_window} if app.context_window is not None else {}
            self._send_json(200, {"default_generation_settings": settings, "total_slots": 1, "model_path": MODEL_ID})
        elif route.startswith(("/v1/models/", "/models/")):
            name = route.rsplit("/", 1)[-1]
            self._send_json(
                404,
                error_body(
                    f"The model {name!r} does not exist; this server serves {MODEL_ID!r}.",
                    "invalid_request_error",
                    "model",
                    "model_not_found",
                ),
            )
        elif route in ("/health", "/v1/health"):
            self._send_json(200, {"status": "ok", "model": MODEL_ID, "requests": self.server.app.request_count})
        else:
            self._refuse(
                404,
                f"Unknown request URL: GET {route}. This server has POST /v1/chat/completions and GET /v1/models.",
                "unknown_url",
            )

    def _tokenize(self, route: str) -> None:
        """The tokenize endpoints of llama.cpp (`/tokenize`: content -> tokens), llama-cpp-python
        (`/extras/tokenize/count`: input -> count) and vLLM (`/tokenize`: prompt -> count)."""
        try:
            body = json.loads(self._read_body() or b"{}")
        except ValueError:
            raise RequestError("The body is not valid JSON.") from None
        kind = self.server.app.profile.tokenize
        field = {"/extras/tokenize/count": "input"}.get(route, "content" if kind == "llamacpp" else "prompt")
        text = body.get(field) if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise RequestError(f"'{field}' is required and must be a string.", param=field)
        count = count_text_tokens(text)
        if route == "/extras/tokenize/count":
            self._send_json(200, {"count": count})
        elif kind == "llamacpp":
            self._send_json(200, {"tokens": list(range(count))})
        else:
            self._send_json(
                200, {"count": count, "max_model_len": self.server.app.context_window, "tokens": list(range(count))}
            )

    def _post(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        large = length > LARGE_BODY_BYTES or "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        with _large_bodies if large else contextlib.nullcontext():
            self._post_bounded()

    def _post_bounded(self) -> None:
        route = self._route()
        app = self.server.app
        tokenize_routes = {"llamacpp": ("/tokenize", "/extras/tokenize/count"), "vllm": ("/tokenize",)}.get(
            app.profile.tokenize or "", ()
        )
        if route in tokenize_routes:
            try:
                self._tokenize(route)
            except RequestError as error:
                self._send_request_error(error)
            return
        if route not in ("/v1/chat/completions", "/chat/completions"):
            self._refuse(
                404,
                f"Unknown request URL: POST {route}. This server has POST /v1/chat/completions and GET /v1/models.",
                "unknown_url",
            )
            return
        request_index = app._next_request_index()
        try:
            request = parse_chat_request(self._read_body())
        except RequestError as error:
            self._send_request_error(error)
            return
        fault = app.faults.fault_for(request_index)
        if fault is not None and self._answer_fault_before_reply(fault, request, request_index):
            return
        if app.profile.rejects_null_content and (refusal := null_content_error(request.messages)) is not None:
            self._send_json(*refusal)
            return
        prompt_tokens = count_prompt_tokens(request.messages, request.tools)
        window = app.context_window
        app._record_prompt(prompt_tokens)
        if window is not None and prompt_tokens > window:
            if request.stream and app.profile.empty_stream_on_overflow:  # llama-cpp-python: 200, an empty body
                self.close_connection = True
                self.log_request(200, "-")
                self._write(
                    self._head(
                        200, [("Content-Type", "text/event-stream; charset=utf-8"), ("Transfer-Encoding", "chunked")]
                    )
                )
                self._end_chunks()
                return
            self._send_json(*app.profile.overflow(window, prompt_tokens, request.max_tokens))
            return
        budget = request.max_tokens
        if window is not None:
            room = window - prompt_tokens
            budget = room if budget is None else min(budget, room)
        if fault is not None and fault.kind == "empty":
            reply = Reply(FixedText(""))
        else:
            reply = decide_reply(
                request, with_reasoning=app.reasoning is not None, useless_summaries=app.useless_summaries
            )
        cache = app.prefix_cache
        meta = ReplyMeta(
            completion_id=_completion_id(request),
            prompt_tokens=prompt_tokens,
            budget_tokens=budget,
            reasoning_field=app.reasoning,
            cached_tokens=cache.serve(request.messages, request.tools) if cache is not None else None,
            cache_report=app.profile.cache_report,
        )
        if meta.cached_tokens is not None:
            app._record_cached(meta.cached_tokens)
        if request.stream:
            self._stream(reply, meta, request, fault)
        else:
            self._complete(reply, meta, fault)

    # -- faults that replace the reply ------------------------------------------------------------

    def _answer_fault_before_reply(self, fault: Fault, request: ChatRequest, request_index: int) -> bool:
        """Handle faults that need no reply; True when the request is fully answered (or dropped)."""
        label = f"{fault.kind}@{request_index}"
        if fault.kind == "500":
            self._send_json(
                500, error_body(f"The offline server failed on purpose (injected fault {label}).", "server_error")
            )
            return True
        if fault.kind == "429":
            seconds = fault.seconds if fault.seconds is not None else 1.0
            headers = [("Retry-After", str(max(0, round(seconds)))), ("retry-after-ms", str(int(seconds * 1000)))]
            body = error_body(
                f"Rate limit reached (injected fault {label}); retry after {seconds:g}s.",
                "requests",
                None,
                "rate_limit_exceeded",
            )
            self._send_json(429, body, headers)
            return True
        if fault.kind == "disconnect" and not request.stream:
            self._drop_connection()
            return True
        if fault.kind == "timeout" or (fault.kind == "stall" and not request.stream):
            self._hang(fault.seconds or 30.0)
            self._drop_connection()
            return True
        return False

    def _drop_connection(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _client_left(self) -> bool:
        """Whether the peer has closed its side (readable with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return bool(self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"")
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    def _hang(self, cap_seconds: float) -> None:
        """Wait until the client leaves, the server stops, or `cap_seconds` pass."""
        deadline = time.monotonic() + cap_seconds
        stopping = self.server.app._stopping
        while time.monotonic() < deadline:
            if stopping.wait(min(WAIT_POLL_SECONDS, max(0.0, deadline - time.monotonic()))) or self._client_left():
                return

    def _pause(self, seconds: float) -> None:
        """Sleep between chunks; raise _ClientGone if the server stops meanwhile."""
        if seconds > 0 and self.server.app._stopping.wait(seconds):
            raise _ClientGone()

    # -- replies ----------------------------------------------------------------------------------

    def _complete(self, reply: Reply, meta: ReplyMeta, fault: Fault | None) -> None:
        if fault is not None and fault.kind == "slow":
            self._pause((fault.seconds or 0.5) * SLOW_NON_STREAM_FACTOR)
        body = build_completion(reply, meta)
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        if fault is not None and fault.kind == "malformed":
            broken = (
                b'{"id": "'
                + meta.completion_id.encode()
                + b'", "object": "chat.completion", "choices": [ (not JSON: injected fault malformed)'
            )
            self.log_request(200, len(broken))
            self._write(
                self._head(200, [("Content-Type", "application/json"), ("Content-Length", str(len(broken)))]) + broken
            )
            return
        if fault is not None and fault.kind == "truncate":
            self.close_connection = True
            head = self._head(200, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
            self._write(head + payload[: len(payload) // 2])
            self._drop_connection()
            return
        self.log_request(200, len(payload))
        self._write(
            self._head(200, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]) + payload
        )

    def _write_chunk(self, data: bytes) -> None:
        if self._chunked:
            self._write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            self._write(data)

    def _end_chunks(self) -> None:
        if self._chunked:
            self._write(b"0\r\n\r\n")

    def _stream(self, reply: Reply, meta: ReplyMeta, request: ChatRequest, fault: Fault | None) -> None:
        app = self.server.app
        tokens_per_second = app.tokens_per_second
        piece_chars = PACED_PIECE_CHARS if tokens_per_second else STREAM_PIECE_CHARS
        kind = fault.kind if fault is not None else None
        fault_seconds = fault.seconds if fault is not None else None
        slow_delay = (fault_seconds or 0.5) if kind == "slow" else 0.0
        # HTTP/1.0 clients cannot read chunked bodies: they get the events raw and the connection closes.
        self._chunked = self.request_version != "HTTP/1.0"
        if not self._chunked:
            self.close_connection = True
        headers = [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache")]
        if self._chunked:
            headers.append(("Transfer-Encoding", "chunked"))
        self.log_request(200, "-")
        self._write(self._head(200, headers))
        paced_until = time.monotonic()
        sent = 0
        include_usage = request.include_usage and app.profile.usage_in_streams
        for chunk in iter_stream_chunks(reply, meta, include_usage, piece_chars):
            if app._stopping.is_set():
                self._drop_connection()
                return
            if kind == "disconnect" and sent == FAULT_CHUNKS_BEFORE:
                self._drop_connection()
                return
            if kind == "truncate" and (sent == FAULT_CHUNKS_BEFORE or chunk.is_final):
                self._write_chunk(b": the stream ends here without finish_reason (injected fault truncate)\n\n")
                self._end_chunks()
                return
            if kind == "stall" and sent == STALL_CHUNKS_BEFORE:
                self._hang(fault_seconds or 30.0)
                self._drop_connection()
                return
            if sent and slow_delay:
                self._pause(slow_delay)
            if tokens_per_second and chunk.chars:
                paced_until += chunk.chars / 4 / tokens_per_second
                self._pause(paced_until - time.monotonic())
            if kind == "malformed" and sent == MALFORMED_CHUNK_AT:
                self._write_chunk(
                    b'data: {"id": "' + meta.completion_id.encode() + b'", "choices": [{"delta": {"content": \n\n'
                )
            self._write_chunk(_sse(chunk))
            sent += 1
        self._write_chunk(b"data: [DONE]\n\n")
        self._end_chunks()


def _sse(chunk: StreamChunk) -> bytes:
    return (
        b"data: "
        + json.dumps(chunk.payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        + b"\n\n"
    )


def _completion_id(request: ChatRequest) -> str:
    """Deterministic for the same conversation, like every other part of the reply."""
    digest = hashlib.sha256(json.dumps(request.messages, sort_keys=True, default=str).encode("utf-8", "surrogatepass"))
    return "chatcmpl-" + digest.hexdigest()[:24]


def model_card() -> dict[str, Any]:
    """The one model this server serves, described honestly."""
    return {
        "id": MODEL_ID,
        "object": "model",
        "created": MODEL_CREATED,
        "owned_by": "xun (deterministic scripted demo model, not an LLM)",
        "description": MODEL_DESCRIPTION,
    }


class OfflineServer:
    """The offline OpenAI-compatible server, run in a daemon thread of the calling process.

    `start()` returns once the socket is listening and works with or without a running asyncio loop (it
    never blocks on one); `stop()` ends open connections and joins the thread. Also a context manager.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        context_window: int | None = None,
        faults: str | FaultSchedule | None = None,
        reasoning: str | None = None,
        tokens_per_second: float | None = None,
        profile: str = "openai",
        idle_timeout: float = IDLE_TIMEOUT,
        cache_ttl: float | None = None,
        clock: Callable[[], float] | None = None,
        useless_summaries: bool = False,
    ):
        self._family, self._bind_address = resolve_loopback(host)
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
        self.profile: Profile = PROFILES[profile]
        self.useless_summaries = useless_summaries
        """Answer every summary request with empty sections (a summarizer that writes nothing useful)."""
        self.prompt_sizes: list[int] = []
        """The prompt tokens of every chat-completion request received, in order (what tests check)."""
        if cache_ttl is None and os.environ.get(CACHE_TTL_ENV):  # like the faults: for the server `xun` starts itself
            cache_ttl = _env_cache_ttl(os.environ[CACHE_TTL_ENV]) or None  # 0: no cache
        self.prefix_cache = PrefixCache(cache_ttl, clock or time.monotonic) if cache_ttl is not None else None
        """The simulated prompt cache (`--cache-ttl`); `clock` lets tests and benchmarks move time."""
        self.cached_sizes: list[int] = []
        """The cached tokens of every answered request, in order, when the cache is simulated."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer from 0 to 65535, not {port!r}")
        if context_window is not None and (
            isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
        ):
            raise ValueError(f"context_window must be a positive integer or None, not {context_window!r}")
        if reasoning is not None and reasoning not in REASONING_FIELDS:
            raise ValueError(f"reasoning must be None, 'reasoning_content' or 'reasoning', not {reasoning!r}")
        if tokens_per_second is not None and (
            isinstance(tokens_per_second, bool)
            or not isinstance(tokens_per_second, (int, float))
            or not tokens_per_second > 0
        ):
            raise ValueError(f"tokens_per_second must be a positive number or None, not {tokens_per_second!r}")
        if isinstance(idle_timeout, bool) or not isinstance(idle_timeout, (int, float)) or not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be a positive number, not {idle_timeout!r}")
        self.idle_timeout = float(idle_timeout)
        self.host = host.strip()
        self._requested_port = port
        self.context_window = context_window
        if faults is None:  # an in-process server (e.g. the one `xun run` starts) takes faults from the environment
            spec = os.environ.get(FAULTS_ENV) or None
            try:
                faults = FaultSchedule.parse(spec)
            except ValueError as exc:
                raise ValueError(f"${FAULTS_ENV}: {exc}") from None
        self.faults = faults if isinstance(faults, FaultSchedule) else FaultSchedule.parse(faults)
        self.reasoning = reasoning
        self.tokens_per_second = float(tokens_per_second) if tokens_per_second is not None else None
        self._lock = threading.Lock()
        self._request_count = 0
        self._connections: set[socket.socket] = set()
        self._connections_idle = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._http: _LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> OfflineServer:
        """Bind and listen, then serve from a daemon thread; a no-op when already running."""
        if self._thread is not None:
            return self
        self._stopping.clear()
        self._http = _LoopbackHTTPServer((self._bind_address, self._requested_port), self._family, self)
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": WAIT_POLL_SECONDS},
            name=f"xun-offline:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open connections (waits and streams wake at once), and join the thread."""
        if self._thread is None or self._http is None:
            return
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            for connection in list(self._connections):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            deadline = time.monotonic() + STOP_JOIN_SECONDS
            while self._connections and time.monotonic() < deadline:
                self._connections_idle.wait(max(0.0, deadline - time.monotonic()))
        self._thread.join(STOP_JOIN_SECONDS)
        self._thread = None
        self._http = None

    def __enter__(self) -> OfflineServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> OfflineServer:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what callers read ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def port(self) -> int:
        """The listening port (the real one when started with port 0)."""
        if self._http is not None:
            return int(self._http.server_address[1])
        if self._requested_port:
            return self._requested_port
        raise RuntimeError("the offline server has no port yet: call start() first (it was created with port=0)")

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. http://127.0.0.1:PORT/v1."""
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def request_count(self) -> int:
        """Chat-completion requests received since the server was created."""
        with self._lock:
            return self._request_count

    # -- used by the handler ----------------------------------------------------------------------

    def model_card(self) -> dict[str, Any]:
        card = model_card()
        if self.profile.window_in_models and self.context_window is not None:
            card["max_model_len"] = self.context_window
        return card

    def _record_prompt(self, tokens: int) -> None:
        with self._lock:
            self.prompt_sizes.append(tokens)

    def _record_cached(self, tokens: int) -> None:
        with self._lock:
            self.cached_sizes.append(tokens)

    def _next_request_index(self) -> int:
        with self._lock:
            self._request_count += 1
            return self._request_count

    def _track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)
        if self._stopping.is_set():  # accepted just as stop() ran: end it too
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)
            if not self._connections:
                self._connections_idle.notify_all()

    def __repr__(self) -> str:
        state = self.base_url if self._http is not None else "stopped"
        return f"OfflineServer({state})"
