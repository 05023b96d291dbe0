"""The agent: an async loop on the official `openai` SDK, with compaction before every model call.

One turn: the compactor runs, one streamed chat completion is read (text, reasoning and tool-call
deltas), the tool calls run (in parallel, results stored in call order), and the loop repeats until the
model calls no tool or `max_iterations` is reached. Everything that happens is an event (`xun.base.events`)
sent to `on_event`; the engine never imports a front end.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import json
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from xun.agent.call_limits import gather_limited, raise_if_cancel_pending, valid_usage, within_deadline
from xun.compact.breakdown import first_tool_result, tokens_from
from xun.compact.policy import CompactorAbstract, compactor_from_config
from xun.compact.summary import ledger_budget
from xun.context.compaction_results import ToolCallCompactResult
from xun.agent.config import XunConfig, resolve_api_key
from xun.base.arguments import DEFAULT_MAX_ITERATIONS
from xun.base.confined import open_regular_inside
from xun.context.conversation import DEFAULT_TOKENS_PER_CHAR, MESSAGE_TOKENS, TOKENS_PER_CHAR_RANGE, Conversation
from xun.context.messages import RawOpenAIMessage, SystemPrompt, UserMessage, message_length
from xun.context.prompt_cache import cached_tokens_of
from xun.context.usage import add_call, cost, price_for
from xun.base.events import (
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
from xun.agent.sdk_request import open_chunk_stream, untransformed
from xun.agent.tools import ConfirmCallback, Toolbox, ToolContext, ToolOutcome, default_toolbox
from xun.agent.window import (
    ASSUMED,
    CONFIG,
    LEARNED,
    UNKNOWN,
    TEMPLATE,
    TEXT,
    Calibration,
    LearnedEstimates,
    LearnedWindows,
    ServerKnowledge,
    Window,
    believable_count,
    count_prompt,
    count_request,
    count_tail,
    count_tokens,
    discover_window,
    is_overflow_text,
    overflow_window,
    request_text,
    requested_tokens,
)

PROJECT_INSTRUCTION_FILES = ("AGENTS.md", "Agents.md", "agents.md")
MAX_PROJECT_INSTRUCTION_BYTES = 256 * 1024
"""The most of AGENTS.md read into the context (a 1.5 GB one took 10.8 GB whole); the rest is cut, and
the section says so."""
PROJECT_SECTION = "AGENTS.md"
CANCELLED_TOOL_RESULT = "[Cancelled] The user cancelled the turn before this tool call ran; it did not run."
INTERRUPTED_TOOL_RESULT = ("[Cancelled] The user cancelled the turn while this tool call was running: it was "
                           "interrupted and may have run in part or in full, so check its effects before running it again.")
"""A cancel keeps the real result of a call that had finished; these say what became of the others."""
CANCELLED_REPLY_MARK = "\n\n[cancelled by the user]"
"""Ends a reply cut short by a cancel: what streamed is kept, and the model (and the user) see why it stops."""
OFFLINE_API_KEY = "xun-offline-no-key"

EventCallback = Callable[[Event], Awaitable[None] | None]
ConsentCallback = Callable[["Agent"], Awaitable[bool]]


PREPARE_WAIT = 3.0
"""Seconds a model call waits for window discovery still under way (front ends start it early)."""
CALIBRATION_SAMPLE = (
    "Please read src/app.py and tell me why the tests in tests/test_app.py fail since yesterday's change; "
    "run `make test` afterwards, and keep the public names as they are. The error was: TypeError: "
    "expected str, got None (line 42)."
)
"""Prose with a path, a command and an error line: what the tokenizer is measured on in a new session."""
CALIBRATION_DEADLINE = 30.0
"""Seconds the calibration's single-token request may take in all (it is only a measure)."""
COUNT_DEADLINE = 10.0
"""Seconds the count of a request before a call may take in all (without it, the ratio's estimate stands)."""
CALIBRATION_MIN_CHARS = 400
"""Below this much conversation text, the sample is measured instead (a ratio of a few words misleads)."""
SMALLEST_COMMON_WINDOW = 2048
"""llama-cpp-python's default n_ctx: below it an empty reply is not taken for an overflow."""


class TransientServerError(Exception):
    """A model call that may succeed when tried again (5xx, timeout, dropped or broken stream)."""


class EmptyStreamError(TransientServerError):
    """The server answered 200 and then sent nothing at all (how llama.cpp servers refuse an overflow)."""


class ContextOverflowError(Exception):
    """The server refused the request as longer than the model's context window."""

    def __init__(self, message: str, window: int | None = None, requested: int | None = None) -> None:
        super().__init__(message)
        self.window = window
        self.requested = requested


class ContextStillTooLongError(RuntimeError):
    """The server refused a request as too long again, after compacting to fit the window it named."""


