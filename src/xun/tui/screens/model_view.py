"""The model's view of the context, opened by /history: the conversation exactly as the model sees it
(each message but the system one, which holds the summary, cut at 1,000 characters)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import RichLog

from xun.base.valid_text import escape_control
from xun.tui.screens.modal import Modal

ROLE_STYLES = {"system": "bold magenta", "user": "bold green", "assistant": "bold cyan", "tool": "bold yellow"}


class ModelViewScreen(Modal[None]):
    """What the model is sent, one message after another (its ids and the keymap's `history.close` keep the
    /history command's name)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss(None)", "Close", id="history.close")]

    def __init__(self, records: list[dict[str, str]], subtitle: str) -> None:
        super().__init__(id="history")
        self.records = records
        self.subtitle = subtitle

    def compose(self) -> ComposeResult:
        with Vertical(id="history-box") as box:
            box.border_title = f"history · what the model sees ({len(self.records)} messages)"
            box.border_subtitle = self.subtitle
            yield RichLog(id="history-log", wrap=True, markup=False, min_width=20, auto_scroll=False)

    def on_mount(self) -> None:
        log = self.query_one(RichLog)
        for number, record in enumerate(self.records):
            head = Text(escape_control(f"#{number} {record['role']}"), style=ROLE_STYLES.get(record["role"], "bold"))
            log.write(head)
            log.write(Text(escape_control(record["content"]) or "(no text)"))
            log.write(Text(""))
        log.focus()
