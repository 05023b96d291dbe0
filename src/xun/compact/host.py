"""What compaction needs from whoever runs it: the protocol the policies and the summary call use.

The agent (`xun.agent.loop.Agent`) implements it; the compaction layer never imports the agent, so the
two can be read, tested and changed one at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from xun.base.events import Event, TurnFinished
from xun.context.compaction_results import ToolCallCompactResult
from xun.context.conversation import Conversation


class AutoCompactReading(Protocol):
    """What compaction reads of the `auto_compact` settings (`xun.agent.settings_schema.AutoCompactSettings`)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def mode(self) -> str: ...

    @property
    def toolcall_keep_max(self) -> int: ...

    @property
    def summary_keep_max(self) -> int: ...


class CompressionReading(Protocol):
    """What compaction reads of the `compression` settings (`xun.agent.settings_schema.CompressionSettings`)."""

    @property
    def instructions(self) -> str | None: ...

    @property
    def prompt_files(self) -> list[str]: ...

    @property
    def max_tokens(self) -> int: ...


class SettingsReading(Protocol):
    """What compaction reads of the agent's settings (`xun.agent.settings_schema.XunConfig`)."""

    @property
    def auto_compact(self) -> AutoCompactReading: ...

    @property
    def compression(self) -> CompressionReading: ...


class TokenizerMeasure(Protocol):
    """The server tokenizer's measure (`xun.agent.window.Calibration`)."""

    @property
    def tokens_per_char(self) -> float: ...

    def fixed_for(self, with_tools: bool) -> int:
        """What a request costs besides its messages' characters and their framing."""
        ...


class ServerMeasures(Protocol):
    """What is known of the server (`xun.agent.window.ServerKnowledge`): its tokenizer's measure, once taken."""

    @property
    def calibration(self) -> TokenizerMeasure | None: ...


class WindowSize(Protocol):
    """The model's context window (`xun.agent.window.Window`): `tokens` is None while it is unknown."""

    @property
    def tokens(self) -> int | None: ...


class CompactionHost(Protocol):
    """An agent, as compaction sees it: its conversation, its budget, and a way to ask the model."""

    conversation: Conversation
    workdir: Path
    clock: Callable[[], float]
    reply_budget: int | None
    last_error: str | None
    last_error_did_not_fit: bool
    last_finish_reason: str | None

    @property
    def config(self) -> SettingsReading: ...

    @property
    def knowledge(self) -> ServerMeasures: ...

    @property
    def threshold(self) -> int: ...

    @property
    def window(self) -> WindowSize: ...

    def request_tokens(self) -> int: ...

    def floor_tokens(self) -> int:
        """The smallest request compaction could make: system message, tool definitions, newest prompt."""
        ...

    def output_reserve(self, window: int) -> int:
        """Tokens of the window kept free for the reply."""
        ...

    async def emit(self, event: Event) -> None: ...

    async def reclaim_tool_results(
        self, keep_max: int | None = None, trigger: str = "manual", tokens_before: int | None = None
    ) -> ToolCallCompactResult: ...

    async def consent_to_summary(self) -> bool: ...

    def summarizer(self) -> CompactionHost:
        """A copy for one summary call: the same model and conversation settings, no tools, no display."""
        ...

    async def execute(self, max_iterations: int | None = None) -> TurnFinished: ...

    def last_reply(self) -> str: ...
