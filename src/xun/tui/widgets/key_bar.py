"""The key bar at the bottom: Textual's footer, showing only the keys that fit whole. At 60 columns the
footer cut "f8 Results" to "f8 Resul" and left Ctrl+Q off the screen; here the least needed keys are left
out first (F1 lists every key), and those shown keep their order."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer

from xun.tui.textual_private import FooterKey, bindings_ready

KEPT_FIRST = (
    "help",
    "quit_saving",
    "cancel_turn",
    "toggle_side",
    "compact",
    "reclaim",
    "recall",
    "preview",
    "focus_recoverable",
)
"""Actions by how much a narrow screen needs their key: the help (which lists the rest), quitting,
cancelling a turn, the side panel (hidden when narrow), then compaction's keys."""


def key_width(key: FooterKey) -> int:
    """The cells of a compact key: "f1 Help" (its margin of one not counted)."""
    return cell_len(key.key_display) + (1 + cell_len(key.description) if key.description else 0)


def keys_that_fit(keys: list[FooterKey], width: int) -> list[FooterKey]:
    """The keys to show in `width` cells, in their order, leaving out the least needed until they fit."""

    def rank(key: FooterKey) -> int:
        return KEPT_FIRST.index(key.action) if key.action in KEPT_FIRST else len(KEPT_FIRST)

    shown = list(keys)
    for dropped in sorted(keys, key=rank, reverse=True):
        if sum(key_width(key) for key in shown) + len(shown) - 1 <= width:
            break
        shown.remove(dropped)
    return shown


class KeyBar(Footer):
    def __init__(self) -> None:
        super().__init__(show_command_palette=False, compact=True)
        self._laid_out_for = 0

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        width = self.size.width or self.app.size.width
        self._laid_out_for = width
        keys = [widget for widget in widgets if isinstance(widget, FooterKey)]
        shown = set(keys_that_fit(keys, width))
        yield from (widget for widget in widgets if not isinstance(widget, FooterKey) or widget in shown)

    def on_resize(self, event: events.Resize) -> None:
        if bindings_ready(self) and event.size.width != self._laid_out_for:
            self.call_after_refresh(self.recompose)
