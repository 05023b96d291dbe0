"""Learning the server: its window and its tokenizer's measure, taken from what it says (a discovery, a
count, a reply's usage, an overflow error), each figure believed only when a count of the request could be
it (`believable_count`). Functions of the agent whose knowledge they keep (`ServerKnowledge`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from dataclasses import dataclass
from typing import Any, Protocol

from xun.agent.call_limits import valid_usage
from xun.agent.config import XunConfig
from xun.agent.failures import ContextOverflowError
from xun.agent.sdk_request import untransformed
from xun.agent.tools import Toolbox
from xun.agent.window import (
    ASSUMED,
    LEARNED,
    TEMPLATE,
    TEXT,
    UNKNOWN,
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
    request_text,
)
from xun.base.events import Event, Warning
from xun.compact.breakdown import tokens_from
from xun.context.conversation import MESSAGE_TOKENS, TOKENS_PER_CHAR_RANGE, Conversation
from xun.context.messages import UserMessage, message_length

PREPARE_WAIT = 3.0
"""Seconds a model call waits for window discovery still under way (front ends start it early)."""
CALIBRATION_SAMPLE = (
    "Please read src/app.py and tell me why the tests in tests/test_app.py fail since yesterday's change; "
    "run `make test` afterwards, and keep the public names as they are. The error was: TypeError: "
    "expected str, got None (line 42)."
)
"""Prose with a path, a command and an error line: what the tokenizer is measured on in a new session."""
COUNT_DEADLINE = 10.0
"""Seconds the count of a request before a call may take in all (without it, the ratio's estimate stands)."""
CALIBRATION_MIN_CHARS = 400
"""Below this much conversation text, the sample is measured instead (a ratio of a few words misleads)."""


@dataclass(frozen=True, slots=True)
class RequestShape:
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


def figure(value: Any) -> str:
    """A figure a server sent, as a message quotes it (never its text: it may be anything)."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "no"


class Learner(Protocol):
    """What learning the server reads and keeps of the agent (`xun.agent.loop.Agent`): its settings and
    conversation, what it knows of the server, and the request it would send."""

    config: XunConfig
    conversation: Conversation
    toolbox: Toolbox
    knowledge: ServerKnowledge
    learned_windows: LearnedWindows
    learned_estimates: LearnedEstimates
    sent: RequestShape | None
    max_tokens_param: str

    @property
    def window(self) -> Window: ...

    @property
    def threshold(self) -> int: ...

    def output_reserve(self, window: int) -> int: ...

    def request_tokens(self) -> int: ...

    def request(self, stream: bool) -> dict[str, Any]: ...

    def auth_headers(self) -> dict[str, str]: ...

    def client(self) -> Any: ...

    def start_discovery(self) -> Any: ...

    async def emit(self, event: Event) -> None: ...


def request_shape(agent: Learner, start: int = 0, reply_limit: int | None = None) -> RequestShape:
    """The request as it stands, as a count of it is judged; from message `start`, its tail (no tools)."""
    c = agent.conversation
    messages = c.messages[start:] if start else c.messages
    chars = sum(message_length(m) for m in messages) if start else c.estimated_message_length()
    images = sum(len(m.images) for m in messages if isinstance(m, UserMessage))
    return RequestShape(chars, len(messages), 0 if start else agent.toolbox.schema_chars(), images, reply_limit)


async def doubt(agent: Learner, what: str, outcome: str = "xun's own estimate stands in") -> None:
    """Say, once a session, that a figure from the server was not believed, and what stands in for it."""
    k = agent.knowledge
    if not k.doubted:
        k.doubted = True
        await agent.emit(
            Warning(f"{what}: no count can be that, so xun does not believe it; {outcome} (said once a session)")
        )


def believes_measure(agent: Learner, tokens_per_char: float, fixed_tokens: int) -> bool:
    """Whether a measure of the tokenizer (a remembered one, or the conversation's) says of the request as
    it stands what a count of it could say: a fixed cost no request could have is dropped, not kept."""
    shape, c = request_shape(agent), agent.conversation
    estimate = round(shape.chars * tokens_per_char) + MESSAGE_TOKENS * shape.messages + fixed_tokens
    return not c.messages or shape.believes(estimate)


async def believed_usage(agent: Learner, usage: Any) -> Any:
    """The reply's usage when it can be true of the request just sent: whole numbers (`valid_usage`), the
    prompt a count of that request could be (`believable_count`), the total no less than the prompt, and
    neither the completion nor the total's rest longer than the reply's `max_tokens`. Else None, said once."""
    if usage is None:
        return None
    sent, believed = agent.sent, valid_usage(usage)
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
        await doubt(
            agent,
            f"the server reported {figure(prompt)} prompt, {figure(completion)} completion and "
            f"{figure(total)} total tokens for {sent.describe() if sent else 'a request'}",
        )
    return believed


async def discover(agent: Learner) -> None:
    k = agent.knowledge
    base_url, model = agent.config.provider.base_url, agent.config.model.name
    k.remembered = agent.learned_windows.get(base_url, model)
    if k.calibration is None:  # one remembered from before the server's way of counting was kept is measured again
        remembered = agent.learned_estimates.get(base_url, model)
        k.calibration = remembered if remembered is not None and remembered.tokenizer else None
    if agent.config.model.context_window is None and base_url:
        try:
            k.discovered = await discover_window(base_url, model, agent.auth_headers())
        except Exception:  # noqa: BLE001 - discovery is best effort; the window stays unknown
            k.discovered = UNKNOWN
    await calibrate_once(agent)


async def learn_server(agent: Learner) -> None:
    """Before a model call: the window and the tokenizer's measure (waiting a bounded time for the
    discovery that front ends start when the session opens), applied to this conversation."""
    task = agent.start_discovery()
    if not task.done():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), PREPARE_WAIT)
    if not task.done() and estimate_would_act(agent):  # the measure under way decides: wait for it
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), probe_deadline(agent))
    k, c = agent.knowledge, agent.conversation
    fixed = k.calibration.fixed_for(bool(agent.toolbox.schemas())) if k.calibration is not None else 0
    if k.calibration is not None and not believes_measure(agent, k.calibration.tokens_per_char, fixed):
        await drop_measure(
            agent,
            f"the remembered measure of the server's tokenizer puts the fixed cost of "
            f"{request_shape(agent).describe()} at {fixed:,} tokens",
        )  # then measured again
    if c.fixed_tokens is not None and not believes_measure(agent, c.tokens_per_char, c.fixed_tokens):
        await doubt(
            agent,
            f"the session's measure of the server's tokenizer puts the fixed cost of "
            f"{request_shape(agent).describe()} at {c.fixed_tokens:,} tokens",
        )
        c.fixed_tokens = None
    await calibrate_once(agent)
    if k.calibration is not None and c.fixed_tokens is None and c.total_tokens is None:
        c.calibrate(k.calibration.tokens_per_char, k.calibration.fixed_for(bool(agent.toolbox.schemas())))


def probe_deadline(agent: Learner) -> float:
    """Seconds the single-token probe may take: as long as the model call itself waits for the server
    (`provider.timeout`). The probe is the call's own prompt, and the server goes on processing one that is
    abandoned, so the call would queue behind it anyway; once answered, a server's prompt cache (llama.cpp,
    vLLM) serves the call the probe's work."""
    return agent.config.provider.timeout


