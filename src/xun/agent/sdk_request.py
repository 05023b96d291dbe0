"""Chat-completion keyword arguments that skip the openai SDK's request transform for the big fields.

The SDK walks every message and tool of a request (``_async_transform_recursive``) on every call, on the
event loop, before a byte is sent: about 0.7 ms per message, so a 4,000-message context froze the app for
seconds. xun's messages and tool schemas are already plain JSON, so they travel in ``extra_body``, which the
SDK merges into the body untouched; an empty placeholder keeps each key at its place, so the server receives
the same JSON body, byte for byte, as before. Everything else (retries, errors, streaming) stays the SDK's.

The reply's chunks are read as the server's plain JSON (`open_chunk_stream`): the SDK builds a typed model
of every chunk otherwise (`construct_type`, about 0.07 ms a chunk, a dozen chunks a call), the largest part
of xun's own time per round in a long turn (`tests/benchmarks/bench_long_turn.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

UNTRANSFORMED = ("messages", "tools")


def untransformed(request: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` equal on the wire to ``request``."""
    kwargs = dict(request)
    extra = dict(kwargs.pop("extra_body", None) or {})
    for key in UNTRANSFORMED:
        if key in kwargs and key not in extra:
            extra[key] = kwargs[key]
            kwargs[key] = []  # placeholder: the transform runs on nothing, the merge keeps the key's place
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


@contextlib.asynccontextmanager
async def open_chunk_stream(client: Any, request: dict[str, Any]) -> AsyncIterator[Any]:
    """The streamed chat completion of ``request`` (``untransformed``), its chunks as plain dicts.

    The SDK sends it, raises its errors (a refused request, an error event in the stream) and decodes the
    server-sent events; only the typed model of each chunk is left out. The response is closed on leaving."""
    import openai

    from xun.agent.bounded_http import STREAMED

    kwargs = {**untransformed(request), "extra_headers": {STREAMED: "1"}}  # its events are bounded, not its length
    async with client.chat.completions.with_streaming_response.create(**kwargs) as response:
        yield await response.parse(to=openai.AsyncStream[object])
