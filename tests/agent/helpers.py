"""Agents wired to a real offline server, and a recorder of their events."""

from __future__ import annotations

from pathlib import Path

from xun.agent.loop import Agent
from xun.agent.config import XunConfig
from xun.context.conversation import Conversation
from xun.base.events import Event


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events if e.type not in ("text_delta", "reasoning_delta", "usage")]

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.type == kind]

    def text(self) -> str:
        return "".join(e.text for e in self.of("text_delta"))


def make_agent(server, workdir: Path, *, agent_class=Agent, history: bool = True, **settings) -> tuple[Agent, Recorder]:
    """An agent on `server` in `workdir`; `settings` are dotted config keys with `__` for dots."""
    config = XunConfig()
    config.provider.base_url = server.base_url
    config.model.name = "xun-offline"
    config.retry.backoff_base = 0.01
    config.retry.backoff_max = 0.05
    for key, value in settings.items():
        section, _, name = key.partition("__")
        if name:
            setattr(getattr(config, section), name, value)
        else:
            setattr(config, section, value)
    recorder = Recorder()
    conversation = Conversation(offload_dir=workdir / ".xun" / "conversation_history" if history else None)
    agent = agent_class(config, conversation=conversation, workdir=workdir, on_event=recorder, environ={})
    agent.system("You are the test agent.")
    return agent, recorder


def write_files(folder: Path, count: int, lines: int = 60) -> None:
    for i in range(1, count + 1):
        (folder / f"f{i}.py").write_text("".join(f"line {j} of file {i}\n" for j in range(lines)))
