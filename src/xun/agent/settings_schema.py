"""xun's settings as one validated model (`XunConfig`), table by table: the fields, their defaults, their
bounds and their descriptions (what `xun config show` prints). The model knows nothing of files: the
layers it is merged from are `xun.agent.config_layers`'s, the wording of its errors `config_errors`'.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from xun.agent import keymap as keymap_table
from xun.compact.summary import MIN_SUMMARY_TOKENS, SUMMARY_MAX_TOKENS

DEFAULT_SOURCE = "default"
"""Where a value no layer set comes from."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{28,}")
# Prefixes of real provider keys (OpenAI, Groq, xAI, Google, GitHub, Hugging Face, Perplexity, Replicate...).
_SECRET_PREFIXES = ("sk-", "sk_", "gsk_", "xai-", "AIza", "ghp_", "gho_", "github_pat_", "hf_", "pplx-", "r8_")


def looks_like_secret(value: object) -> bool:
    """Heuristic for an API key pasted where a name belongs; used to refuse storing or echoing it."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    if text.startswith(_SECRET_PREFIXES) and len(text) >= 8:
        return True
    if text.lower().startswith("bearer "):
        return True
    # A long unbroken run of letters and digits is how generated keys look; names and paths break up.
    for run in _ALNUM_RUN.findall(text):
        if any(c.isdigit() for c in run) and any(c.isalpha() for c in run):
            return True
    return False


class _Section(BaseModel):
    """Shared rules: unknown keys are errors, types are exact (TOML has real types), assignment re-validates."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)


def _http_url(value: str | None, without_credentials: str, *, no_user: bool = False) -> str | None:
    """An http(s) URL with a host, stripped; a password in it (or any user, with `no_user`) is refused
    with `without_credentials`, which says where the secret belongs instead."""
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("an http:// or https:// URL with a host")
    if parts.password or (no_user and parts.username):
        raise ValueError(without_credentials)
    return value.strip()


class ProviderSettings(_Section):
    """Where the OpenAI-compatible server is and how to authenticate to it."""

    base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible API (e.g. http://localhost:11434/v1). Unset: the "
        "official OpenAI API, or the offline demo server when no API key is set either.",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="NAME of the environment variable holding the API key. The key itself is read at run "
        "time and never written to config, sessions, logs or events.",
    )
    timeout: float = Field(
        default=120.0,
        gt=0,
        description="Seconds to wait on the server (to connect, and between streamed chunks) before the call "
        "counts as failed and is retried.",
    )

    deadline: float = Field(
        default=900.0,
        gt=0,
        description="Seconds one model call may take in all, streaming included; a server that keeps the "
        "stream open without finishing is cut off there and the call retried.",
    )

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return _http_url(value, "a URL without a password in it (put credentials in the api_key_env variable)")

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str) -> str:
        if looks_like_secret(value):
            raise ValueError(
                "the NAME of an environment variable (like OPENAI_API_KEY), not the API key itself; "
                "put the key in that variable"
            )
        if not _ENV_NAME.match(value):
            raise ValueError("an environment variable name (letters, digits and _, not starting with a digit)")
        return value


class ModelSettings(_Section):
    """Which model to talk to and what is known about it."""

    name: str = Field(default="gpt-4o-mini", min_length=1, description="Model name sent with every request.")
    context_window: int | None = Field(
        default=None,
        gt=0,
        description="The model's context window in tokens. Unset: asked of the server (llama.cpp /props, "
        "vLLM, Ollama, LM Studio, OpenRouter) or learned from its overflow errors. It lowers the compaction "
        "threshold to threshold_ratio of it, and no request that cannot fit it is sent.",
    )
    output_reserve: int | None = Field(
        default=None,
        gt=0,
        description="Tokens of the window kept free for the reply when checking that a request fits, and "
        "the reply's max_tokens (while the window is unknown too). Unset: an eighth of the window, at least 256 "
        "and at most 16384, and no max_tokens while the window is unknown.",
    )
    reasoning_field: Literal["reasoning", "reasoning_content"] | None = Field(
        default=None,
        description="Which delta field carries the provider's reasoning text; detected and remembered by "
        "the agent so it is sent back unchanged on later turns.",
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature; unset leaves the server's default."
    )


