"""Tools from MCP servers (`[mcp.servers.NAME]`), through the official `mcp` SDK, in the ordinary toolbox.

`McpManager` starts each configured server in its own task (a program over stdio, or a streamable HTTP
endpoint), lists its tools and registers them in the agent's toolbox as `NAME__tool`, with the server's
schemas. From there a call is like any built-in one: `Toolbox.call` caps the text, the conversation
stores it, compaction reclaims, offloads and indexes it. A server that fails to start, hangs, or dies
during a call becomes a state with a reason (and its tools leave the toolbox); nothing raises out to
the session. `aclose()` stops every server (stdin closed, then the process tree terminated by the SDK),
so no process outlives the session.

The SDK (about a second to import) is imported only when a server starts, never for the first frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import inspect
import json
import os
import re
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xun.base.confined import open_state, state_dir_fd
from xun.base.events import McpServerChanged
from xun.agent.tools.toolbox import (
    ConfirmationRequest,
    Tool,
    Toolbox,
    ToolContext,
    ToolError,
    ToolResult,
    escape_control,
)

if TYPE_CHECKING:
    from xun.agent.config import McpServerSettings, McpSettings

__all__ = [
    "DISABLED",
    "FAILED",
    "READY",
    "SEPARATOR",
    "STARTING",
    "STOPPED",
    "McpManager",
    "McpServer",
    "describe_content",
    "preload",
]

STARTING, READY, FAILED, STOPPED, DISABLED = "starting", "ready", "failed", "stopped", "disabled"
SEPARATOR = "__"
"""Between the server's name and the tool's: `git__git_log`."""
STOP_TIMEOUT = 10.0
"""Seconds a server's shutdown may take (the SDK's own: 2 s after stdin closes, 2 s after SIGTERM)."""
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_LOG_TAIL = 400

ChangeCallback = Callable[[McpServerChanged], Awaitable[None] | None]


@dataclass
class McpServer:
    """One configured server: its state, the tools it offers now, and why it failed when it did."""

    name: str
    settings: McpServerSettings
    state: str = STOPPED
    reason: str = ""
    tools: list[Tool] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Tools not offered, each as "name: why" (denied, or an unusable name or schema)."""
    log_path: Path | None = None
    http_error: str = ""
    """The last HTTP error status a remote server answered (part of the reason when it fails)."""
    _client: Any = field(default=None, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)
    _stop: asyncio.Event | None = field(default=None, repr=False)
    _ready: asyncio.Event | None = field(default=None, repr=False)

    @property
    def transport(self) -> str:
        return "http" if self.settings.url else "stdio"

    @property
    def target(self) -> str:
        """What it runs or where it is: the command line, or the URL."""
        if self.settings.url:
            return self.settings.url
        return " ".join([self.settings.command or "", *self.settings.args]).strip()

    def summary(self) -> str:
        """ "ready with 3 tools", "failed: the server exited (...)", "starting"..."""
        if self.state == READY:
            count = len(self.tools)
            return f"ready with {count} tool{'s' if count != 1 else ''}"
        if self.state == FAILED:
            return f"failed: {self.reason}"
        return self.state


def preload() -> None:
    """Import what starting a server needs (the SDK, jsonschema: about a second): a front end runs this
    in a thread first, so its event loop never waits on an import."""
    import jsonschema.validators  # noqa: F401
    import mcp  # noqa: F401


# ------------------------------------------------------------------------------------------ results


def describe_content(block: Any) -> str:
    """One MCP content block as text: text as it is; images, audio and binary resources described (type,
    size, where), so nothing disappears without a word."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        data = getattr(block, "data", "") or ""
        size = len(data) * 3 // 4  # base64
        return f"[{kind} content: {getattr(block, 'mime_type', '?')}, about {size:,} bytes; not shown to the model]"
    if kind == "resource":
        resource = block.resource
        uri, mime = str(getattr(resource, "uri", "")), getattr(resource, "mime_type", None) or "unknown type"
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {uri} ({mime})]\n{text}"
        blob = getattr(resource, "blob", "") or ""
        return f"[resource {uri}: {mime}, about {len(blob) * 3 // 4:,} bytes of binary data; not shown to the model]"
    if kind == "resource_link":
        about = f" - {block.description}" if getattr(block, "description", None) else ""
        mime = f" ({block.mime_type})" if getattr(block, "mime_type", None) else ""
        return f"[resource link: {block.name} {block.uri}{mime}{about}]"
    return f"[{kind or 'unknown'} content; not shown to the model]"


def result_of(result: Any) -> ToolResult:
    """A `CallToolResult` as the toolbox's result (the toolbox caps its size)."""
    parts = [describe_content(block) for block in result.content or ()]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2, default=str))
    text = "\n".join(parts) if parts else "(no output)"
    return ToolResult(text, is_error=bool(result.is_error))


