"""The prompt: multi-line, Enter sends, Shift+Enter or Ctrl+J starts a new line, Up/Down walk the
history (from the first or last line), and slash commands complete as they are typed."""

from __future__ import annotations

import time
from typing import ClassVar

from textual import events
from textual.strip import Strip
from textual.binding import BindingType
from textual.widgets import TextArea

from xun.base.valid_text import escape_control
from xun.tui.commands import COMMAND_NAMES, completions
from xun.tui.messages import PromptSubmitted
from xun.tui.textual_private import delete_via_keyboard, replace_via_keyboard
from xun.tui.widgets.command_menu import CommandMenu

NEWLINE_KEYS = ("shift+enter", "ctrl+j", "alt+enter")
PLACEHOLDER = "Ask the agent…  (/ for commands · F1 help)"
PASTE_LINES = 20
PASTE_CHARS = 4_000
"""A paste of this many lines or characters is shown as one marker line (and sent in full)."""
DRAFT_LINES = 2_000
DRAFT_CHARS = 256 * 1024
"""Text put back in the prompt (a session file's draft) over this many lines or characters comes back folded as
a paste marker, sent in full like a paste: the editor spends about a kilobyte a line, so a 30 MB draft drawn
as text took the app past a gigabyte."""
TYPED_AHEAD_SECONDS = 0.5
"""A Ctrl+J this soon after the prompt appears was an Enter typed before the app started: the terminal,
not yet in raw mode, turned it into a line feed (which reads as Ctrl+J). It sends, as Enter would."""


def paste_marker(pasted: str, number: int) -> str:
    """The line a large paste shows as: `[pasted 1,024 lines #1]`; a paste folded for its characters says
    how many (`[pasted 40,000 characters #1]` for one line). A final newline starts no line. The number
    makes each marker unique, so the prompt sent has each paste in its place."""
    lines = len(pasted.splitlines())
    if lines >= PASTE_LINES:
        size = f"{lines:,} lines"
    elif lines <= 1:
        size = f"{len(pasted):,} characters"
    else:
        size = f"{lines:,} lines, {len(pasted):,} characters"
    return f"[pasted {size} #{number}]"


