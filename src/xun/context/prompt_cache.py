"""Prompt-cache figures: what the server said it served from its prefix cache, and what input was billed.

Providers bill the cached part of a prompt at a fraction of the price (OpenAI, DeepSeek, Anthropic:
about a tenth), and every compaction changes the prompt's prefix. Servers say it in different shapes:
`usage.prompt_tokens_details.cached_tokens` (OpenAI, vLLM), `usage.prompt_cache_hit_tokens` (DeepSeek),
`timings.cache_n` (llama.cpp's own server). A server that says nothing (llama-cpp-python) leaves the
figure unknown: None, never zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

DEFAULT_CACHED_DISCOUNT = 0.1
"""The price of a cached input token as a share of an uncached one (OpenAI, DeepSeek, Anthropic)."""


def _field(source: Any, name: str) -> Any:
    """`source.name` or `source[name]`, also from a pydantic model's extra fields; None when absent."""
    if source is None:
        return None
    if isinstance(source, dict):
        return source.get(name)
    value = getattr(source, name, None)
    if value is None:
        extra = getattr(source, "model_extra", None) or {}
        value = extra.get(name)
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def cached_tokens_of(usage: Any, timings: Any = None) -> int | None:
    """The prompt tokens the server served from its cache, in whichever shape it sent them; None when
    it sent none (unknown, which is not zero)."""
    details = _field(usage, "prompt_tokens_details")
    for value in (
        _field(details, "cached_tokens"),
        _field(usage, "prompt_cache_hit_tokens"),
        _field(timings, "cache_n"),
    ):
        if (count := _count(value)) is not None:
            return count
    return None


def billed_input(uncached: int, cached: int, discount: float = DEFAULT_CACHED_DISCOUNT) -> float:
    """Input tokens as billed, in uncached-token units: the uncached ones, and the cached at a discount."""
    return uncached + discount * cached


@dataclass(slots=True)
class PromptCacheRecord:
    """The session's cache figures (saved with it): the last call's, the totals over the calls whose
    cache figure is known, and when the last call was made (so an idle gap is seen across a resume)."""

    last_prompt: int | None = None
    last_cached: int | None = None
    """None: the server did not say (unknown)."""
    known_calls: int = 0
    """Calls with a server report that included a cache figure; the totals cover these only."""
    prompt_tokens: int = 0
    cached_tokens: int = 0
    last_call_at: float | None = None
    """Wall-clock seconds of the last model call's end (None: no call yet)."""

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def last_hit_share(self) -> float | None:
        """The share of the last call's prompt served from the cache; None when unknown."""
        if self.last_cached is None or not self.last_prompt:
            return None
        return min(self.last_cached / self.last_prompt, 1.0)

    def billed_input(self, discount: float = DEFAULT_CACHED_DISCOUNT) -> float:
        return billed_input(self.uncached_tokens, self.cached_tokens, discount)

    def record(self, prompt_tokens: int | None, cached_tokens: int | None, at: float) -> None:
        """Take one call's report (`prompt_tokens` None: the server sent no usage at all)."""
        self.last_call_at = at
        self.last_prompt = prompt_tokens
        self.last_cached = (
            min(cached_tokens, prompt_tokens) if cached_tokens is not None and prompt_tokens is not None else None
        )
        if self.last_cached is not None and prompt_tokens is not None:
            self.known_calls += 1
            self.prompt_tokens += prompt_tokens
            self.cached_tokens += self.last_cached

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> PromptCacheRecord:
        """The record from a session file; ValueError names the bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"prompt_cache should be an object, got {type(data).__name__}")
        record = cls()
        for f in fields(cls):
            value = data.get(f.name, getattr(record, f.name))
            if f.name == "last_call_at":
                if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                    raise ValueError(f"prompt_cache.last_call_at should be a time in seconds or null, got {value!r}")
                value = float(value) if value is not None else None
            elif value is None and f.name.startswith("last_"):
                pass
            elif _count(value) is None:
                raise ValueError(f"prompt_cache.{f.name} should be a whole number >= 0, got {value!r}")
            setattr(record, f.name, value)
        if record.cached_tokens > record.prompt_tokens:
            raise ValueError("prompt_cache.cached_tokens is larger than prompt_tokens")
        return record
