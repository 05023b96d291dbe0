"""The agent: an async loop on the official `openai` SDK, with compaction before every model call.

One turn: the compactor runs, one streamed chat completion is read (text, reasoning and tool-call
deltas), the tool calls run (in parallel, results stored in call order), and the loop repeats until the
model calls no tool or `max_iterations` is reached. Everything that happens is an event (`xun.events`)
sent to `on_event`; the engine never imports a front end.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xun.call_limits import gather_limited, valid_total_tokens, valid_usage, within_deadline
from xun.compact import AutoCompactor, CompactorAbstract, ToolCallCompactResult
from xun.config import XunConfig, resolve_api_key
from xun.confined import open_regular_inside
from xun.conversation import Conversation
from xun.conversation_message import RawOpenAIMessage, UserMessage
from xun.events import (
    AssistantMessage,
    CompactionEvent,
    Error,
    Event,
    Info,
    ReasoningDelta,
    Retry,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultRestored,
    ToolResultsReclaimed,
    TurnFinished,
    TurnStarted,
    Usage,
    Warning,
)
from xun.tools import ConfirmCallback, Toolbox, ToolContext, default_toolbox

PROJECT_INSTRUCTION_FILES = ("AGENTS.md", "Agents.md", "agents.md")
PROJECT_SECTION = "AGENTS.md"
DEFAULT_MAX_ITERATIONS = 50
CANCELLED_TOOL_RESULT = "[Cancelled] The user cancelled the turn before this tool call finished."
OFFLINE_API_KEY = "xun-offline-no-key"

EventCallback = Callable[[Event], Awaitable[None] | None]
ConsentCallback = Callable[["Agent"], Awaitable[bool]]


class TransientServerError(Exception):
    """A model call that may succeed when tried again (5xx, timeout, dropped or broken stream)."""


class ContextOverflowError(Exception):
    """The server refused the request as longer than the model's context window."""


@dataclass
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Reply:
    """What one streamed completion produced."""

    content: str = ""
    reasoning: str = ""
    reasoning_field: str | None = None
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    usage: Any = None
    finish_reason: str | None = None

    def message(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning and self.reasoning_field:
            raw[self.reasoning_field] = self.reasoning
        if self.calls:
            raw["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for _, c in sorted(self.calls.items())
            ]
        return raw


def _classify(exc: BaseException) -> Exception:
    """Map SDK and transport errors to what the loop does with them: retry, compact, or fail."""
    import openai

    if isinstance(exc, openai.BadRequestError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body) if isinstance(body, dict) else {}
        code = error.get("code") if isinstance(error, dict) else None
        if code == "context_length_exceeded" or "context_length_exceeded" in str(exc):
            return ContextOverflowError(str(exc))
        return exc  # type: ignore[return-value]
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
            return TransientServerError(f"HTTP {exc.status_code} from the server: {exc.message}")
        return exc  # type: ignore[return-value]
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        return TransientServerError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError, UnicodeDecodeError)):
        return TransientServerError(f"the server sent a malformed stream ({exc})")
    name = type(exc).__module__
    if name.startswith(("httpx", "httpcore", "h11", "anyio")) or isinstance(exc, (ConnectionError, TimeoutError)):
        return TransientServerError(f"{type(exc).__name__}: {exc}")
    return exc  # type: ignore[return-value]


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (`retry-after-ms` or a `Retry-After` in seconds), if it did."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name)) * scale
        except (TypeError, ValueError):  # absent, or an HTTP date (not worth parsing for a capped wait)
            continue
        if seconds >= 0 and math.isfinite(seconds):
            return seconds
    return None


