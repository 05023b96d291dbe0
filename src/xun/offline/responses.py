"""Turning the scripted model's `Reply` into OpenAI chat-completion objects, streamed or whole.

Both paths walk the reply in the same order (reasoning, content, tool calls) against the same character
budget, so `max_tokens`, `finish_reason` and `usage` agree whether or not the client streams. Streaming
is a generator: a long reply is produced piece by piece and never held whole.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from xun.offline.model import Reply
from xun.offline.protocol import MODEL_ID
from xun.offline.tokenizer import CHARS_PER_TOKEN, tokens_for_chars

SYSTEM_FINGERPRINT = "xun-offline-scripted"
TOOL_ARGUMENT_FRAGMENT_CHARS = 10


@dataclass
class ReplyMeta:
    """Identity and accounting shared by every chunk of one response."""

    completion_id: str
    prompt_tokens: int
    budget_tokens: int | None  # None: unlimited
    reasoning_field: str | None
    created: int = field(default_factory=lambda: int(time.time()))
    model: str = MODEL_ID
    cached_tokens: int | None = None
    """Prompt tokens served from the simulated prefix cache (None: no cache simulated)."""
    cache_report: str | None = None
    """How the cached tokens are reported: "openai" (`prompt_tokens_details`), "deepseek"
    (`prompt_cache_hit_tokens`/`prompt_cache_miss_tokens`), "timings" (llama.cpp's `timings.cache_n`)."""

    @property
    def budget_chars(self) -> int | None:
        return None if self.budget_tokens is None else self.budget_tokens * CHARS_PER_TOKEN

    def usage(self, completion_chars: int) -> dict[str, Any]:
        completion_tokens = tokens_for_chars(completion_chars)
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }
        if self.cached_tokens is not None and self.cache_report == "openai":
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        elif self.cached_tokens is not None and self.cache_report == "deepseek":
            usage["prompt_cache_hit_tokens"] = self.cached_tokens
            usage["prompt_cache_miss_tokens"] = self.prompt_tokens - self.cached_tokens
        return usage

    def timings(self) -> dict[str, int] | None:
        """llama.cpp's server's `timings` (cache_n: prompt tokens reused from its cache), when it sends them."""
        if self.cached_tokens is None or self.cache_report != "timings":
            return None
        return {"cache_n": self.cached_tokens, "prompt_n": self.prompt_tokens - self.cached_tokens}


@dataclass
class _Budget:
    """Characters left before the reply must stop with finish_reason "length"."""

    remaining: int | None
    used: int = 0
    cut: bool = False  # something was left unsaid because the budget ran out

    def has_room(self) -> bool:
        """Whether another piece may start; a piece that must wait for room means the reply was cut."""
        if self.remaining == 0:
            self.cut = True
            return False
        return True

    def take(self, text: str) -> str:
        """The part of `text` that still fits."""
        if self.remaining is not None:
            if len(text) > self.remaining:
                text = text[: self.remaining]
                self.cut = True
            self.remaining -= len(text)
        self.used += len(text)
        return text


def _walk(reply: Reply, budget: _Budget, piece_chars: int) -> Iterator[tuple[str, Any]]:
    """The reply as ("reasoning", text) / ("content", text) / ("tool", (index, call, fragments)) steps."""
    reasoning = reply.reasoning or ""
    for start in range(0, len(reasoning), piece_chars):
        if not budget.has_room():
            return
        yield "reasoning", budget.take(reasoning[start : start + piece_chars])
        if budget.cut:
            return
    for piece in reply.content.pieces(piece_chars):
        if not piece:
            continue
        if not budget.has_room():
            return
        yield "content", budget.take(piece)
        if budget.cut:
            return
    for index, call in enumerate(reply.tool_calls):
        if not budget.has_room():
            return
        if budget.remaining is not None and len(call.name) > budget.remaining:
            budget.cut = True
            return
        budget.take(call.name)
        arguments = budget.take(call.arguments)
        fragments = [
            arguments[i : i + TOOL_ARGUMENT_FRAGMENT_CHARS]
            for i in range(0, len(arguments), TOOL_ARGUMENT_FRAGMENT_CHARS)
        ]
        yield "tool", (index, call, fragments)
        if budget.cut:
            return


def _finish_reason(reply: Reply, budget: _Budget) -> str:
    if budget.cut:
        return "length"
    return "tool_calls" if reply.tool_calls else "stop"


def build_completion(reply: Reply, meta: ReplyMeta) -> dict[str, Any]:
    """A whole `chat.completion` object, with usage."""
    budget = _Budget(meta.budget_chars)
    reasoning: list[str] = []
    content: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for kind, value in _walk(reply, budget, piece_chars=4096):
        if kind == "reasoning":
            reasoning.append(value)
        elif kind == "content":
            content.append(value)
        else:
            _, call, fragments = value
            tool_calls.append(
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": "".join(fragments)}}
            )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(content) if (content or not tool_calls) else None,
        "refusal": None,
    }
    if meta.reasoning_field and reply.reasoning is not None:
        message[meta.reasoning_field] = "".join(reasoning)
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": meta.completion_id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply, budget)}],
        "usage": meta.usage(budget.used),
        **({"timings": timings} if (timings := meta.timings()) is not None else {}),
    }


@dataclass
class StreamChunk:
    """One SSE event's payload and the completion characters it carries (for pacing)."""

    payload: dict[str, Any]
    chars: int = 0
    is_final: bool = False  # the chunk with finish_reason
    is_usage: bool = False


def iter_stream_chunks(reply: Reply, meta: ReplyMeta, include_usage: bool, piece_chars: int) -> Iterator[StreamChunk]:
    """The `chat.completion.chunk` objects of a streamed reply, generated lazily."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        payload = {
            "id": meta.completion_id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            payload["usage"] = None
        return payload

    first_delta: dict[str, Any] = {"role": "assistant", "content": ""}
    if meta.reasoning_field and reply.reasoning is not None:
        first_delta[meta.reasoning_field] = ""
    yield StreamChunk(chunk(first_delta))

    budget = _Budget(meta.budget_chars)
    for kind, value in _walk(reply, budget, piece_chars):
        if kind == "reasoning":
            yield StreamChunk(chunk({meta.reasoning_field or "reasoning_content": value}), chars=len(value))
        elif kind == "content":
            yield StreamChunk(chunk({"content": value}), chars=len(value))
        else:
            index, call, fragments = value
            opening = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield StreamChunk(chunk({"tool_calls": [opening]}), chars=len(call.name))
            for fragment in fragments:
                yield StreamChunk(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}), chars=len(fragment)
                )
    final = chunk({}, _finish_reason(reply, budget))
    if (timings := meta.timings()) is not None:
        final["timings"] = timings
    yield StreamChunk(final, is_final=True)
    if include_usage:
        usage_payload = {
            "id": meta.completion_id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [],
            "usage": meta.usage(budget.used),
        }
        yield StreamChunk(usage_payload, is_usage=True)
