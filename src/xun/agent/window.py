"""The model's context window: how big it is, where that figure came from, and how xun learns it.

A request that cannot fit is never sent, so xun needs the window before it is reached. The figure comes,
strongest first, from the configuration (`model.context_window`), from the server itself (discovery:
llama.cpp `/props`, vLLM `max_model_len` and OpenRouter/LM Studio `context_length` in `/v1/models`,
Ollama `/api/show`), from an overflow error that named it (learned, and remembered per base URL and
model in the user's state folder), or from an overflow that named nothing (assumed for this session).

Servers say "too long" in many shapes; `overflow_window` reads every one we know of. The tokenize
endpoints of llama.cpp, llama-cpp-python and vLLM let the estimate be calibrated to the real tokenizer.
All HTTP here is the standard library's, run in a worker thread with short timeouts: discovery is
best effort and never holds up a front end.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from xun.base.atomic import open_regular, write_text_atomic
from xun.context.conversation import MESSAGE_TOKENS, TOKENS_PER_CHAR_RANGE
from xun.context.messages import content_text

DISCOVERY_TIMEOUT = 3.0
"""Seconds for one discovery or tokenize request, in all (a server that does not answer is simply unknown)."""
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MIN_WINDOW = 256
MAX_WINDOW = 100_000_000
"""Figures outside this range are not believed (a server's garbage must not shrink or lift the check)."""

FRAMING_ALLOWANCE = 32
"""Tokens a count may hold for each message besides its text: a chat template's role markers and special tokens."""
PREAMBLE_ALLOWANCE = 1024
"""Tokens a count may hold once besides its text: a template's own lines, a server's tool-use instructions."""
IMAGE_ALLOWANCE = 16_384
"""Tokens a count may hold for each image (the most a vision model's largest image costs)."""

CONFIG = "config"
SERVER = "server"
LEARNED = "learned"
ASSUMED = "assumed"


@dataclass(frozen=True, slots=True)
class Window:
    """The context window in tokens (None: unknown), and a phrase saying where the figure came from."""

    tokens: int | None
    source: str
    kind: str = ""
    """CONFIG, SERVER, LEARNED or ASSUMED ("" when unknown)."""

    @property
    def known(self) -> bool:
        return self.tokens is not None

    def describe(self) -> str:
        if self.tokens is None:
            return "window unknown"
        return f"window {self.tokens:,} ({self.source})"


UNKNOWN = Window(None, "unknown")


def _plausible(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and MIN_WINDOW <= value <= MAX_WINDOW:
        return value
    return None


def believable_count(tokens: Any, chars: int, messages: int = 0, tool_chars: int = 0, images: int = 0) -> bool:
    """Whether `tokens` can be a tokenizer's count of `chars` characters of text in `messages` messages,
    with `tool_chars` characters of tool definitions (which a server may leave out) and `images` images:
    a whole number from one token for every twenty characters of the text (no tokenizer's tokens are
    longer on average) to one for every character of text and tools, with room for each message's
    framing, a template's own lines and each image (`TOKENS_PER_CHAR_RANGE`, the ratios xun believes).
    Any other figure (zero, negative, a billion) is a broken or hostile server's: the estimate stands in."""
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        return False
    low, high = TOKENS_PER_CHAR_RANGE
    most = high * (chars + tool_chars) + FRAMING_ALLOWANCE * messages + PREAMBLE_ALLOWANCE + IMAGE_ALLOWANCE * images
    return max(1, math.floor(low * chars)) <= tokens <= most


# ------------------------------------------------------------------------------------- overflow errors

_OVERFLOW_WORDS = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? (the )?(available )?context (window|size|length)"
    r"|context window of|n_ctx|context length of only|greater than the context length|exceed_context_size"
    r"|prompt is too long|input is too long|too many tokens|reduce the length of the messages",
    re.IGNORECASE,
)
_WINDOW_FIGURES = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),  # OpenAI, vLLM, llama-cpp-python (400)
    re.compile(r"context window of (\d+)", re.IGNORECASE),  # llama-cpp-python's own words
    re.compile(r"context length of only (\d+)", re.IGNORECASE),  # LM Studio
    re.compile(r"n_ctx\W{0,4}(\d+)", re.IGNORECASE),  # llama.cpp ("n_ctx": 4096), LM Studio "n_ctx (7424)"
    re.compile(r"context (?:size|length) (?:is |of )?\(?(\d+)", re.IGNORECASE),  # Ollama, others
)


