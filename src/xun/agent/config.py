"""xun's settings: one validated model, merged from TOML files, the environment and `--set` flags.

Layers, later wins, merged per table: defaults, the user file (`$XDG_CONFIG_HOME/xun/config.toml`), the
project file (`.xun/config.toml`, or under `$XUN_HOME`), the environment (`OPENAI_BASE_URL`, `XUN_MODEL`),
then command-line overrides `key.sub=value`. Every mistake becomes one `ConfigError` whose lines name the
source, the dotted key and what was expected, because users read these, not pydantic tracebacks.

The API key is never part of the config: `provider.api_key_env` names the environment variable holding it,
and `resolve_api_key` reads that variable only when a client is built.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import random
import re
import tomllib
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

import tomli_w
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from xun.agent import keymap as keymap_table
from xun.base import paths
from xun.base.atomic import open_regular
from xun.base.confined import write_state

__all__ = [
    "AutoCompactSettings",
    "CompressionSettings",
    "ConfigError",
    "ConfigItem",
    "ConfigProblem",
    "McpServerSettings",
    "McpSettings",
    "ModelSettings",
    "OffloadSettings",
    "ProviderSettings",
    "RetrySettings",
    "TRUST_REQUIRED_KEYS",
    "ToolSettings",
    "UiSettings",
    "XunConfig",
    "describe_config",
    "load_config",
    "looks_like_secret",
    "parse_override",
    "resolve_api_key",
    "set_config_value",
    "unset_config_value",
    "uses_offline_demo",
]

DEFAULT_SOURCE = "default"
ENV_SOURCE = "environment"
CLI_SOURCE = "command line"

# Environment variables that feed config keys (the API key variable is read separately, at run time).
ENV_KEYS: dict[str, str] = {
    "OPENAI_BASE_URL": "provider.base_url",
    "XUN_MODEL": "model.name",
}

# Keys a project file may not turn on: a checkout from someone else must not switch confirmations off.
USER_ONLY_TRUE_KEYS = frozenset({"auto_confirm"})
TRUST_REQUIRED_KEYS = frozenset({"provider", "compression.prompt_files", "ui.keymap", "mcp"})
"""Keys (a dotted key, or a whole table) a project's `.xun/config.toml` may set only once the user trusts
its folder (`xun trust`, or the app's question; see `xun.agent.trust`): where requests and the API key go
(`provider`), files read into requests (`compression.prompt_files`), key bindings (`ui.keymap`, which
could put "allow" on Enter), and MCP servers (`mcp`: programs xun starts, or URLs it sends data to).
Until then they are left out and listed in `XunConfig.withheld`. Add a table here when a new one can
send data or run code."""

_MAX_DEPTH = 8  # our deepest key is ui.keymap.<id>; anything far deeper is garbage, refuse it early
_KEY_PART = re.compile(r"^[A-Za-z0-9_-]+$")
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


# --------------------------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong: where it came from, which key, and what was wrong with it."""

    source: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.key}: {self.message}" if self.key else f"{self.source}: {self.message}"


class ConfigError(ValueError):
    """Every configuration mistake: the message names the source, the dotted key and what was expected."""

    def __init__(self, problems: ConfigProblem | Iterable[ConfigProblem]):
        if isinstance(problems, ConfigProblem):
            problems = [problems]
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @property
    def source(self) -> str:
        """The source of the first problem (a file path, "environment" or "command line")."""
        return self.problems[0].source if self.problems else ""

    @property
    def key(self) -> str:
        """The dotted key of the first problem."""
        return self.problems[0].key if self.problems else ""


def _problem(source: str, key: str, message: str) -> ConfigError:
    return ConfigError(ConfigProblem(source, key, message))


