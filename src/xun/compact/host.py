"""What compaction needs from whoever runs it: the protocol the policies and the summary call use.

The agent (`xun.agent.loop.Agent`) implements it; the compaction layer never imports the agent, so the
two can be read, tested and changed one at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from xun.base.events import Event
from xun.context.compaction_results import ToolCallCompactResult
from xun.context.conversation import Conversation


class CompactionHost(Protocol):
    """An agent, as compaction sees it: its conversation, its budget, and a way to ask the model."""

    conversation: Conversation
    config: Any  # xun.agent.config.Settings: compaction reads `auto_compact`, `compression` and `cache`
    knowledge: Any  # xun.agent.window.ServerKnowledge: the tokenizer's calibration, when measured
    workdir: Path
    clock: Callable[[], float]
    reply_budget: int | None
    last_error: str | None
    last_error_did_not_fit: bool
    last_finish_reason: str | None

    @property
    def threshold(self) -> int: ...

    @property
    def window(self) -> Any: ...  # xun.agent.window.Window: `.tokens` is the window, or None when unknown

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

    async def execute(self, max_iterations: int | None = None) -> Any: ...

    def last_reply(self) -> str: ...
