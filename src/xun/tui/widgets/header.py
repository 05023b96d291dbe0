"""The top line: the model, where it runs (a badge on the offline demo model), the session id (marked
read-only when nothing will be saved), and what the agent is doing right now."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Label

from xun.tui.format import literal


class XunHeader(Horizontal):
    status: reactive[str] = reactive("ready")

    def __init__(self, *, model: str = "", provider: str = "", offline: bool = False, session_id: str = "") -> None:
        super().__init__(id="header")
        self._model = model
        self._provider = provider
        self._offline = offline
        self._session_id = session_id
        self.read_only = False
        """Opened with --read-only: the id says so, since nothing done here is saved."""

    def compose(self) -> ComposeResult:
        yield Label("xun", id="app-name")
        yield Label(literal(self._model, flat=True), id="model-name")  # the model's name and the provider come
        yield Label(
            literal(self._provider_text(), flat=True),
            id="provider",  # from a config: text, not markup
            classes="badge" if self._offline else "",
        )
        yield Label(literal(self._session_text(), flat=True), id="session-id")
        yield Label(literal(self.status, flat=True), id="status")

    def _provider_text(self) -> str:
        return "offline demo model" if self._offline else self._provider

    def _session_text(self) -> str:
        """The whole id where there is room; narrower, its first 8 characters (enough for `xun --resume`),
        then without the word: cutting the end would keep only "session …"."""
        ident, width = self._session_id, self.size.width
        if not ident:
            return ""
        mark = " read-only" if self.read_only else ""
        if width and width < 100:
            return ident[:8] + mark if width < 70 else f"session {ident[:8]}{mark}"
        return f"session {ident}{mark}"

    def on_resize(self, event: events.Resize) -> None:
        self.set_session(self._session_id)

    def _fit(self) -> None:
        """Narrow, the status (what the agent is doing) shows whole: the less useful parts give way first, in
        this order: the badge shortened to "offline", the badge, the session id, the model's name (at 60
        columns the status must never be cut mid-word beside the badge). A read-only session's id goes
        last: its mark is the only lasting sign that nothing is saved. A
        status still too long is cut with "…"."""
        if not self.is_mounted:
            return
        model, provider = self.query_one("#model-name", Label), self.query_one("#provider", Label)
        session, status = self.query_one("#session-id", Label), self.query_one("#status", Label)
        badge, ident = self._provider_text(), self._session_text()
        shown = {"model": True, "badge": True, "session": True}
        width = self.size.width
        margin = 2
        room = width - 2 - (len("xun") + margin) - margin  # padding, the name, the session's margin (a spacer)

        def needs() -> int:
            parts = {
                "model": cell_len(self._model) + margin if self._model else 0,
                "badge": cell_len(badge) + (2 if self._offline else 0) + margin if badge else 0,
                "session": cell_len(ident),
            }
            return sum(size for part, size in parts.items() if shown[part]) + cell_len(self.status)

        if width:
            giving_way = (
                ["short badge", "badge", "model", "session"]
                if self.read_only
                else ["short badge", "badge", "session", "model"]
            )
            for part in giving_way:
                if needs() <= room:
                    break
                if part == "short badge":
                    badge = "offline" if self._offline else badge
                else:
                    shown[part] = False
        provider.update(literal(badge, flat=True))
        model.display, provider.display = shown["model"], shown["badge"]
        session.update(literal(ident if shown["session"] else "", flat=True))  # empty, it still pushes the status right
        over = width > 0 and needs() > room
        status.styles.width = max(room - (needs() - cell_len(self.status)), 1) if over else None

    def show_model(self, *, model: str, provider: str, offline: bool) -> None:
        """Once the session is open (the app may draw its first frame before)."""
        self._model, self._provider, self._offline = model, provider, offline
        if self.is_mounted:
            self.query_one("#model-name", Label).update(literal(model, flat=True))
            badge = self.query_one("#provider", Label)
            badge.update(literal(self._provider_text(), flat=True))
            badge.set_class(offline, "badge")
            self._fit()

    def set_session(self, session_id: str, *, read_only: bool | None = None) -> None:
        self._session_id = session_id
        if read_only is not None:
            self.read_only = read_only
        if self.is_mounted:
            label = self.query_one("#session-id", Label)
            label.update(literal(self._session_text(), flat=True))
            label.set_class(self.read_only, "-read-only")
            where = " (opened read-only: nothing done here is saved)" if self.read_only else ""
            label.tooltip = literal(f"session {session_id}{where}") if session_id else None
            self._fit()

    def watch_status(self, status: str) -> None:
        if not self.is_mounted:
            return
        label = self.query_one("#status", Label)
        label.update(literal(status, flat=True))
        label.set_class(status != "ready", "-busy")
        self._fit()