class ContextTooLargeError(Exception):
    """Nothing was sent: the request cannot fit the model's window, even after compaction.

    `prompt` is True when the newest user message alone (with the system prompt and the tool
    definitions) is too large: the front ends give it back to the user instead of keeping it."""

    def __init__(self, needed: int, budget: int, window: Window, prompt: bool, detail: str = "") -> None:
        self.needed, self.budget, self.window, self.prompt = needed, budget, window, prompt
        what = "the prompt" if prompt else "the context"
        text = (f"{what} does not fit the model's context window: about {needed:,} tokens are needed and "
                f"{budget:,} are available ({window.describe()}, less {window.tokens - budget:,} kept for the reply)")
        if prompt:
            text += "; nothing was sent. Shorten the prompt, or split it over several turns"
        super().__init__(text + (f"; {detail}" if detail else ""))


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a request holds, as a count of it is judged (`believable_count`)."""

    chars: int
    """Characters of its messages' text (`Conversation.estimated_message_length`)."""
    messages: int
    tool_chars: int
    images: int = 0
    reply_limit: int | None = None
    """Its `max_tokens`: no reply to it is longer."""

    def believes(self, tokens: Any) -> bool:
        return believable_count(tokens, self.chars, self.messages, self.tool_chars, self.images)

    def describe(self) -> str:
        tools = f" and {self.tool_chars:,} of tool definitions" if self.tool_chars else ""
        return f"a request of {self.chars:,} characters in {self.messages:,} messages{tools}"


def _figure(value: Any) -> str:
    """A figure a server sent, as a message quotes it (never its text: it may be anything)."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "no"


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
    timings: Any = None
    """llama.cpp's server's `timings` (its prompt-cache figure), when a chunk carried them."""
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


def _error_text(exc: BaseException) -> str:
    """The error's message and body, where servers put their words (and figures) about an overflow."""
    body = getattr(exc, "body", None)
    try:
        body_text = json.dumps(body, ensure_ascii=False) if body is not None else ""
    except (TypeError, ValueError):
        body_text = str(body)
    return f"{exc} {body_text}"


def _classify(exc: BaseException) -> Exception:
    """Map SDK and transport errors to what the loop does with them: retry, compact, or fail."""
    import openai

    from xun.agent.bounded_http import ReplyRefused, cut_note

    if isinstance(exc, ReplyRefused):
        return RuntimeError(f"the model call failed: {exc}; the reply was dropped and the call not retried (a server "
                            "that sends that sends it again)")
    if isinstance(exc, openai.APIStatusError) and (note := cut_note(exc.response)):
        exc.message += note  # the status still decides what is done; the words say the body was cut
        exc.args = (exc.message,)
    if isinstance(exc, openai.APIError) and not isinstance(exc, (openai.APIConnectionError, openai.APIResponseValidationError)):
        text = _error_text(exc)
        status = getattr(exc, "status_code", None)
        if (status is None or status in (400, 413, 422) or status >= 500) and is_overflow_text(text):
            return ContextOverflowError(str(exc), window=overflow_window(text), requested=requested_tokens(text))
    if isinstance(exc, openai.BadRequestError):
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


