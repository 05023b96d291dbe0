"""Bounds on what xun reads of a model server's replies, whatever the server sends.

The openai SDK reads an error body whole, and an SSE line or event whole, however long they are: a 500
with an endless body, or one `data:` line that never ends, would take all the memory there is.
`bounded_client()` is the HTTP client xun gives the SDK; its hooks count the bytes of each reply as they
arrive, before the SDK sees them:

- an error body (any status but 2xx) is cut at MAX_ERROR_BODY: the status still decides what xun does,
  and `cut_note` says the body was cut;
- a streamed reply (its request marked with `STREAMED`) may be as long as it likes, but no SSE event (the
  bytes up to a blank line, so no line either) may pass MAX_SSE_EVENT: an honest one holds one delta;
- any other reply, which the SDK reads whole as one JSON document, may not pass MAX_REPLY.

Past a cap the reply is closed and `ReplyRefused` raised. Replies are asked for uncompressed, and a
compressed one is refused: its size on the wire bounds nothing of what it inflates to. Headers are bounded
below all this, by httpcore (100 kB in all).
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx2

MAX_ERROR_BODY = 256 * 1024
"""Bytes of an error body read: an honest one (JSON, or a proxy's HTML page) takes a few kB."""
MAX_SSE_EVENT = 8 * 1024 * 1024
"""Bytes of one SSE event: an honest one holds one small delta (a whole reply sent as one chunk is far below)."""
MAX_REPLY = 16 * 1024 * 1024
"""Bytes of a reply read whole (not streamed): the longest honest completion is a few MB of JSON."""

STREAMED = "X-Xun-Streamed"
"""A request header meaning "the reply is read as a stream of events"; the client drops it before sending."""
_STREAMED = "xun.streamed"
_CUT = "xun.cut_error_body"

_LINE_END = re.compile(rb"\r\n|\r|\n")
_CODING_NAME = re.compile(r"[a-z0-9.+-]{1,20}")


class ReplyRefused(Exception):
    """The server sent more than an honest reply holds, or a body whose size cannot be bounded. Not worth
    retrying: a server that sends that sends it again, and each try would cost the whole cap."""


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit // 1024} kB"


def cut_note(response: Any) -> str:
    """What to add to an error whose body was cut ("" when it was read whole)."""
    extensions = getattr(response, "extensions", None)
    cut = isinstance(extensions, dict) and extensions.get(_CUT)
    return f" (an error body over {_size(MAX_ERROR_BODY)}, cut)" if cut else ""


class _Counted(httpx2.AsyncByteStream):
    """A reply's body, each chunk shown to `take` before the SDK reads it: `take` passes it on, cuts it
    (then the body ends there, without waiting for more), or raises."""

    def __init__(self, inner: httpx2.AsyncByteStream, take: Any) -> None:
        self._inner = inner
        self._take = take

    @property
    def elapsed(self) -> Any:  # what the response reports, once closed
        return getattr(self._inner, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts = self._inner.__aiter__()
        try:
            async for chunk in parts:
                kept = self._take(chunk)
                yield kept
                if len(kept) < len(chunk):
                    return
        finally:
            if isinstance(parts, AsyncGenerator):
                await parts.aclose()

    async def aclose(self) -> None:
        await self._inner.aclose()


class _ErrorBody:
    """Passes the first MAX_ERROR_BODY bytes, then cuts the body (marking the response as cut)."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self.left = MAX_ERROR_BODY

    def __call__(self, chunk: bytes) -> bytes:
        if len(chunk) > self.left:
            self.response.extensions[_CUT] = True
            chunk = chunk[: self.left]
        self.left -= len(chunk)
        return chunk


class _WholeReply:
    """Raises once the body passes MAX_REPLY."""

    def __init__(self) -> None:
        self.size = 0

    def __call__(self, chunk: bytes) -> bytes:
        self.size += len(chunk)
        if self.size > MAX_REPLY:
            raise ReplyRefused(f"the server sent a reply over {_size(MAX_REPLY)}")
        return chunk


class _Events:
    """Raises once the bytes since the last blank line (the event being sent) pass MAX_SSE_EVENT, saying
    whether one line or many did it. A chunk is one read of the socket (64 kB at most in httpcore): no more
    than that is read past the cap."""

    def __init__(self) -> None:
        self.event = 0
        """Bytes of the event's complete lines."""
        self.line = 0
        """Bytes of the line not yet ended."""
        self.after_cr = False
        """The last chunk ended with CR: an LF opening this one ends no line (CRLF split in two)."""

    def __call__(self, chunk: bytes) -> bytes:
        start = 1 if self.after_cr and chunk.startswith(b"\n") else 0
        for match in _LINE_END.finditer(chunk, start):
            length = self.line + match.start() - start
            self.event = 0 if length == 0 else self.event + length + 1
            self.line, start = 0, match.end()
        self.line += len(chunk) - start
        self.after_cr = chunk.endswith(b"\r")
        if self.line > MAX_SSE_EVENT:
            raise ReplyRefused(
                f"the server sent an SSE line over {_size(MAX_SSE_EVENT)} without ending it (an honest "
                "line holds one small delta)"
            )
        if self.event + self.line > MAX_SSE_EVENT:
            raise ReplyRefused(
                f"the server sent an SSE event over {_size(MAX_SSE_EVENT)} (lines without the blank "
                "line that ends an event)"
            )
        return chunk


async def _ask_uncompressed(request: httpx2.Request) -> None:
    """Ask for a plain body, and note (then drop) the mark of a streamed request."""
    request.headers["Accept-Encoding"] = "identity"
    if request.headers.pop(STREAMED, None) is not None:
        request.extensions[_STREAMED] = True  # kept by a redirect's request


async def _bound(response: httpx2.Response) -> None:
    """Count the reply's body as it arrives, by what the SDK will do with it."""
    coding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if coding not in ("", "identity"):
        name = coding if _CODING_NAME.fullmatch(coding) else "differently"  # the server's words, only if plain
        raise ReplyRefused(
            f"the server sent a {name}-compressed reply, which xun did not ask for (it reads "
            "replies uncompressed, so that their size is bounded)"
        )
    if not 200 <= response.status_code < 300:
        take: Any = _ErrorBody(response)
    elif response.request.extensions.get(_STREAMED):
        take = _Events()
    else:
        take = _WholeReply()
    if not isinstance(response.stream, httpx2.AsyncByteStream):  # an async client's replies are async streams
        raise TypeError(f"an async client's reply has a {type(response.stream).__name__} body")
    response.stream = _Counted(response.stream, take)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS settings (its CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR), made once a process:
    loading the CA bundle takes 25 ms, and a client is made for each agent and each session opened."""
    return httpx2.create_ssl_context()


def bounded_client() -> httpx2.AsyncClient:
    """The SDK's own default HTTP client (its limits, redirects, proxies, TLS), with every reply's body bounded."""
    import openai

    return openai.DefaultAsyncHttpxClient(
        verify=_tls_context(), event_hooks={"request": [_ask_uncompressed], "response": [_bound]}
    )
