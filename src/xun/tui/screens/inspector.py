"""The inspector: a reclaimed tool result, or a call's reclaimed arguments, in full (highlighted when it is
code or JSON), with actions to copy it, save it to a file, and restore it into the context."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widgets import Button, Input, Label, Static

from xun.base.atomic import write_text_atomic
from xun.base.valid_text import escape_control
from xun.context.reclaimed import ARGUMENTS, ReclaimedToolResult
from xun.tui.format import TOKENS_PER_CHAR, literal, one_line, tokens
from xun.tui.screens.modal import Modal

HIGHLIGHT_LIMIT = 200_000
"""Longer originals are shown as plain text: highlighting them would stall the screen."""


def detect_language(tool_name: str, arguments: str, text: str) -> str | None:
    """ "json" for JSON, the file's language for read_file of a code file, else None (plain text)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(stripped)
            return "json"
        except ValueError:
            pass
    if tool_name == "read_file":
        try:
            path = json.loads(arguments).get("path", "")
        except (ValueError, AttributeError):
            path = ""
        if path:
            from pygments.lexers import get_lexer_for_filename
            from pygments.util import ClassNotFound

            try:
                lexer = get_lexer_for_filename(path)
            except ClassNotFound:
                return None
            return lexer.aliases[0] if lexer.aliases else None
    return None


_WHOLE_FILE = re.compile(r"^\[[^\n]*: lines 1-(\d+) of \1, the whole file\]\n")


def file_content(record: ReclaimedToolResult, original: str) -> str | None:
    """The file itself when `original` is read_file's view of a whole file (its header and line numbers
    taken off), else None: what `s` saves, so a saved `.py` is the code and not the numbered view."""
    if record.tool_name != "read_file" or record.kind == ARGUMENTS:
        return None
    match = _WHOLE_FILE.match(original)
    if match is None:
        return None
    lines = original[match.end() :].split("\n")
    if len(lines) != int(match.group(1)) or not all("\t" in line for line in lines):
        return None
    return "\n".join(line.split("\t", 1)[1] for line in lines) + "\n"


def suggested_name(record: ReclaimedToolResult, language: str | None, original: str = "") -> str:
    extension = {"json": ".json", None: ".txt"}.get(language)
    if record.tool_name == "read_file" and file_content(record, original) is None:
        extension = ".txt"  # a part of a file, numbered: not something to run or import
    if extension is None:
        try:
            path = json.loads(record.arguments).get("path", "")
        except (ValueError, AttributeError):
            path = ""
        extension = Path(path).suffix or ".txt"
    what = "-arguments" if record.kind == ARGUMENTS else ""
    return f"{record.tool_name or 'result'}-{record.call_id[-8:]}{what}{extension}"


def recall_query(record: ReclaimedToolResult, original: str = "") -> str:
    """What F9 searches for to find this call again: its short argument values (a path, a command, a
    pattern), which the history indexes with the call and with the summarised turn that made it. For
    reclaimed arguments, `record.arguments` is only a preview (cut JSON): the original has them whole
    (F9 searched for the bare tool name, 50+ matches from every session)."""
    try:
        arguments = json.loads(original if record.kind == ARGUMENTS and original else record.arguments)
    except ValueError:
        arguments = None
    values = arguments.values() if isinstance(arguments, dict) else []
    short = [value for value in values if isinstance(value, str) and 0 < len(value) <= 120]
    return " ".join(short) or record.tool_name


