"""A one-line note in the chat: info, a warning, an error, a retry, a cancelled turn."""

from __future__ import annotations

from textual.widgets import Static

ICONS = {"info": "·", "warning": "!", "error": "✗", "retry": "↻", "cancelled": "■"}


class NoticeBlock(Static):
    def __init__(self, level: str, text: str) -> None:
        super().__init__(f"{ICONS.get(level, '·')} {text}", markup=False, classes=f"block -{level}")
        self.level = level
        self.text = text