_REQUESTED_FIGURES = (
    re.compile(r"Requested tokens \((\d+)\)", re.IGNORECASE),  # llama-cpp-python
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"n_prompt_tokens\W{0,4}(\d+)", re.IGNORECASE),  # llama.cpp
    re.compile(r"keep the first (\d+) tokens", re.IGNORECASE),  # LM Studio
    re.compile(r"prompt is (\d+) tokens", re.IGNORECASE),
)


def is_overflow_text(text: str) -> bool:
    """Whether an error message says the request is longer than the model's context."""
    return bool(_OVERFLOW_WORDS.search(text or ""))


def overflow_window(text: str) -> int | None:
    """The window an overflow error names, if it names one we can believe."""
    for pattern in _WINDOW_FIGURES:
        for match in pattern.finditer(text or ""):
            value = _plausible(match.group(1))
            if value is not None:
                return value
    return None


def requested_tokens(text: str) -> int | None:
    """The prompt's size in the server's own tokens, when its overflow error says it."""
    for pattern in _REQUESTED_FIGURES:
        match = pattern.search(text or "")
        if match and 0 < int(match.group(1)) < MAX_WINDOW:
            return int(match.group(1))
    return None


# ------------------------------------------------------------------------------------- learned windows


def state_dir() -> Path:
    """Where xun keeps what it learned about servers: `$XDG_STATE_HOME/xun` (default ~/.local/state/xun).
    Per user, never the project's `.xun/`: a cloned folder must not be able to tell xun a window."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "xun"


def _key(base_url: str | None, model: str) -> str:
    return f"{(base_url or 'https://api.openai.com/v1').rstrip('/')} {model}"


class _StateFile:
    """A JSON object in the state folder, one entry per base URL and model (written atomically). A broken
    or unreadable file is treated as empty: it only ever holds what can be learned again."""

    name = ""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else state_dir() / self.name

    def _read(self) -> dict[str, Any]:
        try:
            with open_regular(self.path) as handle:
                data = json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _entry(self, base_url: str | None, model: str) -> dict[str, Any] | None:
        entry = self._read().get(_key(base_url, model))
        return entry if isinstance(entry, dict) else None

    def _write(self, base_url: str | None, model: str, entry: dict[str, Any] | None, what: str) -> str | None:
        """Store `entry` (None: remove it); returns a problem (never raises) when the file cannot be written."""
        data = self._read()
        if entry is not None:
            data[_key(base_url, model)] = {**entry, "time": time.time()}
        elif data.pop(_key(base_url, model), None) is None:
            return None
        try:
            write_text_atomic(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            return f"could not remember the {what} in {self.path} ({exc.strerror or exc})"
        return None


class LearnedWindows(_StateFile):
    """Windows named by overflow errors, per base URL and model, in `windows.json`."""

    name = "windows.json"

    def get(self, base_url: str | None, model: str) -> Window:
        """What an earlier session learned (or assumed) of this server's window; UNKNOWN when nothing."""
        entry = self._entry(base_url, model)
        tokens = _plausible(entry.get("tokens")) if entry is not None else None
        if entry is None or tokens is None:
            return UNKNOWN
        if entry.get("kind") == ASSUMED:
            return Window(tokens, "assumed in an earlier session: the server refused a longer request", ASSUMED)
        return Window(tokens, "learned from the server's error in an earlier session", LEARNED)

    def remember(self, base_url: str | None, model: str, window: Window) -> str | None:
        """Store a learned (or assumed) window; returns a problem (never raises) when the file cannot be
        written. An assumed figure never replaces one the server named."""
        old = self._entry(base_url, model)
        if window.kind == ASSUMED and old is not None and old.get("kind") == LEARNED:
            return None
        return self._write(base_url, model, {"tokens": window.tokens, "kind": window.kind}, "window")


