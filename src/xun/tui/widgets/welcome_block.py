"""What an empty chat says: who answers, and the keys that matter."""

from __future__ import annotations

from textual.widgets import Static

from xun.tui.format import literal


class WelcomeBlock(Static):
    def __init__(self, model: str, provider: str) -> None:
        self.text = (
            f"{model}: {provider}\n\n"
            "Enter sends · Shift+Enter or Ctrl+J: new line · / commands\n"
            "F5 summarise · F6 reclaim · F7 preview · F8 results · F9 recall\n"
            "Enter on the gauge: what fills the context · F4 side panel on/off\n"
            "Esc cancel · F1 help · Ctrl+P every action · Ctrl+Q save and quit"
        )
        super().__init__(literal(self.text), id="welcome")