def estimate_would_act(agent: Learner) -> bool:
    """Whether the estimate as it stands would compact or refuse the request (an uncalibrated one prices
    the tool definitions at the prose ratio, which a server's template may render far cheaper, or not
    at all: llama-cpp-python's probe of them takes seconds on a small machine)."""
    needed, window = agent.request_tokens(), agent.window.tokens
    over_window = window is not None and needed > window - agent.output_reserve(window)
    return over_window or (agent.config.auto_compact.enabled and needed > agent.threshold)


async def calibrate_once(agent: Learner) -> None:
    """Once per session, unless an earlier session's measure of this server is remembered: measure
    its tokenizer (a resumed session too: the summarizer's requests are planned with it)."""
    k, c = agent.knowledge, agent.conversation
    if k.calibrated or k.calibration is not None or not agent.config.provider.base_url:
        return
    k.calibrated = True
    calibration = await calibrate(agent)
    if calibration is not None:
        k.calibration = calibration
        c.calibrate(calibration.tokens_per_char, calibration.fixed_for(bool(agent.toolbox.schemas())))
        # remembered at once: a server that reports no usage in a stream (llama-cpp-python) never corrects it
        problem = agent.learned_estimates.remember(agent.config.provider.base_url, agent.config.model.name, calibration)
        if problem:
            await agent.emit(Warning(problem))


