"""Text in a chat block that shows only part of a longer one (a folded paste, a result's preview): a click
opens the whole in the reader screen."""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.widgets import Static

from xun.tui.folding import Folded
from xun.tui.format import literal


def folded_content(folded: Folded, how: str = "click or o opens it whole") -> Content:
    """A folded text as a block draws it: its head, the fold line, its tail."""
    parts: list[Content | str] = [
        literal(folded.head.rstrip("\n")),
        "\n",
        Content.styled(folded.fold_line(how), "dim italic"),
    ]
    if folded.tail:
        parts += ["\n", literal(folded.tail.rstrip("\n"))]
    return Content.assemble(*parts)


class ReadableText(Static):
    """`whole` is the text a click opens, None while what is drawn is all of it."""

    def __init__(self, content: Content, *, title: str, whole: str | None = None, classes: str = "") -> None:
        super().__init__(content, classes=classes)
        self.title_text = title
        self.whole = whole

    def on_click(self, event: events.Click) -> None:
        if self.whole is not None:
            from xun.tui.screens.reader import read_whole  # read when first opened, not at start-up

            event.stop()
            read_whole(self.app, self.title_text, self.whole)
