"""The model's reasoning, dimmed and collapsible: open while it streams, folded once the reply is in."""

from __future__ import annotations

from textual.widgets import Collapsible, Static


class ReasoningBlock(Collapsible):
    def __init__(self, text: str = "", *, collapsed: bool = False) -> None:
        self._parts: list[str] = [text] if text else []
        self._body = Static(text, markup=False, classes="reasoning-text")
        super().__init__(self._body, title=self._heading(), collapsed=collapsed, classes="reasoning")
        self._title.can_focus = False  # opened with Enter on its selected reply, or a click

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def _heading(self) -> str:
        size = sum(map(len, self._parts))
        return f"reasoning · {size:,} chars" if size else "reasoning"

    def append(self, text: str) -> None:
        if not text:
            return
        self._parts.append(text)
        self._body.update(self.text)
        self.title = self._heading()

    def replace(self, text: str) -> None:
        self._parts = [text] if text else []
        self._body.update(text)
        self.title = self._heading()
