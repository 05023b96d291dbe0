"""The Markdown a reply streams into: its blocks are `MeasuredOnce`, so each update of the reply lays the
screen out once (the paragraph being written grows a line, and so do its parents, at every update)."""

from __future__ import annotations

from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock

from xun.tui.widgets.measured_once import MeasuredOnce

_measured: dict[type[MarkdownBlock], type[MarkdownBlock]] = {}


def measured_once(block: type[MarkdownBlock]) -> type[MarkdownBlock]:
    """`block`'s class laid out once per change of size (one class made per block class, then kept)."""
    made = _measured.get(block)
    if made is None:
        made = _measured[block] = type(block.__name__, (block, MeasuredOnce), {})
    return made


class LiveMarkdown(Markdown, MeasuredOnce):
    """A `Markdown` (styled and queried as one) whose blocks are laid out once per change of size."""

    def get_block_class(self, block_name: str) -> type[MarkdownBlock]:
        return measured_once(super().get_block_class(block_name))