class PromptInput(TextArea, inherit_bindings=False):
    # TextArea's F6 (select line) and F7 (select all) would shadow the app's F6 and F7, and its PageUp and
    # PageDown (a page of a prompt that is a line or two) the app's, which scroll the chat; the rest stay.
    BINDINGS: ClassVar[list[BindingType]] = [
        binding
        for binding in TextArea.BINDINGS
        if getattr(binding, "key", "") not in ("f6", "f7", "pageup", "pagedown")
    ]

    def __init__(self, menu: CommandMenu, *, cursor_blink: bool = True) -> None:
        super().__init__(
            id="prompt",
            soft_wrap=True,
            show_line_numbers=False,
            tab_behavior="focus",
            highlight_cursor_line=False,
            placeholder=PLACEHOLDER,
        )
        self.cursor_blink = cursor_blink
        self.menu = menu
        self.prompt_history: list[str] = []
        self._history_at: int | None = None
        """Index into `history` while walking it; None when editing a new prompt."""
        self._draft = ""
        self._pastes: list[str] = []
        """Large pastes, shown as one marker line each until the prompt is sent."""
        self.border_title = "prompt"
        self._shown_at = time.monotonic()

    def on_mount(self) -> None:
        self._shown_at = time.monotonic()

    def shown_for(self) -> float:
        """Seconds since the prompt appeared (a Ctrl+J sooner was typed before the app started)."""
        return time.monotonic() - self._shown_at

    # ------------------------------------------------------------------------------------ text

    def load_text(self, text: str) -> None:
        """Text put in the prompt other than by keys (a draft or an unanswered prompt from the session file, the
        history, a command) with its control characters shown, never drawn raw: a session file's draft
        holding OSC 0 and `ESC[2J` retitled the terminal and cleared it on resume."""
        super().load_text(escape_control(text))

    def set_prompt(self, text: str) -> None:
        """Put text in the prompt with the cursor at its end."""
        self.load_text(text)
        self.move_cursor(self.document.end)
        self._history_at = None

    def put_back(self, text: str) -> str | None:
        """Put `text` back at the end of the prompt (in place of an empty prompt), folded as a paste marker
        when it is over DRAFT_LINES or DRAFT_CHARS; the marker, or None when it came back as text."""
        marker = None
        if len(text) > DRAFT_CHARS or text.count("\n") >= DRAFT_LINES:
            self._pastes.append(text)
            text = marker = paste_marker(text, len(self._pastes))
        before = self.text.rstrip()
        self.set_prompt(f"{before}\n\n{text}" if before else text)
        return marker

    def remember(self, text: str) -> None:
        if text and (not self.prompt_history or self.prompt_history[-1] != text):
            self.prompt_history.append(text)
        self._history_at = None

    def recall_earlier(self, prompts: list[str]) -> None:
        """Prompts older than those typed here (a resumed session's own), oldest first, before them in the history."""
        earlier = [text for at, text in enumerate(prompts) if text and (not at or prompts[at - 1] != text)]
        if self._history_at is not None:
            self._history_at += len(earlier)
        self.prompt_history[:0] = earlier

    async def _on_paste(self, event: events.Paste) -> None:
        """A large paste is one line in the input, `[pasted 1,024 lines #1]`; the prompt sent has it all.
        Terminals end the lines of a bracketed paste with CR: every paste is read with LF line ends."""
        event.prevent_default()
        event.stop()
        if self.read_only:
            return
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        if len(text.splitlines()) >= PASTE_LINES or len(text) >= PASTE_CHARS:
            self._pastes.append(text)  # (sent as pasted; only its marker is drawn)
            text = paste_marker(text, len(self._pastes))
        text = escape_control(text)  # a paste that came some other way than the terminal's parser
        if result := replace_via_keyboard(self, text, *self.selection):
            self.move_cursor(result.end_location)
            self.focus()

    def expanded(self, text: str) -> str:
        """`text` with each paste marker replaced by what was pasted."""
        for number, pasted in enumerate(self._pastes, 1):
            text = text.replace(paste_marker(pasted, number), pasted)
        return text

    def action_delete_to_start_of_line(self) -> None:
        """Ctrl+U deletes to the start of the line; at the start of a line (so a second Ctrl+U) it clears
        the whole prompt, however many lines it has. The line is the logical one: Textual's own stops at
        the start of the wrapped row, so a long pasted line took one press a row to clear."""
        row, column = self.cursor_location
        if column == 0 and not self.selected_text:
            # an edit, not `load_text`, which forgets the undo history: Ctrl+Z brings the draft back;
            # the pastes stay known, so markers undone back into the prompt still send what was pasted
            delete_via_keyboard(self, (0, 0), self.document.end)
            self._history_at = None
            return
        if self.selected_text or self.read_only:
            super().action_delete_to_start_of_line()
            return
        delete_via_keyboard(self, self.selection.end, (row, 0))

    def _edited_markers(self) -> list[str]:
        """The markers of pastes that are no longer whole in the text but not gone either (a letter typed
        into one, a Backspace at its end): a prompt holding one is not sent, or its paste would be left out."""
        text = self.text
        edited = []
        for number, pasted in enumerate(self._pastes, 1):
            marker = paste_marker(pasted, number)
            if marker not in text and (marker[:8] in text or marker[-8:] in text or f" #{number}]" in text):
                edited.append(marker)
        return edited

    def _submit(self) -> None:
        text = self.text.strip()
        self.menu.hide()
        if not text:
            return
        if edited := self._edited_markers():
            self.app.notify(
                f"Not sent: the paste marker {edited[0]} was edited, so its paste would be left out. Put it "
                "back as it was to send the paste, or delete it whole to send without it (Ctrl+Z undoes).",
                title="paste",
                severity="warning",
            )
            return
        self.remember(self.expanded(self.text.rstrip()))
        text = self.expanded(text)
        self._pastes = []
        self.load_text("")
        self.post_message(PromptSubmitted(text))

    def _accept_completion(self) -> bool:
        chosen = self.menu.chosen
        if chosen is None:
            return False
        self.set_prompt(chosen.inserts)
        self._update_menu()
        return True

    def _update_menu(self) -> None:
        self.menu.show(completions(self.text), shown_for=self.text)

    def _current_menu(self) -> None:
        """The menu for the text as it is now. It follows the text on the Changed message, which comes
        after any keys already queued: in a fast burst Enter would else take a completion offered for an
        earlier, shorter text (`/re` -> `/recall` while the prompt reads `/render out.html`)."""
        if self.menu.shown_for != self.text:
            self._update_menu()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is self:
            self._current_menu()

    # ---------------------------------------------------------------------------------- history

    def _walk_history(self, step: int) -> None:
        if not self.prompt_history:
            return
        if self._history_at is None:
            if step > 0:
                return
            self._draft = self.text
            index = len(self.prompt_history) - 1
        else:
            index = self._history_at + step
        if index >= len(self.prompt_history):
            self.load_text(self._draft)
            self.move_cursor(self.document.end)
            self._history_at = None
            return
        index = max(index, 0)
        self.load_text(self.prompt_history[index])
        self.move_cursor(self.document.end if step < 0 else (0, len(self.document.get_line(0))))
        self._history_at = index

    def render_line(self, y: int) -> Strip:
        """A blank line when the prompt has no width: Textual (8.2.8, pinned) wraps the placeholder at width
        0 and raises (a terminal growing back from 20x6 passes through width 0)."""
        if self.content_size.width <= 0:
            return Strip.blank(self.size.width)
        return super().render_line(y)

    # -------------------------------------------------------------------------------------- keys

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        handled = True
        if key == "ctrl+j" and self.shown_for() < TYPED_AHEAD_SECONDS:
            key = "enter"
        if key in ("enter", "tab", "escape", "up", "down"):
            self._current_menu()
        if key == "enter":
            typed = self.text.strip()
            if self.menu.is_open and typed not in COMMAND_NAMES:
                self._accept_completion()
            else:
                self._submit()
        elif key in NEWLINE_KEYS:
            self.insert("\n")
        elif key == "tab" and self.menu.is_open:
            self._accept_completion()
        elif key == "escape" and self.menu.is_open:
            self.menu.hide(shown_for=self.text)
        elif key == "up" and self.menu.is_open:
            self.menu.move(-1)
        elif key == "down" and self.menu.is_open:
            self.menu.move(1)
        elif key == "up" and self.cursor_location[0] == 0:
            self._walk_history(-1)
        elif key == "down" and self.cursor_location[0] == self.document.line_count - 1 and self._history_at is not None:
            self._walk_history(1)
        else:
            handled = False
        if handled:
            event.stop()
            event.prevent_default()
