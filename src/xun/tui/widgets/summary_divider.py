"""Where a summary compaction happened: a divider saying how many messages went and where to."""

from __future__ import annotations

from textual.widgets import Static

from xun.tui.format import literal


class SummaryDivider(Static):
    def __init__(self, text: str = "", *, state: str = "done") -> None:
        super().__init__(literal(text), classes=f"block -{state}")
        self.text = text
        self.state = state

    @staticmethod
    def describe(condensed: int, kept: int, offload: str | None, focus: str | None = None) -> str:
        where = f", offloaded to {offload}" if offload else ", originals kept in the session file"
        focus_text = f" · focus: {focus}" if focus else ""
        return f"{condensed} messages summarised{where} · {kept} kept{focus_text}"

    def set_text(self, text: str, state: str) -> None:
        self.remove_class(f"-{self.state}")
        self.text, self.state = text, state
        self.add_class(f"-{state}")
        self.update(literal(text))
