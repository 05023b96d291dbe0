"""The chat's vertical scrollbar: where the view is in the whole session, not only in the mounted window.

The chat mounts a bounded window of a session's blocks, so Textual's bar, which measures the mounted rows,
would show a big thumb near the bottom in a session of 30,000 messages. While blocks are left unmounted
this bar measures the whole session instead (the chat estimates its rows from the mounted blocks), and a
click on its track or a drag of its thumb moves the window to the block at that place. While every block
is mounted it is Textual's bar, drawn and driven as Textual does.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from rich.console import RenderableType
from textual import events
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.timer import Timer


class SessionPlace(NamedTuple):
    """Where the view is in the whole session, in (estimated) rows."""

    rows: float
    """The whole session's rows."""
    above: float
    """The rows above the view."""


class SessionScrolled(Protocol):
    """What the bar needs from the widget it scrolls."""

    def session_place(self) -> SessionPlace | None:
        """None while every block is mounted (the plain scrollbar is right)."""

    async def go_to_fraction(self, fraction: float) -> None:
        """Show the block at `fraction` (0 the first, 1 the newest) of the whole session."""


class SessionScrollBar(ScrollBar):
    """A vertical scrollbar over the whole session of the `SessionScrolled` widget that owns it."""

    DRAG_SETTLE = 0.3
    """Seconds a dragged thumb rests before the window moves to it (and it moves on release)."""

    def __init__(self, owner: SessionScrolled, *, thickness: int = 1) -> None:
        super().__init__(vertical=True, name="vertical", thickness=thickness)
        self._owner = owner
        self.dragged_to: float | None = None
        """While the thumb is dragged (or its jump is under way), the fraction of the session it is at."""
        self._drag_start = 0.0
        self._settle: Timer | None = None

    def place(self) -> SessionPlace | None:
        return self._owner.session_place()

    def fraction(self) -> float:
        """How far down the whole session the view is (0 at the top, 1 at the bottom)."""
        place = self.place()
        if place is None:
            return 0.0
        span = place.rows - self.window_size
        return min(1.0, max(0.0, place.above / span)) if span > 0 else 0.0

    def thumb(self) -> tuple[float, float]:
        """The thumb's first row on the track and its height, in rows, as `ScrollBarRender` draws it."""
        place = self.place()
        track = self.size.height
        if place is None or not track or not place.rows:
            return 0.0, float(track)
        height = max(1.0, min(track, self.window_size * track / place.rows))
        fraction = self.fraction() if self.dragged_to is None else self.dragged_to
        return (track - height) * fraction, height

    def render(self) -> RenderableType:
        renderable = super().render()
        place = self.place()
        if place is None or not isinstance(renderable, ScrollBarRender):
            return renderable
        span = max(0.0, place.rows - self.window_size)
        fraction = self.fraction() if self.dragged_to is None else self.dragged_to
        renderable.virtual_size = max(1, round(place.rows))
        renderable.window_size = min(self.window_size, renderable.virtual_size - 1)
        renderable.position = span * fraction
        return renderable

    def on_mouse_down(self, event: events.MouseDown) -> None:
        """A click on the track (not the thumb) shows the block at that place of the session."""
        if self.place() is None:
            return
        if event.style.meta.get("@mouse.down") == "grab":
            return  # the thumb: grabbed, as Textual does
        event.prevent_default()  # not a page up or down
        event.stop()
        track = max(1, self.size.height - 1)
        self.jump(min(1.0, max(0.0, event.y / track)))

    def on_mouse_capture(self, event: events.MouseCapture) -> None:
        self._drag_start = self.fraction()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """A dragged thumb follows the mouse over the whole session; the window follows once it rests."""
        if self.grabbed is None or self.place() is None:
            return
        event.prevent_default()  # Textual's drag scrolls the mounted rows only
        event.stop()
        _, height = self.thumb()
        free = max(1.0, self.size.height - height)
        self.dragged_to = min(1.0, max(0.0, self._drag_start + (event.screen_y - self.grabbed.y) / free))
        self.refresh()
        if self._settle is not None:
            self._settle.stop()
        self._settle = self.set_timer(self.DRAG_SETTLE, self._settled)

    def _settled(self) -> None:
        if self.dragged_to is not None:
            self.jump(self.dragged_to)

    def on_mouse_release(self, event: events.MouseRelease) -> None:
        """The thumb let go (the button up, or the bar hidden meanwhile): the window goes where it was left."""
        if self.dragged_to is not None:
            self.jump(self.dragged_to)

    def jump(self, fraction: float) -> None:
        """Move the view to `fraction` of the session once the current message is handled: the thumb stays
        there meanwhile."""
        if self._settle is not None:
            self._settle.stop()
            self._settle = None
        self.dragged_to = fraction
        self.refresh()
        self.call_later(self._go, fraction)

    async def _go(self, fraction: float) -> None:
        try:
            await self._owner.go_to_fraction(fraction)
        finally:
            if self.dragged_to == fraction and self.grabbed is None:
                self.dragged_to = None
            self.refresh()