class InspectorScreen(Modal[str | None]):
    """Dismisses with "restore" when the user asks to restore the result, "recall" to find it in the
    history (a result a summary took out of the context cannot be restored), else None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="inspector.close"),
        Binding("c", "copy", "Copy", id="inspector.copy"),
        Binding("s", "save", "Save to file", id="inspector.save"),
        Binding("r", "restore", "Restore into context", id="inspector.restore"),
        Binding("f", "find", "Find in the history", id="inspector.find"),
        Binding("g", "show_in_chat", "Show in the chat", id="inspector.chat"),
    ]

    def __init__(
        self, record: ReclaimedToolResult, original: str, *, workdir: Path, when: str, restorable: bool = True
    ) -> None:
        super().__init__(id="inspector")
        self.record = record
        self.original = original
        self.workdir = workdir
        self.when = when
        self.restorable = restorable
        self.language = detect_language(record.tool_name, record.arguments, original)
        self.saved_to: Path | None = None
        self._replace_confirmed: Path | None = None
        """A file that exists and that the user asked again to replace."""

    def compose(self) -> ComposeResult:
        record = self.record
        with Vertical(id="inspector-box") as box:
            what = (
                f"{record.tool_name or 'tool'} call arguments"
                if record.kind == ARGUMENTS
                else record.tool_name or "tool result"
            )
            box.border_title = literal(f"{what} · {record.tool_call_id}", flat=True)
            box.border_subtitle = (
                "c copy · s save · r restore · esc close"
                if self.restorable
                else "c copy · s save · f find in history · esc close"
            )
            yield Label(literal(self.summary_line()), id="inspector-summary")
            with VerticalScroll(id="inspector-body"):
                yield Static(self._renderable(), id="inspector-text")
            with Horizontal(id="inspector-save-row"):
                yield Label("save to ", id="inspector-save-label")
                yield Input(
                    value=str(Path(".xun") / "exports" / suggested_name(record, self.language, self.original)),
                    id="inspector-save-path",
                    compact=True,
                )
            with Horizontal(id="inspector-buttons"):
                yield Button("Copy", id="copy", variant="primary", compact=True)
                yield Button("Save…", id="save", compact=True)
                if self.restorable:
                    yield Button(
                        "Restore",
                        id="restore",
                        variant="warning",
                        compact=True,
                        tooltip="Put the original back into the context in place of its placeholder",
                    )
                else:  # its placeholder is gone: what works is reading it here and finding it in the history
                    yield Button(
                        "Find in history",
                        id="find",
                        variant="primary",
                        compact=True,
                        tooltip=f"{self.app.key_of('recall')} with this call's arguments: this result, "
                        "and the summarised turn that made the call in the offload log",
                    )
                yield Button("Close", id="close", compact=True)
            yield Label("", id="inspector-status")

    def summary_line(self) -> str:
        record = self.record
        size = f"{len(self.original):,} chars (~{tokens(len(self.original) * TOKENS_PER_CHAR)} tokens)"
        kind = self.language or "text"
        gone = "" if self.restorable else " · summarised since (read only) · f finds it in the history"
        if record.kind == ARGUMENTS:  # the original is the arguments themselves: no need to repeat their start
            return f"the arguments of this call · {size} · {kind} · reclaimed {self.when}{gone}"
        return f"{one_line(record.arguments, 90)} · {size} · {kind} · reclaimed {self.when}{gone}"

    @property
    def save_text(self) -> str:
        """What `s` writes: the file's own content for a whole file read with read_file, else the result."""
        return file_content(self.record, self.original) or self.original

    @property
    def shown_text(self) -> str:
        """What the screen shows: the original with its tabs expanded (copy and save use the original)."""
        return escape_control(self.original.expandtabs(4))

    def _renderable(self) -> Content:
        if self.language and len(self.original) <= HIGHLIGHT_LIMIT:
            return highlight(self.shown_text, language=self.language)
        return Content(self.shown_text)

    def on_mount(self) -> None:
        self.query_one("#inspector-save-row").display = False
        self.query_one("#inspector-body").focus()

    def _status(self, text: str) -> None:
        self.query_one("#inspector-status", Label).update(literal(text))

    # ----------------------------------------------------------------------------------- actions

    def action_close(self) -> None:
        row = self.query_one("#inspector-save-row")
        if row.display:
            row.display = False
            self.query_one("#inspector-body").focus()
            return
        self.dismiss(None)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.original)
        # the terminal is asked (OSC 52) and never says whether it agreed: do not claim more than that
        self._status(
            f"sent {len(self.original):,} characters to the terminal's clipboard; if nothing arrives there "
            "(some terminals refuse), s saves the text to a file"
        )

    def action_save(self) -> None:
        row = self.query_one("#inspector-save-row")
        row.display = True
        path_input = self.query_one("#inspector-save-path", Input)
        path_input.focus()
        path_input.cursor_position = len(path_input.value)

    def save_to(self, name: str) -> Path | None:
        text = name.strip()
        if not text:
            self._status("give a file name to save to")
            return None
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = self.workdir / path
        if path.exists() and path != self._replace_confirmed:
            self._replace_confirmed = path  # the same Enter again replaces it
            self._status(f"{path} exists: Enter again replaces it, or give another name")
            return None
        try:
            write_text_atomic(path, self.save_text)  # 0600 in 0700 folders (.xun/exports), as the rest of .xun
        except OSError as exc:
            self._status(f"could not save to {path}: {exc.strerror or exc}")
            self.app.notify(f"could not save to {path}: {exc.strerror or exc}", severity="error")
            return None
        self.saved_to = path
        self.query_one("#inspector-save-row").display = False
        self.query_one("#inspector-body").focus()
        what = "the file's content" if self.save_text is not self.original else f"{len(self.original):,} characters"
        self._status(f"saved {what} to {path}")
        return path

    def action_restore(self) -> None:
        if self.restorable:
            self.dismiss("restore")
        else:
            self._status(
                "cannot restore: a summary took its placeholder out of the context after it was reclaimed, "
                "so there is no place to put it back. Read it here (c copy, s save), or press f to find it "
                f"and the summarised turn in the history ({self.app.key_of('recall')}); the model can run "
                "the tool again."
            )

    def action_find(self) -> None:
        self.dismiss("recall")

    def action_show_in_chat(self) -> None:
        """Close, and the chat shows the call (its page mounted wherever it is in the session)."""
        self.dismiss("chat")

    @on(Input.Submitted, "#inspector-save-path")
    def _save_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.save_to(event.value)

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        event.stop()
        action = {
            "copy": self.action_copy,
            "save": self.action_save,
            "restore": self.action_restore,
            "find": self.action_find,
            "close": lambda: self.dismiss(None),
        }.get(event.button.id or "")
        if action is not None:
            action()
