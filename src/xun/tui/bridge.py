"""Engine events to Textual messages: the only thing the agent's `on_event` does in the app.

It runs inside the agent's worker, so it never touches a widget; it posts messages to the app.
Text deltas are appended to the current stream's chunk list and announced with a message that a
newer one of the same stream may replace while queued (see `xun.tui.messages`). A fast stream never
waits for the network, so the agent's task would keep the event loop to itself: every YIELD_EVERY
seconds of deltas the bridge hands the agent a pause, and keys and frames get their turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from textual.message import Message

from xun.base import events
from xun.tui import messages as m

if TYPE_CHECKING:
    from xun.agent.tools import ConfirmationRequest, Decision


YIELD_EVERY = 0.01
"""Seconds of streaming after which the agent's task lets the rest of the app run."""


class EventBridge:
    def __init__(self, post: Callable[[Message], object]) -> None:
        self._post = post
        self._text: m.StreamChunks | None = None
        self._reasoning: m.StreamChunks | None = None
        self._call_pending = False
        self._ran_since = time.perf_counter()

    def _end_streams(self) -> None:
        self._text = None
        self._reasoning = None

    def _pause(self) -> Awaitable[None] | None:
        now = time.perf_counter()
        if now - self._ran_since < YIELD_EVERY:
            return None
        self._ran_since = now
        return asyncio.sleep(0.001)

    def __call__(self, event: events.Event) -> Awaitable[None] | None:
        post = self._post
        if isinstance(event, events.TextDelta):
            if self._text is None:
                self._text = m.StreamChunks()
            self._text.chunks.append(event.text)
            post(m.ReplyText(self._text, len(self._text.chunks)))
            return self._pause()
        if isinstance(event, events.ReasoningDelta):
            if self._reasoning is None:
                self._reasoning = m.StreamChunks()
            self._reasoning.chunks.append(event.text)
            post(m.ReasoningText(self._reasoning, len(self._reasoning.chunks)))
            return self._pause()
        if isinstance(event, events.AssistantMessage):
            self._end_streams()
            self._call_pending = True
            post(m.ReplyComplete(event.content, event.reasoning, event.tool_calls))
        elif isinstance(event, events.Usage):
            after_call, self._call_pending = self._call_pending, False
            post(m.ContextUsage(event, after_model_call=after_call))
        elif isinstance(event, events.Retry):
            self._end_streams()
            post(m.ReplyRetrying(event.attempt, event.attempts, event.delay, event.reason))
        elif isinstance(event, events.TurnStarted):
            self._end_streams()
            post(m.TurnBegan(event.prompt))
        elif isinstance(event, events.TurnFinished):
            self._end_streams()
            post(m.TurnEnded(event.status, event.restored_prompt, event.error))
        elif isinstance(event, events.ToolCallStarted):
            post(m.ToolCallBegan(event.id, event.name, event.arguments))
        elif isinstance(event, events.ToolCallFinished):
            post(m.ToolCallEnded(event))
        elif isinstance(event, events.SummaryStarted):
            post(m.SummaryBegan(event))
        elif isinstance(event, events.CompactionEvent):
            post(m.CompactionRecorded(event))
        elif isinstance(event, events.McpServerChanged):
            post(m.McpServerChanged(event))
        elif isinstance(event, events.Error):
            post(m.Notice("error", event.message))
        elif isinstance(event, events.Warning):
            post(m.Notice("warning", event.message))
        elif isinstance(event, events.Info):
            post(m.Notice("info", event.message))

    async def confirm(self, request: ConfirmationRequest) -> Decision:
        """The agent's confirmation callback: ask through a message, wait for the modal's answer."""
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._post(m.ConfirmationAsked(request, answer))
        return await answer

    async def consent(self, _agent: object) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._post(m.ConsentAsked(answer))
        return await answer