async def calibrate(agent: Learner) -> Calibration | None:
    """Measure the server's tokenizer: its tokenize endpoint counts the conversation's text (or, in an
    empty session, a sample of prose), and one request for a single token (only to a server that has
    such an endpoint: a local one) counts the whole prompt with the tool definitions, so the estimate
    of what a request costs besides its text is the server's own."""
    c = agent.conversation
    if (
        c.estimated_message_length() - sum(message_length(m) for m in c.messages if m.role == "system")
        >= CALIBRATION_MIN_CHARS
    ):
        params, probe = c.completion_params(), request_shape(agent)
    else:  # too little text to measure: the system prompt and a sample of prose
        system = [m.completion_param() for m in c.messages]
        params = [*system, {"role": "user", "content": CALIBRATION_SAMPLE}]
        probe = RequestShape(
            c.estimated_message_length() + len(CALIBRATION_SAMPLE), len(params), agent.toolbox.schema_chars()
        )
    chars, text = probe.chars, request_text(params)
    headers, base_url, model = agent.auth_headers(), agent.config.provider.base_url or "", agent.config.model.name
    try:
        tokens = await count_tokens(base_url, model, text, headers)
    except Exception:  # noqa: BLE001 - best effort
        return None
    if tokens is None:
        return None
    if not believable_count(tokens, len(text)):  # every measure below is built on it: none this session
        await doubt(agent, f"the server's tokenizer counted {figure(tokens)} tokens in {len(text):,} characters")
        return None
    low, high = TOKENS_PER_CHAR_RANGE
    ratio = min(max(tokens / len(text), low), high)
    window = agent.window
    if window.tokens is not None and round(chars * ratio) + MESSAGE_TOKENS * len(params) + 1 > window.tokens:
        return None  # the probe would not fit: no measure this session (the server's counts teach it)
    schemas = agent.toolbox.schemas()
    try:  # llama.cpp: the chat template rendered with the tools, counted by its tokenizer (no inference)
        prompt_tokens = await count_prompt(base_url, params, schemas, headers)
    except Exception:  # noqa: BLE001 - best effort
        prompt_tokens = None
    tokenizer = TEXT if prompt_tokens is None else TEMPLATE
    if prompt_tokens is None:
        try:
            request = {**agent.request(stream=False), "messages": params, agent.max_tokens_param: 1}
            response = await asyncio.wait_for(
                agent.client().chat.completions.create(**untransformed(request)), probe_deadline(agent)
            )
            prompt_tokens = response.usage.prompt_tokens
        except Exception:  # noqa: BLE001 - a server that refuses the probe stays uncalibrated
            return None
    if not probe.believes(prompt_tokens):  # a fixed cost no request could have would outlive every reply
        await doubt(agent, f"the server counted {figure(prompt_tokens)} tokens in {probe.describe()}")
        return None
    tool_tokens = 0
    if schemas:
        definitions = json.dumps(schemas, ensure_ascii=False)
        with contextlib.suppress(Exception):
            tool_tokens = await count_tokens(base_url, model, definitions, headers) or 0
        if tool_tokens and not believable_count(tool_tokens, len(definitions)):
            await doubt(
                agent,
                f"the server's tokenizer counted {figure(tool_tokens)} tokens in "
                f"{len(definitions):,} characters of tool definitions",
            )
            tool_tokens = 0
    fixed = prompt_tokens - round(chars * ratio) - MESSAGE_TOKENS * len(params)
    return Calibration(tokens_per_char=ratio, fixed_tokens=fixed, tool_tokens=tool_tokens, tokenizer=tokenizer)


async def uncached_tokens_from(agent: Learner, index: int) -> int:
    """What the next request pays uncached after a change at message `index` (a prompt cache serves only
    the prefix before it): the server tokenizer's count of the messages from there where it can count
    (`count_current_request`'s measure: code and prose are not priced alike), else `tokens_from`'s ratio."""
    calibration = agent.knowledge.calibration
    if calibration is not None and calibration.tokenizer and agent.config.provider.base_url:
        request = agent.request(stream=False)
        with contextlib.suppress(Exception):  # best effort: the ratio's figure stands
            tokens = await asyncio.wait_for(
                count_tail(
                    agent.config.provider.base_url,
                    agent.config.model.name,
                    request["messages"],
                    request.get("tools"),
                    agent.auth_headers(),
                    calibration,
                    index,
                ),
                COUNT_DEADLINE,
            )
            tail = request_shape(agent, index)
            if tokens is not None and tail.believes(tokens):
                return tokens
            if tokens is not None:
                await doubt(
                    agent,
                    f"the server's tokenizer counted {figure(tokens)} tokens in the last "
                    f"{tail.messages:,} messages ({tail.chars:,} characters)",
                )
    return tokens_from(agent.conversation, index)


