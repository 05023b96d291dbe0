"""Widgets laid out once per change of their size, not twice.

When a layout gives a widget a new size, Textual 8.2.8 stores it through the `virtual_size` reactive, which
asks for another layout of the whole screen: every streamed line of a reply (its paragraph, the Markdown,
the block around them and the chat's scrollable height growing by one row) cost two layouts of the screen,
the second changing nothing. The
layout that measured the new size has already arranged everything inside it at that size, so these widgets
store it without asking again.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


class MeasuredOnce(Widget):
    """Mix in after the widget's own Textual class (`class X(Vertical, MeasuredOnce)`): Textual reads a
    class's style sheet and CSS type name through its first base, which must stay the real one."""

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        return super()._size_updated(size, virtual_size, container_size, layout=False)
