"""Every message the app passes around, in one place.

Engine events become these messages (see `xun.tui.bridge`); workers only ever post them, and the
app's handlers update the panes. Two kinds arrive at a high rate while a reply streams:

- `ReplyText` / `ReasoningText` carry a shared, append-only list of the reply's chunks and how many
  of them exist at posting time. A newer one replaces a queued older one of the same stream
  (`can_replace`), and the handler writes every chunk it has not written yet, so text is batched,
  never dropped.
- `ContextUsage` replaces a queued older `ContextUsage`: only the newest figures matter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform

from textual.message import Message

if TYPE_CHECKING:  # the engine loads with the session, after the first frame
    from xun.base import events
    from xun.agent.launch import Session
    from xun.agent.tools import ConfirmationRequest, Decision
    from xun.context.conversation import Conversation

T = TypeVar("T")


@dataclass_transform()
def dataclass(cls: type[T]) -> type[T]:
    """`dataclasses.dataclass` for the classes here: compared by identity, as every Textual message is, and
    shown as Textual shows messages (the generated `__eq__` and `__repr__` of thirty classes were 3 ms of the
    app's first frame)."""
    return dataclasses.dataclass(eq=False, repr=False)(cls)


# ------------------------------------------------------------------------------------ the session


@dataclass
class SessionOpened(Message):
    """The session the app was started to open is ready (posted from the opening thread)."""

    session: Session


@dataclass
class TranscriptLoaded(Message):
    """A resumed conversation is read; the settings and the agent are still loading (posted from the opening
    thread, before `SessionOpened`, so the transcript shows sooner). `items` is its transcript, walked in
    that thread too: tens of thousands of messages are a tenth of a second the event loop need not spend."""

    conversation: Conversation
    items: list[Any]
    drawn: threading.Event
    """Set after the frame that shows it: the opening thread goes on then."""


@dataclass
class NewestTurns(Message):
    """A resumed session's newest turns, read from the end of its file before the whole is parsed (posted
    from the opening thread, before `TranscriptLoaded`, which brings the older ones)."""

    conversation_id: str
    items: list[Any]
    drawn: threading.Event
    """Set after the frame that shows them: the opening thread parses the whole session then."""


@dataclass
class SessionOpenFailed(Message):
    """Opening the session failed (bad settings, an unknown or damaged session, no model server)."""

    error: Exception


# ------------------------------------------------------------------------------------------ a turn


@dataclass
class TurnBegan(Message):
    prompt: str | None


@dataclass
class TurnEnded(Message):
    """The agent's own end of a turn (ok, error, cancelled, max_iterations)."""

    status: str
    restored_prompt: str | None = None
    error: str | None = None


@dataclass
class AgentWorkDone(Message):
    """Posted from a worker's `finally:`, so the UI settles even when the worker was cancelled."""

    kind: str
    """"turn", "compact", "reclaim" or "restore"."""


@dataclass
class StreamChunks:
    """The chunks of one streamed text, appended by the bridge, read by the handler."""

    chunks: list[str] = field(default_factory=list)
    written: int = 0

    def take(self, upto: int) -> str:
        """The text of chunks not yet written, up to `upto`, marked written."""
        if upto <= self.written:
            return ""
        text = "".join(self.chunks[self.written : upto])
        self.written = upto
        return text


@dataclass
class ReplyText(Message):
    stream: StreamChunks
    upto: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplyText) and message.stream is self.stream


@dataclass
class ReasoningText(Message):
    stream: StreamChunks
    upto: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReasoningText) and message.stream is self.stream


@dataclass
class ReplyComplete(Message):
    content: str
    reasoning: str
    tool_calls: int


@dataclass
class ReplyRetrying(Message):
    """The model call failed and is retried: the partial reply on screen is discarded."""

    attempt: int
    attempts: int
    delay: float
    reason: str


@dataclass
class ToolCallBegan(Message):
    id: str
    name: str
    arguments: str


@dataclass
class ToolCallEnded(Message):
    event: events.ToolCallFinished


@dataclass
class ContextUsage(Message):
    event: events.Usage
    after_model_call: bool

    def can_replace(self, message: Message) -> bool:
        # A point after a model call goes into the sparkline, so it is never replaced away.
        return isinstance(message, ContextUsage) and not self.after_model_call


@dataclass
class Notice(Message):
    """Info, warnings and errors from the engine."""

    level: str
    """"info", "warning" or "error"."""
    text: str


# ------------------------------------------------------------------------------------- compaction


@dataclass
class CompactionRecorded(Message):
    """A compaction event the session's log keeps (reclaim, summary, restore, skipped, failed)."""

    event: events.CompactionEvent


@dataclass
class SummaryBegan(Message):
    event: events.SummaryStarted


# ------------------------------------------------------------------------------------ asking the user


@dataclass
class ConfirmationAsked(Message):
    """A tool wants to run; the answer goes into `answer`."""

    request: ConfirmationRequest
    answer: asyncio.Future[Decision]


@dataclass
class ConsentAsked(Message):
    """auto_compact.mode is "ask": may an automatic summary run now?"""

    answer: asyncio.Future[bool]


# ------------------------------------------------------------------------------------------ the UI


@dataclass
class PromptSubmitted(Message):
    text: str


@dataclass
class OpenInspector(Message):
    tool_call_id: str


@dataclass
class RestoreRequested(Message):
    tool_call_id: str


@dataclass
class ShowInChat(Message):
    """Jump the chat to a turn found elsewhere: a tool call by its id, or else a prompt or reply by its words,
    or else the divider of the session's `summary`-th summary (0 the first)."""

    tool_call_id: str
    speaker: str = ""
    text: str = ""
    summary: int | None = None


@dataclass
class SessionSaved(Message):
    path: str | None
    error: str | None = None


@dataclass
class SwitchSession(Message):
    conversation_id: str


@dataclass
class OpenBreakdown(Message):
    """Enter (or a click) on the gauge: show what fills the context."""


# ------------------------------------------------------------------------------- searching history


@dataclass
class RecallResults(Message):
    """A search of the recall index finished (posted from the search worker's thread).

    `serial` tells the newest search from older ones still finishing; `error` is set when the index
    could not be used at all (the hits are then empty)."""

    serial: int
    query: str
    hits: list[Any]
    """`xun.context.recall.RecallHit`s, best first."""
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class RecallEntryLoaded(Message):
    """The full text of one search hit (`xun.context.recall.RecallEntry`, None when it is gone)."""

    entry_id: int
    entry: Any
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class RecallStats(Message):
    """What the index holds, for the empty search box, and the index's warnings met while counting (a
    damaged file the count moved aside and rebuilt)."""

    offloaded: int
    reclaimed: int
    sessions: int
    warnings: list[str] = field(default_factory=list)


def event_payload(event: Any) -> dict[str, Any]:
    """An engine event as its JSON record (for compaction messages built from a saved log)."""
    return event.to_json() if hasattr(event, "to_json") else dict(event)


# -------------------------------------------------------------------------------------------- mcp


@dataclass
class McpServerChanged(Message):
    """An MCP server started, became ready, failed or stopped (`xun.base.events.McpServerChanged`)."""

    event: events.McpServerChanged
