"""The toolbox: typed Python functions become OpenAI tools, and every call becomes a `ToolOutcome`.

A tool is an ordinary function (sync or async) with annotated parameters; pydantic builds its JSON schema
and validates the model's JSON arguments against it. A parameter annotated `ToolContext` is injected and
hidden from the model. Nothing a model sends can raise out of `Toolbox.call`: malformed JSON, wrong types,
unknown tools, refused confirmations and exceptions inside tools all come back as text starting with
`[Error]`, so the agent loop goes on and the model can correct itself. Only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from xun.base.valid_text import escape_control, valid_text

if TYPE_CHECKING:  # pragma: no cover
    from xun.agent.config import XunConfig

__all__ = [
    "ReclaimedOriginals",
    "ConfirmationRequest",
    "ConfirmCallback",
    "CONFIRM_GUARD_SECONDS",
    "CONFIRM_KEYS",
    "Decision",
    "RecallLookup",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolResult",
    "Toolbox",
    "cap_text",
    "cut_note",
    "escape_control",
    "tool",
]

ERROR_PREFIX = "[Error]"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolError(Exception):
    """A failure the model should read: raised inside a tool, reported as `[Error] <message>`."""


class ReclaimedOriginals(Protocol):
    """What tools need of the conversation: the originals of reclaimed tool results."""

    def reclaimed_original(self, tool_call_id: str) -> str | None: ...


class RecallLookup(Protocol):
    """What the recall tools need: `xun.context.recall.RecallIndex`'s search and entry."""

    def search(self, query: str, limit: int = 10, session: str | None = None) -> list[Any]: ...

    def entry(self, entry_id: int) -> Any: ...


class Decision(enum.Enum):
    """The user's answer to a confirmation request."""

    ALLOW_ONCE = "allow_once"
    ALLOW_SESSION = "allow_session"
    DENY = "deny"


CONFIRM_KEYS: dict[str, Decision] = {"y": Decision.ALLOW_ONCE, "s": Decision.ALLOW_SESSION, "n": Decision.DENY}
"""The same keys in the app and on the command line: y allow once, s allow for the session, n deny;
anything else (Enter, Escape, no answer) denies."""
CONFIRM_GUARD_SECONDS = 0.6
"""A confirmation takes no answer until it has been shown this long AND no key came for this long: keys
typed ahead (the end of a sentence, while the dialog appeared) must not answer it."""


@dataclass(frozen=True)
class ConfirmationRequest:
    """What the front end shows before a tool with side effects runs.

    `title` is one line saying exactly what will run or be written (control characters escaped so nothing
    can hide in it); `preview` is the detail: a unified diff, a new file's content, or the command and cwd.
    """

    tool: str
    title: str
    preview: str
    kind: str = "text"  # "diff", "new_file" or "command": lets a front end pick highlighting
    path: Path | None = None
    command: str | None = None
    cwd: Path | None = None


ConfirmCallback = Callable[[ConfirmationRequest], Awaitable[Decision]]