def _unreached(exc: BaseException) -> bool:
    """Whether the server was never reached or stopped answering (no HTTP status): then where xun was
    connecting is what the user needs to know."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # (timeouts too)
        return True
    return type(exc).__module__.startswith(("httpx", "httpcore", "anyio")) or isinstance(exc, (ConnectionError, TimeoutError))


def server_address(url: object) -> str:
    """A base URL as messages name it: scheme, host, port and path, never a user, password or query
    (they may hold a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(str(url))
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:
        host, port = parts.hostname or "", None
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{host}:{port}" if port else host, parts.path.rstrip("/"), "", ""))


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
        self._partial: _Reply | None = None
        """The reply being streamed (None once it is complete): a cancel keeps what it holds."""
        self._tools_running: set[str] = set()
        """Ids of this reply's tool calls that began to run (confirmed, if they ask); a cancel says they may have run."""
        self._tools_done: dict[str, ToolOutcome] = {}
        """Outcomes of this reply's tool calls that finished: a cancel keeps them, though not yet recorded."""
        self.offline = False
        """Talking to the offline demo server: the user's API key is not sent to it."""
        self.knowledge = ServerKnowledge()
        """The window and the tokenizer's measure, as learned this session (shared with helpers)."""
        self.learned_windows = LearnedWindows()
        self.learned_estimates = LearnedEstimates()
        self._sent: _Shape | None = None
        """The last request as sent, which its reply's count is judged against and learnt from."""
        self.reply_budget: int | None = None
        """`max_tokens` of every request, when set (the summarizer's is bounded by what it replaces)."""
        self.last_finish_reason: str | None = None
        self._max_tokens_param = "max_tokens"
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
                text = codecs.getincrementaldecoder("utf-8")().decode(data[:MAX_PROJECT_INSTRUCTION_BYTES],
                                                                     final=not cut).strip()
                if cut:
                    text += (f"\n\n[... {name} cut: only its first {MAX_PROJECT_INSTRUCTION_BYTES // 1024} KB "
                             f"of {size:,} bytes are read]")
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
        child.bills_to = agent.bills_to or agent
        child.reads_project_instructions = False  # the summarizer must not see AGENTS.md
        child.offline = agent.offline
        child.knowledge = agent.knowledge
        child._max_tokens_param, child._empty_for_null = agent._max_tokens_param, agent._empty_for_null
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
                api_key=key, base_url=self.config.provider.base_url, max_retries=0,
                timeout=self.config.provider.timeout, http_client=bounded_client(),
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
        await self.emit(Usage(
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
        ))

    # ------------------------------------------------------- the window and the tokenizer

    def _shape(self, start: int = 0, reply_limit: int | None = None) -> _Shape:
        """The request as it stands, as a count of it is judged; from message `start`, its tail (no tools)."""
        c = self.conversation
        messages = c.messages[start:] if start else c.messages
        chars = sum(message_length(m) for m in messages) if start else c.estimated_message_length()
        images = sum(len(m.images) for m in messages if isinstance(m, UserMessage))
        return _Shape(chars, len(messages), 0 if start else self._schema_chars(), images, reply_limit)

    async def _doubt(self, what: str, outcome: str = "xun's own estimate stands in") -> None:
        """Say, once a session, that a figure from the server was not believed, and what stands in for it."""
        k = self.knowledge
        if not k.doubted:
            k.doubted = True
            await self.emit(Warning(f"{what}: no count can be that, so xun does not believe it; {outcome} "
                                    "(said once a session)"))

    def _believes_measure(self, tokens_per_char: float, fixed_tokens: int) -> bool:
        """Whether a measure of the tokenizer (a remembered one, or the conversation's) says of the request as
        it stands what a count of it could say: a fixed cost no request could have is dropped, not kept."""
        shape, c = self._shape(), self.conversation
        estimate = round(shape.chars * tokens_per_char) + MESSAGE_TOKENS * shape.messages + fixed_tokens
        return not c.messages or shape.believes(estimate)

    async def _believed_usage(self, usage: Any) -> Any:
        """The reply's usage when it can be true of the request just sent: whole numbers (`valid_usage`), the
        prompt a count of that request could be (`believable_count`), the total no less than the prompt, and
        neither the completion nor the total's rest longer than the reply's `max_tokens`. Else None, said once."""
        if usage is None:
            return None
        sent, believed = self._sent, valid_usage(usage)
        prompt, total = getattr(usage, "prompt_tokens", None), getattr(usage, "total_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if believed is not None and sent is not None:
            if isinstance(prompt, int) and isinstance(total, int) and sent.believes(prompt) and total >= prompt:
                reply_tokens = max(completion or 0, total - prompt)
                if sent.reply_limit is not None and reply_tokens > sent.reply_limit:
                    believed = None
            else:
                believed = None
        if believed is None:
            await self._doubt(f"the server reported {_figure(prompt)} prompt, {_figure(completion)} completion and "
                              f"{_figure(total)} total tokens for {sent.describe() if sent else 'a request'}")
        return believed

    def _auth_headers(self) -> dict[str, str]:
        key = None if self.offline else resolve_api_key(self.config, self.environ)
        return {"Authorization": f"Bearer {key or OFFLINE_API_KEY}"}

    def start_discovery(self) -> Any:
        """Ask the server for its window in the background (front ends call this right after opening a
        session, so the answer is there before the first prompt); returns the task."""
        k = self.knowledge
        if k.discovery is None:
            k.discovery = asyncio.ensure_future(self._discover())
        return k.discovery

    async def _discover(self) -> None:
        k = self.knowledge
        base_url, model = self.config.provider.base_url, self.config.model.name
        k.remembered = self.learned_windows.get(base_url, model)
        if k.calibration is None:  # one remembered from before the server's way of counting was kept is measured again
            remembered = self.learned_estimates.get(base_url, model)
            k.calibration = remembered if remembered is not None and remembered.tokenizer else None
        if self.config.model.context_window is None and base_url:
            try:
                k.discovered = await discover_window(base_url, model, self._auth_headers())
            except Exception:  # noqa: BLE001 - discovery is best effort; the window stays unknown
                k.discovered = UNKNOWN
        await self._calibrate_once()

    async def _learn_server(self) -> None:
        """Before a model call: the window and the tokenizer's measure (waiting a bounded time for the
        discovery that front ends start when the session opens), applied to this conversation."""
        task = self.start_discovery()
        if not task.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), PREPARE_WAIT)
        if not task.done() and self._estimate_would_act():  # the measure under way decides: wait for it
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), CALIBRATION_DEADLINE)
        k, c = self.knowledge, self.conversation
        fixed = k.calibration.fixed_for(bool(self.toolbox.schemas())) if k.calibration is not None else 0
        if k.calibration is not None and not self._believes_measure(k.calibration.tokens_per_char, fixed):
            await self._drop_measure(f"the remembered measure of the server's tokenizer puts the fixed cost of "
                                     f"{self._shape().describe()} at {fixed:,} tokens")  # then measured again
        if c.fixed_tokens is not None and not self._believes_measure(c.tokens_per_char, c.fixed_tokens):
            await self._doubt(f"the session's measure of the server's tokenizer puts the fixed cost of "
                              f"{self._shape().describe()} at {c.fixed_tokens:,} tokens")
            c.fixed_tokens = None
        await self._calibrate_once()
        if k.calibration is not None and c.fixed_tokens is None and c.total_tokens is None:
            c.calibrate(k.calibration.tokens_per_char, k.calibration.fixed_for(bool(self.toolbox.schemas())))

    def _estimate_would_act(self) -> bool:
        """Whether the estimate as it stands would compact or refuse the request (an uncalibrated one prices
        the tool definitions at the prose ratio, which a server's template may render far cheaper, or not
        at all: llama-cpp-python's probe of them takes seconds on a small machine)."""
        needed, window = self.request_tokens(), self.window.tokens
        over_window = window is not None and needed > window - self.output_reserve(window)
        return over_window or (self.config.auto_compact.enabled and needed > self.threshold)

    async def _calibrate_once(self) -> None:
        """Once per session, unless an earlier session's measure of this server is remembered: measure
        its tokenizer (a resumed session too: the summarizer's requests are planned with it)."""
        k, c = self.knowledge, self.conversation
        if k.calibrated or k.calibration is not None or not self.config.provider.base_url:
            return
        k.calibrated = True
        calibration = await self._calibrate()
        if calibration is not None:
            k.calibration = calibration
            c.calibrate(calibration.tokens_per_char, calibration.fixed_for(bool(self.toolbox.schemas())))
            # remembered at once: a server that reports no usage in a stream (llama-cpp-python) never corrects it
            problem = self.learned_estimates.remember(self.config.provider.base_url, self.config.model.name, calibration)
            if problem:
                await self.emit(Warning(problem))

    async def _calibrate(self) -> Calibration | None:
        """Measure the server's tokenizer: its tokenize endpoint counts the conversation's text (or, in an
        empty session, a sample of prose), and one request for a single token (only to a server that has
        such an endpoint: a local one) counts the whole prompt with the tool definitions, so the estimate
        of what a request costs besides its text is the server's own."""
        c = self.conversation
        if c.estimated_message_length() - sum(message_length(m) for m in c.messages if m.role == "system") >= CALIBRATION_MIN_CHARS:
            params, probe = c.completion_params(), self._shape()
        else:  # too little text to measure: the system prompt and a sample of prose
            system = [m.completion_param() for m in c.messages]
            params = [*system, {"role": "user", "content": CALIBRATION_SAMPLE}]
            probe = _Shape(c.estimated_message_length() + len(CALIBRATION_SAMPLE), len(params), self._schema_chars())
        chars, text = probe.chars, request_text(params)
        headers, base_url, model = self._auth_headers(), self.config.provider.base_url or "", self.config.model.name
        try:
            tokens = await count_tokens(base_url, model, text, headers)
        except Exception:  # noqa: BLE001 - best effort
            return None
        if tokens is None:
            return None
        if not believable_count(tokens, len(text)):  # every measure below is built on it: none this session
            await self._doubt(f"the server's tokenizer counted {_figure(tokens)} tokens in {len(text):,} characters")
            return None
        low, high = TOKENS_PER_CHAR_RANGE
        ratio = min(max(tokens / len(text), low), high)
        window = self.window
        if window.known and round(chars * ratio) + MESSAGE_TOKENS * len(params) + 1 > window.tokens:
            return None  # the probe would not fit: no measure this session (the server's counts teach it)
        schemas = self.toolbox.schemas()
        try:  # llama.cpp: the chat template rendered with the tools, counted by its tokenizer (no inference)
            prompt_tokens = await count_prompt(base_url, params, schemas, headers)
        except Exception:  # noqa: BLE001 - best effort
            prompt_tokens = None
        tokenizer = TEXT if prompt_tokens is None else TEMPLATE
        if prompt_tokens is None:
            try:
                request = {**self._request(stream=False), "messages": params, self._max_tokens_param: 1}
                response = await asyncio.wait_for(self.client().chat.completions.create(**untransformed(request)), CALIBRATION_DEADLINE)
                prompt_tokens = response.usage.prompt_tokens
            except Exception:  # noqa: BLE001 - a server that refuses the probe stays uncalibrated
                return None
        if not probe.believes(prompt_tokens):  # a fixed cost no request could have would outlive every reply
            await self._doubt(f"the server counted {_figure(prompt_tokens)} tokens in {probe.describe()}")
            return None
        tool_tokens = 0
        if schemas:
            definitions = json.dumps(schemas, ensure_ascii=False)
            with contextlib.suppress(Exception):
                tool_tokens = await count_tokens(base_url, model, definitions, headers) or 0
            if tool_tokens and not believable_count(tool_tokens, len(definitions)):
                await self._doubt(f"the server's tokenizer counted {_figure(tool_tokens)} tokens in "
                                  f"{len(definitions):,} characters of tool definitions")
                tool_tokens = 0
        fixed = prompt_tokens - round(chars * ratio) - MESSAGE_TOKENS * len(params)
        return Calibration(tokens_per_char=ratio, fixed_tokens=fixed, tool_tokens=tool_tokens, tokenizer=tokenizer)

    async def _tokens_from(self, index: int) -> int:
        """What the next request pays uncached after a change at message `index` (a prompt cache serves only
        the prefix before it): the server tokenizer's count of the messages from there where it can count
        (`_count_request`'s measure: code and prose are not priced alike), else `tokens_from`'s ratio."""
        calibration = self.knowledge.calibration
        if calibration is not None and calibration.tokenizer and self.config.provider.base_url:
            request = self._request(stream=False)
            with contextlib.suppress(Exception):  # best effort: the ratio's figure stands
                tokens = await asyncio.wait_for(count_tail(self.config.provider.base_url, self.config.model.name, request["messages"],
                                                           request.get("tools"), self._auth_headers(), calibration, index), COUNT_DEADLINE)
                tail = self._shape(index)
                if tokens is not None and tail.believes(tokens):
                    return tokens
                if tokens is not None:
                    await self._doubt(f"the server's tokenizer counted {_figure(tokens)} tokens in the last "
                                      f"{tail.messages:,} messages ({tail.chars:,} characters)")
        return tokens_from(self.conversation, index)

    async def _count_request(self) -> None:
        """Before a call, the server's tokenizer counts the request as it stands (a server that can: see
        `Calibration.tokenizer`), so the window check, the trigger and the gauge judge the server's own
        figure, not a ratio learnt on other text (a summary request's prose, a new message, a reply's
        framing). Best effort: without an answer the estimate stays the ratio's."""
        calibration = self.knowledge.calibration
        if calibration is None or not calibration.tokenizer or not self.config.provider.base_url:
            return
        request = self._request(stream=False)
        try:
            tokens = await asyncio.wait_for(count_request(self.config.provider.base_url, self.config.model.name, request["messages"],
                                                          request.get("tools"), self._auth_headers(), calibration), COUNT_DEADLINE)
        except Exception:  # noqa: BLE001 - best effort: the ratio's estimate stands
            return
        if tokens is None:
            return
        shape = self._shape()
        if shape.believes(tokens):
            self.conversation.record_count(tokens)
        else:
            await self._doubt(f"the server's tokenizer counted {_figure(tokens)} tokens in {shape.describe()}")

    async def _learn_estimate(self, prompt_tokens: int) -> None:
        """Correct the tokenizer's measure by the server's count of the request just sent, apply it to the
        conversation, and remember it for this server and model (a later session starts from it)."""
        calibration, sent = self.knowledge.calibration, self._sent
        if calibration is None or sent is None:
            return
        chars, messages, with_tools = sent.chars, sent.messages, bool(sent.tool_chars)
        if calibration.contradicted_by(prompt_tokens, chars, messages, with_tools):
            fixed = calibration.fixed_for(with_tools)
            await self._drop_measure(f"the server counted {prompt_tokens:,} tokens in {sent.describe()}, leaving "
                                     f"{prompt_tokens - fixed:,} for its text once the measured fixed cost of "
                                     f"{fixed:,} is taken out")
            return
        if calibration.learn(prompt_tokens, chars, messages, with_tools) is None:
            return
        self.conversation.calibrate(calibration.tokens_per_char, calibration.fixed_for(bool(self.toolbox.schemas())))
        problem = self.learned_estimates.remember(self.config.provider.base_url, self.config.model.name, calibration)
        if problem:
            await self.emit(Warning(problem))

    async def _drop_measure(self, why: str) -> None:
        """Drop the tokenizer's measure (and forget it for this server and model): the server's counts
        teach the estimate from here, and the next session measures again."""
        k, c = self.knowledge, self.conversation
        k.calibration, c.fixed_tokens = None, None
        problem = self.learned_estimates.forget(self.config.provider.base_url, self.config.model.name)
        if problem:
            await self.emit(Warning(problem))
        await self._doubt(why, f"the measure of the server's tokenizer is dropped and forgotten "
                               f"({self.learned_estimates.path})")

    async def _learn_from_overflow(self, exc: ContextOverflowError, estimate: int) -> None:
        """Take what an overflow error says: the window (remembered for this base URL and model when the
        server named it) and the prompt's real size (a count by the server's own tokenizer)."""
        k, c = self.knowledge, self.conversation
        if exc.window is not None:
            k.learned = Window(exc.window, "learned from the server's error", LEARNED)
        elif not self.window.known or self.window.kind == ASSUMED:
            assumed = max(k.largest_fit, math.floor(estimate * 0.75), 1)
            k.learned = Window(assumed, f"assumed: the server refused a request of about {estimate:,} tokens", ASSUMED)
        if k.learned.known and self.config.model.context_window is None:
            problem = self.learned_windows.remember(self.config.provider.base_url, self.config.model.name, k.learned)
            if problem:
                await self.emit(Warning(problem))
        if exc.requested is not None and self._sent is not None and not self._sent.believes(exc.requested):
            await self._doubt(f"the server's error counted {exc.requested:,} tokens in {self._sent.describe()}")
        elif exc.requested is not None:  # the server's own count of this prompt
            c.record_usage(exc.requested, overhead_chars=self._schema_chars())
        elif exc.window is None and self.window.known and estimate < self.window.tokens:
            c.tokens_per_char = min(1.0, c.tokens_per_char * 1.1)  # refused below the window: the estimate was low

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
            raise ContextTooLargeError(needed, budget, window, prompt=False,
                                       detail="automatic compaction is off; compact by hand (/compact, xun compact)")
        from xun.compact.summary import fit_to_window

        if await fit_to_window(self, budget, trigger=trigger, ask_model=not self.compactor.paused):
            await self.compactor.summary_failed(self)
        needed = self.request_tokens()
        if needed > budget:
            raise ContextTooLargeError(needed, budget, window, prompt=False, detail="compaction could not bring it under")

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

    async def reclaim_tool_results(self, keep_max: int | None = None, trigger: str = "manual", tokens_before: int | None = None) -> ToolCallCompactResult:
        """Tier 1 now, reported as an event (also what `/compact toolcall` and F6 run)."""
        from xun.compact.breakdown import reclaim_preview

        c = self.conversation
        before = tokens_before if tokens_before is not None else self.request_tokens()
        keep = keep_max if keep_max is not None else self.config.auto_compact.toolcall_keep_max
        result = await c.acompact_toolcall(keep_max=keep)  # the index is written in a worker thread
        first = first_tool_result(c, result.reclaimed_ids)
        if first is not None:
            await self._count_request()
        after = self.request_tokens()
        reason = "" if result.reclaimed_count else reclaim_preview(c, keep).why_nothing
        await self.emit(ToolResultsReclaimed(
            ids=result.reclaimed_ids, count=result.reclaimed_count, arguments=result.arguments_count,
            fraction=result.reclaimed_fraction,
            tokens_before=before, tokens_after=after, trigger=trigger, reason=reason,
            cache_miss_tokens=await self._tokens_from(first) if first is not None else None,
            saved_per_call=before - after if first is not None else None,
        ))
        for warning in c.take_history_warnings():  # the search index could not take the reclaimed results
            await self.emit(Warning(warning))
        return result

    async def restore_tool_result(self, tool_call_id: str) -> None:
        """Put a reclaimed original back into the context (raises KeyError/ValueError as the conversation does)."""
        before = self.request_tokens()
        await self.conversation.arestore_toolcall(tool_call_id)
        await self._count_request()
        after, first = self.request_tokens(), first_tool_result(self.conversation, [tool_call_id])
        await self.emit(ToolResultRestored(id=tool_call_id, tokens_before=before, tokens_after=after, trigger="manual",
                                           cache_miss_tokens=await self._tokens_from(first) if first is not None else None,
                                           saved_per_call=before - after))
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
        """The preflight of every model call: learn the window, run the policy, make the request fit. A
        usage event first shows the figure that is judged; another follows when compaction changed it."""
        await self._learn_server()
        await self._count_request()
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
            await self._count_request()
            await self._fit_window()
            await self.emit_usage()

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
        prompt = c.messages[-1].text if c.messages and isinstance(c.messages[-1], UserMessage) else None
        self.sync_project_instructions()
        await self.emit(TurnStarted(prompt=prompt))
        self.last_error = None
        self.last_error_did_not_fit = False
        iterations = 0
        unasked_rounds = 0  # rounds with a call refused as nobody can confirm it: the second ends the turn
        finished: TurnFinished | None = None
        answered: list[dict[str, Any]] = []
        self._partial, self._tools_running, self._tools_done = None, set(), {}
        try:
            while iterations < limit:
                iterations += 1
                raise_if_cancel_pending()  # each step starts only if no cancel is pending
                await self._compact_before_call()
                reply = await self._call_model()
                calls = [call for _, call in sorted(reply.calls.items())]
                c.add_agent_message(reply.message())
                usage = await self._believed_usage(reply.usage)
                if usage is not None:  # a server that reports nothing leaves the estimate as it is, labelled so
                    await self._learn_estimate(int(usage.prompt_tokens))
                    c.record_usage(int(usage.total_tokens), overhead_chars=self._schema_chars())
                elif reply.usage is not None:  # not believed: nor the last report, nor the ratio its counts taught
                    c.total_tokens = c.usage_chars = None
                    if c.fixed_tokens is None:
                        c.tokens_per_char = DEFAULT_TOKENS_PER_CHAR
                self._record_cache(usage, reply)
                await self.emit(AssistantMessage(content=reply.content, reasoning=reply.reasoning, tool_calls=len(calls)))
                await self.emit_usage(usage, disbelieved=usage is None and reply.usage is not None)
                if not calls:
                    finished = TurnFinished(status="ok", iterations=iterations)
                    break
                raise_if_cancel_pending()
                await self._run_tools(calls)
                await self.emit_usage()
                if self.confirm is None and any(outcome.denied for outcome in self._tools_done.values()):
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
            self.last_error_did_not_fit = isinstance(exc, ContextTooLargeError | ContextOverflowError | ContextStillTooLongError)
            self._answer_dangling_calls()
            restored = None
            if isinstance(exc, ContextTooLargeError) and exc.prompt:  # never sent: it goes back to the user
                popped = c.pop_last_message_if_user()
                restored = popped.text if popped is not None else None
            await self.emit(Error(message=message, detail=type(exc).__name__))
            finished = TurnFinished(status="error", iterations=iterations, error=message, restored_prompt=restored)
        finally:
            self.sync_project_instructions()
            if finished is not None and finished.status == "cancelled":
                await self._report_settled_calls(answered)
            if finished is not None:
                await self.emit(finished)
        return finished

    async def _stop_unasked(self, iterations: int) -> TurnFinished:
        """A call needing confirmation was refused, the model was told, and it called one again: with nobody
        to ask (`xun run` without a terminal) every further try is refused too, and a model that keeps
        trying burnt the whole turn's 500 calls (trial D #10). The refusals are in the conversation."""
        names = sorted({outcome.name for outcome in self._tools_done.values() if outcome.denied})
        message = (f"the turn stopped: {', '.join(names)} needed the user's confirmation again, and nobody can be asked "
                   "here (auto_confirm is off); nothing was done")
        self.last_error = message
        await self.emit(Error(message=message, detail="NobodyToConfirm"))
        return TurnFinished(status="error", iterations=iterations, error=message)

    async def _report_settled_calls(self, answered: list[dict[str, Any]]) -> None:
        """The calls a cancel answered end as every call does, with a finished event (a front end shows
        a kept result as it is, the rest as cancelled)."""
        for raw in answered:
            call_id, text = str(raw.get("tool_call_id", "")), str(raw.get("content", ""))
            outcome = self._tools_done.get(call_id)
            function = next((call.get("function") or {} for message in self.conversation.messages
                             if isinstance(message, RawOpenAIMessage) and message.role == "assistant"
                             for call in message.raw.get("tool_calls") or () if call.get("id") == call_id), {})
            is_error = outcome.is_error if outcome is not None else True
            await self.emit(ToolCallFinished(
                id=call_id, name=str(function.get("name", "")), arguments=str(function.get("arguments", "")),
                result_chars=len(text), duration=round(outcome.duration, 4) if outcome is not None else 0.0,
                is_error=is_error, error=text[:300] if is_error else None,
                denied=outcome.denied if outcome is not None else False,
                truncated_chars=outcome.truncated_chars if outcome is not None else 0,
            ))

    def _record_cache(self, usage: Any, reply: _Reply) -> None:
        """Keep the call's prompt-cache figures (when the server sent believable ones) and when it was made."""
        usage = usage if getattr(usage, "prompt_tokens", None) is not None else None
        prompt = int(usage.prompt_tokens) if usage is not None else None
        record = self.conversation.prompt_cache
        record.record(prompt, cached_tokens_of(usage, reply.timings), self.clock())
        if usage is not None:
            add_call(self.session_totals(), prompt, getattr(usage, "completion_tokens", None), record.last_cached)

    def session_totals(self) -> dict[str, int]:
        """The session's usage totals (`xun.context.usage`), which a helper's calls (the summarizer's) count into too."""
        return (self.bills_to or self).conversation.usage_totals

    def session_cost(self) -> float | None:
        """What the session's calls cost by the `pricing` of its model (None when it has no price)."""
        owner = self.bills_to or self
        return cost(owner.conversation.usage_totals, price_for(owner.config.pricing, owner.config.model.name))

    def _settle_interrupted_turn(self) -> str | None:
        """After a cancel: answer dangling tool calls, keep a reply cut short (marked as cancelled), and if
        the turn got no reply at all, take the user message back so the front end can put it into the
        prompt again."""
        self._answer_dangling_calls()
        partial, self._partial = self._partial, None
        if partial is not None and partial.content.strip():
            self.conversation.add_agent_message({"role": "assistant", "content": partial.content + CANCELLED_REPLY_MARK})
            return None
        popped = self.conversation.pop_last_message_if_user()
        return popped.text if popped is not None else None

    def _answer_dangling_calls(self) -> None:
        """Every tool call of this turn gets a result, so the history stays valid for the next request: its
        real one if it finished (a cancel may come before it is recorded), else what became of it. Only the
        newest reply can have calls without results (each round's come before the next call); it is found
        from the end, as a summary inside the turn moves where the turn began (looking from there, a call
        kept no result and showed "running…" for ever: trial D)."""
        c = self.conversation
        answered: set[Any] = set()
        for message in reversed(c.messages):
            if not isinstance(message, RawOpenAIMessage):
                return
            if message.role == "tool":
                answered.add(message.raw.get("tool_call_id"))
                continue
            for call in message.raw.get("tool_calls") or ():
                call_id = call.get("id", "")
                if call_id in answered:
                    continue
                outcome = self._tools_done.get(call_id)
                text = (outcome.text if outcome is not None
                        else INTERRUPTED_TOOL_RESULT if call_id in self._tools_running else CANCELLED_TOOL_RESULT)
                c.add_tool_result(call_id, text)
            return

    async def _call_model(self) -> _Reply:
        """One completion with retries on transient errors; on an overflow, learn the window, compact to
        fit it and try once more (never the same oversized request again)."""
        attempts = self.config.retry.attempts
        overflowed = False
        attempt = 0
        while True:
            attempt += 1
            estimate = self.request_tokens()
            self._sent = self._shape(reply_limit=self._reply_limit())
            try:
                reply = await within_deadline(self._stream_once(), self.config.provider.deadline)
            except asyncio.CancelledError:
                raise
            except Exception as raw_exc:
                exc = _classify(raw_exc)
                if isinstance(exc, EmptyStreamError) and self._empty_means_overflow(estimate):
                    exc = ContextOverflowError(f"the server sent an empty reply to a request of about {estimate:,} tokens "
                                               f"({self.window.describe()})")
                if isinstance(exc, ContextOverflowError):
                    if overflowed:
                        raise ContextStillTooLongError(f"the context is too long for the model even after compacting to fit "
                                           f"{self.window.describe()}: {exc}") from None
                    overflowed = True
                    await self._learn_from_overflow(exc, estimate)
                    await self.emit(Warning(f"the server says the context is too long ({exc}); now {self.window.describe()}: "
                                            "compacting to fit it and retrying once"))
                    await self._fit_window(trigger="emergency")
                    await self.emit_usage()
                    attempt -= 1
                    continue
                if self._adapt_request(raw_exc):
                    attempt -= 1
                    continue
                unreached = isinstance(exc, TransientServerError) and _unreached(raw_exc)
                if unreached:
                    exc = TransientServerError(f"{exc} (server at {server_address(self.client().base_url)})")
                if isinstance(exc, TransientServerError) and attempt < attempts:
                    delay = self.config.retry.delay(attempt, asked=_retry_after(raw_exc))
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
        if self._max_tokens_param == "max_tokens" and "max_tokens" in text and "max_completion_tokens" in text:
            self._max_tokens_param = "max_completion_tokens"
            return True
        if not self._empty_for_null and "content" in text and "valid string" in text:
            self._empty_for_null = True
            return True
        return False

    def _request(self, stream: bool) -> dict[str, Any]:
        """The chat-completion request for the conversation as it is now."""
        messages = self.conversation.completion_params()
        if self._empty_for_null:
            messages = [{**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m for m in messages]
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
            request[self._max_tokens_param] = limit
        return request

    def _reply_limit(self) -> int | None:
        """Every request's `max_tokens`: the reply budget when set, else the output reserve of a known window."""
        window = self.window.tokens
        if self.reply_budget is not None:
            return self.reply_budget
        return self.output_reserve(window) if window is not None else None

    async def _stream_once(self) -> _Reply:
        reply = self._partial = _Reply(reasoning_field=self.config.model.reasoning_field)
        chunks = 0
        async with open_chunk_stream(self.client(), self._request(stream=True)) as stream:
            async for chunk in stream:
                chunks += 1
                if not isinstance(chunk, dict):
                    continue
                if isinstance(usage := chunk.get("usage"), dict):
                    reply.usage = SimpleNamespace(**usage)
                if (timings := chunk.get("timings")) is not None:
                    reply.timings = timings
                for choice in chunk.get("choices") or ():
                    if not isinstance(choice, dict):
                        continue
                    await self._take_delta(reply, choice.get("delta"))
                    if choice.get("finish_reason"):
                        reply.finish_reason = choice["finish_reason"]
        self.last_finish_reason = reply.finish_reason
        if chunks == 0:
            raise EmptyStreamError("the server sent an empty reply (HTTP 200 and no data)")
        if reply.finish_reason is None:
            raise TransientServerError("the stream ended before the reply was complete")
        if not reply.content and not reply.calls and reply.finish_reason != "length":
            raise TransientServerError("the server sent an empty reply")
        self._partial = None
        return reply

    async def _take_delta(self, reply: _Reply, delta: Any) -> None:
        """One chunk's delta, as the server's plain JSON (`open_chunk_stream`): text, reasoning, tool-call parts."""
        if not isinstance(delta, dict):
            return
        for name in ("reasoning_content", "reasoning"):
            value = delta.get(name)
            if isinstance(value, str) and value:
                if self.config.model.reasoning_field is None:
                    self.config.model.reasoning_field = name  # detected once, remembered for the session
                reply.reasoning_field = self.config.model.reasoning_field
                reply.reasoning += value
                await self.emit(ReasoningDelta(text=value))
                break
        content = delta.get("content")
        if isinstance(content, str) and content:
            reply.content += content
            await self.emit(TextDelta(text=content))
        for part in delta.get("tool_calls") or ():
            if not isinstance(part, dict):
                continue
            index = part.get("index")
            call = reply.calls.setdefault(index if isinstance(index, int) else 0, _PendingCall())
            if isinstance(ident := part.get("id"), str) and ident:
                call.id = ident
            function = part.get("function")
            if isinstance(function, dict):
                if isinstance(name := function.get("name"), str):
                    call.name += name
                if isinstance(arguments := function.get("arguments"), str):
                    call.arguments += arguments

    async def _run_tools(self, calls: list[_PendingCall]) -> None:
        """Run the calls of one reply concurrently; store the results in call order."""
        context = ToolContext.from_config(self.config, workdir=self.workdir, conversation=self.conversation,
                                          confirm=self.confirm, environ=self.environ)
        self._tools_running, self._tools_done = set(), {}
        for call in calls:
            await self.emit(ToolCallStarted(id=call.id, name=call.name, arguments=call.arguments))

        async def one(call: _PendingCall) -> ToolOutcome:
            outcome = await self.toolbox.call(call.name, call.arguments, context,
                                              on_run=lambda: self._tools_running.add(call.id))
            self._tools_done[call.id] = outcome
            return outcome

        outcomes = await gather_limited(one(call) for call in calls)
        for call, outcome in zip(calls, outcomes, strict=True):
            self.conversation.add_tool_result(call.id, outcome.text)
            await self.emit(ToolCallFinished(
                id=call.id, name=call.name, arguments=call.arguments, result_chars=len(outcome.text),
                duration=round(outcome.duration, 4), is_error=outcome.is_error,
                error=outcome.text[:300] if outcome.is_error else None, denied=outcome.denied,
                truncated_chars=outcome.truncated_chars,
            ))
