"""The typed events the agent emits; every front end (TUI, CLI, `--json`) consumes these.

Each event is a frozen dataclass with a `type` name; `to_json()` gives the one-line JSON form that
`xun run --json` prints. Compaction events also become records of the session's compaction log
(`to_json()` of every event whose class is `logged`), so the history of compactions survives a restart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


def _plain(value: Any) -> Any:
    """A value of an event's field as its JSON form holds it: a dict or list copied (the form may be kept and
    changed apart from the event, as the session's compaction log is), anything else as it is."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


@dataclass(frozen=True, slots=True)
class Event:
    type: ClassVar[str] = "event"

    def to_json(self) -> dict[str, Any]:
        # field by field, not `asdict`: that deep-copies every value, 8 times the cost, several events a round
        return {"type": self.type, **{f.name: _plain(getattr(self, f.name)) for f in fields(self)}}


@dataclass(frozen=True, slots=True)
class TurnStarted(Event):
    type: ClassVar[str] = "turn_started"
    prompt: str | None = None


@dataclass(frozen=True, slots=True)
class TurnFinished(Event):
    """`status` is one of: ok, error, cancelled, max_iterations."""

    type: ClassVar[str] = "turn_finished"
    status: str = "ok"
    iterations: int = 0
    error: str | None = None
    restored_prompt: str | None = None
    """The unanswered user message taken back on cancel or failure, for the front end to put back."""


@dataclass(frozen=True, slots=True)
class TextDelta(Event):
    type: ClassVar[str] = "text_delta"
    text: str = ""


@dataclass(frozen=True, slots=True)
class ReasoningDelta(Event):
    type: ClassVar[str] = "reasoning_delta"
    text: str = ""


@dataclass(frozen=True, slots=True)
class AssistantMessage(Event):
    """A complete reply was added to the conversation (its text was streamed as deltas before)."""

    type: ClassVar[str] = "assistant_message"
    content: str = ""
    reasoning: str = ""
    tool_calls: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallStarted(Event):
    type: ClassVar[str] = "tool_call_started"
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class ToolCallFinished(Event):
    type: ClassVar[str] = "tool_call_finished"
    id: str = ""
    name: str = ""
    arguments: str = ""
    result_chars: int = 0
    duration: float = 0.0
    is_error: bool = False
    error: str | None = None
    denied: bool = False
    truncated_chars: int = 0


@dataclass(frozen=True, slots=True)
class Usage(Event):
    """Context figures: what the server last reported, and the estimate of the next request now.

    `estimated_tokens` is the reported total plus what was added since (characters times the ratio
    of reported tokens to estimated characters), or the calibrated estimate when the server reports
    nothing; the compaction trigger and the window check compare it to `threshold` and `context_window`.
    `source` says whether `prompt_tokens`/`completion_tokens` are the server's ("server") or whether
    this event carries only xun's estimate ("estimate"); `window_source` where the window came from.
    """

    type: ClassVar[str] = "usage"
    total_tokens: int | None = None
    estimated_tokens: int = 0
    threshold: int = 0
    context_window: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    source: str = "estimate"
    window_source: str | None = None
    cached_tokens: int | None = None
    """Prompt tokens the server served from its prompt cache on this call; None: it did not say."""
    session_totals: dict[str, int] | None = None
    """The session's totals so far (`xun.context.usage`: calls, prompt, completion, cached_input), summaries' calls
    included."""
    session_cost: float | None = None
    """What they cost by the `pricing` of the model: uncached input, cached input and output at their prices
    (None without a price)."""


@dataclass(frozen=True, slots=True)
class Info(Event):
    type: ClassVar[str] = "info"
    message: str = ""


@dataclass(frozen=True, slots=True)
class Warning(Event):  # noqa: A001 - the event's name in the --json schema
    type: ClassVar[str] = "warning"
    message: str = ""


@dataclass(frozen=True, slots=True)
class McpServerChanged(Event):
    """An MCP server started, became ready (with its tools), failed (with the reason) or stopped."""

    type: ClassVar[str] = "mcp_server"
    name: str = ""
    state: str = ""
    tools: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Error(Event):
    type: ClassVar[str] = "error"
    message: str = ""
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Retry(Event):
    """A model call failed transiently and will be retried; any partial reply is discarded."""

    type: ClassVar[str] = "retry"
    attempt: int = 0
    attempts: int = 0
    delay: float = 0.0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CompactionEvent(Event):
    """Base of the events that the session's compaction log records."""

    logged: ClassVar[bool] = True

    trigger: str = "auto"  # auto, manual, emergency, idle
    time: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class PrefixChange(CompactionEvent):
    """Base of the compactions that change the prompt: what that costs in the server's prompt cache.

    `cache_miss_tokens`: the estimated tokens from the first changed message to the end of the next
    request, which that call pays uncached; `saved_per_call`: the tokens each later call no longer
    sends (negative for a restore)."""

    cache_miss_tokens: int | None = None
    saved_per_call: int | None = None


@dataclass(frozen=True, slots=True)
class ToolResultsReclaimed(PrefixChange):
    """Tier 1 ran: `ids` are the archive ids it replaced (`call_7` a result, `call_7:arguments` a call's
    arguments), `count` how many, `arguments` how many of them were call arguments."""

    type: ClassVar[str] = "tool_results_reclaimed"
    ids: tuple[str, ...] = ()
    count: int = 0
    arguments: int = 0
    fraction: float = 0.0
    tokens_before: int = 0
    tokens_after: int = 0
    reason: str = ""
    """Why nothing was replaced ("" when something was)."""


@dataclass(frozen=True, slots=True)
class SummaryStarted(CompactionEvent):
    type: ClassVar[str] = "summary_started"
    condensed: int = 0
    kept: int = 0
    focus: str | None = None

    logged: ClassVar[bool] = False  # the finished event carries the outcome


@dataclass(frozen=True, slots=True)
class SummaryFinished(PrefixChange):
    type: ClassVar[str] = "summary_finished"
    status: str = "compacted"
    message: str = ""
    condensed: int = 0
    kept: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    offload_path: str | None = None
    warning: str | None = None
    method: str = "model"
    """"model" (the model's summary), or "extractive" (xun's own, when the model gave no usable one)."""
    own_because: str = ""
    """Why xun wrote the summary itself (method "extractive"): what became of the model's, or why it was not asked."""
    pieces: int = 1
    """Summary requests the condensed messages were split into, so that each fits the window."""
    why: str = ""
    """Why the automatic policy summarised (what the reclaim before it left), "" when asked for by hand."""
    turn_rounds: int = 0
    """Tool calls of the running turn this summary condensed (0: it cut between turns)."""
    ledger_entries: int = 0
    """Lines of the turn ledger the summary frame carries now (older calls merge into one line)."""
    ledger_calls: int = 0
    """Calls that ledger records in all."""


@dataclass(frozen=True, slots=True)
class SummaryRejected(CompactionEvent):
    """A summary the model wrote was not applied: why, and what xun does next ("retry", "extractive")."""

    type: ClassVar[str] = "summary_rejected"
    reason: str = ""
    next: str = ""


@dataclass(frozen=True, slots=True)
class ToolResultRestored(PrefixChange):
    type: ClassVar[str] = "tool_result_restored"
    id: str = ""
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass(frozen=True, slots=True)
class CompactionSkipped(CompactionEvent):
    type: ClassVar[str] = "compaction_skipped"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CompactionFailed(CompactionEvent):
    type: ClassVar[str] = "compaction_failed"
    reason: str = ""
