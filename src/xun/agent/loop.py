"""The agent: an async loop on the official `openai` SDK, with compaction before every model call.

One turn: the compactor runs, one streamed chat completion is read (text, reasoning and tool-call
deltas), the tool calls run (in parallel, results stored in call order), and the loop repeats until the
model calls no tool or `max_iterations` is reached. Everything that happens is an event (`xun.base.events`)
sent to `on_event`; the engine never imports a front end.
"""

from __future__ import annotations

import asyncio
import codecs
import inspect
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from xun.agent.calibration import (
    RequestShape,
    believed_usage,
    count_current_request,
    discover,
    learn_estimate,
    learn_from_overflow,
    learn_server,
    request_shape,
    uncached_tokens_from,
)
from xun.agent.call_limits import raise_if_cancel_pending, within_deadline
from xun.agent.config import XunConfig, resolve_api_key
from xun.agent.failures import (
    ContextOverflowError,
    ContextStillTooLongError,
    ContextTooLargeError,
    EmptyStreamError,
    TransientServerError,
    classify,
    retry_after,
    server_address,
    server_unreached,
)
from xun.agent.sdk_request import open_chunk_stream
from xun.agent.streaming import PendingCall, Reply, check_complete, read_chunks
from xun.agent.tool_calls import ToolRound
from xun.agent.tools import ConfirmCallback, Toolbox, ToolContext, default_toolbox
from xun.agent.window import CONFIG, LearnedEstimates, LearnedWindows, ServerKnowledge, Window
from xun.base.arguments import DEFAULT_MAX_ITERATIONS
from xun.base.confined import open_regular_inside
from xun.base.events import (
    AssistantMessage,
    CompactionEvent,
    Error,
    Event,
    Info,
    Retry,
    ToolResultRestored,
    ToolResultsReclaimed,
    TurnFinished,
    TurnStarted,
    Usage,
    Warning,
)
from xun.compact.breakdown import first_tool_result
from xun.compact.policy import CompactorAbstract, compactor_from_config
from xun.compact.summary import ledger_budget
from xun.context.compaction_results import ToolCallCompactResult
from xun.context.conversation import DEFAULT_TOKENS_PER_CHAR, Conversation
from xun.context.messages import RawOpenAIMessage, SystemPrompt, UserMessage, message_length
from xun.context.prompt_cache import cached_tokens_of
from xun.context.usage import add_call, cost, price_for

PROJECT_INSTRUCTION_FILES = ("AGENTS.md", "Agents.md", "agents.md")
MAX_PROJECT_INSTRUCTION_BYTES = 256 * 1024
"""The most of AGENTS.md read into the context (a 1.5 GB one took 10.8 GB whole); the rest is cut, and
the section says so."""
PROJECT_SECTION = "AGENTS.md"
CANCELLED_REPLY_MARK = "\n\n[cancelled by the user]"
"""Ends a reply cut short by a cancel: what streamed is kept, and the model (and the user) see why it stops."""
OFFLINE_API_KEY = "xun-offline-no-key"

