"""Before write_file or run_command runs: what exactly will happen (the path or the command, and a diff
or preview), and the answer: allow once, allow for this session, or deny."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from xun.tools import ConfirmationRequest, Decision

DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "$text-accent"), ("+", "$text-success"), ("-", "$text-error"))


def diff_content(text: str) -> Content:
    """A unified diff, added lines green and removed lines red."""
    lines = []
    for line in text.splitlines():
        style = next((style for prefix, style in DIFF_STYLES if line.startswith(prefix)), "")
        lines.append(Content.styled(line, style) if style else Content(line))
    return Content("\n").join(lines)


def preview_renderable(request: ConfirmationRequest) -> Content:
    """The preview highlighted as a diff, a shell command, or the new file's language."""
    text = request.preview.expandtabs(4)
    if request.kind == "diff":
        return diff_content(text)
    if request.kind == "command":
        return highlight(text, language="bash")
    if request.kind == "new_file" and request.path is not None:
        from pygments.lexers import get_lexer_for_filename
        from pygments.util import ClassNotFound

        try:
            lexer = get_lexer_for_filename(Path(request.path).name)
        except ClassNotFound:
            return Content(text)
        if lexer.aliases:
            return highlight(text, language=lexer.aliases[0])
    return Content(text)


class ConfirmScreen(ModalScreen[Decision]):
    BINDINGS: ClassVar[list[BindingType]] = [
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
