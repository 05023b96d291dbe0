"""Under the prompt just sent, until the model's first token: the turn started and how long it has waited.
A first turn can take seconds (the SDK loads, the model reads the prompt), and a chat with nothing new in
it looked as if Enter had done nothing."""

from __future__ import annotations

import time

from textual.widgets import Static

INTERVAL = 1.0


class WaitingLine(Static):
    def __init__(self) -> None:
        super().__init__("", classes="block")
        self._since = time.monotonic()
        self._held: str | None = None
        self.text = ""

    def on_mount(self) -> None:
        self._tick()
        self.set_interval(INTERVAL, self._tick)

    def hold(self, why: str | None) -> None:
        """While xun waits for the user (ask mode's question), the model does not have the prompt yet: say
        what it waits for; None goes back to "thinking…", counting from now."""
        self._held = why
        self._since = time.monotonic()
        if self.is_mounted:
            self._tick()

    def _tick(self) -> None:
        seconds = int(time.monotonic() - self._since)
        self.text = self._held or "thinking… the model has the prompt"
        if not self._held:  # a held question counts down in its own dialog: one clock, not two
            self.text += f" · {seconds} s" if seconds else ""
        self.update(self.text)