# -------------------------------------------------------------------------------------------- tools


def _schema_problem(schema: Any) -> str | None:
    """Why a tool's input schema cannot be offered to the model (None when it can)."""
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema is of type {str(schema.get('type'))[:40]!r}, not an object"
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is invalid ({exc.message[:200]})"
    return None


def _error_text(exc: BaseException) -> str:
    """The innermost message of an exception (group), on one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())[:400]


def _open_log(path: Path) -> int:
    """A descriptor of a server's log `<xun home>/mcp/NAME.log`, emptied, opened without following a link
    below the xun home (a planted `mcp/NAME.log -> ~/.bashrc` is refused, not emptied); the folder is made
    0700 and the log 0600, as the rest of `.xun`."""
    with state_dir_fd(path.parent, create=True) as folder:  # `.xun` and `.xun/mcp` as links are refused too
        os.fchmod(folder, 0o700)
    fd = open_state(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.ftruncate(fd, 0)
        os.fchmod(fd, 0o600)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


class McpManager:
    """Every configured server of a session; registers their tools in `toolbox` while they are ready."""

    def __init__(
        self,
        settings: McpSettings,
        toolbox: Toolbox,
        *,
        workdir: str | os.PathLike[str],
        log_dir: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        on_change: ChangeCallback | None = None,
    ) -> None:
        self.toolbox = toolbox
        self.workdir = Path(workdir)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.environ = environ
        self.on_change = on_change
        self.servers: dict[str, McpServer] = {}
        for name, server_settings in settings.servers.items():
            server = McpServer(name, server_settings, state=STOPPED if server_settings.enabled else DISABLED)
            if self.log_dir is not None:
                server.log_path = self.log_dir / f"{name}.log"
            self.servers[name] = server

    def __bool__(self) -> bool:
        return bool(self.servers)

    # -- lifecycle

    async def start(self) -> None:
        """Start every enabled server that is not running, concurrently; returns when each is ready or
        failed (at most its `startup_timeout`). Never raises for a server's sake."""
        waiting = [self.start_server(s.name) for s in self.servers.values() if s.state in (STOPPED, FAILED)]
        if waiting:
            await asyncio.gather(*waiting)

    async def start_server(self, name: str) -> McpServer:
        server = self.servers[name]
        if server.state in (STARTING, READY):
            return server
        if server.state == DISABLED:
            return server
        server.tools, server.skipped, server.reason = [], [], ""
        server._stop, server._ready = asyncio.Event(), asyncio.Event()
        await self._changed(server, STARTING)
        server._task = asyncio.create_task(self._run(server), name=f"mcp server {name}")
        ready = asyncio.create_task(server._ready.wait())
        timeout = server.settings.startup_timeout
        try:
            await asyncio.wait({server._task, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if server.state == STARTING:  # neither ready nor failed in time: a hanging server
            await self._end(server, f"it did not answer within {timeout:g}s (startup_timeout)")
        return server

    async def restart(self, name: str) -> McpServer:
        """Stop the server (if it runs) and start it again, e.g. after it failed."""
        server = self.servers[name]
        if server.state == DISABLED:
            server.state = STOPPED  # restarting by hand starts a disabled server for this session
        await self.stop_server(name)
        return await self.start_server(name)

    async def stop_server(self, name: str) -> None:
        server = self.servers[name]
        if server._task is not None and not server._task.done():
            await self._end(server, "", state=STOPPED)

    async def aclose(self) -> None:
        """Stop every server; returns when their processes are gone (or were killed)."""
        running = [s for s in self.servers.values() if s._task is not None and not s._task.done()]
        if running:
            await asyncio.gather(*(self._end(s, "", state=STOPPED) for s in running), return_exceptions=True)

    async def _end(self, server: McpServer, reason: str, *, state: str = FAILED) -> None:
        """Stop the server's task (politely, then by cancelling it) and record why."""
        task = server._task
        if task is not None and not task.done():
            if server._stop is not None:
                server._stop.set()
            done, _ = await asyncio.wait({task}, timeout=STOP_TIMEOUT if server.state == READY else 0)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=STOP_TIMEOUT)
        self._unregister(server)
        if state == FAILED and server.state != FAILED:
            server.reason = reason
            await self._changed(server, FAILED)
        elif state != FAILED:
            server.reason = ""
            await self._changed(server, state)

    async def _changed(self, server: McpServer, state: str) -> None:
        server.state = state
        if self.on_change is None:
            return
        event = McpServerChanged(name=server.name, state=state, tools=len(server.tools), reason=server.reason)
        with contextlib.suppress(Exception):  # a front end's failure must not stop a server's lifecycle
            result = self.on_change(event)
            if inspect.isawaitable(result):
                await result

    # -- one server's task

    async def _run(self, server: McpServer) -> None:
        """Connect, list the tools, offer them, and hold the connection until asked to stop."""
        try:
            from mcp import Client
            from mcp.types import Implementation

            from xun import __version__

            async with contextlib.AsyncExitStack() as stack:
                transport = await self._transport(server, stack)
                client = await stack.enter_async_context(
                    Client(
                        transport,
                        read_timeout_seconds=server.settings.startup_timeout,
                        client_info=Implementation(name="xun", version=__version__),
                    )
                )
                listing = await self._list_tools(client)
                server._client = client
                self._register(server, listing)
                await self._changed(server, READY)
                assert server._ready is not None and server._stop is not None
                server._ready.set()
                await server._stop.wait()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of a server is its state, never the session's
            if server.state != FAILED and not (server._stop is not None and server._stop.is_set()):
                server.reason = self._failure(server, exc)
                self._unregister(server)
                await self._changed(server, FAILED)
        finally:
            server._client = None

    async def _transport(self, server: McpServer, stack: contextlib.AsyncExitStack) -> Any:
        settings = server.settings
        if settings.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            env = os.environ if self.environ is None else self.environ
            headers = {}
            for header, variable in settings.headers.items():
                value = env.get(variable)
                if not value:
                    raise ToolError(f"header {header} needs the environment variable {variable}, which is not set")
                headers[header] = value

            async def remember_refusal(response: Any) -> None:  # the SDK's error does not carry the status
                if response.status_code >= 400:
                    server.http_error = f"HTTP {response.status_code} from {settings.url}"

            server.http_error = ""
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=headers,
                    timeout=httpx2.Timeout(30.0, read=max(300.0, settings.timeout)),
                    event_hooks={"response": [remember_refusal]},
                )
            )
            return streamable_http_client(settings.url, http_client=http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        errlog: Any = open(os.devnull, "w")  # noqa: SIM115 - closed by the stack
        if server.log_path is not None:
            try:
                fd = _open_log(server.log_path)
                errlog.close()
                errlog = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
            except OSError:
                pass  # no log then (a planted link or FIFO is refused); the server still runs
        stack.callback(errlog.close)
        env = dict(settings.env)
        environ = os.environ if self.environ is None else self.environ
        env.update({name: environ[name] for name in settings.pass_env if name in environ})
        parameters = StdioServerParameters(
            command=settings.command or "", args=list(settings.args), env=env or None, cwd=self.workdir
        )
        return stdio_client(parameters, errlog=errlog)

    @staticmethod
    async def _list_tools(client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor = None
        for _ in range(100):  # a paginator that never ends cannot hang the start
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _failure(self, server: McpServer, exc: BaseException) -> str:
        """Why a server failed, in words: the exception and the last line the server wrote on stderr."""
        if isinstance(exc, FileNotFoundError):
            return f"cannot run {server.settings.command!r}: no such program"
        text = _error_text(exc)
        if text.lower() == "connection closed":
            text = "the server exited or closed the connection"
        if server.http_error:
            return f"{text} ({server.http_error})"
        tail = self._log_tail(server)
        return f"{text} (its last words: {tail})" if tail else text

    @staticmethod
    def _log_tail(server: McpServer) -> str:
        if server.log_path is None:
            return ""
        try:
            with os.fdopen(open_state(server.log_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 4096))
                lines = handle.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " ".join(lines[-1].split())[:_LOG_TAIL] if lines else ""

    # -- tools

    def _register(self, server: McpServer, listing: list[Any]) -> None:
        allow, deny = server.settings.tools.allow, set(server.settings.tools.deny)
        for item in listing:
            original = str(item.name)
            if (allow is not None and original not in allow) or original in deny:
                server.skipped.append(f"{original}: not allowed by mcp.servers.{server.name}.tools")
                continue
            name = f"{server.name}{SEPARATOR}{_BAD_NAME_CHARS.sub('_', original)}"
            problem = _schema_problem(item.input_schema)
            if len(name) > 64:
                problem = f"{name} is longer than the 64 characters a tool name may have"
            elif name in self.toolbox:
                problem = f"{name} is already a tool"
            if problem:
                server.skipped.append(f"{original}: {problem}")
                continue
            new = self._tool(server, original, name, item)
            self.toolbox.register(new)
            server.tools.append(new)

    def _unregister(self, server: McpServer) -> None:
        for item in server.tools:
            if self.toolbox.get(item.name) is item:
                self.toolbox.unregister(item.name)
        server.tools = []

    def _tool(self, server: McpServer, original: str, name: str, listed: Any) -> Tool:
        async def call(arguments: dict[str, Any]) -> ToolResult:
            return await self.call(server.name, original, arguments)

        def confirmation(kwargs: dict[str, Any], _context: ToolContext) -> ConfirmationRequest:
            arguments = json.dumps(kwargs.get("arguments") or {}, ensure_ascii=False, indent=2, default=str)
            inline = " ".join(arguments.split())
            if len(inline) > 200:
                inline = inline[:197] + "..."
            title = f"MCP server {server.name} ({server.target}): tool {original} with {inline}"
            return ConfirmationRequest(
                tool=name,
                title=escape_control(title, keep_newlines=False),
                preview=escape_control(arguments),
                kind="text",
            )

        description = (listed.description or listed.title or original).strip()
        return Tool(
            name=name,
            description=f"{description}\n\n(MCP server {server.name}, tool {original})",
            func=call,
            arguments_model=None,
            confirmation=None if server.settings.trust else confirmation,
            parameters=dict(listed.input_schema),
            source=server.name,
        )

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call a tool of a ready server, at most its `timeout`; a server that died on the way is marked
        failed (with its last words), and the model reads why."""
        server = self.servers[name]
        client = server._client
        if server.state != READY or client is None:
            raise ToolError(f"MCP server {name} is {server.summary()}; restart it from /mcp")
        timeout = server.settings.timeout
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout + 1
            )
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            raise ToolError(
                f"MCP server {name} did not answer {tool} within {timeout:g}s (mcp.servers.{name}.timeout)"
            ) from None
        except Exception as exc:  # noqa: BLE001 - a broken server is reported, never raised
            from mcp.shared.exceptions import MCPError
            from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

            text = _error_text(exc)
            if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
                raise ToolError(
                    f"MCP server {name} did not answer {tool} within {timeout:g}s (mcp.servers.{name}.timeout)"
                ) from None
            if (
                isinstance(exc, MCPError)
                and exc.code != CONNECTION_CLOSED
                and server._task is not None
                and not server._task.done()
            ):
                raise ToolError(f"MCP server {name} refused {tool}: {text}") from None
            # The connection is gone (the server crashed or closed it): say so, and stop offering its tools.
            await asyncio.sleep(0.1)  # let the server's stderr reach its log
            await self._end(server, self._failure(server, exc))
            raise ToolError(f"MCP server {name} failed during {tool}: {server.reason}") from None
        return result_of(result)

    # -- figures

    def definition_chars(self) -> dict[str, int]:
        """Characters of each server's tool definitions in a request (0 when it offers none now)."""
        sizes = self.toolbox.definition_chars()
        return {name: sizes.get(name, 0) for name in self.servers}
