"""A one-line note in the chat: info, a warning, an error, a retry, a cancelled turn."""

from __future__ import annotations

from textual.widgets import Static

from xun.tui.format import literal

ICONS = {"info": "·", "warning": "!", "error": "✗", "retry": "↻", "cancelled": "■"}


class NoticeBlock(Static):
    def __init__(self, level: str, text: str) -> None:
        super().__init__(literal(f"{ICONS.get(level, '·')} {text}"), classes=f"block -{level}")
        self.level = level
        self.text = text
