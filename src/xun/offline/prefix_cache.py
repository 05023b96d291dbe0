"""The offline server's prompt-cache simulation (`--cache-ttl`): a prefix cache with a time to live.

Like a provider's cache, a request is served from the cache up to the end of the longest prefix it
shares with a recent request (the priming and tool definitions first, then whole messages); a prefix
stays cached `ttl` seconds after it was last used. Message by message (no 128-token blocks, no minimum
length), so the figures can be recomputed by hand: the cached tokens are those of the priming and tools
and of every message before the first one that differs, as `xun.offline.tokenizer` counts them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from xun.offline.tokenizer import PROMPT_PRIMING_TOKENS, count_message_tokens, count_tool_tokens

MAX_PREFIXES = 200_000
"""Stored prefixes at most; expired ones are dropped first, then the least recently used."""


class PrefixCache:
    """Which prompt prefixes are cached now; thread-safe (the server answers from several threads)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
            raise ValueError(f"cache ttl must be a positive number of seconds, not {ttl!r}")
        self.ttl = float(ttl)
        self.clock = clock
        self._used: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def serve(self, messages: Iterable[Mapping[str, Any]], tools: Iterable[Any] | None = None) -> int:
        """The tokens of this prompt served from the cache; the prompt's prefixes are cached from now."""
        tool_list = list(tools or ())
        units = [
            (
                json.dumps(tool_list, sort_keys=True, ensure_ascii=False),
                PROMPT_PRIMING_TOKENS + sum(count_tool_tokens(t) for t in tool_list),
            )
        ]
        units += [
            (json.dumps(m, sort_keys=True, ensure_ascii=False, default=str), count_message_tokens(m)) for m in messages
        ]
        now = self.clock()
        digest = hashlib.sha256()
        keys: list[bytes] = []
        cached = 0
        hitting = True
        with self._lock:
            for text, tokens in units:
                digest.update(text.encode("utf-8", "surrogatepass") + b"\x00")
                key = digest.copy().digest()
                keys.append(key)
                used = self._used.get(key)
                if hitting and used is not None and now - used <= self.ttl:
                    cached += tokens
                else:
                    hitting = False
            for key in keys:
                self._used.pop(key, None)
                self._used[key] = now  # re-inserted: the dict's order is the order of last use
            if len(self._used) > MAX_PREFIXES:
                self._evict(now)
        return cached

    def _evict(self, now: float) -> None:
        for key in [k for k, used in self._used.items() if now - used > self.ttl]:
            del self._used[key]
        while len(self._used) > MAX_PREFIXES:
            del self._used[next(iter(self._used))]