@dataclass
class ToolContext:
    """Everything a tool call may use besides its arguments; the agent builds one per session or turn."""

    workdir: Path
    conversation: ReclaimedOriginals | None = None
    confirm: ConfirmCallback | None = None
    auto_confirm: bool = False
    max_output_chars: int = 50_000
    command_timeout: float = 120.0
    # Environment variables removed from commands' environment (the API key's variable, at least).
    hidden_env: frozenset[str] = frozenset({"OPENAI_API_KEY"})
    # Values replaced by "[redacted]" in every tool output (e.g. the API key); never shown in repr.
    redact: tuple[str, ...] = field(default=(), repr=False)
    # The recall index the search_history and read_history_entry tools read; by default the conversation's.
    recall: RecallLookup | None = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        if self.max_output_chars <= 0:
            raise ValueError(f"max_output_chars must be > 0, got {self.max_output_chars}")
        if self.command_timeout <= 0:
            raise ValueError(f"command_timeout must be > 0, got {self.command_timeout}")
        self.hidden_env = frozenset(self.hidden_env)
        # Very short values would blank out ordinary text; real keys are long.
        self.redact = tuple(v for v in self.redact if isinstance(v, str) and len(v) >= 8)
        if self.recall is None:
            self.recall = getattr(self.conversation, "recall_index", None)

    @classmethod
    def from_config(
        cls,
        config: XunConfig,
        *,
        workdir: str | Path,
        conversation: ReclaimedOriginals | None = None,
        confirm: ConfirmCallback | None = None,
        environ: Mapping[str, str] | None = None,
        recall: RecallLookup | None = None,
    ) -> ToolContext:
        """A context with the config's limits; the API key's variable is hidden from commands and its
        value redacted from outputs."""
        from xun.agent.config import resolve_api_key

        key = resolve_api_key(config, environ)
        return cls(
            workdir=Path(workdir),
            conversation=conversation,
            confirm=confirm,
            auto_confirm=config.auto_confirm,
            max_output_chars=config.tools.max_output_chars,
            command_timeout=config.tools.command_timeout,
            hidden_env=frozenset({"OPENAI_API_KEY", config.provider.api_key_env}),
            redact=(key,) if key else (),
            recall=recall,
        )


@dataclass(frozen=True)
class ToolResult:
    """What a tool may return instead of a string, to report its own error state or cutting."""

    text: str
    is_error: bool = False
    truncated_chars: int = 0


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one call, ready for `conversation.add_tool_result` and for a tool-finished event."""

    name: str
    text: str
    is_error: bool = False
    truncated_chars: int = 0
    duration: float = 0.0
    """Seconds the call took, not counting the wait for the user's confirmation (`waited`)."""
    denied: bool = False
    arguments: dict[str, Any] | None = None
    waited: float = 0.0
    """Seconds spent waiting for the user to confirm the call."""


# ------------------------------------------------------------------------------------------ text helpers


def cut_note(cut: int, limit: int) -> str:
    """The note put where output was cut: how much, and how to see the rest."""
    return (
        f"\n\n[... {cut:,} characters cut here: the output exceeded the limit of {limit:,} characters. "
        "Narrow the request (offset/limit, a tighter pattern, a filtered command) to see the rest. ...]\n\n"
    )


def cap_text(text: str, limit: int) -> tuple[str, int]:
    """Cut `text` to at most about `limit` characters, note included, keeping the head and the tail
    (errors often come last). Returns the text and how many characters were cut."""
    if len(text) <= limit:
        return text, 0
    reserve = len(cut_note(len(text), limit))
    keep = limit - reserve if limit > 2 * reserve else limit
    head = max(1, (keep * 2) // 3)
    tail = max(0, keep - head)
    cut = len(text) - head - tail
    return text[:head] + cut_note(cut, limit) + (text[-tail:] if tail else ""), cut


def _stringify(value: Any) -> str:
    if value is None:
        return "(no output)"
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2)
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):
        return str(value)


# --------------------------------------------------------------------------------------------- tools


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into the tool description and per-argument help from an `Args:` section."""
    text = inspect.cleandoc(doc or "")
    lines = text.splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        stripped = line.strip()
        if re.match(r"^(Args|Arguments|Parameters):\s*$", stripped):
            in_args = True
            continue
        if in_args and re.match(r"^(Returns|Raises|Yields|Examples?|Notes?):\s*$", stripped):
            in_args = False
            current = None
            continue
        if not in_args:
            description.append(line)
            continue
        match = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", stripped)
        if match and not line.startswith((" " * 8, "\t\t")):
            current = match.group(1)
            params[current] = match.group(3).strip()
        elif current and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
    paragraphs = re.split(r"\n\s*\n", "\n".join(description).strip())
    flowed = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    return flowed.strip(), params


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated `title`s: they cost tokens and tell the model nothing."""
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


