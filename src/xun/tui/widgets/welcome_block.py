"""What an empty chat says: who answers, and the keys that matter (as `ui.keymap` made them)."""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import Static

from xun.tui.format import literal


class WelcomeBlock(Static):
    def __init__(self, model: str, provider: str, key_of: Callable[[str], str]) -> None:
        """`key_of(binding_id)`: how that binding's key reads now ("F5"; "Ctrl+P" when the keymap took it)."""
        self.text = (
            f"{model}: {provider}\n\n"
            "Enter sends · Shift+Enter or Ctrl+J: new line · / commands\n"
            f"{key_of('compact')} summarise · {key_of('reclaim')} reclaim · {key_of('preview')} preview · "
            f"{key_of('recoverable')} results · {key_of('recall')} recall\n"
            f"Enter on the gauge: what fills the context · {key_of('toggle_side')} side panel on/off\n"
            f"{key_of('cancel')} cancel · {key_of('help')} help · Ctrl+P every action · {key_of('quit')} save and quit"
        )
        super().__init__(literal(self.text), id="welcome")
