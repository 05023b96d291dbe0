"""Fixtures for the tool tests: a real workspace in tmp, a folder outside it, and a recording confirmer."""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.agent.tools import ConfirmationRequest, Decision, ToolContext, default_toolbox


class ReclaimedResults:
    """The one conversation method tools use, over a plain dict (the real one is xun.context.conversation)."""

    def __init__(self, originals: dict[str, str] | None = None) -> None:
        self.originals = dict(originals or {})

    def reclaimed_original(self, tool_call_id: str) -> str | None:
        return self.originals.get(tool_call_id)


class Confirmer:
    """An async confirmation callback that answers from a script and records every request."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.requests: list[ConfirmationRequest] = []

    async def __call__(self, request: ConfirmationRequest) -> Decision:
        self.requests.append(request)
        return self.answers.pop(0) if self.answers else Decision.DENY


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("top secret\n")
    return folder


@pytest.fixture
def toolbox():
    return default_toolbox()


@pytest.fixture
def make_context(workspace: Path):
    def make(**overrides) -> ToolContext:
        options = {"workdir": workspace, "conversation": ReclaimedResults(), "auto_confirm": True}
        options.update(overrides)
        return ToolContext(**options)

    return make
