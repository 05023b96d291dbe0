"""Do you trust this folder? Its `.xun/config.toml` sets keys that decide where requests (and the API key)
go or what is read into them; until the user says yes they are ignored (`xun.agent.config.TRUST_REQUIRED_KEYS`).
The default, and Escape, is no; yes is remembered in the user config folder, like `xun trust`."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Button, Label, Static

from xun.tui.format import literal
from xun.tui.screens.modal import Modal


class TrustScreen(Modal[bool]):
    HOLDS_TOASTS = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n,escape", "answer(False)", "Do not trust", id="trust.no"),
    ]

    def __init__(self, folder: str, settings: dict[str, str]) -> None:
        super().__init__(id="trust")
        self.folder = folder
        self.settings = settings

    def compose(self) -> ComposeResult:
        with Vertical(id="trust-box") as box:
            box.border_title = "trust this folder?"
            box.border_subtitle = "n / Esc do not trust"
            yield Label(
                literal(
                    f"{self.folder}/.xun/config.toml sets what only a trusted folder may set. They are "
                    "ignored now. Trust it only if you wrote this config or know who did:"
                ),
                id="trust-text",
            )
            with VerticalScroll(id="trust-settings"):  # the folder's own keys and values: text, never markup
                yield Static(
                    Content("\n").join(literal(f"{key} = {value}", flat=True) for key, value in self.settings.items())
                )
            with Horizontal(id="trust-buttons"):
                yield Button("Trust this folder", id="trust", variant="warning", compact=True)
                yield Button("Do not trust", id="no", variant="primary", compact=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "trust")