async def count_current_request(agent: Learner) -> None:
    """Before a call, the server's tokenizer counts the request as it stands (a server that can: see
    `Calibration.tokenizer`), so the window check, the trigger and the gauge judge the server's own
    figure, not a ratio learnt on other text (a summary request's prose, a new message, a reply's
    framing). Best effort: without an answer the estimate stays the ratio's."""
    calibration = agent.knowledge.calibration
    if calibration is None or not calibration.tokenizer or not agent.config.provider.base_url:
        return
    request = agent.request(stream=False)
    try:
        tokens = await asyncio.wait_for(
            count_request(
                agent.config.provider.base_url,
                agent.config.model.name,
                request["messages"],
                request.get("tools"),
                agent.auth_headers(),
                calibration,
            ),
            COUNT_DEADLINE,
        )
    except Exception:  # noqa: BLE001 - best effort: the ratio's estimate stands
        return
    if tokens is None:
        return
    shape = request_shape(agent)
    if shape.believes(tokens):
        agent.conversation.record_count(tokens)
    else:
        await doubt(agent, f"the server's tokenizer counted {figure(tokens)} tokens in {shape.describe()}")


async def learn_estimate(agent: Learner, prompt_tokens: int) -> None:
    """Correct the tokenizer's measure by the server's count of the request just sent, apply it to the
    conversation, and remember it for this server and model (a later session starts from it)."""
    calibration, sent = agent.knowledge.calibration, agent.sent
    if calibration is None or sent is None:
        return
    chars, messages, with_tools = sent.chars, sent.messages, bool(sent.tool_chars)
    if calibration.contradicted_by(prompt_tokens, chars, messages, with_tools):
        fixed = calibration.fixed_for(with_tools)
        await drop_measure(
            agent,
            f"the server counted {prompt_tokens:,} tokens in {sent.describe()}, leaving "
            f"{prompt_tokens - fixed:,} for its text once the measured fixed cost of "
            f"{fixed:,} is taken out",
        )
        return
    if calibration.learn(prompt_tokens, chars, messages, with_tools) is None:
        return
    agent.conversation.calibrate(calibration.tokens_per_char, calibration.fixed_for(bool(agent.toolbox.schemas())))
    problem = agent.learned_estimates.remember(agent.config.provider.base_url, agent.config.model.name, calibration)
    if problem:
        await agent.emit(Warning(problem))


async def drop_measure(agent: Learner, why: str) -> None:
    """Drop the tokenizer's measure (and forget it for this server and model): the server's counts
    teach the estimate from here, and the next session measures again."""
    k, c = agent.knowledge, agent.conversation
    k.calibration, c.fixed_tokens = None, None
    problem = agent.learned_estimates.forget(agent.config.provider.base_url, agent.config.model.name)
    if problem:
        await agent.emit(Warning(problem))
    await doubt(
        agent, why, f"the measure of the server's tokenizer is dropped and forgotten ({agent.learned_estimates.path})"
    )


async def learn_from_overflow(agent: Learner, exc: ContextOverflowError, estimate: int) -> None:
    """Take what an overflow error says: the window (remembered for this base URL and model when the
    server named it) and the prompt's real size (a count by the server's own tokenizer)."""
    k, c = agent.knowledge, agent.conversation
    if exc.window is not None:
        k.learned = Window(exc.window, "learned from the server's error", LEARNED)
    elif not agent.window.known or agent.window.kind == ASSUMED:
        assumed = max(k.largest_fit, math.floor(estimate * 0.75), 1)
        k.learned = Window(assumed, f"assumed: the server refused a request of about {estimate:,} tokens", ASSUMED)
    if k.learned.known and agent.config.model.context_window is None:
        problem = agent.learned_windows.remember(agent.config.provider.base_url, agent.config.model.name, k.learned)
        if problem:
            await agent.emit(Warning(problem))
    if exc.requested is not None and agent.sent is not None and not agent.sent.believes(exc.requested):
        await doubt(agent, f"the server's error counted {exc.requested:,} tokens in {agent.sent.describe()}")
    elif exc.requested is not None:  # the server's own count of this prompt
        c.record_usage(exc.requested, overhead_chars=agent.toolbox.schema_chars())
    elif exc.window is None and (tokens := agent.window.tokens) is not None and estimate < tokens:
        c.tokens_per_char = min(1.0, c.tokens_per_char * 1.1)  # refused below the window: the estimate was low
