"""The fault schedule: which chat-completion requests the offline server answers badly, and how.

Tests of retries, timeouts and broken streams need a real server that misbehaves on cue. A spec is a
comma-separated list of ``KIND@N`` or ``KIND@N-M`` entries, where ``N`` is the 1-based index of the
chat-completion request since the server started (every ``POST /v1/chat/completions`` counts, including
rejected ones). Kinds that wait take an optional number of seconds: ``KIND:SECONDS@N``, e.g.
``slow:0.05@3`` or ``429:2@1``. Example: ``500@2,disconnect@4,slow@6-8``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# kind -> (what it does, default seconds or None when the kind takes no seconds)
FAULT_KINDS: dict[str, tuple[str, float | None]] = {
    "500": ("HTTP 500 with an OpenAI-shaped JSON error", None),
    "429": ("HTTP 429 rate limit with Retry-After (seconds, default 1)", 1.0),
    "disconnect": ("drop the connection after a few chunks (non-streaming: before any response)", None),
    "slow": ("stream with a long delay between chunks (seconds, default 0.5)", 0.5),
    "stall": ("send a couple of chunks, then hang until the client leaves (cap in seconds, default 30)", 30.0),
    "timeout": ("accept the request, never answer until the client leaves (cap in seconds, default 30)", 30.0),
    "malformed": ("one SSE chunk that is not valid JSON (non-streaming: a body that is not JSON)", None),
    "truncate": ("the stream ends without finish_reason or [DONE] (non-streaming: body cut short)", None),
    "empty": ("a reply with empty content and no tool calls", None),
}

FAULTS_ENV = "XUN_OFFLINE_FAULTS"
"""Environment variable with a fault spec, used when a server is created without `faults`."""

MAX_FAULT_SECONDS = 600.0
_ENTRY = re.compile(
    r"^(?P<kind>[A-Za-z0-9_]+)(?::(?P<seconds>[0-9]*\.?[0-9]+))?@(?P<start>[0-9]+)(?:-(?P<end>[0-9]+))?$"
)


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, and how long it waits when its kind waits."""

    kind: str
    seconds: float | None = None


class FaultSchedule:
    """Parsed fault spec: maps request indexes to faults."""

    def __init__(
        self, faults_by_request: dict[int, Fault] | None = None, ranges: list[tuple[int, int, Fault]] | None = None
    ):
        self._by_request = dict(faults_by_request or {})
        self._ranges = list(ranges or [])

    @classmethod
    def parse(cls, spec: str | None) -> FaultSchedule:
        """Parse a spec string; raise ValueError saying what is wrong with it."""
        if spec is None or not spec.strip():
            return cls()
        by_request: dict[int, Fault] = {}
        ranges: list[tuple[int, int, Fault]] = []
        for raw_entry in spec.split(","):
            entry = raw_entry.strip()
            if not entry:
                raise ValueError(f"fault spec {spec!r}: empty entry (expected KIND@N, e.g. 500@2)")
            match = _ENTRY.match(entry)
            if match is None:
                raise ValueError(
                    f"fault spec entry {entry!r}: expected KIND@N, KIND@N-M or KIND:SECONDS@N (e.g. 500@2, "
                    "slow:0.1@3-5)"
                )
            kind = match["kind"].lower()
            if kind not in FAULT_KINDS:
                raise ValueError(
                    f"fault spec entry {entry!r}: unknown kind {kind!r}; known kinds: {', '.join(FAULT_KINDS)}"
                )
            default_seconds = FAULT_KINDS[kind][1]
            seconds: float | None = default_seconds
            if match["seconds"] is not None:
                if default_seconds is None:
                    raise ValueError(f"fault spec entry {entry!r}: kind {kind!r} takes no seconds")
                seconds = float(match["seconds"])
                if seconds > MAX_FAULT_SECONDS:
                    raise ValueError(f"fault spec entry {entry!r}: at most {MAX_FAULT_SECONDS:g} seconds")
            start = int(match["start"])
            end = int(match["end"]) if match["end"] is not None else start
            if start < 1:
                raise ValueError(f"fault spec entry {entry!r}: request numbers start at 1")
            if end < start:
                raise ValueError(f"fault spec entry {entry!r}: range end {end} is before its start {start}")
            fault = Fault(kind, seconds)
            for other_start, other_end, _ in ranges:
                if start <= other_end and other_start <= end:
                    raise ValueError(f"fault spec entry {entry!r}: overlaps requests {other_start}-{other_end}")
            for index in by_request:
                if start <= index <= end:
                    raise ValueError(f"fault spec entry {entry!r}: request {index} already has a fault")
            if start == end:
                by_request[start] = fault
            else:
                ranges.append((start, end, fault))
        return cls(by_request, ranges)

    def fault_for(self, request_index: int) -> Fault | None:
        """The fault for the request with this 1-based index, or None."""
        fault = self._by_request.get(request_index)
        if fault is not None:
            return fault
        for start, end, ranged in self._ranges:
            if start <= request_index <= end:
                return ranged
        return None

    def __iter__(self) -> Iterator[tuple[int, int, Fault]]:
        for index, fault in sorted(self._by_request.items()):
            yield index, index, fault
        yield from sorted(self._ranges, key=lambda item: item[0])

    def __bool__(self) -> bool:
        return bool(self._by_request or self._ranges)

    def __repr__(self) -> str:
        return f"FaultSchedule({list(self)!r})"