class LearnedEstimates(_StateFile):
    """The estimate's measure of each server's tokenizer (`Calibration`, corrected by every reply's
    count), per base URL and model, in `estimates.json`: a new or resumed session starts from it."""

    name = "estimates.json"

    def get(self, base_url: str | None, model: str) -> Calibration | None:
        entry = self._entry(base_url, model)
        return Calibration.from_json(entry) if entry is not None else None

    def remember(self, base_url: str | None, model: str, calibration: Calibration) -> str | None:
        return self._write(base_url, model, calibration.to_json(), "estimate's calibration")

    def forget(self, base_url: str | None, model: str) -> str | None:
        """Drop the measure of this server and model (one its replies contradicted): the next session measures again."""
        return self._write(base_url, model, None, "estimate's calibration")


@dataclass(slots=True)
class Calibration:
    """A measure of the server's tokenizer: tokens per character of message text, and the tokens a
    request costs besides its messages' characters and their framing when it carries `tool_tokens` of
    tool definitions. Measured once (the tokenize endpoint, the rendered template) and corrected by
    every reply's `usage.prompt_tokens` (`learn`)."""

    tokens_per_char: float
    fixed_tokens: int
    tool_tokens: int
    replies: int = 0
    """How many replies' counts corrected it."""
    tokenizer: str = ""
    """How the server counts a request before it is sent: TEMPLATE (its chat template rendered, then
    tokenized: the count is the model's), TEXT (its tokenizer counts the messages' text; the framing and
    the fixed cost are added as measured) or "" (it cannot: the estimate is the ratio's)."""

    def fixed_for(self, with_tools: bool) -> int:
        """The fixed cost of a request with the tools measured, or with none (a server that ignores
        tool definitions measured no cost for them: never below what was measured without)."""
        return self.fixed_tokens if with_tools else min(self.fixed_tokens, max(0, self.fixed_tokens - self.tool_tokens))

    def estimate(self, chars: int, messages: int, with_tools: bool) -> int:
        """Tokens of a request of `chars` characters of message text in `messages` messages."""
        return round(chars * self.tokens_per_char) + MESSAGE_TOKENS * messages + self.fixed_for(with_tools)

    def contradicted_by(self, prompt_tokens: int, chars: int, messages: int, with_tools: bool) -> bool:
        """Whether the server's count of a request it was sent, less this measure's fixed cost, is no count
        its text could have (`believable_count`): the fixed cost is wrong, and no ratio can correct it."""
        return not believable_count(prompt_tokens - self.fixed_for(with_tools), chars, messages)

    def learn(self, prompt_tokens: int, chars: int, messages: int, with_tools: bool) -> float | None:
        """Take the server's count of a request it was sent: the ratio that count implies (its fixed cost
        and framing taken out) replaces the measure when higher (an estimate too low is what sends a
        request over the window), else the two are averaged. Returns the implied ratio (None: too little
        text to judge)."""
        if chars < LEARN_MIN_CHARS:
            return None
        low, high = TOKENS_PER_CHAR_RANGE
        implied = min(max((prompt_tokens - MESSAGE_TOKENS * messages - self.fixed_for(with_tools)) / chars, low), high)
        self.tokens_per_char = implied if implied > self.tokens_per_char else (self.tokens_per_char + implied) / 2
        self.replies += 1
        return implied

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens_per_char": self.tokens_per_char,
            "fixed_tokens": self.fixed_tokens,
            "tool_tokens": self.tool_tokens,
            "replies": self.replies,
            "tokenizer": self.tokenizer,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration | None:
        """The calibration from `estimates.json`; None when any figure is not believable."""
        ratio, fixed, tools, replies = (
            data.get(k) for k in ("tokens_per_char", "fixed_tokens", "tool_tokens", "replies")
        )
        low, high = TOKENS_PER_CHAR_RANGE
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not low <= ratio <= high:
            return None
        whole = [
            v for v in (fixed, tools, replies) if isinstance(v, int) and not isinstance(v, bool) and abs(v) < MAX_WINDOW
        ]
        if len(whole) != 3:
            return None
        fixed, tools, replies = whole
        if tools < 0 or replies < 0:
            return None
        tokenizer = data.get("tokenizer")
        return cls(float(ratio), fixed, tools, replies, tokenizer if tokenizer in (TEMPLATE, TEXT) else "")


