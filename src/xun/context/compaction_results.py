"""What tier 1 and tier 2 return, and the counters of the escalation cadence: the conversation produces
them, the policies (`xun.compact`) read them, and the session file keeps the counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCallCompactResult:
    """Outcome of tier 1: how many tool results and call arguments became placeholders (their archive ids,
    `call_7` for a result, `call_7:arguments` for arguments), and the share of length removed."""

    reclaimed_count: int
    reclaimed_fraction: float
    reclaimed_ids: tuple[str, ...] = ()
    length_before: int = 0
    length_after: int = 0
    arguments_count: int = 0
    """Of `reclaimed_count`, the calls whose arguments were replaced."""


@dataclass(frozen=True, slots=True)
class SummaryCompactResult:
    """Outcome of tier 2. Only COMPACTED changes the conversation."""

    class Status(Enum):
        COMPACTED = "compacted"
        NOTHING_TO_CONDENSE = "nothing_to_condense"
        SUMMARIZE_FAILED = "summarize_failed"

    status: Status
    message: str
    reclaimed_fraction: float = 0.0
    condensed_count: int = 0
    kept_count: int = 0
    length_before: int = 0
    length_after: int = 0
    offload_path: str | None = None
    warning: str | None = None
    turn_rounds: int = 0
    """Tool calls of the running turn this summary condensed (0: it cut between turns)."""
    ledger_entries: int = 0
    """Lines of the turn ledger after it (merged entries count once)."""
    ledger_calls: int = 0
    """Calls the ledger records in all."""
    did_not_fit: bool = False
    """A summary request did not fit the window (the result is SUMMARIZE_FAILED, or xun's own summary in
    its place): a planning bug, never a reason to pause automatic compaction."""
    without_model: bool = False
    """No summary came from the model (its request failed, or it was not asked): whatever was applied is
    xun's own."""

    @property
    def compacted(self) -> bool:
        return self.status is SummaryCompactResult.Status.COMPACTED


@dataclass(slots=True)
class CompactionCounter:
    """Cheap reclaim rounds since the last summary, and summaries so far (the escalation cadence)."""

    tool_rounds: int = 0
    summary_rounds: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> CompactionCounter:
        if not isinstance(data, dict):
            raise ValueError(f"compaction counters should be an object, got {type(data).__name__}")
        values = {}
        for name in ("tool_rounds", "summary_rounds"):
            value = data.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"compaction counter {name!r} should be a whole number >= 0, got {value!r}")
            values[name] = value
        return cls(**values)
