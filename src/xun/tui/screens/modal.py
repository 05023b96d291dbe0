"""The base of xun's modal screens: their style sheet is read when the first one opens, not before the
app's first frame (Textual loads a screen's `CSS_PATH` when it is first shown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, TypeVar

from textual import events
from textual.screen import ModalScreen

from xun.tui.textual_private import get_time

from xun.base.paths import styles_dir

ResultType = TypeVar("ResultType")

BOX_SHARE, BOX_MAX = 0.9, 140
"""A box's width: this share of the screen, at most this many cells (`width` and `max-width` in modals.tcss)."""


def box_room(screen_width: int) -> int:
    """The cells a table has in a box (borders, padding and a vertical scrollbar off), to fit its columns
    before it is laid out: a column cut by the box's edge shows no sign of it."""
    return min(int(screen_width * BOX_SHARE), BOX_MAX) - 2 - 2 - 1


class Modal(ModalScreen[ResultType]):
    CSS_PATH: ClassVar[list[str | Path]] = [styles_dir() / "modals.tcss"]
    HOLDS_TOASTS: ClassVar[bool] = False
    """A question: toasts raised while it is open wait too, not only those on screen (`XunApp.hold_toasts`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened_at = get_time()
        """When it was asked for (Textual's clock, as a key's `time`): a key pressed before is not its own."""

    def on_screen_resume(self) -> None:
        self.app.hold_toasts(new_ones_too=self.HOLDS_TOASTS)

    def on_screen_suspend(self) -> None:
        self.app.release_toasts()

    def on_unmount(self) -> None:
        self.app.release_toasts()

    def on_paste(self, event: events.Paste) -> None:
        """A paste that no field of the dialog took (an input stops its own) goes to the prompt behind it, and
        the toast says so: a paste is never lost. A question keeps it aside instead."""
        event.stop()
        event.prevent_default()
        self.app.paste_into_prompt(event.text)

    def action_copy_text(self) -> None:
        """Ctrl+C copies the selected text; with none it counts toward quitting, as on the main screen
        (a modal hides the app's own, non-priority Ctrl+C)."""
        selection = self.get_selected_text()
        if selection is None:
            self.app.action_quit_twice()
            return
        self.app.copy_to_clipboard(selection)