TAIL_MARKER = "\u2063xun-tail\u2063"
"""Put in place of a message to find where the template renders it (text no conversation holds)."""
TEMPLATE = "template"
TEXT = "text"
LEARN_MIN_CHARS = 200
"""Below this much message text, a reply's count says more about the framing than about the ratio."""


@dataclass(slots=True)
class ServerKnowledge:
    """What a session learned about its server; an agent shares it with its helpers (the summarizer)."""

    discovered: Window = UNKNOWN
    learned: Window = UNKNOWN
    """Named (or implied) by an overflow error in this session: the truest figure, after the config."""
    remembered: Window = UNKNOWN
    """Learned in an earlier session (`LearnedWindows`)."""
    calibration: Calibration | None = None
    """The tokenizer's measure: measured this session, or remembered (`LearnedEstimates`); corrected by
    every reply."""
    discovery: Any = None
    """The discovery task, once started."""
    calibrated: bool = False
    """Calibration was tried (it runs once per session, successful or not)."""
    largest_fit: int = 0
    """The largest request estimate the server answered: the window is at least this."""
    doubted: bool = False
    """A count from the server was not believed this session (`believable_count`): said once."""

    def window(self) -> Window:
        for window in (self.learned, self.discovered, self.remembered):
            if window.known:
                return window
        return UNKNOWN


# ------------------------------------------------------------------------------------------ discovery