ConfirmationBuilder = Callable[[dict[str, Any], ToolContext], ConfirmationRequest]


@dataclass
class Tool:
    """One callable tool: its schema, its argument model, and whether it needs the user's consent."""

    name: str
    description: str
    func: Callable[..., Any]
    # None: the tool checks its own arguments (an MCP server does) and `func` gets them as `arguments`.
    arguments_model: type[BaseModel] | None
    context_param: str | None = None
    # Builds what the user is asked; a tool with one never runs unconfirmed (unless auto_confirm).
    confirmation: ConfirmationBuilder | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    # Where the tool comes from: "" for the built-ins, the server's name for an MCP tool.
    source: str = ""

    @property
    def needs_confirmation(self) -> bool:
        return self.confirmation is not None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        confirmation: ConfirmationBuilder | None = None,
    ) -> Tool:
        """Build a tool from a typed function: its docstring is the description (an `Args:` section
        documents the parameters; `Annotated[..., Field(description=...)]` works too)."""
        tool_name = name or func.__name__
        if not _NAME.match(tool_name):
            raise ValueError(f"tool name {tool_name!r} must be 1-64 letters, digits, _ or -")
        doc_description, doc_params = _parse_docstring(func.__doc__)
        signature = inspect.signature(func)
        hints = get_type_hints(func, include_extras=True)
        fields: dict[str, Any] = {}
        context_param = None
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise TypeError(f"tool {tool_name}: parameter {param.name!r} must be a plain named parameter")
            annotation = hints.get(param.name, inspect.Parameter.empty)
            if annotation is ToolContext:
                context_param = param.name
                continue
            if annotation is inspect.Parameter.empty:
                raise TypeError(f"tool {tool_name}: parameter {param.name!r} needs a type annotation")
            default = ... if param.default is inspect.Parameter.empty else param.default
            if isinstance(default, FieldInfo):
                fields[param.name] = (annotation, default)
            else:
                help_text = doc_params.get(param.name)
                extra: dict[str, Any] = {"description": help_text} if help_text else {}
                fields[param.name] = (annotation, Field(default, **extra))
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        parameters = _strip_titles(model.model_json_schema())
        parameters.setdefault("properties", {})
        return cls(
            name=tool_name,
            description=description or doc_description or tool_name,
            func=func,
            arguments_model=model,
            context_param=context_param,
            confirmation=confirmation,
            parameters=parameters,
        )

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def usage(self) -> str:
        """`name(a, b=1)`: shown with argument errors so the model can retry right."""
        parts = []
        if self.arguments_model is None:
            required = self.parameters.get("required") or []
            for pname in self.parameters.get("properties") or {}:
                parts.append(pname if pname in required else f"{pname}=...")
            return f"{self.name}({', '.join(parts)})"
        for pname, info in self.arguments_model.model_fields.items():
            parts.append(pname if info.is_required() else f"{pname}={info.default!r}")
        return f"{self.name}({', '.join(parts)})"


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    confirmation: ConfirmationBuilder | None = None,
) -> Any:
    """Decorator: `@tool` or `@tool(name=..., confirmation=...)` turns a typed function into a `Tool`."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description, confirmation=confirmation)

    return wrap(func) if func is not None else wrap


# ------------------------------------------------------------------------------------------- toolbox


def _describe_validation(error: ValidationError) -> str:
    lines = []
    for item in error.errors(include_url=False):
        loc = ".".join(str(p) for p in item.get("loc", ())) or "(arguments)"
        kind = item.get("type")
        if kind == "missing":
            lines.append(f"missing required argument '{loc}'")
        elif kind == "extra_forbidden":
            lines.append(f"unexpected argument '{loc}'")
        else:
            shown = json.dumps(item.get("input"), default=str, ensure_ascii=False)
            if len(shown) > 80:
                shown = shown[:77] + "..."
            lines.append(f"argument '{loc}': {item.get('msg', 'invalid')} (got {shown})")
    return "; ".join(lines)


class Toolbox:
    """The tools offered to the model, plus what the user allowed for the rest of the session."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._schema_chars: int | None = None
        """`schema_chars()` as last measured; None after a tool was added or removed."""
        self._session_allowed: set[str] = set()
        self._confirm_lock: asyncio.Lock | None = None
        for item in tools:
            self.register(item)

    # -- registry

    def register(self, item: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a tool (or a typed function, wrapped); a duplicate name is an error unless `replace`."""
        new = item if isinstance(item, Tool) else Tool.from_function(item)
        if new.name in self._tools and not replace:
            raise ValueError(f"a tool named {new.name!r} is already registered")
        self._tools[new.name] = new
        self._schema_chars = None
        return new

    def unregister(self, name: str) -> Tool:
        """Remove a tool and any session permission it had."""
        try:
            removed = self._tools.pop(name)
        except KeyError:
            raise KeyError(f"no tool named {name!r}") from None
        self._schema_chars = None
        self._session_allowed.discard(name)
        return removed

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The `tools` parameter of a chat completion request."""
        return [t.schema() for t in self._tools.values()]

    def schema_chars(self) -> int:
        """Characters of `schemas()` as JSON (part of every request's size), measured once per set of tools:
        the estimate asks for it before every model call."""
        if self._schema_chars is None:
            schemas = self.schemas()
            self._schema_chars = len(json.dumps(schemas, ensure_ascii=False)) if schemas else 0
        return self._schema_chars

    def definition_chars(self) -> dict[str, int]:
        """Characters of the tool definitions every request carries, by source ("" for the built-ins)."""
        sizes: dict[str, int] = {}
        for item in self._tools.values():
            size = len(json.dumps(item.schema(), ensure_ascii=False)) + 2  # ", " between list items
            sizes[item.source] = sizes.get(item.source, 0) + size
        return sizes

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def copy(self, *, keep_permissions: bool = False) -> Toolbox:
        """A toolbox with the same tools; session permissions start empty unless asked, so a child agent
        does not inherit the user's consent by accident."""
        other = Toolbox(self._tools.values())
        if keep_permissions:
            other._session_allowed = set(self._session_allowed)
        return other

    # -- session permissions

    def allowed_for_session(self) -> frozenset[str]:
        return frozenset(self._session_allowed)

    def allow_for_session(self, name: str) -> None:
        self._session_allowed.add(name)

    def forget_permissions(self) -> None:
        """Ask again from now on (e.g. after /clear or on a new session)."""
        self._session_allowed.clear()

    # -- calling

    async def call(
        self,
        name: str,
        arguments: str | Mapping[str, Any] | None,
        context: ToolContext,
        *,
        on_run: Callable[[], object] | None = None,
    ) -> ToolOutcome:
        """Run one tool call from the model. Never raises except for cancellation. `on_run` is called when
        the tool itself starts (after its confirmation): from then on a cancel may leave effects."""
        started = time.monotonic()
        waited = 0.0
        parsed: dict[str, Any] | None = None

        def done(text: str, *, is_error: bool = False, truncated: int = 0, denied: bool = False) -> ToolOutcome:
            text = valid_text(text)
            for secret in context.redact:
                text = text.replace(secret, "[redacted]")
            text, cut = cap_text(text, context.max_output_chars)
            return ToolOutcome(
                name=name,
                text=text,
                is_error=is_error,
                truncated_chars=truncated + cut,
                duration=time.monotonic() - started - waited,
                denied=denied,
                arguments=parsed,
                waited=waited,
            )

        def fail(message: str, **kw: Any) -> ToolOutcome:
            return done(f"{ERROR_PREFIX} {message}", is_error=True, **kw)

        found = self._tools.get(name) if isinstance(name, str) else None
        if found is None:
            available = ", ".join(self._tools) or "none"
            return fail(f"unknown tool {str(name)[:100]!r}; the available tools are: {available}")

        if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            raw: Any = {}
        elif isinstance(arguments, str):
            try:
                raw = json.loads(arguments)
            except json.JSONDecodeError as exc:
                return fail(
                    f"the arguments for {name} are not valid JSON ({exc.msg} at line {exc.lineno}, column "
                    f"{exc.colno}); send a JSON object with the arguments of {found.usage()}"
                )
            except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, or [[[[...]]]]
                detail = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
                return fail(f"the arguments for {name} could not be read as JSON ({detail})")
        elif isinstance(arguments, Mapping):
            raw = dict(arguments)
        else:
            raw = arguments
        if not isinstance(raw, dict):
            return fail(
                f"the arguments for {name} must be a JSON object, got {type(raw).__name__}; usage: {found.usage()}"
            )
        parsed = raw

        if found.arguments_model is None:
            kwargs: dict[str, Any] = {"arguments": raw}
        else:
            try:
                validated = found.arguments_model.model_validate(raw)
            except ValidationError as exc:
                return fail(f"invalid arguments for {name}: {_describe_validation(exc)}. Usage: {found.usage()}")
            except RecursionError:
                return fail(f"invalid arguments for {name}: nested too deeply")
            kwargs = {key: getattr(validated, key) for key in found.arguments_model.model_fields}

        if found.confirmation is not None:
            asked = time.monotonic()
            try:
                verdict = await self._confirm(found, kwargs, context)
            except ToolError as exc:
                return fail(str(exc))
            except Exception as exc:
                return fail(f"preparing the confirmation for {name} failed: {type(exc).__name__}: {exc}")
            finally:
                waited = time.monotonic() - asked
            if verdict is not None:
                return fail(verdict, denied=True)

        if found.context_param:
            kwargs[found.context_param] = context
        if on_run is not None:
            on_run()
        try:
            if found.is_async:
                value = await found.func(**kwargs)
            else:
                value = await asyncio.to_thread(found.func, **kwargs)
                if inspect.isawaitable(value):  # e.g. a callable object whose __call__ is async
                    value = await value
        except ToolError as exc:
            return fail(str(exc))
        except Exception as exc:  # the model's loop must go on: report, don't raise
            return fail(f"{name} failed: {type(exc).__name__}: {exc}")

        if isinstance(value, ToolResult):
            text = value.text
            if value.is_error and not text.startswith(ERROR_PREFIX):
                text = f"{ERROR_PREFIX} {text}"
            return done(text, is_error=value.is_error, truncated=value.truncated_chars)
        return done(_stringify(value))

    async def _confirm(self, found: Tool, kwargs: dict[str, Any], context: ToolContext) -> str | None:
        """None to proceed, else the refusal to report. Prompts are serialised, so parallel calls ask one
        at a time and an "allow for this session" answer covers the calls waiting behind it."""
        if context.auto_confirm or found.name in self._session_allowed:
            return None
        if context.confirm is None:
            return (
                f"{found.name} needs the user's confirmation and none can be asked here (auto_confirm is off); "
                "nothing was done"
            )
        assert found.confirmation is not None
        request = await asyncio.to_thread(found.confirmation, kwargs, context)
        if self._confirm_lock is None:
            self._confirm_lock = asyncio.Lock()
        async with self._confirm_lock:
            if found.name in self._session_allowed:
                return None
            try:
                decision = await context.confirm(request)
            except Exception as exc:
                return f"asking the user to confirm {found.name} failed ({type(exc).__name__}: {exc}); nothing was done"
        if decision is Decision.ALLOW_SESSION:
            self._session_allowed.add(found.name)
            return None
        if decision is Decision.ALLOW_ONCE:
            return None
        if decision is Decision.DENY:
            return f"the user declined: {request.title}. Nothing was done; ask the user or try something else"
        return f"the confirmation for {found.name} gave no valid answer ({decision!r}); nothing was done"
