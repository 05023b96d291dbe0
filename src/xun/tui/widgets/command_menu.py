"""The slash-command completions shown above the prompt while a command is typed."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from xun.tui.commands import SlashCommand


class CommandMenu(OptionList):
    """Never focused: the prompt keeps the keyboard and moves the highlight (Up/Down, Tab accepts)."""

    can_focus = False

    def __init__(self) -> None:
        super().__init__(id="command-menu")
        self.commands: list[SlashCommand] = []
        self.shown_for: str | None = None
        """The prompt text the commands were offered for (the prompt refreshes the menu when it differs)."""
        self.display = False

    def show(self, commands: list[SlashCommand], shown_for: str | None = None) -> None:
        self.commands = list(commands)
        self.shown_for = shown_for
        self.clear_options()
        if not commands:
            self.display = False
            return
        width = max(len(c.usage) for c in commands)
        self.add_options(
            [Option(Content(f"{c.usage.ljust(width)}  {c.help}"), id=str(i)) for i, c in enumerate(commands)]
        )
        self.highlighted = 0
        self.display = True

    def hide(self, shown_for: str | None = None) -> None:
        """Close the menu; with `shown_for`, it stays closed for that text (Esc dismissed it)."""
        self.show([], shown_for)

    @property
    def is_open(self) -> bool:
        return bool(self.display and self.commands)

    def move(self, step: int) -> None:
        if not self.commands:
            return
        current = self.highlighted if self.highlighted is not None else 0
        self.highlighted = (current + step) % len(self.commands)

    @property
    def chosen(self) -> SlashCommand | None:
        if not self.commands:
            return None
        index = self.highlighted if self.highlighted is not None else 0
        return self.commands[index]