def server_root(base_url: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (llama.cpp, Ollama and vLLM keep extras at the root)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _http_json(url: str, body: Any | None, headers: dict[str, str], timeout: float) -> Any:
    """GET (or POST `body` as JSON) and parse the JSON answer; None on any failure or a non-200."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    for name, value in headers.items():
        request.add_header(name, value)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    deadline = time.monotonic() + timeout  # in all: a server that trickles bytes must not hold this forever
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's own server
            if response.status != 200:
                return None
            parts: list[bytes] = []
            size = 0
            while chunk := response.read1(65536):
                parts.append(chunk)
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES or time.monotonic() > deadline:
                    return None
            raw = b"".join(parts)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        return None


def _from_models(answer: Any, model: str) -> int | None:
    """`max_model_len` (vLLM), `context_length` (OpenRouter, LM Studio), `meta.n_ctx` (llama-server) or the
    like, for `model`."""
    items = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        return None
    cards = [item for item in items if isinstance(item, dict)]
    chosen = [card for card in cards if card.get("id") == model] or (cards if len(cards) == 1 else [])
    for card in chosen:
        for name in (
            "max_model_len",
            "loaded_context_length",
            "context_length",
            "max_context_length",
            "context_window",
        ):
            value = _plausible(card.get(name))
            if value is not None:
                return value
        top = card.get("top_provider")
        if isinstance(top, dict) and (value := _plausible(top.get("context_length"))) is not None:
            return value
        meta = card.get("meta")  # llama.cpp's llama-server: the context it runs with (n_ctx_train is the model's)
        if isinstance(meta, dict) and (value := _plausible(meta.get("n_ctx"))) is not None:
            return value
    return None


def _from_props(answer: Any) -> int | None:
    """llama.cpp's `/props`: `default_generation_settings.n_ctx` (or `n_ctx` at the top)."""
    if not isinstance(answer, dict):
        return None
    settings = answer.get("default_generation_settings")
    if isinstance(settings, dict) and (value := _plausible(settings.get("n_ctx"))) is not None:
        return value
    return _plausible(answer.get("n_ctx"))


def _from_ollama(answer: Any) -> int | None:
    """Ollama's `/api/show`: the `num_ctx` parameter when set, else the model's `*.context_length`."""
    if not isinstance(answer, dict):
        return None
    parameters = answer.get("parameters")
    if isinstance(parameters, str):
        match = re.search(r"^\s*num_ctx\s+(\d+)", parameters, re.MULTILINE)
        if match and (value := _plausible(match.group(1))) is not None:
            return value
    info = answer.get("model_info")
    if isinstance(info, dict):
        for name, value in info.items():
            if isinstance(name, str) and name.endswith(".context_length") and (found := _plausible(value)) is not None:
                return found
    return None


def discover_window_sync(
    base_url: str, model: str, headers: dict[str, str], timeout: float = DISCOVERY_TIMEOUT
) -> Window:
    """Ask the server for its window, the ways servers say it; UNKNOWN when none answers."""
    root = server_root(base_url)
    base = base_url.rstrip("/")
    found = _from_models(_http_json(f"{base}/models", None, headers, timeout), model)
    if found is not None:
        return Window(found, f"the server's {urlsplit(base).path or ''}/models", SERVER)
    found = _from_props(_http_json(f"{root}/props", None, headers, timeout))
    if found is not None:
        return Window(found, "the server's /props", SERVER)
    found = _from_ollama(_http_json(f"{root}/api/show", {"model": model}, headers, timeout))
    if found is not None:
        return Window(found, "the server's /api/show", SERVER)
    return UNKNOWN


def count_tokens_sync(
    base_url: str, model: str, text: str, headers: dict[str, str], timeout: float = DISCOVERY_TIMEOUT
) -> int | None:
    """Tokens of `text` by the server's own tokenizer (llama-cpp-python, llama.cpp, vLLM), if it has one."""
    root = server_root(base_url)
    answer = _http_json(f"{root}/extras/tokenize/count", {"input": text, "model": model}, headers, timeout)
    if isinstance(answer, dict) and isinstance(count := answer.get("count"), int):
        return count
    answer = _http_json(f"{root}/tokenize", {"content": text}, headers, timeout)  # llama.cpp
    if isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
        return len(answer["tokens"])
    answer = _http_json(f"{root}/tokenize", {"model": model, "prompt": text}, headers, timeout)  # vLLM
    if isinstance(answer, dict) and isinstance(count := answer.get("count"), int):
        return count
    return None


def _render(
    base_url: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    headers: dict[str, str],
    timeout: float = DISCOVERY_TIMEOUT,
) -> str | None:
    """llama.cpp's chat template rendered with the tool definitions (`/apply-template`): the prompt text."""
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    rendered = _http_json(f"{server_root(base_url)}/apply-template", body, headers, timeout)
    return rendered["prompt"] if isinstance(rendered, dict) and isinstance(rendered.get("prompt"), str) else None


def _tokenize(base_url: str, text: str, headers: dict[str, str], timeout: float = DISCOVERY_TIMEOUT) -> int | None:
    """Tokens of a rendered prompt by llama.cpp's tokenizer (`/tokenize`, with the special tokens the model sees)."""
    answer = _http_json(
        f"{server_root(base_url)}/tokenize",
        {"content": text, "add_special": True, "parse_special": True},
        headers,
        timeout,
    )
    return len(answer["tokens"]) if isinstance(answer, dict) and isinstance(answer.get("tokens"), list) else None


def count_prompt_sync(
    base_url: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    headers: dict[str, str],
    timeout: float = DISCOVERY_TIMEOUT,
) -> int | None:
    """Tokens of a whole chat request as llama.cpp's server sends it to the model: its chat template
    rendered with the tool definitions, counted by its tokenizer. None when the server has no such endpoints."""
    prompt = _render(base_url, messages, tools, headers, timeout)
    return _tokenize(base_url, prompt, headers, timeout) if prompt is not None else None


def request_text(messages: list[dict[str, Any]]) -> str:
    """The text of a request's messages as a tokenizer is given it to count (content, reasoning, and the
    calls' names and arguments, one message a line): how the calibration measures, and a TEXT count counts."""
    parts: list[str] = []
    for message in messages:
        text = content_text(message.get("content"))
        for name in ("reasoning_content", "reasoning"):
            if isinstance(message.get(name), str):
                text += message[name]
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                text += f"{function.get('name') or ''}{function.get('arguments') or ''}"
        parts.append(text)
    return "\n".join(parts)


def count_request_sync(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    headers: dict[str, str],
    calibration: Calibration,
) -> int | None:
    """The next request's prompt tokens by the server's tokenizer, the way `calibration.tokenizer` says it
    can count (None when it cannot, or did not answer)."""
    if calibration.tokenizer == TEMPLATE:
        return count_prompt_sync(base_url, messages, tools, headers)
    if calibration.tokenizer == TEXT:
        tokens = count_tokens_sync(base_url, model, request_text(messages), headers)
        if tokens is not None:
            return tokens + MESSAGE_TOKENS * len(messages) + calibration.fixed_for(bool(tools))
    return None


def count_tail_sync(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    headers: dict[str, str],
    calibration: Calibration,
    start: int,
) -> int | None:
    """Tokens of `messages[start:]` in the request, by the server's tokenizer (None when it cannot count):
    after a change at `start`, what the next request pays uncached. TEMPLATE: the whole request less the
    part before `start` (both rendered, so the tail's framing is the template's); TEXT: the tail's text
    and its framing."""
    if calibration.tokenizer == TEMPLATE:
        # the part before `start` is what the template renders before a marker put in that message's
        # place (a template may refuse to render a prefix ending in an assistant's tool calls)
        marked = (
            [*messages[:start], {**messages[start], "content": TAIL_MARKER}, *messages[start + 1 :]]
            if start < len(messages)
            else messages
        )
        rendered, rendered_marked = (
            _render(base_url, messages, tools, headers),
            _render(base_url, marked, tools, headers),
        )
        if rendered is None or rendered_marked is None or TAIL_MARKER not in rendered_marked:
            return None
        prefix = rendered_marked[: rendered_marked.index(TAIL_MARKER)]
        whole, before = (_tokenize(base_url, text, headers) for text in (rendered, prefix))
        return whole - before if whole is not None and before is not None else None
    if calibration.tokenizer == TEXT:
        tail = messages[start:]
        tokens = count_tokens_sync(base_url, model, request_text(tail), headers)
        return tokens + MESSAGE_TOKENS * len(tail) if tokens is not None else None
    return None


async def count_tail(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    headers: dict[str, str],
    calibration: Calibration,
    start: int,
) -> int | None:
    return await asyncio.to_thread(count_tail_sync, base_url, model, messages, tools, headers, calibration, start)


async def count_request(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    headers: dict[str, str],
    calibration: Calibration,
) -> int | None:
    return await asyncio.to_thread(count_request_sync, base_url, model, messages, tools, headers, calibration)


async def count_prompt(
    base_url: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, headers: dict[str, str]
) -> int | None:
    return await asyncio.to_thread(count_prompt_sync, base_url, messages, tools, headers)


async def discover_window(base_url: str, model: str, headers: dict[str, str]) -> Window:
    return await asyncio.to_thread(discover_window_sync, base_url, model, headers)


async def count_tokens(base_url: str, model: str, text: str, headers: dict[str, str]) -> int | None:
    return await asyncio.to_thread(count_tokens_sync, base_url, model, text, headers)
