"""The main screen: the panes. It forgets its focus when a modal covers it, so closing any screen
brings the keyboard back to the prompt (the app's AUTO_FOCUS), wherever it was before."""

from __future__ import annotations

from textual.screen import Screen


class MainScreen(Screen[None]):
    def on_screen_suspend(self) -> None:
        self.set_focus(None)