class AutoCompactSettings(_Section):
    """When and how the context is compacted automatically before a model call."""

    enabled: bool = Field(default=True, description="Compact automatically before model calls at all.")
    mode: Literal["auto", "ask", "off"] = Field(
        default="auto",
        description='What happens before an automatic summary: "auto" runs it, "ask" asks the front end '
        'first (proceeding after ask_timeout), "off" never summarises automatically (reclaims still run).',
    )
    ask_timeout: float = Field(
        default=30.0, gt=0, description="Seconds an unanswered ask-mode prompt waits before the summary runs."
    )
    token_threshold: int = Field(
        default=192_000,
        gt=0,
        description="Compact before a model call when the estimate of the request (messages and tool "
        "definitions, calibrated by the server's counts) exceeds this (or threshold_ratio of the context "
        "window, when known and lower).",
    )
    threshold_ratio: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Fraction of the context window used as the threshold when that is below token_threshold.",
    )
    toolcall_keep_max: int = Field(
        default=12, ge=1, description="Newest tool results kept verbatim when old ones are reclaimed."
    )
    summary_keep_max: int = Field(
        default=16, ge=1, description="Newest messages kept verbatim when older ones are summarised."
    )
    escalation_rounds: int = Field(
        default=2, ge=0, description="Cheap reclaim-only rounds allowed before escalating to a summary."
    )
    max_retries: int = Field(
        default=2, ge=0, description="Extra compactions, with halved keep counts, when a summary is not enough."
    )
    policy: Literal["cache-aware", "escalation"] = Field(
        default="cache-aware",
        description='"cache-aware" prices compaction by the server\'s prompt cache: above low_water it reclaims '
        "when that pays for the broken prefix, over the threshold it reclaims down to low_water, and after an idle "
        'gap (cache.ttl_seconds) it reclaims and summarises while the cache is cold; "escalation" (the seed\'s) '
        'reclaims just below the threshold each time ("seed" is read as "escalation").',
    )
    low_water: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="The cache-aware policy's low-water mark, a fraction of the threshold: reclaims over the "
        "threshold go down to it; above it, reclaims that pay for themselves run early.",
    )

    @field_validator("policy", mode="before")
    @classmethod
    def _seed_is_escalation(cls, value: object) -> object:
        """Configurations written before the escalation policy had its name call it "seed"."""
        return "escalation" if value == "seed" else value


class CacheSettings(_Section):
    """The server's prompt cache, as far as xun's policy and figures need to know it."""

    ttl_seconds: float = Field(
        default=300.0,
        gt=0,
        description="Seconds the server keeps a prompt prefix cached; after a longer idle gap the next call "
        "pays full price anyway, so the cache-aware policy reclaims then.",
    )
    cached_discount: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="The price of a cached input token as a share of an uncached one (for the billed-input figure).",
    )


class CompressionSettings(_Section):
    """How summaries are written."""

    model: str | None = Field(
        default=None, min_length=1, description="A (cheaper) model for summaries; unset uses model.name."
    )
    prompt_files: list[str] = Field(
        default_factory=list,
        description="Extra instruction files (paths relative to the working directory) appended to the "
        "summary prompt; a missing file is reported when a summary runs, not at load.",
    )
    instructions: str | None = Field(
        default=None, description="Focus instructions for automatic summaries (what must survive)."
    )
    max_tokens: int = Field(
        default=SUMMARY_MAX_TOKENS,
        ge=MIN_SUMMARY_TOKENS,
        description="The longest summary, in tokens (its request's max_tokens; never more than a quarter of a "
        "known window). Small local models tend to write up to the limit: a lower one makes each summary faster.",
    )


class OffloadSettings(_Section):
    """Where summarised originals go."""

    enabled: bool = Field(
        default=True,
        description="Append the originals of summarised messages to the Markdown offload log in .xun/.",
    )


class RetrySettings(_Section):
    """Retrying transient server failures (5xx, timeouts, dropped streams)."""

    attempts: int = Field(
        default=3, ge=1, description="Tries per model call in total, the first included (1 = never retry)."
    )
    backoff_base: float = Field(
        default=0.5, gt=0, description="Seconds before the first retry; doubled on each further retry."
    )
    backoff_max: float = Field(default=8.0, gt=0, description="Upper bound, in seconds, of one retry delay.")

    @field_validator("backoff_max")
    @classmethod
    def _not_below_base(cls, value: float, info: ValidationInfo) -> float:
        base = info.data.get("backoff_base")
        if base is not None and value < base:
            raise ValueError(f"a number >= retry.backoff_base ({base})")
        return value

    def delay(self, retry_number: int, rand: Callable[[], float] = random.random, asked: float | None = None) -> float:
        """Seconds to sleep before retry `retry_number` (1-based): capped exponential, with jitter so
        clients that failed together do not retry together. `asked` is the server's Retry-After: the
        wait is at least that, still never above backoff_max."""
        exponent = min(max(retry_number, 1) - 1, 60)
        ceiling = min(self.backoff_max, self.backoff_base * (2**exponent))
        delay = ceiling * (0.5 + 0.5 * rand())
        if asked is not None and asked > delay:
            delay = min(asked, self.backoff_max)
        return float(delay)


