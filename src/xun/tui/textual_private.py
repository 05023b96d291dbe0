"""Every use xun makes of Textual's (and Rich's) private API, in one place, each with the reason no public
API does the job. Textual is pinned exactly in pyproject.toml; `tests/tui/test_textual_private.py` fails,
naming the use, when an upgrade moves or reshapes any of them. `docs/upstream/` holds a report for each,
ready to file, asking for a public way.

Imports of private modules are made here and nowhere else; private members are reached through the
functions below. Overrides of private methods stay in their classes (an override must live there) and
are listed in `OVERRIDDEN`, which the test checks against Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich._wrap import divide_line
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.notifications import Notification
from textual.screen import Screen
from textual.scrollbar import ScrollBar
from textual.widget import Widget
from textual.widgets import Collapsible, Footer, TextArea
from textual.widgets._collapsible import CollapsibleTitle
from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast
from textual.widgets.text_area import EditResult, Location

__all__ = [
    "OVERRIDDEN",
    "CollapsibleTitle",
    "FooterKey",
    "Toast",
    "XTermParser",
    "bindings_ready",
    "check_bindings",
    "collapsible_title",
    "delete_via_keyboard",
    "divide_line",
    "get_time",
    "lay_out_now",
    "layout_required",
    "notifications",
    "replace_via_keyboard",
    "toast_notification",
    "vertical_scrollbar",
]

# Private modules, and why:
# - rich._wrap.divide_line: where Rich wraps a paragraph, so a streamed reply is cut only where both sides
#   wrap as the whole does (assistant_block.line_start_cut); Rich has no public wrap-points function.
# - textual._time.get_time: the clock Textual stamps events with; a dialog's opening time must be on the
#   same clock to tell a key pressed before it opened (screens/modal.py, app.XunApp._on_key).
# - textual._xterm_parser.XTermParser: the drivers' input parser; xun's own (terminal_input) reads a paste's
#   end marker hidden in copied text, and no driver takes a parser by any public means.
# - textual.widgets._footer.FooterKey: the footer's key widget, which the key bar keeps or drops to fit.
# - textual.widgets._toast.Toast: the toast widget, to see whether a gone notification is still drawn.
# - textual.widgets._collapsible.CollapsibleTitle: the title of a Collapsible, which must not take focus.

OVERRIDDEN: dict[tuple[type[Any], str], str] = {
    (App, "_on_key"): "app.XunApp._on_key: a key pressed before the dialog on screen opened runs none of "
    "its keys (the handler that runs the screen's bindings has no public hook before it)",
    (App, "_on_notify"): "app.XunApp._on_notify: a toast withdrawn while its message was queued is not shown",
    (App, "_unnotify"): "app.XunApp._unnotify: repaint once a toast has gone (Textual's diff may miss it)",
    (TextArea, "_on_key"): "widgets.prompt_input.PromptInput._on_key: Enter sends, Shift/Alt+Enter is a new "
    "line, and a paste marker is deleted whole",
    (Widget, "_size_updated"): "widgets.measured_once.MeasuredOnce._size_updated: a size the layout just "
    "measured is stored without asking for a second layout of the screen (the `virtual_size` reactive asks)",
    (XTermParser, "feed"): "terminal_input.TerminalInputParser.feed: what follows a paste's end marker is pasted",
    (XTermParser, "tick"): "terminal_input.TerminalInputParser.tick: held text goes on once the input is quiet",
    (XTermParser, "_sequence_to_key_events"): "terminal_input.TerminalInputParser: ESC and a letter in one read "
    "are Esc and the letter, not Alt+letter",
}
"""Private methods xun overrides, with where and why; each must still exist on its Textual class."""

DRIVER_PARSERS = ("textual.drivers.linux_driver", "textual.drivers.web_driver")
"""Modules whose `XTermParser` name terminal_input.install replaces: each driver makes its parser from it."""


def notifications(app: App[Any]) -> list[Notification]:
    """The notifications the app holds now (`App._notifications`): a toast's title may be withdrawn."""
    return list(app._notifications)


def toast_notification(toast: Toast) -> Notification:
    """The notification a toast on screen shows (`Toast._notification`)."""
    notification: Notification = toast._notification
    return notification


async def check_bindings(app: App[Any], key: str) -> bool:
    """Run the focused chain's binding for `key` now, as the app reads it (`App._check_bindings`): Esc on a
    dialog must act before the keys typed behind it reach the dialog."""
    return await app._check_bindings(key)


def delete_via_keyboard(area: TextArea, start: Location, end: Location) -> EditResult | None:
    """Delete as a key does (`TextArea._delete_via_keyboard`): an edit Ctrl+Z undoes, unlike `load_text`."""
    return area._delete_via_keyboard(start, end)


def replace_via_keyboard(area: TextArea, text: str, start: Location, end: Location) -> EditResult | None:
    """Insert as typing does (`TextArea._replace_via_keyboard`): one undoable edit, read-only respected."""
    return area._replace_via_keyboard(text, start, end)


def layout_required(widget: Widget) -> bool:
    """Whether Textual still owes `widget` a layout (`Widget._layout_required`)."""
    return bool(widget._layout_required)


def lay_out_now(screen: Screen[Any]) -> None:
    """Lay `screen` out at once (`Screen._refresh_layout`), so that widgets just mounted have their places;
    inside `App.batch_update` nothing is painted until the batch ends. A jump scrolls the block it mounted
    to the top of the chat before the first frame shows it (that frame showed the new blocks at the old
    offset, and the block came a frame or two later)."""
    screen._refresh_layout()


def bindings_ready(footer: Footer) -> bool:
    """Whether the footer has its bindings yet (`Footer._bindings_ready`): before, it has nothing to fit."""
    return bool(footer._bindings_ready)


def collapsible_title(collapsible: Collapsible) -> CollapsibleTitle:
    """The clickable title of a Collapsible (`Collapsible._title`)."""
    title: CollapsibleTitle = collapsible._title
    return title


def vertical_scrollbar(widget: Widget, make: Callable[[], ScrollBar]) -> ScrollBar:
    """The widget's vertical scrollbar, made by `make` the first time it is wanted (`Widget._vertical_scrollbar`,
    `App._start_widget`, as `Widget.vertical_scrollbar` does): that property always makes a plain `ScrollBar`,
    and no public hook picks the class, so the chat's bar over the whole session is made here."""
    bar: ScrollBar | None = widget._vertical_scrollbar
    if bar is None:
        bar = make()
        bar.display = False
        widget._vertical_scrollbar = bar
        widget.app._start_widget(widget, bar)
    return bar