# --------------------------------------------------------------------------------------------- models


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
        "the reply's max_tokens when the window is known. Unset: an eighth of the window, at least 256 and at "
        "most 16384.",
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
    policy: Literal["cache-aware", "seed"] = Field(
        default="cache-aware",
        description='"cache-aware" prices compaction by the server\'s prompt cache: above low_water it reclaims '
        'when that pays for the broken prefix, over the threshold it reclaims down to low_water, and after an idle '
        'gap (cache.ttl_seconds) it reclaims and summarises while the cache is cold; "seed" reclaims just below '
        'the threshold each time.',
    )
    low_water: float = Field(
        default=0.5, gt=0, le=1,
        description="The cache-aware policy's low-water mark, a fraction of the threshold: reclaims over the "
        "threshold go down to it; above it, reclaims that pay for themselves run early.",
    )


class CacheSettings(_Section):
    """The server's prompt cache, as far as xun's policy and figures need to know it."""

    ttl_seconds: float = Field(
        default=300.0, gt=0,
        description="Seconds the server keeps a prompt prefix cached; after a longer idle gap the next call "
        "pays full price anyway, so the cache-aware policy reclaims then.",
    )
    cached_discount: float = Field(
        default=0.1, ge=0, le=1,
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
        return _http_url(value, "a URL without credentials in it (send them in headers from environment variables)",
                         no_user=True)

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
        default=None, ge=0, description="Price of a million cached prompt tokens (unset: they cost as input).")


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


# ----------------------------------------------------------------------------- describing fields & values


def _walk_annotation(annotation: Any, metadata: list[Any], loc: tuple[Any, ...]) -> tuple[Any, list[Any]] | None:
    """Follow a pydantic error location through the models; returns the annotation at its end."""
    for part in loc:
        annotation = _strip_optional(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation, metadata = field.annotation, list(field.metadata)
            continue
        origin = get_origin(annotation)
        if origin is list:
            annotation, metadata = _unwrap_annotated(get_args(annotation)[0])
        elif origin is dict:
            annotation, metadata = _unwrap_annotated(get_args(annotation)[1])
        else:
            return None
    return annotation, metadata


def _unwrap_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        return base, list(extra)
    return annotation, []


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _bounds(metadata: list[Any]) -> str:
    words = []
    for item in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(item, attr, None)
            if bound is not None:
                words.append(f"{sign} {bound}")
    return " and ".join(words)


def _expectation(annotation: Any, metadata: list[Any]) -> str:
    """Plain-English description of what a field accepts, e.g. "an integer > 0"."""
    annotation = _strip_optional(annotation)
    origin = get_origin(annotation)
    bounds = _bounds(metadata)
    suffix = f" {bounds}" if bounds else ""
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in get_args(annotation))
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer" + suffix
    if annotation is float:
        return "a number" + suffix
    if annotation is str:
        non_empty = any(getattr(m, "min_length", 0) for m in metadata)
        return "a non-empty string" if non_empty else "a string"
    if origin is list:
        return "a list of " + _plural(get_args(annotation)[0])
    if origin is dict:
        return "a table of " + _plural(get_args(annotation)[1])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a table"
    return "a valid value"


def _plural(annotation: Any) -> str:
    annotation = _strip_optional(annotation)
    return {str: "strings", int: "integers", float: "numbers", bool: "booleans"}.get(annotation, "values")


