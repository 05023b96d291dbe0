"""/mcp: the MCP servers of the session, their state, their tools and what the tool definitions cost in
every request; `r` restarts the highlighted server (after it failed, or to pick up a new version)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Label, Static

from xun.base.valid_text import escape_control
from xun.tui.format import tokens
from xun.tui.screens.modal import Modal

if TYPE_CHECKING:
    from xun.agent.tools.mcp import McpManager

STATE_STYLE = {"ready": "green", "failed": "red", "starting": "yellow", "stopped": "dim", "disabled": "dim"}


class McpScreen(Modal[None]):
    """Shows the manager's servers as they are now; `refresh_servers()` redraws after a change of state."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss(None)", "Close", id="mcp.close"),
        Binding("r", "restart", "Restart", id="mcp.restart"),
    ]

    def __init__(self, manager: McpManager, tokens_per_char: float, restart: Callable[[str], None]) -> None:
        super().__init__(id="mcp")
        self.manager = manager
        self.tokens_per_char = tokens_per_char
        self.restart = restart

    def compose(self) -> ComposeResult:
        with Vertical(id="mcp-box") as box:
            box.border_title = "MCP servers"
            box.border_subtitle = "r restart the highlighted server · esc close"
            table: DataTable[Text] = DataTable(id="mcp-table", cursor_type="row")
            table.add_columns("server", "state", "tools", "definitions", "runs")
            yield table
            with VerticalScroll(id="mcp-detail"):
                yield Static("", id="mcp-detail-text")
            if not self.manager.servers:
                yield Label(
                    Text(
                        "No MCP servers are configured: add [mcp.servers.NAME] to the user config "
                        '(command = "..." or url = "..."); `xun config path --user` shows where it is.'
                    ),
                    id="mcp-empty",
                )

    def on_mount(self) -> None:
        self.refresh_servers()
        self.query_one(DataTable).focus()

    def _tokens(self, chars: int) -> int:
        return round(chars * self.tokens_per_char)

    def refresh_servers(self) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        sizes = self.manager.definition_chars()
        for server in self.manager.servers.values():
            state = Text(
                escape_control(server.summary()) if server.state != "failed" else "failed",
                style=STATE_STYLE.get(server.state, ""),
            )
            cost = f"~{tokens(self._tokens(sizes.get(server.name, 0)))} tokens" if server.tools else "-"
            table.add_row(
                Text(escape_control(server.name)),
                state,
                Text(str(len(server.tools)), justify="right"),
                Text(cost, justify="right"),
                Text(escape_control(server.target), overflow="ellipsis", no_wrap=True),
                key=server.name,
            )
        if self.manager.servers:
            table.move_cursor(row=min(max(row, 0), len(self.manager.servers) - 1))
            self._describe(table.cursor_row)

    def _highlighted_name(self) -> str | None:
        names = list(self.manager.servers)
        row = self.query_one(DataTable).cursor_row
        return names[row] if 0 <= row < len(names) else None

    def _describe(self, row: int) -> None:
        names = list(self.manager.servers)
        if not 0 <= row < len(names):
            return
        server = self.manager.servers[names[row]]
        text = Text()
        text.append(escape_control(server.name), style="bold")  # names, targets, stderr, tool descriptions:
        text.append(escape_control(f" · {server.transport} · {server.target}") + "\n")  # what a server says
        text.append(escape_control(server.summary()) + "\n", style=STATE_STYLE.get(server.state, ""))
        text.append(
            "trusted: its tools run without asking\n"
            if server.settings.trust
            else "its tools ask before they run (trust = true in the user config skips that)\n",
            style="dim",
        )
        for item in server.tools:
            cost = self._tokens(len(json.dumps(item.schema(), ensure_ascii=False)))
            first = " ".join(item.description.split("\n\n")[0].split())
            text.append(escape_control(f"  {item.name}"), style="bold")
            text.append(escape_control(f"  ~{tokens(cost)} tokens  {first[:120]}") + "\n")
        for skipped in server.skipped:
            text.append(escape_control(f"  not offered: {skipped}") + "\n", style="dim")
        if server.log_path is not None and server.transport == "stdio":
            text.append(escape_control(f"its standard error: {server.log_path}") + "\n", style="dim")
        self.query_one("#mcp-detail-text", Static).update(text)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._describe(event.cursor_row)

    def action_restart(self) -> None:
        name = self._highlighted_name()
        if name is not None:
            self.restart(name)
