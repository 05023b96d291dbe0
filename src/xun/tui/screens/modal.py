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
