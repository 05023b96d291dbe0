"""A question that keys typed ahead cannot answer.

A dialog that opens while someone types (a confirmation in the middle of a turn, the ask-mode question)
would otherwise take the "n", "s" or "o" of their next word for an answer. Until the dialog has been shown
for `GUARD_SECONDS` with no key pressed meanwhile, its answer keys do nothing and its buttons are
disabled; every key that arrives meanwhile restarts the wait, and so does a typed character that is no
answer once it is ready (someone typing a sentence is not answering), and so does a paste (a paste is
text, and text copied from a web page may end in an answer key). What is typed while it waits is kept
out of the prompt behind it (a newcomer found stray letters there, to be sent with the next prompt): the
question keeps it (`typed_aside`), and the chat shows it once the question closes, so a sentence is not lost
either."""

from __future__ import annotations

import time
from typing import ClassVar

from textual import events
from textual.widgets import Button

from xun.agent.tools import CONFIRM_GUARD_SECONDS
from xun.tui.screens.modal import Modal, ResultType


class GuardedQuestion(Modal[ResultType]):
    """A modal whose `answer` action and buttons work only once it is armed (see the module)."""

    HOLDS_TOASTS = True

    GUARD_SECONDS: ClassVar[float] = CONFIRM_GUARD_SECONDS
    ANSWER_KEYS: ClassVar[frozenset[str]] = frozenset()
    """The characters that answer; any other typed character disarms it."""
    BOX_ID: ClassVar[str] = ""
    """The box whose subtitle says whether it takes answers."""
    SUBTITLE: ClassVar[str] = ""
    WAITING: ClassVar[str] = "wait… (keys typed ahead are ignored)"

    def __init__(self, *, id: str) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self.armed = False
        """False until the guard has passed: answers are ignored."""
        self._quiet_since = time.monotonic()
        self.typed_aside: list[str] = []
        """What was typed while it took no answers: never an answer, never sent to the prompt."""
        self._answer_key = ""
        """An answer key typed while armed whose binding has not run yet (its answer clears it)."""

    def on_mount(self) -> None:
        self._quiet_since = time.monotonic()
        self._set_armed(False)
        self.set_interval(0.1, self._arm_when_quiet, name="answer guard")

    def on_key(self, event: events.Key) -> None:
        typed = event.is_printable and event.character is not None
        if self.armed and typed and event.character in self.ANSWER_KEYS:
            self._answer_key = event.character  # on its way to the binding, which runs after this handler
        elif self.armed and typed:
            self._wait_again()
        if typed and event.character not in self.ANSWER_KEYS:
            self._answer_key = ""
        if not self.armed:
            self._quiet_since = time.monotonic()
            if typed:
                event.stop()
                event.prevent_default()
                self.typed_aside.append(event.character)

    def on_paste(self, event: events.Paste) -> None:
        """A paste is never an answer, nor is a key that comes with it: it is kept aside as typed text is, and
        the question waits again."""
        event.stop()
        event.prevent_default()
        self._wait_again()
        self._answer_key = ""
        self._quiet_since = time.monotonic()
        self.typed_aside.append(event.text.replace("\r\n", "\n").replace("\r", "\n"))

    def _wait_again(self) -> None:
        """Take no answer until it has been quiet for `GUARD_SECONDS` again. An answer key just before, whose
        binding has not run yet, was the start of the text that disarmed it: its binding finds the question
        disarmed, and the key is kept aside."""
        if self.armed:
            self._set_armed(False)
        if self._answer_key:
            self.typed_aside.append(self._answer_key)

    @property
    def aside_text(self) -> str:
        """What was typed aside, when it is more than answer keys (a sentence worth showing back)."""
        text = "".join(self.typed_aside)
        return text if text.strip(" " + "".join(self.ANSWER_KEYS)) else ""

    def _arm_when_quiet(self) -> None:
        if not self.armed and time.monotonic() - self._quiet_since >= self.GUARD_SECONDS:
            self._set_armed(True)

    def _set_armed(self, armed: bool) -> None:
        self.armed = armed
        for button in self.query(Button):
            button.disabled = not armed
        self.query_one(f"#{self.BOX_ID}").border_subtitle = self.SUBTITLE if armed else self.WAITING
        self.focus_for(armed)
        self.refresh_bindings()

    def focus_for(self, armed: bool) -> None:
        """Where the focus goes when it arms or disarms (a disabled button cannot hold it)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "answer" and not self.armed:  # other actions (a refusal such as Esc) need no guard
            return False
        return True