class ToolSettings(_Section):
    """Limits for the built-in tools."""

    max_output_chars: int = Field(
        default=50_000, gt=0, description="Tool output longer than this is cut, with a note of how much."
    )
    command_timeout: float = Field(
        default=120.0, gt=0, description="Default seconds before run_command kills the command's process group."
    )


def _problem_text(text: str) -> PydanticCustomError:
    """A validation error whose whole message is `text` (not "expected …, got …")."""
    return PydanticCustomError("xun_problem", "{text}", {"text": text})


def _known_keys(value: str) -> str:
    try:
        return keymap_table.normalise_keys(value)
    except ValueError as exc:
        raise _problem_text(str(exc)) from None


def _known_binding(value: str) -> str:
    if value not in keymap_table.BINDINGS:
        raise _problem_text(keymap_table.unknown_binding(value))
    return value


_KeySpec = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), AfterValidator(_known_keys)]
_BindingId = Annotated[str, AfterValidator(_known_binding)]
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


class McpToolFilter(_Section):
    """Which of a server's tools are offered to the model."""

    allow: list[str] | None = Field(
        default=None, description="Only these tools (their names on the server); unset offers every tool."
    )
    deny: list[str] = Field(default_factory=list, description="Never these tools (applied after allow).")


class McpServerSettings(_Section):
    """One MCP server: a local program over stdio (`command`) or a remote one over streamable HTTP (`url`)."""

    command: str | None = Field(default=None, min_length=1, description="The program to run (stdio).")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment variables for the program (it gets only HOME, PATH, SHELL, TERM, USER, "
        "LOGNAME and these; never the API key).",
    )
    pass_env: list[str] = Field(
        default_factory=list,
        description="NAMES of xun's environment variables the program also gets (e.g. a token it needs), read "
        "when it starts, so their values never sit in a config file.",
    )
    url: str | None = Field(default=None, description="The endpoint of a streamable HTTP server.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers as header = NAME of the environment variable holding its value (read when "
        "the server starts, never written anywhere).",
    )
    enabled: bool = Field(default=True, description="Start this server with the session.")
    trust: bool = Field(
        default=False,
        description="Run this server's tools without asking (only in the user config or on the command line; "
        "a project file cannot, trusted or not).",
    )
    tools: McpToolFilter = Field(default_factory=McpToolFilter, description="Which of its tools are offered.")
    timeout: float = Field(default=60.0, gt=0, description="Seconds one tool call may take before it fails.")
    startup_timeout: float = Field(
        default=30.0, gt=0, description="Seconds the server may take to start and list its tools."
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return _http_url(
            value, "a URL without credentials in it (send them in headers from environment variables)", no_user=True
        )

    @field_validator("pass_env")
    @classmethod
    def _check_pass_env(cls, value: list[str]) -> list[str]:
        for variable in value:
            if looks_like_secret(variable) or not _ENV_NAME.match(variable):
                raise ValueError("a list of environment variable NAMES (like GITHUB_TOKEN), not their values")
        return value

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header, variable in value.items():
            if not _HEADER_NAME.match(header):
                raise ValueError(f"HTTP header names ({header!r} is not one)")
            if looks_like_secret(variable) or not _ENV_NAME.match(variable):
                raise ValueError(
                    f"the NAME of an environment variable for header {header!r} (like MY_TOKEN), not its value; "
                    "the value is read from that variable when the server starts"
                )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("a table with exactly one of command (a local server) or url (a remote one)")
        return self


class McpSettings(_Section):
    """Model Context Protocol servers whose tools are offered to the model."""

    servers: dict[str, McpServerSettings] = Field(
        default_factory=dict,
        description="Servers by name ([mcp.servers.NAME]); their tools are offered as NAME__tool.",
    )

    @field_validator("servers")
    @classmethod
    def _check_names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in value:
            if not _SERVER_NAME.match(name):
                raise ValueError(f"server names of 1-32 letters, digits, _ and - ({name!r} is not one)")
        return value


class UiSettings(_Section):
    """Front-end preferences."""

    keymap: dict[_BindingId, _KeySpec] = Field(
        default_factory=dict,
        description='Key bindings by binding id, e.g. {compact = "f5", quit = "ctrl+q"}; several keys are '
        "comma-separated.",
    )

    @field_validator("keymap")
    @classmethod
    def _no_key_twice(cls, value: dict[str, str]) -> dict[str, str]:
        errors, _ = keymap_table.clashes(value)
        if errors:
            raise _problem_text("; ".join(errors))
        return value


class ModelPrice(_Section):
    """What one model costs, per million tokens (in the currency the user thinks in)."""

    input: float = Field(ge=0, description="Price of a million prompt tokens.")
    output: float = Field(ge=0, description="Price of a million completion tokens.")
    cached_input: float | None = Field(
        default=None, ge=0, description="Price of a million cached prompt tokens (unset: they cost as input)."
    )


class XunConfig(_Section):
    """All of xun's settings. Cheap to deep-copy: `Agent.inherit` gives each child its own."""

    provider: ProviderSettings = Field(
        default_factory=ProviderSettings, description="The OpenAI-compatible server and how to reach it."
    )
    model: ModelSettings = Field(
        default_factory=ModelSettings, description="Which model answers, and what is known about it."
    )
    auto_confirm: bool = Field(
        default=False,
        description="Run write_file and run_command without asking. Only the user file or the command line "
        "can turn this on, never a project file.",
    )
    auto_compact: AutoCompactSettings = Field(
        default_factory=AutoCompactSettings, description="When and how the context is compacted automatically."
    )
    cache: CacheSettings = Field(
        default_factory=CacheSettings, description="The server's prompt cache (time to live, cached price share)."
    )
    compression: CompressionSettings = Field(
        default_factory=CompressionSettings, description="How summaries of old messages are written."
    )
    offload: OffloadSettings = Field(
        default_factory=OffloadSettings, description="The Markdown log of summarised originals."
    )
    retry: RetrySettings = Field(
        default_factory=RetrySettings, description="Retrying model calls after transient server errors."
    )
    tools: ToolSettings = Field(default_factory=ToolSettings, description="Limits of the built-in tools.")
    ui: UiSettings = Field(default_factory=UiSettings, description="Front-end preferences such as key bindings.")
    mcp: McpSettings = Field(
        default_factory=McpSettings, description="MCP servers (only in the user config or on the command line)."
    )
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description='Prices per million tokens by model name, e.g. [pricing."gpt-4o-mini"] input = 0.15, '
        "output = 0.6 (cached_input optional): the app then shows what the session cost.",
    )

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _withheld: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def withheld(self) -> list[str]:
        """Dotted keys the project file set but may not until its folder is trusted (left out)."""
        return list(self._withheld)

    @property
    def withheld_settings(self) -> dict[str, str]:
        """The same keys with their values as shown to the user (a value like a key is never shown)."""
        return dict(self._withheld)

    @property
    def keymap_warnings(self) -> list[str]:
        """Keys `ui.keymap` takes from actions it leaves without one (they still run from the palette)."""
        return keymap_table.clashes(self.ui.keymap)[1]

    def effective_threshold(self, window: int | None = None) -> int:
        """The token count that triggers compaction: token_threshold, or threshold_ratio of the context
        window (`window`, else model.context_window) when the window is known and that is lower."""
        threshold = self.auto_compact.token_threshold
        window = window if window is not None else self.model.context_window
        if window is not None:
            threshold = min(threshold, max(1, math.floor(self.auto_compact.threshold_ratio * window)))
        return threshold

    def set_here(self, dotted_key: str, value: Any, source: str) -> None:
        """Change one setting for this session only (nothing is written) and say where it came from,
        e.g. the offline server's address, or a choice made in the app."""
        section, _, name = dotted_key.rpartition(".")
        target: Any = self
        for part in filter(None, section.split(".")):
            target = getattr(target, part)
        setattr(target, name, value)
        self._sources[dotted_key] = source

    def source_of(self, dotted_key: str) -> str:
        """Where a value came from: a file path, "environment (VAR)", "command line" or "default"."""
        if dotted_key in self._sources:
            return self._sources[dotted_key]
        prefix = dotted_key + "."
        found = sorted({src for key, src in self._sources.items() if key.startswith(prefix)})
        if found:
            return ", ".join(found)
        parts = dotted_key.split(".")
        for end in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:end])
            if parent in self._sources:
                return self._sources[parent]
        return DEFAULT_SOURCE
