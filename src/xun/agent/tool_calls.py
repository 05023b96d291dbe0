"""Running the tool calls of one reply, and what becomes of them when a cancel cuts the turn short."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from xun.agent.call_limits import gather_limited
from xun.agent.streaming import PendingCall
from xun.agent.tools import Toolbox, ToolContext, ToolOutcome
from xun.base.events import Event, ToolCallFinished, ToolCallStarted
from xun.context.conversation import Conversation
from xun.context.messages import RawOpenAIMessage

CANCELLED_TOOL_RESULT = "[Cancelled] The user cancelled the turn before this tool call ran; it did not run."
INTERRUPTED_TOOL_RESULT = (
    "[Cancelled] The user cancelled the turn while this tool call was running: it was "
    "interrupted and may have run in part or in full, so check its effects before running it again."
)
"""A cancel keeps the real result of a call that had finished; these say what became of the others."""

Emit = Callable[[Event], Awaitable[None]]


class ToolRound:
    """The tool calls of the newest reply: which began to run (confirmed, if they ask) and which finished,
    so a cancel can say of each what became of it."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        """Ids of the calls that began to run: a cancel says they may have run."""
        self.done: dict[str, ToolOutcome] = {}
        """Outcomes of the calls that finished: a cancel keeps them, though not yet recorded."""

    def denied(self) -> list[str]:
        """The names of the tools whose calls were refused confirmation, sorted."""
        return sorted({outcome.name for outcome in self.done.values() if outcome.denied})

    async def run(
        self, calls: list[PendingCall], toolbox: Toolbox, context: ToolContext, conversation: Conversation, emit: Emit
    ) -> None:
        """Run the calls of one reply concurrently; store the results in call order."""
        for call in calls:
            await emit(ToolCallStarted(id=call.id, name=call.name, arguments=call.arguments))

        async def one(call: PendingCall) -> ToolOutcome:
            outcome = await toolbox.call(call.name, call.arguments, context, on_run=lambda: self.running.add(call.id))
            self.done[call.id] = outcome
            return outcome

        outcomes = await gather_limited(one(call) for call in calls)
        for call, outcome in zip(calls, outcomes, strict=True):
            conversation.add_tool_result(call.id, outcome.text)
            await emit(
                ToolCallFinished(
                    id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    result_chars=len(outcome.text),
                    duration=round(outcome.duration, 4),
                    is_error=outcome.is_error,
                    error=outcome.text[:300] if outcome.is_error else None,
                    denied=outcome.denied,
                    truncated_chars=outcome.truncated_chars,
                )
            )

    def answer_dangling(self, conversation: Conversation) -> None:
        """Every tool call of this turn gets a result, so the history stays valid for the next request: its
        real one if it finished (a cancel may come before it is recorded), else what became of it. Only the
        newest reply can have calls without results (each round's come before the next call); it is found
        from the end, as a summary inside the turn moves where the turn began."""
        answered: set[Any] = set()
        for message in reversed(conversation.messages):
            if not isinstance(message, RawOpenAIMessage):
                return
            if message.role == "tool":
                answered.add(message.raw.get("tool_call_id"))
                continue
            for call in message.raw.get("tool_calls") or ():
                call_id = call.get("id", "")
                if call_id in answered:
                    continue
                outcome = self.done.get(call_id)
                text = (
                    outcome.text
                    if outcome is not None
                    else INTERRUPTED_TOOL_RESULT
                    if call_id in self.running
                    else CANCELLED_TOOL_RESULT
                )
                conversation.add_tool_result(call_id, text)
            return

    async def report_settled(self, answered: list[dict[str, Any]], conversation: Conversation, emit: Emit) -> None:
        """The calls a cancel answered end as every call does, with a finished event (a front end shows
        a kept result as it is, the rest as cancelled)."""
        for raw in answered:
            call_id, text = str(raw.get("tool_call_id", "")), str(raw.get("content", ""))
            outcome = self.done.get(call_id)
            function = next(
                (
                    call.get("function") or {}
                    for message in conversation.messages
                    if isinstance(message, RawOpenAIMessage) and message.role == "assistant"
                    for call in message.raw.get("tool_calls") or ()
                    if call.get("id") == call_id
                ),
                {},
            )
            is_error = outcome.is_error if outcome is not None else True
            await emit(
                ToolCallFinished(
                    id=call_id,
                    name=str(function.get("name", "")),
                    arguments=str(function.get("arguments", "")),
                    result_chars=len(text),
                    duration=round(outcome.duration, 4) if outcome is not None else 0.0,
                    is_error=is_error,
                    error=text[:300] if is_error else None,
                    denied=outcome.denied if outcome is not None else False,
                    truncated_chars=outcome.truncated_chars if outcome is not None else 0,
                )
            )
