"""Before write_file or run_command runs: what exactly will happen (the path or the command, and a diff
or preview), and the answer: allow once, allow for this session, or deny."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from xun.tools import ConfirmationRequest, Decision


def preview_renderable(request: ConfirmationRequest) -> Syntax | Text:
    if request.kind == "diff":
        return Syntax(request.preview, "diff", theme="ansi_dark", word_wrap=True, background_color="default")
    if request.kind == "command":
        return Syntax(request.preview, "bash", theme="ansi_dark", word_wrap=True, background_color="default")
    if request.kind == "new_file" and request.path is not None:
        from pygments.lexers import get_lexer_for_filename
        from pygments.util import ClassNotFound

        try:
            lexer = get_lexer_for_filename(Path(request.path).name)
            return Syntax(request.preview, lexer.aliases[0], theme="ansi_dark", word_wrap=True,
                          background_color="default")
        except (ClassNotFound, IndexError):
            pass
    return Text(request.preview)


class ConfirmScreen(ModalScreen[Decision]):
    BINDINGS = [
        Binding("a,y", "answer('allow_once')", "Allow once", id="confirm.allow_once"),
        Binding("s", "answer('allow_session')", "Allow for this session", id="confirm.allow_session"),
        Binding("d,n,escape", "answer('deny')", "Deny", id="confirm.deny"),
    ]

    def __init__(self, request: ConfirmationRequest) -> None:
        super().__init__(id="confirm")
        self.request = request

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="confirm-box") as box:
            box.border_title = f"{request.tool} wants to run"
            box.border_subtitle = "a allow once · s allow for session · d deny"
            yield Label(Text(request.title), id="confirm-title")
            with VerticalScroll(id="confirm-preview"):
                yield Static(preview_renderable(request), id="confirm-preview-text")
            with Horizontal(id="confirm-buttons"):
                yield Button("Allow once", id="allow_once", variant="success", compact=True)
                yield Button(f"Allow {request.tool} for this session", id="allow_session", variant="primary", compact=True)
                yield Button("Deny", id="deny", variant="error", compact=True)

    def on_mount(self) -> None:
        self.query_one("#deny", Button).focus()

    def action_answer(self, answer: str) -> None:
        self.dismiss(Decision(answer))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id in ("allow_once", "allow_session", "deny"):
            self.dismiss(Decision(event.button.id))
