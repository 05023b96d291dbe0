"""The main screen: the panes. It forgets its focus when a modal covers it, so closing any screen
brings the keyboard back to the prompt (the app's AUTO_FOCUS), wherever it was before. What is typed or
pasted while another pane has the keyboard, and that pane has no use for, goes to the prompt."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen


class MainScreen(Screen[None]):
    def on_screen_suspend(self) -> None:
        self.set_focus(None)

    def on_key(self, event: events.Key) -> None:
        """A printable key no pane used (the chat, the gauge, the log had the keyboard): the prompt takes
        it and the keyboard, so a sentence typed after Tab lands whole (it was lost, Enter too: trial D)."""
        if not (event.is_printable and event.character) or event.key in self.app.active_bindings:
            return  # (a key bound in the focused pane, as `[` in the chat, reaches its binding after this)
        if self._bring_prompt() is not None:
            event.stop()
            event.prevent_default()
            self.app.prompt.insert(event.character)

    def on_paste(self, event: events.Paste) -> None:
        """A paste no pane took goes to the prompt, which collapses a large one as it does its own."""
        prompt = self._bring_prompt()
        if prompt is not None:
            event.stop()
            event.prevent_default()
            prompt.post_message(events.Paste(event.text))

    def _bring_prompt(self) -> Any:
        """The prompt, with the keyboard and on screen (at a narrow size the side panel may stand in place of
        the chat and the prompt), or None when it has the keyboard already or cannot take text."""
        app: Any = self.app
        try:
            prompt = app.prompt
        except Exception:  # not composed yet
            return None
        if prompt.has_focus or prompt.read_only or app.screen is not self:
            return None
        main = self.query_one("#main")
        if main.has_class("-narrow") and main.has_class("-side-shown"):
            main.remove_class("-side-shown")
        prompt.focus()
        return prompt
