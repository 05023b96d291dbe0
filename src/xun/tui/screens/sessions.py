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
from xun.tui.screens.modal import Modal, box_room


COLUMNS = ("", "session", "title", "updated", "messages", "tokens", "summaries", "reclaimed")
DROPPED_FIRST = ("reclaimed", "summaries", "tokens", "messages")
"""Where the box is too narrow for every column, these go, in this order."""
TITLE_MIN = 16
TITLE_CUT_MIN = 5
"""With every droppable column gone, the title is cut (with an ellipsis) below TITLE_MIN, down to this,
rather than the box cutting the last column without one."""


class SessionsScreen(Modal[str | None]):
    """Dismisses with the chosen conversation id (None to stay)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close", id="sessions.close")]

    def __init__(
        self,
        sessions: list[SessionInfo],
        current: str,
        clock: Callable[[float], str],
        elsewhere: dict[str, str] | None = None,
        unreadable: list[tuple[Path, str]] | None = None,
    ) -> None:
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
                f" · {len(self.unreadable)} unreadable" if self.unreadable else ""
            )
            box.border_subtitle = "enter switch · esc close"
            rows = [(info.conversation_id, self._cells(info)) for info in self.sessions]
            rows += [
                (
                    f"unreadable:{path}",
                    {
                        "": Text("✗", style="bold red"),
                        "session": Text(escape_control(path.stem[:8]), style="dim"),
                        "title": Text(f"cannot read: {one_line(problem, 200)}", style="dim"),
                    },
                )
                for path, problem in self.unreadable
            ]
            columns, title_width = self._fit([cells for _, cells in rows])
            table: DataTable[Text] = DataTable(id="sessions-table", cursor_type="row")
            for column in columns:
                table.add_column(column, key=column, width=title_width if column == "title" else None)
            for key, cells in rows:
                cells["title"] = Text(one_line(cells["title"].plain, title_width), style=cells["title"].style)
                table.add_row(*(cells.get(column, Text("")) for column in columns), key=key)
            yield table
            if self.unreadable:
                yield Label(
                    Text(
                        escape_control(
                            f"✗ cannot be read, so not opened: {self.unreadable[0][0].parent}/"
                            "ID.json; `xun --resume ID` says why in full",
                            keep_newlines=False,
                        )
                    ),
                    id="sessions-unreadable",
                )
            if self.elsewhere:
                holders = "; ".join(
                    f"{ident[:8]} by {holder or 'another xun'}" for ident, holder in self.elsewhere.items()
                )
                yield Label(
                    Text(
                        escape_control(
                            f"open: in use by another xun, which alone may save it ({holders}); "
                            "it can be switched to once that xun has ended",
                            keep_newlines=False,
                        )
                    ),
                    id="sessions-elsewhere",
                )
            if not self.sessions and not self.unreadable:
                yield Label("No saved session yet: a session is saved after each turn.", id="sessions-empty")

    def _cells(self, info: SessionInfo) -> dict[str, Text]:
        ident = info.conversation_id
        return {
            "": Text("●")
            if ident == self.current
            else Text("open", style="bold")
            if ident in self.elsewhere
            else Text(""),
            "session": Text(escape_control(ident[:8]), style="dim"),  # (a unique prefix is enough for --resume)
            "title": Text(
                escape_control(info.title, keep_newlines=False) or "(no prompt yet)", style="" if info.title else "dim"
            ),
            "updated": Text(self.clock(info.updated_at)),
            "messages": Text(f"{info.messages:,}", justify="right"),
            "tokens": Text(tokens(info.tokens), justify="right"),
            "summaries": Text(str(info.summaries), justify="right"),
            "reclaimed": Text(str(info.reclaimed), justify="right"),
        }

    def _fit(self, rows: list[dict[str, Text]]) -> tuple[list[str], int]:
        """The columns that fit the box beside a title of at least TITLE_MIN cells (the least telling go
        first), and the title's width: at 80 columns "reclaimed" was cut to "recla" and the id was off-screen."""
        room = box_room(self.app.size.width)
        columns = list(COLUMNS)

        def width(column: str) -> int:
            return max([len(column), *(row[column].cell_len for row in rows if column in row)])

        def others() -> int:
            return sum(width(column) for column in columns if column != "title") + 2 * len(columns)

        for column in DROPPED_FIRST:
            if others() + TITLE_MIN <= room:
                break
            columns.remove(column)
        return columns, max(TITLE_CUT_MIN, min(room - others(), width("title")))

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if str(event.row_key.value).startswith("unreadable:"):
            self.notify("this session file cannot be read: see the line under the table", severity="warning")
            return
        self.dismiss(event.row_key.value)
