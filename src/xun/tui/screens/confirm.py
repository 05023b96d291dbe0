"""Before write_file or run_command runs: what exactly will happen (the path or the command, and the whole
diff or preview, scrollable), and the answer: y allow once, s allow for this session, n / Esc deny (the
keys of `xun.agent.tools.CONFIRM_KEYS`, the same as on the command line); Enter on the focused Deny denies.

Keys typed ahead must not answer: until the dialog has been shown for `CONFIRM_GUARD_SECONDS` and no key
has come for as long, the answer keys do nothing and the buttons are disabled (the preview can already
be scrolled). Every key that arrives meanwhile restarts the wait, and so does a typed character that is
not an answer once the dialog is ready: someone typing a sentence (meant for the prompt) is not answering,
and the "n" or "s" in its next word must not decide. What is typed while the dialog waits is kept out of
the prompt behind it (a newcomer found stray letters there, to be sent with the next prompt): the dialog
keeps it (`typed_aside`), and the chat shows it once the dialog closes, so a sentence is not lost either."""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Button, Label, Static

from xun.agent.tools import CONFIRM_GUARD_SECONDS, CONFIRM_KEYS, ConfirmationRequest, Decision
from xun.base.valid_text import escape_control
from xun.tui.format import literal
from xun.tui.screens.modal import Modal

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


ANSWER_LABELS = {Decision.ALLOW_ONCE: "Allow once", Decision.ALLOW_SESSION: "Allow for this session",
                 Decision.DENY: "Deny"}


class ConfirmScreen(Modal[Decision]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key + (",escape" if decision is Decision.DENY else ""), f"answer('{decision.value}')",
                ANSWER_LABELS[decision], id=f"confirm.{decision.value}")
        for key, decision in CONFIRM_KEYS.items()
    ]
    SUBTITLE = "y allow once · s allow for session · n deny"
    WAITING = "wait… (keys typed ahead are ignored)"

    def __init__(self, request: ConfirmationRequest) -> None:
        super().__init__(id="confirm")
        self.request = request
        self.armed = False
        """False until the guard has passed: answers are ignored."""
        self._quiet_since = time.monotonic()
        self.typed_aside: list[str] = []
        """What was typed while the dialog took no answers: never an answer, never sent to the prompt."""

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="confirm-box") as box:
            box.border_title = literal(f"{request.tool} wants to run", flat=True)
            box.border_subtitle = self.WAITING
            yield Label(literal(request.title), id="confirm-title")
            with VerticalScroll(id="confirm-preview"):
                yield Static(preview_renderable(request), id="confirm-preview-text")
            with Horizontal(id="confirm-buttons"):
                yield Button("Allow once", id="allow_once", variant="success", compact=True, disabled=True)
                yield Button(ANSWER_LABELS[Decision.ALLOW_SESSION], id="allow_session", variant="primary",
                             compact=True, disabled=True)
                yield Button("Deny", id="deny", variant="error", compact=True, disabled=True)

    def on_mount(self) -> None:
        self._quiet_since = time.monotonic()
        self.query_one("#confirm-preview").focus()
        self.set_interval(0.1, self._arm_when_quiet, name="confirm guard")

    def on_key(self, event: events.Key) -> None:
        typed = event.is_printable and event.character is not None
        if self.armed and typed and event.character not in CONFIRM_KEYS:
            self._set_armed(False)
        if not self.armed:
            self._quiet_since = time.monotonic()
            if typed:
                event.stop()
                event.prevent_default()
                self.typed_aside.append(event.character)

    @property
    def aside_text(self) -> str:
        """What was typed aside, when it is more than answer keys (a sentence worth showing back)."""
        text = "".join(self.typed_aside)
        return text if text.strip(" " + "".join(CONFIRM_KEYS)) else ""

    def _arm_when_quiet(self) -> None:
        if not self.armed and time.monotonic() - self._quiet_since >= CONFIRM_GUARD_SECONDS:
            self._set_armed(True)

    def _set_armed(self, armed: bool) -> None:
        self.armed = armed
        for button in self.query(Button):
            button.disabled = not armed
        self.query_one("#deny" if armed else "#confirm-preview").focus()
        self.query_one("#confirm-box").border_subtitle = self.SUBTITLE if armed else self.WAITING
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "answer" and not self.armed:
            return False
        return True

    def action_answer(self, answer: str) -> None:
        if self.armed:
            self.dismiss(Decision(answer))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.armed and event.button.id in ("allow_once", "allow_session", "deny"):
            self.dismiss(Decision(event.button.id))

