"""/sessions: the saved sessions of this working directory; Enter switches to one."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from xun.base.valid_text import escape_control
from xun.context.sessions import SessionInfo
from xun.tui.format import tokens
from xun.tui.screens.modal import Modal


class SessionsScreen(Modal[str | None]):
    """Dismisses with the chosen conversation id (None to stay)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close", id="sessions.close")]

    def __init__(self, sessions: list[SessionInfo], current: str, clock: Callable[[float], str],
                 elsewhere: dict[str, str] | None = None) -> None:
        super().__init__(id="sessions")
        self.sessions = sessions
        self.current = current
        self.clock = clock
        self.elsewhere = elsewhere or {}
        """Sessions open in another xun process, with who holds them (the lock file's "pid N: command")."""

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-box") as box:
            box.border_title = f"sessions · {len(self.sessions)} saved here"
            box.border_subtitle = "enter switch · esc close"
            table: DataTable[Text] = DataTable(id="sessions-table", cursor_type="row")
            table.add_columns("", "title", "updated", "messages", "tokens", "summaries", "reclaimed", "session")
            for info in self.sessions:
                table.add_row(
                    Text("●") if info.conversation_id == self.current else
                    Text("open", style="bold") if info.conversation_id in self.elsewhere else Text(""),
                    Text(escape_control(info.title[:48], keep_newlines=False) or "(no prompt yet)",
                         style="" if info.title else "dim"),
                    Text(self.clock(info.updated_at)),
                    Text(f"{info.messages:,}", justify="right"),
                    Text(tokens(info.tokens), justify="right"),
                    Text(str(info.summaries), justify="right"),
                    Text(str(info.reclaimed), justify="right"),
                    Text(escape_control(info.conversation_id), style="dim"),
                    key=info.conversation_id,
                )
            yield table
            if self.elsewhere:
                holders = "; ".join(f"{ident[:8]} by {holder or 'another xun'}" for ident, holder in self.elsewhere.items())
                yield Label(Text(escape_control(f"open: in use by another xun, which alone may save it ({holders}); "
                                                "it can be switched to once that xun has ended", keep_newlines=False)),
                            id="sessions-elsewhere")
            if not self.sessions:
                yield Label("No saved session yet: a session is saved after each turn.", id="sessions-empty")

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.dismiss(event.row_key.value)
