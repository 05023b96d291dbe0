"""Reading one streamed chat completion into a reply: its text, reasoning and tool-call deltas, its usage
and its finish, each delta handed on as an event as it comes."""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from xun.agent.config import ModelSettings
from xun.agent.failures import EmptyStreamError, TransientServerError
from xun.base.events import Event, ReasoningDelta, TextDelta


class Pieces:
    """Text that arrives in pieces: kept as a list and joined when read, so a long reply costs what its
    length does (adding each piece to a string copies all before it)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[str] = []

    def add(self, piece: str) -> None:
        self._parts.append(piece)

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""


@dataclass
class PendingCall:
    """A tool call as its deltas build it."""

    id: str = ""
    name: str = ""
    argument_pieces: Pieces = field(default_factory=Pieces, repr=False)

    @property
    def arguments(self) -> str:
        return self.argument_pieces.text


@dataclass
class Reply:
    """What one streamed completion produced."""

    reasoning_field: str | None = None
    calls: dict[int, PendingCall] = field(default_factory=dict)
    usage: Any = None
    timings: Any = None
    """llama.cpp's server's `timings` (its prompt-cache figure), when a chunk carried them."""
    finish_reason: str | None = None
    content_pieces: Pieces = field(default_factory=Pieces, repr=False)
    reasoning_pieces: Pieces = field(default_factory=Pieces, repr=False)

    @property
    def content(self) -> str:
        return self.content_pieces.text

    @property
    def reasoning(self) -> str:
        return self.reasoning_pieces.text

    def message(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning and self.reasoning_field:
            raw[self.reasoning_field] = self.reasoning
        if self.calls:
            raw["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for _, c in sorted(self.calls.items())
            ]
        return raw


Emit = Callable[[Event], Awaitable[None]]


async def read_chunks(stream: AsyncIterable[Any], reply: Reply, model: ModelSettings, emit: Emit) -> int:
    """Read the stream's chunks (the server's plain JSON, `open_chunk_stream`) into `reply`; returns how
    many came. Anything that is not the shape a chunk has is passed over."""
    chunks = 0
    async for chunk in stream:
        chunks += 1
        if not isinstance(chunk, dict):
            continue
        if isinstance(usage := chunk.get("usage"), dict):
            reply.usage = SimpleNamespace(**usage)
        if (timings := chunk.get("timings")) is not None:
            reply.timings = timings
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            await take_delta(reply, choice.get("delta"), model, emit)
            if choice.get("finish_reason"):
                reply.finish_reason = choice["finish_reason"]
    return chunks


def check_complete(reply: Reply, chunks: int) -> None:
    """Raise when the stream was not a whole reply: nothing at all, cut before its finish, or empty."""
    if chunks == 0:
        raise EmptyStreamError("the server sent an empty reply (HTTP 200 and no data)")
    if reply.finish_reason is None:
        raise TransientServerError("the stream ended before the reply was complete")
    if not reply.content and not reply.calls and reply.finish_reason != "length":
        raise TransientServerError("the server sent an empty reply")


async def take_delta(reply: Reply, delta: Any, model: ModelSettings, emit: Emit) -> None:
    """One chunk's delta: text, reasoning, tool-call parts. The reasoning's field is detected once and
    remembered in `model` for the session."""
    if not isinstance(delta, dict):
        return
    for name in ("reasoning_content", "reasoning"):
        value = delta.get(name)
        if isinstance(value, str) and value:
            if model.reasoning_field is None:
                model.reasoning_field = name
            reply.reasoning_field = model.reasoning_field
            reply.reasoning_pieces.add(value)
            await emit(ReasoningDelta(text=value))
            break
    content = delta.get("content")
    if isinstance(content, str) and content:
        reply.content_pieces.add(content)
        await emit(TextDelta(text=content))
    for part in delta.get("tool_calls") or ():
        if not isinstance(part, dict):
            continue
        index = part.get("index")
        call = reply.calls.setdefault(index if isinstance(index, int) else 0, PendingCall())
        if isinstance(ident := part.get("id"), str) and ident:
            call.id = ident
        function = part.get("function")
        if isinstance(function, dict):
            if isinstance(call_name := function.get("name"), str):
                call.name += call_name
            if isinstance(arguments := function.get("arguments"), str):
                call.argument_pieces.add(arguments)
