"""The top line: the model, where it runs (a badge on the offline demo model), the session id, and what
the agent is doing right now."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Label


class XunHeader(Horizontal):
    status: reactive[str] = reactive("ready")

    def __init__(self, *, model: str, provider: str, offline: bool, session_id: str) -> None:
        super().__init__(id="header")
        self._model = model
        self._provider = provider
        self._offline = offline
        self._session_id = session_id

    def compose(self) -> ComposeResult:
        yield Label("xun", id="app-name")
        yield Label(self._model, id="model-name")
        if self._offline:
            yield Label("offline demo model", id="provider", classes="badge")
        else:
            yield Label(self._provider, id="provider")
        yield Label(f"session {self._session_id}", id="session-id")
        yield Label(self.status, id="status")

    def set_session(self, session_id: str) -> None:
        self._session_id = session_id
        if self.is_mounted:
            self.query_one("#session-id", Label).update(f"session {session_id}")

    def watch_status(self, status: str) -> None:
        if not self.is_mounted:
            return
        label = self.query_one("#status", Label)
        label.update(status)
        label.set_class(status != "ready", "-busy")
