"""Opening a session, the same way for every front end: settings, the model server, the store, the agent.

With no API key and no base URL configured (or with `offline=True`) the offline demo server is started
in-process on a free loopback port and the agent talks to it over real HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xun.agent.loop import Agent, ConsentCallback, EventCallback
from xun.agent.config import XunConfig, flag_overrides, load_config, uses_offline_demo
from xun.context.conversation import Conversation
from xun.context.sessions import LATEST, NoSessionToResume, SessionStore
from xun.agent.tools import ConfirmCallback

if TYPE_CHECKING:
    from xun.offline import OfflineServer
    from xun.agent.tools.mcp import McpManager

__all__ = ["LATEST", "OFFLINE_MODEL", "NoSessionToResume", "Session", "open_session"]

OFFLINE_MODEL = "xun-offline"


@dataclass
class Session:
    """A running session: close it (or use it as a context manager) to stop the offline server."""

    config: XunConfig
    agent: Agent
    store: SessionStore
    offline_server: OfflineServer | None = None
    resumed: bool = False
    mcp: McpManager | None = None
    """The MCP servers of the settings: front ends start them (`await mcp.start()`, after the first frame in
    the app) and stop them (`await mcp.aclose()`) on the event loop that runs the turns."""
    read_only: bool = False
    """Opened with --read-only: never saved, and no lock held (another process may be writing it)."""

    @property
    def offline(self) -> bool:
        return self.offline_server is not None

    @property
    def conversation(self) -> Conversation:
        return self.agent.conversation

    def describe_provider(self) -> str:
        if self.offline_server is not None:
            return f"offline demo model (scripted, not an LLM) at {self.offline_server.base_url}"
        return self.config.provider.base_url or "the OpenAI API"

    def resume_command(self, command: str) -> str:
        """`command` (`xun` or `xun run`) with what continues this session from the current directory: the
        session's folder too when it is another one (a hint without it found no session there)."""
        import shlex

        workdir = self.agent.workdir
        elsewhere = workdir.resolve() != Path.cwd().resolve()
        folder = f" --workdir {shlex.quote(str(workdir))}" if elsewhere else ""
        return f"{command}{folder} --resume {self.conversation.conversation_id}"

    def save(self) -> Path | None:
        """Save the session (None, and nothing written, when it was opened read-only)."""
        if self.read_only:
            return None
        return self.store.save(self.agent.conversation)

    def close(self) -> None:
        self.store.unlock()
        if self.offline_server is not None:
            self.offline_server.stop()
            self.offline_server = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_session(
    workdir: str | os.PathLike[str] | None = None,
    *,
    overrides: Iterable[str] = (),
    base_url: str | None = None,
    model: str | None = None,
    offline: bool = False,
    resume: str | None = None,
    environ: Mapping[str, str] | None = None,
    on_event: EventCallback | None = None,
    confirm: ConfirmCallback | None = None,
    consent: ConsentCallback | None = None,
    fork: bool = False,
    read_only: bool = False,
    opened: tuple[SessionStore, Conversation] | None = None,
) -> Session:
    """Load settings (raises ConfigError), pick the model server, and load or start the conversation.

    `resume`: None starts a new session, `LATEST` ("") continues the newest, an id continues that one
    (raises NoSessionToResume, FileNotFoundError or SessionFormatError). The session is locked for this
    process (SessionLocked when another one has it); `fork` continues a copy under a new id instead,
    `read_only` opens it without the lock and never saves it. `opened`: the store and the conversation
    its `open(resume, fork=, read_only=)` returned already (`SessionOpener`); released if this raises.
    """
    folder = Path(workdir) if workdir is not None else Path.cwd()
    store, conversation = opened if opened is not None else (SessionStore(folder), None)
    server = None
    try:
        config = load_config(folder, flag_overrides(overrides, base_url, model), environ)
        if conversation is None:
            conversation = store.open(resume, fork=fork, read_only=read_only)
        if not config.offload.enabled:
            conversation.offload_dir = None
        if offline or uses_offline_demo(config, environ):
            from xun.offline.server import OfflineServer, demo_cache_ttl

            server = OfflineServer(context_window=config.model.context_window, cache_ttl=demo_cache_ttl(os.environ))
            server.start()
            config.set_here("provider.base_url", server.base_url, "the offline demo server (no API key)")
            if config.source_of("model.name") == "default":
                config.set_here("model.name", OFFLINE_MODEL, "the offline demo server (no API key)")
        agent = Agent(
            config,
            conversation=conversation,
            workdir=folder,
            on_event=on_event,
            confirm=confirm,
            consent=consent,
            environ=dict(environ) if environ is not None else None,
        )
        agent.offline = server is not None
        return Session(
            config=config,
            agent=agent,
            store=store,
            offline_server=server,
            resumed=resume is not None,
            mcp=_mcp_manager(config, agent, folder, environ),
            read_only=read_only,
        )
    except BaseException:  # nothing half-open is left: the session's lock and the demo server go
        store.unlock()
        if server is not None:
            server.stop()
        raise


def _mcp_manager(config: XunConfig, agent: Agent, folder: Path, environ: Mapping[str, str] | None) -> McpManager:
    """The servers of `[mcp.servers]`, not started: their tools join the agent's toolbox as they become
    ready, and their changes of state are agent events (`mcp_server`)."""
    from xun.base import paths
    from xun.agent.tools.mcp import McpManager

    return McpManager(
        config.mcp,
        agent.toolbox,
        workdir=folder,
        log_dir=paths.xun_home(folder) / "mcp",
        environ=environ,
        on_change=agent.emit,
    )
