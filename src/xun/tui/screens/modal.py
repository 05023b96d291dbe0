"""The base of xun's modal screens: their style sheet is read when the first one opens, not before the
app's first frame (Textual loads a screen's `CSS_PATH` when it is first shown)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, TypeVar

from textual.screen import ModalScreen

from xun.base.paths import styles_dir

ResultType = TypeVar("ResultType")


class Modal(ModalScreen[ResultType]):
    CSS_PATH: ClassVar[list[str | Path]] = [styles_dir() / "modals.tcss"]
    HOLDS_TOASTS: ClassVar[bool] = False
    """A question: toasts wait until it closes (`XunApp.hold_toasts`)."""

    def on_screen_resume(self) -> None:
        if self.HOLDS_TOASTS:
            self.app.hold_toasts()

    def on_screen_suspend(self) -> None:
        if self.HOLDS_TOASTS:
            self.app.release_toasts()

    def on_unmount(self) -> None:
        if self.HOLDS_TOASTS:
            self.app.release_toasts()

    def action_copy_text(self) -> None:
        """Ctrl+C copies the selected text; with none it counts toward quitting, as on the main screen
        (a modal hides the app's own, non-priority Ctrl+C)."""
        selection = self.get_selected_text()
        if selection is None:
            self.app.action_quit_twice()
            return
        self.app.copy_to_clipboard(selection)