EventCallback = Callable[[Event], Awaitable[None] | None]
ConsentCallback = Callable[["Agent"], Awaitable[bool]]
SMALLEST_COMMON_WINDOW = 2048
"""llama-cpp-python's default n_ctx: below it an empty reply is not taken for an overflow."""


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
        self.compactor = compactor if compactor is not None else compactor_from_config(self.config)
        self.on_event = on_event
        self._last_event: Event | None = None
        """The event handed to `on_event` last: a usage event equal to it is not sent again."""
        self.confirm = confirm
        self.consent = consent
        self.environ = environ
        self._client = client
        self.last_error: str | None = None
        self.last_error_did_not_fit = False
        """The last turn failed because its request did not fit the window (refused before or by the server)."""
        self.reads_project_instructions = True
        self._shares_client = False  # set by inherit: a helper never closes its parent's client
        self._partial: Reply | None = None
        """The reply being streamed (None once it is complete): a cancel keeps what it holds."""
        self._tools = ToolRound()
        """This reply's tool calls: which began to run and which finished (a cancel says what became of each)."""
        self.offline = False
        """Talking to the offline demo server: the user's API key is not sent to it."""
        self.knowledge = ServerKnowledge()
        """The window and the tokenizer's measure, as learned this session (shared with helpers)."""
        self.learned_windows = LearnedWindows()
        self.learned_estimates = LearnedEstimates()
        self.sent: RequestShape | None = None
        """The last request as sent, which its reply's count is judged against and learnt from."""
        self.reply_budget: int | None = None
        """`max_tokens` of every request, when set (the summarizer's is bounded by what it replaces)."""
        self.last_finish_reason: str | None = None
        self.max_tokens_param = "max_tokens"
        """What a request calls the reply's limit (newer OpenAI models refuse `max_tokens`)."""
        self._empty_for_null = False
        self.clock: Callable[[], float] = time.time
        """Wall-clock seconds; the cache-aware policy's idle rule reads it (tests and benchmarks set it)."""
        self.bills_to: Agent | None = None
        """The agent whose session a helper's model calls are counted and billed in (None: this one's)."""

    # ----------------------------------------------------------------- setup

    @property
    def window(self) -> Window:
        """The context window and where the figure came from: the config, else what this session learned
        from an overflow, what the server said, or what an earlier session learned."""
        configured = self.config.model.context_window
        if configured is not None:
            source = self.config.source_of("model.context_window")
            return Window(configured, "configured" if source == "default" else f"configured: {source}", CONFIG)
        return self.knowledge.window()

    @property
    def threshold(self) -> int:
        return self.config.effective_threshold(self.window.tokens)

    def output_reserve(self, window: int) -> int:
        """Tokens of the window kept free for the reply (also the reply's `max_tokens` when the window is
        known: a reply that fills the window would leave no room for the next turn)."""
        if self.reply_budget is not None:
            return self.reply_budget
        configured = self.config.model.output_reserve
        if configured is not None:
            return min(configured, window // 2)
        return min(16384, max(256, window // 8), window // 2)

    def request_tokens(self) -> int:
        """The estimate of the next request's prompt: its messages and its tool definitions, calibrated by
        the server's last count (or its tokenizer). What the trigger, the window check and the gauge use."""
        c = self.conversation
        if c.total_tokens is None:  # no count to extend: the tool definitions are priced afresh
            c.overhead_chars = self._schema_chars()
        return c.estimated_tokens()

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
                    data = handle.read(MAX_PROJECT_INSTRUCTION_BYTES + 1)
                    size = os.fstat(handle.fileno()).st_size
                cut = len(data) > MAX_PROJECT_INSTRUCTION_BYTES
                # a character split at the cut is held back, not an error
                text = (
                    codecs.getincrementaldecoder("utf-8")()
                    .decode(data[:MAX_PROJECT_INSTRUCTION_BYTES], final=not cut)
                    .strip()
                )
                if cut:
                    text += (
                        f"\n\n[... {name} cut: only its first {MAX_PROJECT_INSTRUCTION_BYTES // 1024} KB "
                        f"of {size:,} bytes are read]"
                    )
            except (OSError, UnicodeDecodeError):
                continue
            if text:
                text = f"# Project instructions ({name})\n\n{text}"
                break
        self.conversation.set_persistent_section(PROJECT_SECTION, text)

    @classmethod
    def inherit(
        cls, agent: Agent, share_display: bool = False, copy_toolbox: bool = False, copy_command: bool = False
    ) -> Agent:
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
        child.bills_to = agent.bills_to or agent
        child.reads_project_instructions = False  # the summarizer must not see AGENTS.md
        child.offline = agent.offline
        child.knowledge = agent.knowledge
        child.max_tokens_param, child._empty_for_null = agent.max_tokens_param, agent._empty_for_null
        child.learned_windows = agent.learned_windows
        child.learned_estimates = agent.learned_estimates
        child.conversation.tokens_per_char = agent.conversation.tokens_per_char
        return child

    def _schema_chars(self) -> int:
        """Characters of the tool schemas a request carries (part of every reported prompt)."""
        return self.toolbox.schema_chars()

    async def aclose(self) -> None:
        """Close the HTTP client (front ends call this when they stop; a helper shares its parent's)."""
        if self._client is not None and not self._shares_client:
            await self._client.close()
        self._client = None

    def client(self) -> Any:
        """The `openai.AsyncOpenAI` client, built on first use (the SDK is imported lazily)."""
        if self._client is None:
            import openai

            from xun.agent.bounded_http import bounded_client

            key = None if self.offline else resolve_api_key(self.config, self.environ)
            key = key or OFFLINE_API_KEY
            self._client = openai.AsyncOpenAI(
                api_key=key,
                base_url=self.config.provider.base_url,
                max_retries=0,
                timeout=self.config.provider.timeout,
                http_client=bounded_client(),
            )
        return self._client

    # ---------------------------------------------------------------- events

    def summarizer(self) -> Agent:
        """The helper that writes one summary (`CompactionHost.summarizer`): no tools, no display."""
        return type(self).inherit(self, share_display=False, copy_toolbox=False, copy_command=False)

    async def emit(self, event: Event) -> None:
        """Record compaction events in the session's log, then hand the event to the front end."""
        if isinstance(event, CompactionEvent) and event.logged:
            self.conversation.compaction_log.append(event.to_json())
        repeated = isinstance(event, Usage) and event == self._last_event
        self._last_event = event
        if repeated:  # e.g. after the tools and again before the next call, nothing between: said once
            return
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result

    async def emit_usage(self, usage: Any = None, disbelieved: bool = False) -> None:
        """The figures now; `usage` is the server's report of the call just made, when it sent one
        (`disbelieved`: it sent one that could not be true)."""
        c = self.conversation
        window = self.window
        await self.emit(
            Usage(
                total_tokens=c.total_tokens,
                estimated_tokens=self.request_tokens(),
                threshold=self.threshold,
                context_window=window.tokens,
                prompt_tokens=getattr(usage, "prompt_tokens", None),
                completion_tokens=getattr(usage, "completion_tokens", None),
                source="server" if usage is not None else "disbelieved" if disbelieved else "estimate",
                window_source=window.source if window.known else None,
                cached_tokens=c.prompt_cache.last_cached if usage is not None else None,
                session_totals=dict(self.session_totals()),
                session_cost=self.session_cost(),
            )
        )

    # ------------------------------------------------------- the window and the tokenizer

    def auth_headers(self) -> dict[str, str]:
        key = None if self.offline else resolve_api_key(self.config, self.environ)
        return {"Authorization": f"Bearer {key or OFFLINE_API_KEY}"}

    def start_discovery(self) -> Any:
        """Ask the server for its window in the background (front ends call this right after opening a
        session, so the answer is there before the first prompt); returns the task."""
        k = self.knowledge
        if k.discovery is None:
            k.discovery = asyncio.ensure_future(discover(self))
        return k.discovery

    async def _fit_window(self, trigger: str = "auto") -> None:
        """Never send what cannot fit: over the window, compact first; a prompt too large to fit even
        alone raises ContextTooLargeError, and so does a context that compaction cannot bring under it."""
        window = self.window
        if window.tokens is None:
            return
        budget = window.tokens - self.output_reserve(window.tokens)
        needed = self.request_tokens()
        if needed <= budget:
            return
        floor = self.floor_tokens()
        if floor > budget:
            raise ContextTooLargeError(floor, budget, window, prompt=self._last_is_user())
        if not self.config.auto_compact.enabled:
            raise ContextTooLargeError(
                needed,
                budget,
                window,
                prompt=False,
                detail="automatic compaction is off; compact by hand (/compact, xun compact)",
            )
        from xun.compact.summary import fit_to_window

        if await fit_to_window(self, budget, trigger=trigger, ask_model=not self.compactor.paused):
            await self.compactor.summary_failed(self)
        needed = self.request_tokens()
        if needed > budget:
            raise ContextTooLargeError(
                needed, budget, window, prompt=False, detail="compaction could not bring it under"
            )

    def _last_is_user(self) -> bool:
        messages = self.conversation.messages
        return bool(messages) and isinstance(messages[-1], UserMessage)

    def floor_tokens(self) -> int:
        """The smallest request compaction could make: the system message, the newest user message (kept
        word for word) and the tool definitions, at the calibrated ratio."""
        c = self.conversation
        messages = c.messages
        chars = message_length(messages[0]) if messages and isinstance(messages[0], SystemPrompt) else 0
        last_user = next((m for m in reversed(messages) if isinstance(m, UserMessage)), None)
        if last_user is not None:
            chars += message_length(last_user)
        fixed = c.fixed_tokens if c.fixed_tokens is not None else round(self._schema_chars() * c.tokens_per_char)
        return round(chars * c.tokens_per_char) + fixed

    # ------------------------------------------------------------ compaction

    async def reclaim_tool_results(
        self, keep_max: int | None = None, trigger: str = "manual", tokens_before: int | None = None
    ) -> ToolCallCompactResult:
        """Tier 1 now, reported as an event (also what `/compact toolcall` and F6 run)."""
        from xun.compact.breakdown import reclaim_preview

        c = self.conversation
        before = tokens_before if tokens_before is not None else self.request_tokens()
        keep = keep_max if keep_max is not None else self.config.auto_compact.toolcall_keep_max
        result = await c.areclaim_tool_results(keep_max=keep)  # the index is written in a worker thread
        first = first_tool_result(c, result.reclaimed_ids)
        if first is not None:
            await count_current_request(self)
        after = self.request_tokens()
        reason = "" if result.reclaimed_count else reclaim_preview(c, keep).why_nothing
        await self.emit(
            ToolResultsReclaimed(
                ids=result.reclaimed_ids,
                count=result.reclaimed_count,
                arguments=result.arguments_count,
                fraction=result.reclaimed_fraction,
                tokens_before=before,
                tokens_after=after,
                trigger=trigger,
                reason=reason,
                cache_miss_tokens=await uncached_tokens_from(self, first) if first is not None else None,
                saved_per_call=before - after if first is not None else None,
            )
        )
        for warning in c.take_recall_warnings():  # the search index could not take the reclaimed results
            await self.emit(Warning(warning))
        return result

    async def restore_tool_result(self, tool_call_id: str) -> None:
        """Put a reclaimed original back into the context (raises KeyError/ValueError as the conversation does)."""
        before = self.request_tokens()
        await self.conversation.arestore_tool_result(tool_call_id)
        await count_current_request(self)
        after, first = self.request_tokens(), first_tool_result(self.conversation, [tool_call_id])
        await self.emit(
            ToolResultRestored(
                id=tool_call_id,
                tokens_before=before,
                tokens_after=after,
                trigger="manual",
                cache_miss_tokens=await uncached_tokens_from(self, first) if first is not None else None,
                saved_per_call=before - after,
            )
        )
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
        except TimeoutError:
            await self.emit(Info(f"no answer within {self.config.auto_compact.ask_timeout:g}s; summarising"))
            return True

    async def _compact_before_call(self) -> None:
        """The preflight of every model call: learn the window, run the policy, make the request fit. A
        usage event first shows the figure that is judged; another follows when compaction changed it."""
        await learn_server(self)
        await count_current_request(self)
        judged = self.request_tokens()
        await self.emit_usage()
        self.conversation.ledger_max_chars = ledger_budget(self)
        try:
            await self.compactor.auto_compact(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken policy is reported; the turn goes on
            from xun.base.events import CompactionFailed

            await self.emit(CompactionFailed(reason=f"the compactor failed: {type(exc).__name__}: {exc}"))
        await self._fit_window()
        if self.request_tokens() != judged:  # compaction changed it: counted again
            await count_current_request(self)
            await self._fit_window()
            await self.emit_usage()

    # ------------------------------------------------------------------ turn

    async def run(
        self, prompt: str, images: list[Any] | None = None, max_iterations: int | None = None
    ) -> TurnFinished:
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
        prompt = c.messages[-1].text if c.messages and isinstance(c.messages[-1], UserMessage) else None
        self.sync_project_instructions()
        await self.emit(TurnStarted(prompt=prompt))
        self.last_error = None
        self.last_error_did_not_fit = False
        iterations = 0
        unasked_rounds = 0  # rounds with a call refused as nobody can confirm it: the second ends the turn
        finished: TurnFinished | None = None
        answered: list[dict[str, Any]] = []
        self._partial, self._tools = None, ToolRound()
        try:
            while iterations < limit:
                iterations += 1
                raise_if_cancel_pending()  # each step starts only if no cancel is pending
                await self._compact_before_call()
                reply = await self._call_model()
                calls = [call for _, call in sorted(reply.calls.items())]
                c.add_agent_message(reply.message())
                usage = await believed_usage(self, reply.usage)
                if usage is not None:  # a server that reports nothing leaves the estimate as it is, labelled so
                    await learn_estimate(self, int(usage.prompt_tokens))
                    c.record_usage(int(usage.total_tokens), overhead_chars=self._schema_chars())
                elif reply.usage is not None:  # not believed: nor the last report, nor the ratio its counts taught
                    c.total_tokens = c.usage_chars = None
                    if c.fixed_tokens is None:
                        c.tokens_per_char = DEFAULT_TOKENS_PER_CHAR
                self._record_cache(usage, reply)
                await self.emit(
                    AssistantMessage(content=reply.content, reasoning=reply.reasoning, tool_calls=len(calls))
                )
                await self.emit_usage(usage, disbelieved=usage is None and reply.usage is not None)
                if not calls:
                    finished = TurnFinished(status="ok", iterations=iterations)
                    break
                raise_if_cancel_pending()
                await self._run_tools(calls)
                await self.emit_usage()
                if self.confirm is None and self._tools.denied():
                    unasked_rounds += 1
                    if unasked_rounds == 2:
                        finished = await self._stop_unasked(iterations)
                        break
            else:
                await self.emit(Info(f"stopped after {limit} model calls (max_iterations)"))
                finished = TurnFinished(status="max_iterations", iterations=iterations)
        except asyncio.CancelledError:
            settled = len(c.messages)
            restored = self._settle_interrupted_turn()
            answered = [m.raw for m in c.messages[settled:] if isinstance(m, RawOpenAIMessage) and m.role == "tool"]
            finished = TurnFinished(status="cancelled", iterations=iterations, restored_prompt=restored)
            raise
        except Exception as exc:  # the user's message stays in the conversation: /retry sends it again
            message = str(exc) or type(exc).__name__
            self.last_error = message
            self.last_error_did_not_fit = isinstance(
                exc, ContextTooLargeError | ContextOverflowError | ContextStillTooLongError
            )
            self._tools.answer_dangling(self.conversation)
            restored = None
            if isinstance(exc, ContextTooLargeError) and exc.prompt:  # never sent: it goes back to the user
                popped = c.pop_last_message_if_user()
                restored = popped.text if popped is not None else None
            await self.emit(Error(message=message, detail=type(exc).__name__))
            finished = TurnFinished(status="error", iterations=iterations, error=message, restored_prompt=restored)
        finally:
            self.sync_project_instructions()
            if finished is not None and finished.status == "cancelled":
                await self._tools.report_settled(answered, self.conversation, self.emit)
            if finished is not None:
                await self.emit(finished)
        return finished

    async def _stop_unasked(self, iterations: int) -> TurnFinished:
        """A call needing confirmation was refused, the model was told, and it called one again: with nobody
        to ask (`xun run` without a terminal) every further try is refused too, and a model that keeps
        trying burnt the whole turn's 500 calls. The refusals are in the conversation."""
        names = self._tools.denied()
        message = (
            f"the turn stopped: {', '.join(names)} needed the user's confirmation again, and nobody can be asked "
            "here (auto_confirm is off); nothing was done"
        )
        self.last_error = message
        await self.emit(Error(message=message, detail="NobodyToConfirm"))
        return TurnFinished(status="error", iterations=iterations, error=message)

    def _record_cache(self, usage: Any, reply: Reply) -> None:
        """Keep the call's prompt-cache figures (when the server sent believable ones) and when it was made."""
        usage = usage if getattr(usage, "prompt_tokens", None) is not None else None
        prompt = int(usage.prompt_tokens) if usage is not None else None
        record = self.conversation.prompt_cache
        record.record(prompt, cached_tokens_of(usage, reply.timings), self.clock())
        if usage is not None:
            add_call(self.session_totals(), prompt, getattr(usage, "completion_tokens", None), record.last_cached)

    def session_totals(self) -> dict[str, int]:
        """The session's usage totals (`xun.context.usage`), which a helper's calls (the summarizer's) count into
        too."""
        return (self.bills_to or self).conversation.usage_totals

    def session_cost(self) -> float | None:
        """What the session's calls cost by the `pricing` of its model (None when it has no price)."""
        owner = self.bills_to or self
        return cost(owner.conversation.usage_totals, price_for(owner.config.pricing, owner.config.model.name))

    def _settle_interrupted_turn(self) -> str | None:
        """After a cancel: answer dangling tool calls, keep a reply cut short (marked as cancelled), and if
        the turn got no reply at all, take the user message back so the front end can put it into the
        prompt again."""
        self._tools.answer_dangling(self.conversation)
        partial, self._partial = self._partial, None
        if partial is not None and partial.content.strip():
            self.conversation.add_agent_message(
                {"role": "assistant", "content": partial.content + CANCELLED_REPLY_MARK}
            )
            return None
        popped = self.conversation.pop_last_message_if_user()
        return popped.text if popped is not None else None

    async def _call_model(self) -> Reply:
        """One completion with retries on transient errors; on an overflow, learn the window, compact to
        fit it and try once more (never the same oversized request again)."""
        attempts = self.config.retry.attempts
        overflowed = False
        attempt = 0
        while True:
            attempt += 1
            estimate = self.request_tokens()
            self.sent = request_shape(self, reply_limit=self._reply_limit())
            try:
                self.client()  # made (the SDK imported) before the deadline starts: it bounds the call, not the import
                reply = await within_deadline(self._stream_once(), self.config.provider.deadline)
            except asyncio.CancelledError:
                raise
            except Exception as raw_exc:
                exc = classify(raw_exc)
                if isinstance(exc, EmptyStreamError) and self._empty_means_overflow(estimate):
                    exc = ContextOverflowError(
                        f"the server sent an empty reply to a request of about {estimate:,} tokens "
                        f"({self.window.describe()})"
                    )
                if isinstance(exc, ContextOverflowError):
                    if overflowed:
                        raise ContextStillTooLongError(
                            f"the context is too long for the model even after compacting to fit "
                            f"{self.window.describe()}: {exc}"
                        ) from None
                    overflowed = True
                    await learn_from_overflow(self, exc, estimate)
                    await self.emit(
                        Warning(
                            f"the server says the context is too long ({exc}); now {self.window.describe()}: "
                            "compacting to fit it and retrying once"
                        )
                    )
                    await self._fit_window(trigger="emergency")
                    await self.emit_usage()
                    attempt -= 1
                    continue
                if self._adapt_request(raw_exc):
                    attempt -= 1
                    continue
                unreached = isinstance(exc, TransientServerError) and server_unreached(raw_exc)
                if unreached:
                    exc = TransientServerError(f"{exc} (server at {server_address(self.client().base_url)})")
                if isinstance(exc, TransientServerError) and attempt < attempts:
                    delay = self.config.retry.delay(attempt, asked=retry_after(raw_exc))
                    await self.emit(Retry(attempt=attempt, attempts=attempts, delay=round(delay, 3), reason=str(exc)))
                    await asyncio.sleep(delay)
                    continue
                if isinstance(exc, TransientServerError):
                    hint = "; `--offline` uses the offline demo model instead" if unreached and not self.offline else ""
                    raise RuntimeError(f"the model call failed after {attempts} attempts: {exc}{hint}") from None
                raise exc from None
            k = self.knowledge
            k.largest_fit = max(k.largest_fit, estimate)
            return reply

    def _empty_means_overflow(self, estimate: int) -> bool:
        """An empty 200 reply is an overflow when the request is near or above the known window, or, when
        the window is unknown, near or above the smallest window servers commonly run with and larger than
        any request the server answered (an estimate can be a little low)."""
        window = self.window
        if window.tokens is not None:
            return estimate >= window.tokens * 0.9
        return estimate > self.knowledge.largest_fit and estimate >= SMALLEST_COMMON_WINDOW * 0.9

    def _adapt_request(self, exc: BaseException) -> bool:
        """Whether the server refused a form of the request that has another accepted form (then switch
        to it, once): `max_completion_tokens` for newer OpenAI models, and "" instead of null for the
        content of an assistant message that only calls tools (llama-cpp-python's validation)."""
        text = str(exc)
        if self.max_tokens_param == "max_tokens" and "max_tokens" in text and "max_completion_tokens" in text:
            self.max_tokens_param = "max_completion_tokens"
            return True
        if not self._empty_for_null and "content" in text and "valid string" in text:
            self._empty_for_null = True
            return True
        return False

    def request(self, stream: bool) -> dict[str, Any]:
        """The chat-completion request for the conversation as it is now."""
        messages = self.conversation.completion_params()
        if self._empty_for_null:
            messages = [
                {**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m
                for m in messages
            ]
        request: dict[str, Any] = {"model": self.config.model.name, "messages": messages}
        if stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        tools = self.toolbox.schemas()
        if tools:
            request["tools"] = tools
        if self.config.model.temperature is not None:
            request["temperature"] = self.config.model.temperature
        limit = self._reply_limit()
        if limit is not None:
            request[self.max_tokens_param] = limit
        return request

    def _reply_limit(self) -> int | None:
        """Every request's `max_tokens`: the reply budget when set, else the output reserve of a known window,
        else a configured reserve (the reply size the user asked for; unset, the server's own limit stands)."""
        window = self.window.tokens
        if self.reply_budget is not None:
            return self.reply_budget
        if window is None:
            return self.config.model.output_reserve
        return self.output_reserve(window)

    async def _stream_once(self) -> Reply:
        reply = self._partial = Reply(reasoning_field=self.config.model.reasoning_field)
        async with open_chunk_stream(self.client(), self.request(stream=True)) as stream:
            chunks = await read_chunks(stream, reply, self.config.model, self.emit)
        self.last_finish_reason = reply.finish_reason
        check_complete(reply, chunks)
        self._partial = None
        return reply

    async def _run_tools(self, calls: list[PendingCall]) -> None:
        """Run the calls of one reply concurrently; store the results in call order."""
        context = ToolContext.from_config(
            self.config,
            workdir=self.workdir,
            conversation=self.conversation,
            confirm=self.confirm,
            environ=self.environ,
        )
        self._tools = ToolRound()
        await self._tools.run(calls, self.toolbox, context, self.conversation, self.emit)