class Agent:
    """Holds the config, the conversation, the toolbox and the compaction policy, and runs turns."""

    def __init__(
        self,
        config: XunConfig | None = None,
        *,
        conversation: Conversation | None = None,
        toolbox: Toolbox | None = None,
        compactor: CompactorAbstract | None = None,
        workdir: str | os.PathLike[str] | None = None,
        on_event: EventCallback | None = None,
        confirm: ConfirmCallback | None = None,
        consent: ConsentCallback | None = None,
        environ: dict[str, str] | None = None,
        client: Any = None,
    ) -> None:
        self.config = config if config is not None else XunConfig()
        self.workdir = Path(workdir) if workdir is not None else Path.cwd()
        self.conversation = conversation if conversation is not None else Conversation()
        self.toolbox = toolbox if toolbox is not None else default_toolbox()
        self.compactor = compactor if compactor is not None else AutoCompactor.from_config(self.config.auto_compact)
        self.on_event = on_event
        self.confirm = confirm
        self.consent = consent
        self.environ = environ
        self._client = client
        self.last_error: str | None = None
        self.reads_project_instructions = True
        self._shares_client = False  # set by inherit: a helper never closes its parent's client
        self.offline = False
        """Talking to the offline demo server: the user's API key is not sent to it."""

    # ----------------------------------------------------------------- setup

    @property
    def threshold(self) -> int:
        return self.config.effective_threshold()

    def system(self, prompt: str) -> None:
        """Set the role prompt (kept word for word across every summary)."""
        self.conversation.set_system_message_content(prompt)

    def sync_project_instructions(self) -> None:
        """Read AGENTS.md (or Agents.md, agents.md) into a persistent section; drop it when gone or empty."""
        if not self.reads_project_instructions:
            return
        text = ""
        for name in PROJECT_INSTRUCTION_FILES:
            path = self.workdir / name
            try:  # never through a link out of the workspace (a planted AGENTS.md -> ~/.ssh/id_rsa)
                with open_regular_inside(path, [self.workdir]) as handle:
                    text = handle.read().decode("utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue
            if text:
                text = f"# Project instructions ({name})\n\n{text}"
                break
        self.conversation.set_persistent_section(PROJECT_SECTION, text)

    @classmethod
    def inherit(cls, agent: Agent, share_display: bool = False, copy_toolbox: bool = False, copy_command: bool = False) -> Agent:
        """A helper agent (the summarizer): a copy of the config with compaction off and auto-confirm on,
        its own conversation and compactor, the parent's HTTP client. `share_display` forwards its
        events to the parent's front end; `copy_toolbox` gives it the parent's tools (else none);
        `copy_command` lets it ask the parent's user for confirmations."""
        config = agent.config.model_copy(deep=True)
        config.auto_compact.enabled = False
        config.auto_confirm = True
        if config.compression.model:
            config.model.name = config.compression.model
        child = cls(
            config,
            conversation=Conversation(),
            toolbox=agent.toolbox.copy() if copy_toolbox else Toolbox(),
            workdir=agent.workdir,
            on_event=agent.on_event if share_display else None,
            confirm=agent.confirm if copy_command else None,
            environ=agent.environ,
            client=agent.client(),
        )
        child._shares_client = True
        child.reads_project_instructions = False  # the summarizer must not see AGENTS.md
        child.offline = agent.offline
        return child

    def _schema_chars(self) -> int:
        """Characters of the tool schemas a request carries (part of every reported prompt)."""
        return len(json.dumps(self.toolbox.schemas(), ensure_ascii=False))

    async def aclose(self) -> None:
        """Close the HTTP client (front ends call this when they stop; a helper shares its parent's)."""
        if self._client is not None and not self._shares_client:
            await self._client.close()
        self._client = None

    def client(self) -> Any:
        """The `openai.AsyncOpenAI` client, built on first use (the SDK is imported lazily)."""
        if self._client is None:
            import openai

            key = None if self.offline else resolve_api_key(self.config, self.environ)
            key = key or OFFLINE_API_KEY
            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.config.provider.base_url, max_retries=0, timeout=self.config.provider.timeout
            )
        return self._client

    # ---------------------------------------------------------------- events

    async def emit(self, event: Event) -> None:
        """Record compaction events in the session's log, then hand the event to the front end."""
        if isinstance(event, CompactionEvent) and event.logged:
            self.conversation.compaction_log.append(event.to_json())
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result

    async def emit_usage(self, usage: Any = None) -> None:
        c = self.conversation
        await self.emit(Usage(
            total_tokens=c.total_tokens,
            estimated_tokens=c.estimated_tokens(),
            threshold=self.threshold,
            context_window=self.config.model.context_window,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        ))

    # ------------------------------------------------------------ compaction

    async def reclaim_tool_results(self, keep_max: int | None = None, trigger: str = "manual", tokens_before: int | None = None) -> ToolCallCompactResult:
        """Tier 1 now, reported as an event (also what `/compact toolcall` and F6 run)."""
        c = self.conversation
        before = tokens_before if tokens_before is not None else c.estimated_tokens()
        keep = keep_max if keep_max is not None else self.config.auto_compact.toolcall_keep_max
        result = await c.acompact_toolcall(keep_max=keep)  # the index is written in a worker thread
        # the policy passes the trigger's figure and judges by the seed's estimate; by hand, the gauge's
        after = round(before * (1 - result.reclaimed_fraction)) if tokens_before is not None else c.estimated_tokens()
        await self.emit(ToolResultsReclaimed(
            ids=result.reclaimed_ids, count=result.reclaimed_count, fraction=result.reclaimed_fraction,
            tokens_before=before, tokens_after=after, trigger=trigger,
        ))
        for warning in c.take_history_warnings():  # the search index could not take the reclaimed results
            await self.emit(Warning(warning))
        return result

    async def restore_tool_result(self, tool_call_id: str) -> None:
        """Put a reclaimed original back into the context (raises KeyError/ValueError as the conversation does)."""
        before = self.conversation.estimated_tokens()
        await self.conversation.arestore_toolcall(tool_call_id)
        await self.emit(ToolResultRestored(id=tool_call_id, tokens_before=before, tokens_after=self.conversation.estimated_tokens(), trigger="manual"))
        await self.emit_usage()

    async def consent_to_summary(self) -> bool:
        """Whether an automatic summary may run now, by `auto_compact.mode`."""
        mode = self.config.auto_compact.mode
        if mode == "off":
            return False
        if mode == "auto":
            return True
        if self.consent is None:
            await self.emit(Info("auto_compact.mode is 'ask' but nobody can be asked here; summarising as in 'auto'"))
            return True
        try:
            return bool(await asyncio.wait_for(self.consent(self), timeout=self.config.auto_compact.ask_timeout))
        except asyncio.TimeoutError:
            await self.emit(Info(f"no answer within {self.config.auto_compact.ask_timeout:g}s; summarising"))
            return True

    async def _compact_before_call(self) -> None:
        try:
            await self.compactor.auto_compact(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken policy is reported; the turn goes on
            from xun.events import CompactionFailed

            await self.emit(CompactionFailed(reason=f"the compactor failed: {type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------ turn

    async def run(self, prompt: str, images: list[Any] | None = None, max_iterations: int | None = None) -> TurnFinished:
        """Add a user message and execute a turn."""
        self.conversation.add_user_message(prompt, images=images)
        return await self.execute(max_iterations=max_iterations)

    async def stream(self, prompt: str, max_iterations: int | None = None) -> AsyncIterator[Event]:
        """The same turn as `run`, as an async iterator of its events."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        previous = self.on_event
        self.on_event = queue.put_nowait

        async def runner() -> None:
            try:
                await self.run(prompt, max_iterations=max_iterations)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(runner())
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task
        finally:
            self.on_event = previous
            if not task.done():
                task.cancel()

    def last_reply(self) -> str:
        """The text of the newest assistant message ("" if none)."""
        for message in reversed(self.conversation.messages):
            if isinstance(message, RawOpenAIMessage) and message.role == "assistant":
                return self.conversation.content_to_text(message.raw.get("content"))
            if isinstance(message, UserMessage):
                break
        return ""

    async def execute(self, max_iterations: int | None = None) -> TurnFinished:
        """Run model calls and tools until the model stops calling tools or `max_iterations` is reached."""
        limit = max_iterations or DEFAULT_MAX_ITERATIONS
        c = self.conversation
        start = len(c.messages)
        prompt = c.messages[-1].text if c.messages and isinstance(c.messages[-1], UserMessage) else None
        self.sync_project_instructions()
        await self.emit(TurnStarted(prompt=prompt))
        self.last_error = None
        iterations = 0
        finished: TurnFinished | None = None
        try:
            while iterations < limit:
                iterations += 1
                await self._compact_before_call()
                reply = await self._call_model()
                calls = [call for _, call in sorted(reply.calls.items())]
                c.add_agent_message(reply.message())
                if valid_total_tokens(reply.usage) is not None:
                    c.record_usage(int(reply.usage.total_tokens), overhead_chars=self._schema_chars())
                else:  # a server that reports no usage: the calibrated estimate stands in for it
                    c.record_usage(c.estimated_tokens())
                await self.emit(AssistantMessage(content=reply.content, reasoning=reply.reasoning, tool_calls=len(calls)))
                await self.emit_usage(valid_usage(reply.usage))
                if not calls:
                    finished = TurnFinished(status="ok", iterations=iterations)
                    break
                await self._run_tools(calls)
                await self.emit_usage()
            else:
                await self.emit(Info(f"stopped after {limit} model calls (max_iterations)"))
                finished = TurnFinished(status="max_iterations", iterations=iterations)
        except asyncio.CancelledError:
            restored = self._settle_interrupted_turn(start)
            finished = TurnFinished(status="cancelled", iterations=iterations, restored_prompt=restored)
            raise
        except Exception as exc:  # the user's message stays in the conversation: /retry sends it again
            message = str(exc) or type(exc).__name__
            self.last_error = message
            self._answer_dangling_calls(start)
            await self.emit(Error(message=message, detail=type(exc).__name__))
            finished = TurnFinished(status="error", iterations=iterations, error=message)
        finally:
            self.sync_project_instructions()
            if finished is not None:
                await self.emit(finished)
        return finished

    def _settle_interrupted_turn(self, start: int) -> str | None:
        """After a cancel: answer dangling tool calls, and if the turn got no reply at all, take the user
        message back so the front end can put it into the prompt again."""
        self._answer_dangling_calls(start)
        popped = self.conversation.pop_last_message_if_user()
        return popped.text if popped is not None else None

    def _answer_dangling_calls(self, start: int) -> None:
        """Every tool call of this turn gets a result, so the history stays valid for the next request."""
        c = self.conversation
        answered = {m.raw.get("tool_call_id") for m in c.messages[start:] if isinstance(m, RawOpenAIMessage) and m.role == "tool"}
        for message in c.messages[start:]:
            if isinstance(message, RawOpenAIMessage) and message.role == "assistant":
                for call in message.raw.get("tool_calls") or ():
                    if call.get("id") not in answered:
                        c.add_tool_result(call.get("id", ""), CANCELLED_TOOL_RESULT)

    async def _call_model(self) -> _Reply:
        """One completion with retries on transient errors and one emergency summary on overflow."""
        attempts = self.config.retry.attempts
        compacted_for_overflow = False
        attempt = 0
        while True:
            attempt += 1
            try:
                return await within_deadline(self._stream_once(), self.config.provider.deadline)
            except asyncio.CancelledError:
                raise
            except Exception as raw_exc:
                exc = _classify(raw_exc)
                if isinstance(exc, ContextOverflowError) and not compacted_for_overflow and self.config.auto_compact.enabled:
                    compacted_for_overflow = True
                    await self.emit(Warning(f"the server says the context is too long ({exc}); summarising and retrying once"))
                    from xun.compact import compact_conversation

                    result = await compact_conversation(self, keep_recent=self.config.auto_compact.summary_keep_max,
                                                        instructions=self.config.compression.instructions, trigger="emergency")
                    if not result.compacted:
                        raise RuntimeError(f"the context is too long for the model and could not be compacted: {result.message}") from None
                    attempt -= 1
                    continue
                if isinstance(exc, ContextOverflowError):
                    done = "after an emergency summary" if compacted_for_overflow else "and automatic compaction is off"
                    raise RuntimeError(f"the context is too long for the model {done}: {exc}") from None
                if isinstance(exc, TransientServerError) and attempt < attempts:
                    delay = self.config.retry.delay(attempt, asked=_retry_after(raw_exc))
                    await self.emit(Retry(attempt=attempt, attempts=attempts, delay=round(delay, 3), reason=str(exc)))
                    await asyncio.sleep(delay)
                    continue
                if isinstance(exc, TransientServerError):
                    raise RuntimeError(f"the model call failed after {attempts} attempts: {exc}") from None
                raise exc from None

    async def _stream_once(self) -> _Reply:
        c = self.conversation
        request: dict[str, Any] = {
            "model": self.config.model.name,
            "messages": c.completion_params(),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = self.toolbox.schemas()
        if tools:
            request["tools"] = tools
        if self.config.model.temperature is not None:
            request["temperature"] = self.config.model.temperature
        reply = _Reply(reasoning_field=self.config.model.reasoning_field)
        stream = await self.client().chat.completions.create(**request)
        try:
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    reply.usage = chunk.usage
                for choice in chunk.choices or ():
                    await self._take_delta(reply, choice.delta)
                    if choice.finish_reason:
                        reply.finish_reason = choice.finish_reason
        finally:
            await stream.close()
        if reply.finish_reason is None:
            raise TransientServerError("the stream ended before the reply was complete")
        if not reply.content and not reply.calls and reply.finish_reason != "length":
            raise TransientServerError("the server sent an empty reply")
        return reply

    async def _take_delta(self, reply: _Reply, delta: Any) -> None:
        if delta is None:
            return
        extra = getattr(delta, "model_extra", None) or {}
        for name in ("reasoning_content", "reasoning"):
            value = extra.get(name, getattr(delta, name, None) if name in type(delta).model_fields else None)
            if isinstance(value, str) and value:
                if self.config.model.reasoning_field is None:
                    self.config.model.reasoning_field = name  # detected once, remembered for the session
                reply.reasoning_field = self.config.model.reasoning_field
                reply.reasoning += value
                await self.emit(ReasoningDelta(text=value))
                break
        if delta.content:
            reply.content += delta.content
            await self.emit(TextDelta(text=delta.content))
        for part in delta.tool_calls or ():
            call = reply.calls.setdefault(part.index, _PendingCall())
            if part.id:
                call.id = part.id
            function = part.function
            if function is not None:
                if function.name:
                    call.name += function.name
                if function.arguments:
                    call.arguments += function.arguments

    async def _run_tools(self, calls: list[_PendingCall]) -> None:
        """Run the calls of one reply concurrently; store the results in call order."""
        context = ToolContext.from_config(self.config, workdir=self.workdir, conversation=self.conversation,
                                          confirm=self.confirm, environ=self.environ)
        for call in calls:
            await self.emit(ToolCallStarted(id=call.id, name=call.name, arguments=call.arguments))
        outcomes = await gather_limited(self.toolbox.call(call.name, call.arguments, context) for call in calls)
        for call, outcome in zip(calls, outcomes, strict=True):
            self.conversation.add_tool_result(call.id, outcome.text)
            await self.emit(ToolCallFinished(
                id=call.id, name=call.name, arguments=call.arguments, result_chars=len(outcome.text),
                duration=round(outcome.duration, 4), is_error=outcome.is_error,
                error=outcome.text[:300] if outcome.is_error else None, denied=outcome.denied,
                truncated_chars=outcome.truncated_chars,
            ))