def _show(value: Any) -> str:
    """A value as the user wrote it (TOML-ish), short, and never a secret."""
    if _holds_secret(value):
        return "a value that looks like an API key (not shown)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, list):
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = "a list"
    else:
        text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _holds_secret(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif looks_like_secret(item):
            return True
    return False


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":  # the error is in a table's key (ui.keymap.NAME), not its value
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _all_leaf_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    model = model or XunConfig
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = _strip_optional(field.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(_all_leaf_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append(prefix + name)
    return keys


def _suggest(loc: tuple[Any, ...]) -> str | None:
    """The closest known key to an unknown one, e.g. "auto_compact.token_threshold"."""
    parent = _walk_annotation(XunConfig, [], loc[:-1])
    unknown = str(loc[-1])
    if parent is not None:
        model = _strip_optional(parent[0])
        if isinstance(model, type) and issubclass(model, BaseModel):
            close = difflib.get_close_matches(unknown, list(model.model_fields), n=1, cutoff=0.6)
            if close:
                return _format_loc((*loc[:-1], close[0]))
    # Maybe it belongs in another table: match on the last part of every known key, then on the whole.
    leaves = _all_leaf_keys()
    by_last = {key.rsplit(".", 1)[-1]: key for key in leaves}
    close = difflib.get_close_matches(unknown, list(by_last), n=1, cutoff=0.75)
    if close:
        return by_last[close[0]]
    close = difflib.get_close_matches(_format_loc(loc), leaves, n=1, cutoff=0.8)
    return close[0] if close else None


def _problems_from(error: ValidationError, source_for: Callable[[str], str]) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    seen: set[str] = set()
    for item in error.errors(include_url=False):
        loc = tuple(item.get("loc", ()))
        key = _format_loc(loc)
        if key in seen:
            continue
        seen.add(key)
        source = source_for(".".join(str(p) for p in loc))
        kind = item.get("type", "")
        value = item.get("input")
        if kind == "extra_forbidden":
            hint = _suggest(loc)
            message = "unknown key" + (f"; did you mean {hint}?" if hint else "")
        elif kind == "xun_problem":
            message = str(item.get("msg", ""))
        elif kind == "value_error":
            ctx = item.get("ctx") or {}
            expected = str(ctx.get("error", item.get("msg", "")))
            message = f"expected {expected}, got {_show(value)}"
        else:
            found = _walk_annotation(XunConfig, [], loc)
            expected = _expectation(*found) if found else "a valid value"
            message = f"expected {expected}, got {_show(value)}"
        problems.append(ConfigProblem(source, key, message))
    return problems


# ------------------------------------------------------------------------------------ reading & merging


def _check_depth(data: Any, source: str) -> None:
    stack = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise _problem(source, "", f"tables or arrays nested more than {_MAX_DEPTH} deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


_TOML_POS = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)\s*$", re.S)
_TOML_END = re.compile(r"^(?P<msg>.*?)\s*\(at end of document\)\s*$", re.S)


def _parse_toml_text(text: str, source: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POS.match(message)
        if match:
            raise _problem(
                source, "", f"invalid TOML at line {match['line']}, column {match['col']}: {match['msg']}"
            ) from None
        match = _TOML_END.match(message)
        if match:
            raise _problem(source, "", f"invalid TOML at the end of the file: {match['msg']}") from None
        raise _problem(source, "", f"invalid TOML: {message}") from None
    except RecursionError:
        raise _problem(source, "", "invalid TOML: nested too deeply") from None
    _check_depth(data, source)
    return data


def _read_toml_file(path: Path) -> dict[str, Any] | None:
    """The file's tables, or None when it does not exist; every other failure is a ConfigError."""
    source = str(path)
    try:
        with open_regular(path) as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise _problem(source, "", "expected a TOML file, found a directory") from None
    except OSError as exc:
        raise _problem(source, "", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise _problem(source, "", f"invalid TOML: not UTF-8 text (byte {exc.start}, line {line})") from None
    return _parse_toml_text(text, source)


def _leaves(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) for every non-table value and every empty table."""
    stack: list[tuple[str, Mapping[str, Any]]] = [(prefix, data)]
    while stack:
        base, node = stack.pop()
        for key, value in node.items():
            dotted = f"{base}{key}"
            if isinstance(value, dict) and value:
                stack.append((dotted + ".", value))
            else:
                yield dotted, value


def _deep_merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """Merge `layer` into `into` table by table; anything that is not two tables is replaced."""
    stack = [(into, layer)]
    while stack:
        target, source = stack.pop()
        for key, value in source.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                stack.append((target[key], value))
            else:
                target[key] = copy.deepcopy(value)


def _record_sources(sources: dict[str, str], layer: Mapping[str, Any], label: str) -> None:
    for dotted, value in _leaves(layer):
        prefix = dotted + "."
        if value == {} and any(k.startswith(prefix) for k in sources):
            continue  # an empty table merged onto a full one changes nothing
        for existing in [k for k in sources if k.startswith(prefix)]:
            del sources[existing]
        parts = dotted.split(".")
        for end in range(1, len(parts)):
            sources.pop(".".join(parts[:end]), None)
        sources[dotted] = label


def _split_key(dotted_key: str, source: str) -> list[str]:
    parts = dotted_key.strip().split(".")
    if not dotted_key.strip() or not all(_KEY_PART.match(p) for p in parts):
        raise _problem(
            source, dotted_key, "expected a dotted key of letters, digits, _ and -, like auto_compact.enabled"
        )
    return parts


def _deep_set(data: dict[str, Any], parts: list[str], value: Any) -> None:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _expects_string(parts: list[str]) -> bool:
    found = _walk_annotation(XunConfig, [], tuple(parts))
    if found is None:
        return False
    return _strip_optional(found[0]) is str


def parse_override(text: str, source: str = CLI_SOURCE) -> tuple[str, Any]:
    """Split `key.sub=value` and parse the value as TOML when it parses (`=1000`, `=true`, `="x"`, `=[..]`),
    else keep it as a plain string. A bare word for a string key stays a string, so `model.name=o3` and
    `model.name=2024` both mean the text."""
    if "=" not in text:
        raise _problem(source, text.strip(), "expected KEY=VALUE, e.g. auto_compact.token_threshold=100000")
    key, _, raw = text.partition("=")
    key = key.strip()
    parts = _split_key(key, source)
    return key, _parse_value(raw, parts)


def _parse_value(raw: str, parts: list[str]) -> Any:
    raw_stripped = str(raw).strip()
    value: Any = raw_stripped
    try:
        parsed = tomllib.loads(f"v = {raw_stripped}")
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        parsed = None
    if parsed is not None and list(parsed) == ["v"]:
        value = parsed["v"]
    if not isinstance(value, str) and _expects_string(parts) and not isinstance(value, (list, dict)):
        value = raw_stripped
    return value


# --------------------------------------------------------------------------------------------- loading


def _validate(data: dict[str, Any], source_for: Callable[[str], str]) -> XunConfig:
    try:
        return XunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems_from(exc, source_for)) from None
    except RecursionError:
        raise _problem(source_for(""), "", "values nested too deeply") from None


def _check_trust(data: Mapping[str, Any], source: str) -> None:
    """A project file may come with someone else's checkout: even in a trusted folder it may not switch
    confirmations off, for xun's own tools or for an MCP server's."""
    servers = data.get("mcp", {}).get("servers") if isinstance(data.get("mcp"), dict) else None
    for name, server in (servers.items() if isinstance(servers, dict) else ()):
        if isinstance(server, dict) and server.get("trust") is True:
            raise _problem(
                source,
                f"mcp.servers.{name}.trust",
                "can only be turned on in the user config or on the command line, not in a project file "
                "(a checkout from someone else must not let its tools run without asking)",
            )
    for key in USER_ONLY_TRUE_KEYS:
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is True:
            raise _problem(
                source,
                key,
                "can only be turned on in the user config or on the command line, not in a project file "
                "(a checkout from someone else must not switch confirmations off)",
            )


def withhold_untrusted(data: dict[str, Any]) -> dict[str, str]:
    """Remove the `TRUST_REQUIRED_KEYS` from a project file's tables; the dotted keys removed, sorted,
    with their values as `_show` shows them."""
    removed: dict[str, str] = {}
    for key in TRUST_REQUIRED_KEYS:
        *parents, last = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            value = node.pop(last)
            if isinstance(value, dict) and value:
                removed.update((f"{key}.{leaf}", _show(item)) for leaf, item in _leaves(value))
            else:
                removed[key] = _show(value)
            if parents and not node:  # `[ui]` left empty: the file set nothing there (`xun config` says default)
                _drop_empty(data, parents)
    return dict(sorted(removed.items()))


def _drop_empty(data: dict[str, Any], parts: list[str]) -> None:
    """Remove the table at `parts` and every table above it that this leaves empty."""
    for end in range(len(parts), 0, -1):
        *above, name = parts[:end]
        node: Any = data
        for part in above:
            node = node[part]
        if node[name]:
            return
        del node[name]


def flag_overrides(overrides: Iterable[str], base_url: str | None = None, model: str | None = None) -> list[str]:
    """`--set KEY=VALUE` overrides with `--base-url` and `--model` after them, so that those two win."""
    return [*overrides, *([f"provider.base_url={base_url}"] if base_url else []),
            *([f"model.name={model}"] if model else [])]


def load_config(
    workdir: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    *,
    trusted: bool | None = None,
) -> XunConfig:
    """Merge defaults < user file < project file < environment < `--set` overrides, then validate.

    `environ` (default `os.environ`) supplies OPENAI_BASE_URL and XUN_MODEL; the file locations come from
    `xun.base.paths` (XDG_CONFIG_HOME, XUN_HOME). `trusted` (default: what `xun.agent.trust` remembers for the
    workdir) decides whether the project file may set `TRUST_REQUIRED_KEYS`; when not, they are left out
    and named in `withheld`. Raises ConfigError naming every problem found.
    """
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    withheld: dict[str, str] = {}

    user_path = paths.user_config_path()
    project_path = paths.project_config_path(workdir)
    files = [(user_path, False)]
    if _same_file(user_path, project_path) is False:
        files.append((project_path, True))
    for path, is_project in files:
        data = _read_toml_file(path)
        if data is None:
            continue
        if is_project:
            _check_trust(data, str(path))
            if trusted is None:
                from xun.agent.trust import is_trusted

                trusted = is_trusted(workdir)
            if not trusted:
                withheld = withhold_untrusted(data)
        _deep_merge(merged, data)
        _record_sources(sources, data, str(path))

    for var, dotted in ENV_KEYS.items():
        value = env.get(var, "")
        if value.strip():
            layer: dict[str, Any] = {}
            _deep_set(layer, dotted.split("."), value.strip())
            _deep_merge(merged, layer)
            _record_sources(sources, layer, f"{ENV_SOURCE} ({var})")

    if isinstance(overrides, str):
        overrides = [overrides]
    for text in overrides:
        key, value = parse_override(text)
        layer = {}
        _deep_set(layer, key.split("."), value)
        _check_depth(layer, CLI_SOURCE)
        _deep_merge(merged, layer)
        _record_sources(sources, layer, CLI_SOURCE)

    config = _validate(merged, lambda dotted: _lookup_source(sources, dotted))
    config._sources = sources
    config._withheld = withheld
    return config


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _lookup_source(sources: Mapping[str, str], dotted: str) -> str:
    parts = dotted.split(".") if dotted else []
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found:
            return found
    # A table-level error (e.g. a wrong type for a whole section): blame whoever set keys under it.
    prefix = dotted + "." if dotted else ""
    below = sorted({src for key, src in sources.items() if key.startswith(prefix)})
    return ", ".join(below) if below else DEFAULT_SOURCE


# ---------------------------------------------------------------------------------------- api key etc.


def resolve_api_key(config: XunConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key from the variable named by `provider.api_key_env`, read now and never stored."""
    env = os.environ if environ is None else environ
    value = env.get(config.provider.api_key_env, "")
    value = value.strip() if isinstance(value, str) else ""
    return value or None


def uses_offline_demo(config: XunConfig, environ: Mapping[str, str] | None = None) -> bool:
    """True when no API key is set and no base_url is configured: the app then starts its offline demo
    server instead of failing against the official API."""
    return config.provider.base_url is None and resolve_api_key(config, environ) is None


# ------------------------------------------------------------------------------------------- describing


@dataclass(frozen=True)
class ConfigItem:
    """One row of `xun config show`."""

    key: str
    value: Any
    source: str
    description: str


def describe_config(config: XunConfig) -> list[ConfigItem]:
    """Every leaf setting with its value, where it came from and what it does, in declaration order."""
    items: list[ConfigItem] = []

    def walk(model: BaseModel, prefix: str) -> None:
        for name, field in type(model).model_fields.items():
            value = getattr(model, name)
            key = prefix + name
            if isinstance(value, BaseModel):
                walk(value, key + ".")
            elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
                for sub, model in value.items():  # e.g. mcp.servers.NAME.*
                    walk(model, f"{key}.{sub}.")
            else:
                items.append(ConfigItem(key, copy.deepcopy(value), config.source_of(key), field.description or ""))

    walk(config, "")
    return items


# --------------------------------------------------------------------------------------------- writing


def _check_not_secret(dotted_key: str, value: Any, source: str) -> None:
    last = dotted_key.rsplit(".", 1)[-1].lower()
    if re.search(r"api_?key|secret|passw", last) and last != "api_key_env":
        raise _problem(
            source,
            dotted_key,
            "xun never stores API keys or secrets; put the key in an environment variable and set "
            "provider.api_key_env to that variable's NAME",
        )
    if _holds_secret(value):
        raise _problem(
            source,
            dotted_key,
            "refusing to store a value that looks like an API key; put the key in an environment variable "
            "and set provider.api_key_env to that variable's NAME",
        )


def _is_user_file(path: Path) -> bool:
    return _same_file(path, paths.user_config_path())


def set_config_value(
    path: str | os.PathLike[str],
    dotted_key: str,
    raw_value: str,
    *,
    project: bool | None = None,
    before_write: Callable[[str], None] | None = None,
) -> Any:
    """Set one key in a TOML config file (`xun config set KEY VALUE`) and return the value stored.

    The value is parsed like a `--set` override; the whole resulting file is validated before anything is
    written; the write is atomic and the file is private (0600). `project` says whether the file is a
    project file (default: any file that is not the user config), which may not turn auto_confirm on.
    Comments in the file are not preserved. `before_write(dotted_key)` runs once all is valid, before the
    write, and may refuse it by raising.
    """
    path = Path(path)
    source = str(path)
    parts = _split_key(dotted_key, source)
    dotted_key = ".".join(parts)
    value = _parse_value(raw_value, parts)
    _check_not_secret(dotted_key, value, source)
    data = _read_toml_file(path) or {}
    _deep_set(data, parts, value)
    _check_depth(data, source)
    is_project = (not _is_user_file(path)) if project is None else project
    if is_project:
        _check_trust(data, source)
    try:
        _validate(data, lambda _dotted: source)
    except ConfigError as exc:
        raise ConfigError(_whole_key(problem, parts) for problem in exc.problems) from None
    if before_write is not None:
        before_write(dotted_key)
    _atomic_write_toml(path, data)
    return value


def _whole_key(problem: ConfigProblem, parts: list[str]) -> ConfigProblem:
    """`config set no.such.key 1` is refused for `no`, the first part nobody knows: name the key as given."""
    dotted = ".".join(parts)
    if problem.message.startswith("unknown key") and dotted.startswith(problem.key + ".") and problem.key:
        hint = _suggest(tuple(parts))
        return ConfigProblem(problem.source, dotted, "unknown key" + (f"; did you mean {hint}?" if hint else ""))
    return problem


def unset_config_value(path: str | os.PathLike[str], dotted_key: str) -> bool:
    """Remove a key from a TOML config file (back to the lower layers' value); False if it was not set."""
    path = Path(path)
    source = str(path)
    parts = _split_key(dotted_key, source)
    data = _read_toml_file(path)
    if data is None:
        return False
    chain = [data]
    for part in parts[:-1]:
        child = chain[-1].get(part)
        if not isinstance(child, dict):
            return False
        chain.append(child)
    if parts[-1] not in chain[-1]:
        return False
    del chain[-1][parts[-1]]
    for depth in range(len(chain) - 1, 0, -1):  # drop tables left empty
        if not chain[depth]:
            del chain[depth - 1][parts[depth - 1]]
    _validate(data, lambda _dotted: source)
    _atomic_write_toml(path, data)
    return True


def _atomic_write_toml(path: Path, data: Mapping[str, Any]) -> None:
    """A crash leaves the old file or the new, never half; owner-only, like every file xun writes; a
    project file is written only in the `.xun` below the working folder, never where a link leads."""
    write_state(path, tomli_w.dumps(dict(data)))

