"""Agents for the reliability suite: a real offline server over HTTP, a real session store on disk.

`make_agent(server, workdir, **settings)` builds an agent the way `xun.agent.launch.open_session` does (a
`SessionStore` conversation, so summaries write the offload log and the history index), with dotted
config keys given as `section__name=value`. `Recorder` keeps every event the agent emits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tui.helpers import wait_until as pilot_wait_until
from xun.agent.loop import Agent
from xun.agent.config import XunConfig
from xun.context.conversation import Conversation
from xun.base.events import Event
from xun.context.offload import read_offload_log
from xun.context.sessions import SessionStore


class Recorder:
    """Collects events; `of(kind)` filters them by their `type`."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def types(self) -> list[str]:
        return [e.type for e in self.events if e.type not in ("text_delta", "reasoning_delta", "usage")]


def configure(config: XunConfig, settings: dict[str, Any]) -> XunConfig:
    for key, value in settings.items():
        section, _, name = key.partition("__")
        if name:
            setattr(getattr(config, section), name, value)
        else:
            setattr(config, section, value)
    return config


def make_agent(
    server,
    workdir: Path,
    *,
    agent_class=Agent,
    environ: dict[str, str] | None = None,
    conversation_id: str | None = None,
    **settings: Any,
) -> tuple[Agent, Recorder, SessionStore]:
    """An agent on `server` whose conversation lives in `workdir`'s session store."""
    config = XunConfig()
    config.provider.base_url = server.base_url
    config.model.name = "xun-offline"
    config.retry.backoff_base = 0.01
    config.retry.backoff_max = 0.05
    configure(config, settings)
    store = SessionStore(workdir)
    conversation = store.new()
    if conversation_id:
        conversation.conversation_id = conversation_id
    recorder = Recorder()
    agent = agent_class(
        config,
        conversation=conversation,
        workdir=workdir,
        on_event=recorder,
        environ=environ if environ is not None else {},
    )
    agent.system("You are the reliability-test agent.")
    return agent, recorder, store


def write_files(folder: Path, count: int, lines: int = 60, prefix: str = "f") -> None:
    for i in range(1, count + 1):
        (folder / f"{prefix}{i}.py").write_text("".join(f"line {j} of file {i}\n" for j in range(lines)))


def assistant_messages(conversation: Conversation) -> list[Any]:
    return [m for m in conversation.messages if m.role == "assistant"]


def kept_texts(conversation: Conversation) -> list[str]:
    """Every text the session keeps anywhere: messages (as sent), reclaimed originals, originals kept
    in the session, and the entries of the offload log."""
    parts = [json.dumps(m.completion_param(), ensure_ascii=False) for m in conversation.messages]
    parts += [conversation.reclaimed_original(k) or "" for k in conversation.reclaimed_results]
    for kept in conversation.kept_originals:
        parts += [json.dumps(m.to_json(), ensure_ascii=False) for m in kept["messages"]]
    if conversation.offload_dir is not None:
        log = conversation.offload_dir / f"{conversation.conversation_id}.md"
        if log.exists():
            parts += [entry.text for section in read_offload_log(log) for entry in section.entries]
    return parts


def missing_texts(texts: Iterable[str], conversation: Conversation) -> list[str]:
    """The texts that are nowhere in `kept_texts(conversation)` (JSON-escaped forms count too)."""
    parts = kept_texts(conversation)
    joined = "\x00".join(parts)
    missing = []
    for text in texts:
        if not text:
            continue
        escaped = json.dumps(text, ensure_ascii=False)[1:-1]
        if text not in joined and escaped not in joined:
            missing.append(text)
    return missing


async def wait_until(pilot, predicate, timeout: float = 20.0, what: str = "") -> None:
    """The app tests' wait (`tui.helpers.wait_until`), with this folder's default timeout."""
    await pilot_wait_until(pilot, predicate, timeout, what)


async def submit(pilot, text: str) -> None:
    """Type `text` into the app's prompt and press Enter."""
    pilot.app.main.prompt.focus()
    pilot.app.main.prompt.load_text(text)
    pilot.app.main.prompt.move_cursor(pilot.app.main.prompt.document.end)
    await pilot.press("enter")


@contextmanager
def typing_fast(question) -> Iterator[None]:
    """Within the block, no pause between two keys reaches the question's guard, however slow the machine:
    a test of keys typed in a stream must not find the guard passed because a loaded CI runner took 0.6 s
    to deliver one key. On leaving, the guard is the real one again, so the test can wait for it to pass."""
    question.GUARD_SECONDS = 3600.0
    try:
        yield
    finally:
        del question.GUARD_SECONDS
