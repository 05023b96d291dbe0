"""The model's reasoning, dimmed and collapsible: open while it streams, folded once the reply is in."""

from __future__ import annotations

from textual.widgets import Collapsible, Static

from xun.tui.format import literal
from xun.tui.textual_private import collapsible_title


class ReasoningBlock(Collapsible):
    def __init__(self, text: str = "", *, collapsed: bool = False) -> None:
        self._parts: list[str] = [text] if text else []
        self._body = Static(literal(text), classes="reasoning-text")
        super().__init__(self._body, title=literal(self._heading()), collapsed=collapsed, classes="reasoning")
        self.title = self._heading()
        collapsible_title(self).can_focus = False  # opened with Enter on its selected reply, or a click

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def _watch_title(self, title: str) -> None:
        collapsible_title(self).label = literal(title, flat=True) if isinstance(title, str) else title

    def _heading(self) -> str:
        size = sum(map(len, self._parts))
        return f"reasoning · {size:,} chars" if size else "reasoning"

    def append(self, text: str) -> None:
        if not text:
            return
        self._parts.append(text)
        self._body.update(literal(self.text))
        self.title = self._heading()

    def replace(self, text: str) -> None:
        self._parts = [text] if text else []
        self._body.update(literal(text))
        self.title = self._heading()
