"""/sessions: the saved sessions of this working directory; Enter switches to one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Label

from xun.base.valid_text import escape_control
from xun.context.sessions import SessionInfo
from xun.tui.format import one_line, tokens
from xun.tui.screens.modal import Modal


class SessionsScreen(Modal[str | None]):
    """Dismisses with the chosen conversation id (None to stay)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close", id="sessions.close")]

    def __init__(self, sessions: list[SessionInfo], current: str, clock: Callable[[float], str],
                 elsewhere: dict[str, str] | None = None, unreadable: list[tuple[Path, str]] | None = None) -> None:
        super().__init__(id="sessions")
        self.sessions = sessions
        self.current = current
        self.clock = clock
        self.elsewhere = elsewhere or {}
        """Sessions open in another xun process, with who holds them (the lock file's "pid N: command")."""
        self.unreadable = unreadable or []
        """Session files that cannot be read, with why: listed, not left out (the file is there, and may matter)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-box") as box:
            box.border_title = f"sessions · {len(self.sessions)} saved here" + (
                f" · {len(self.unreadable)} unreadable" if self.unreadable else "")
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
            for path, problem in self.unreadable:
                table.add_row(Text("✗", style="bold red"), Text(one_line(f"cannot read: {problem}", 60), style="dim"),
                              *(Text("") for _ in range(5)), Text(escape_control(path.stem), style="dim"),
                              key=f"unreadable:{path}")
            yield table
            if self.unreadable:
                yield Label(Text(escape_control(f"✗ cannot be read, so not opened: {self.unreadable[0][0].parent}/"
                                                "ID.json; `xun --resume ID` says why in full", keep_newlines=False)),
                            id="sessions-unreadable")
            if self.elsewhere:
                holders = "; ".join(f"{ident[:8]} by {holder or 'another xun'}" for ident, holder in self.elsewhere.items())
                yield Label(Text(escape_control(f"open: in use by another xun, which alone may save it ({holders}); "
                                                "it can be switched to once that xun has ended", keep_newlines=False)),
                            id="sessions-elsewhere")
            if not self.sessions and not self.unreadable:
                yield Label("No saved session yet: a session is saved after each turn.", id="sessions-empty")

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if str(event.row_key.value).startswith("unreadable:"):
            self.notify("this session file cannot be read: see the line under the table", severity="warning")
            return
        self.dismiss(event.row_key.value)
