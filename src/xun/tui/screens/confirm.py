"""Before write_file or run_command runs: what exactly will happen (the path or the command, and the whole
diff or preview, scrollable), and the answer: y allow once, s allow for this session, n deny (the keys of
`xun.agent.tools.CONFIRM_KEYS`, the same as on the command line; Enter on the focused Deny denies). A denied
call goes back to the model, which may well ask for it again; Esc denies and stops the turn, so a person
who wants none of it always has a way out (at once: a deliberate Esc is never the end of a sentence).

Keys typed ahead cannot answer (`GuardedQuestion`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Button, Label, Static

from xun.agent.tools import CONFIRM_KEYS, ConfirmationRequest, Decision
from xun.base.valid_text import escape_control
from xun.tui.format import literal, one_line
from xun.tui.screens.guarded import GuardedQuestion

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
    text = escape_control(request.preview.expandtabs(4))  # made by a tool from the model's arguments
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


TITLE_CHARS = 120
"""The dialog's heading is cut here, with an ellipsis; the preview shows everything."""

ANSWER_LABELS = {
    Decision.ALLOW_ONCE: "Allow once",
    Decision.ALLOW_SESSION: "Allow for this session",
    Decision.DENY: "Deny",
}


class ConfirmScreen(GuardedQuestion[Decision]):
    BINDINGS: ClassVar[list[BindingType]] = (
        [
            Binding(key, f"answer('{decision.value}')", ANSWER_LABELS[decision], id=f"confirm.{decision.value}")
            for key, decision in CONFIRM_KEYS.items()
        ]
        + [Binding("escape", "stop", "Deny and stop the turn", id="confirm.stop")]
        + [
            # the preview scrolls from the dialog as it opens (the focus is on a button once it takes answers)
            Binding(key, f"scroll_preview('{how}')", show=False)
            for key, how in (
                ("pagedown", "page_down"),
                ("pageup", "page_up"),
                ("down", "down"),
                ("up", "up"),
                ("home", "home"),
                ("end", "end"),
            )
        ]
    )
    ANSWER_KEYS = frozenset(CONFIRM_KEYS)
    BOX_ID = "confirm-box"
    SUBTITLE = "y allow once · s session · n deny · Esc stop"

    def __init__(self, request: ConfirmationRequest) -> None:
        super().__init__(id="confirm")
        self.request = request
        self.stop_turn = False
        """Answered with Esc: denied, and the turn is to stop."""

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="confirm-box") as box:
            box.border_title = literal(f"{request.tool} wants to run", flat=True)
            box.border_subtitle = self.WAITING
            # the heading is cut, so the buttons stay in sight; the preview below holds the whole command
            yield Label(literal(one_line(request.title, TITLE_CHARS)), id="confirm-title")
            with VerticalScroll(id="confirm-preview"):
                yield Static(preview_renderable(request), id="confirm-preview-text")
            with Horizontal(id="confirm-buttons"):
                allow_once = Button("Allow once", id="allow_once", variant="success", compact=True, disabled=True)
                allow_session = Button(
                    ANSWER_LABELS[Decision.ALLOW_SESSION],
                    id="allow_session",
                    variant="primary",
                    compact=True,
                    disabled=True,
                )
                for allow in (allow_once, allow_session):  # allowing takes its key (y, s) or a click, so
                    allow.can_focus = False  # Tab and Enter reach Deny and never allow
                    yield allow
                yield Button("Deny", id="deny", variant="error", compact=True, disabled=True)

    def focus_for(self, armed: bool) -> None:
        self.query_one("#deny" if armed else "#confirm-preview").focus()

    def action_answer(self, answer: str) -> None:
        if self.armed:
            self.dismiss(Decision(answer))

    def action_scroll_preview(self, how: str) -> None:
        getattr(self.query_one("#confirm-preview", VerticalScroll), f"scroll_{how}")(animate=False)

    def action_stop(self) -> None:
        self.stop_turn = True
        self.dismiss(Decision.DENY)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.armed and event.button.id in ("allow_once", "allow_session", "deny"):
            self.dismiss(Decision(event.button.id))
