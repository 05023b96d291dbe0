"""One assistant reply: optional reasoning above, the Markdown text streamed into it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer

from xun.tui.widgets.reasoning_block import ReasoningBlock

if TYPE_CHECKING:
    from textual.widgets.markdown import MarkdownStream

FLUSH_EVERY = 0.2
"""Seconds between Markdown updates while a reply streams; the first fragment is shown at once. Each
update re-renders the paragraph being written and moves the anchored chat, a frame of tens of ms: at
0.1 s those frames kept the loop busy and a key waited ~25 ms (median, p95 ~60 ms) behind them; at 0.2 s
~5 ms (p95 ~38 ms) while a reply streams at 500 tokens/s (`bench_tui.py`), still several updates a
second at any speed a model writes."""
LONG_LINE = 1000
"""While streaming, a line longer than this is shown broken into paragraphs at a space: Textual re-wraps
the whole last paragraph on every update, and a paragraph of many kilobytes makes each update cost tens
of milliseconds. The finished reply is shown exactly as written."""


def split_long_lines(text: str, line_chars: int, limit: int = LONG_LINE) -> tuple[str, int, bool]:
    """`text` with a paragraph break at a space wherever the current line would pass `limit`.

    `line_chars` is the length of the line already shown; returns the text to show, the length of its
    last line, and whether a break was added."""
    out: list[str] = []
    split = False
    for piece in text.splitlines(keepends=True):
        while line_chars + len(piece.rstrip("\n")) > limit:
            room = max(limit - line_chars, 0)
            cut = piece.rfind(" ", 0, room + 1)
            if cut <= 0:
                cut = piece.find(" ", room)
            if cut <= 0:
                break
            out.append(piece[:cut] + "\n\n")
            piece = piece[cut + 1:]
            line_chars = 0
            split = True
        out.append(piece)
        line_chars = 0 if piece.endswith("\n") else line_chars + len(piece)
    return "".join(out), line_chars, split


class AssistantBlock(Vertical):
    """Owns its `MarkdownStream` while streaming; `finish()` (or unmounting) stops it."""

    def __init__(self, content: str = "", reasoning: str = "", *, streaming: bool = False) -> None:
        super().__init__(classes="block assistant")
        self.border_title = "assistant"
        self._content = content
        self._reasoning_text = reasoning
        self.streaming = streaming
        self._stream: MarkdownStream | None = None
        self._text_parts: list[str] = [content] if content else []
        self._pending: list[str] = []
        self._flush_timer: Timer | None = None
        self._line_chars = 0
        self._shown_split = False
        """True when the streamed display has breaks the reply does not have (see LONG_LINE)."""
        self.reasoning: ReasoningBlock | None = None
        from textual.widgets import Markdown  # here, not above: an empty chat's first frame does without it

        self.markdown = Markdown(content, classes="reply")

    def compose(self) -> ComposeResult:
        if self._reasoning_text:
            self.reasoning = ReasoningBlock(self._reasoning_text, collapsed=not self.streaming)
            yield self.reasoning
        yield self.markdown

    @property
    def text(self) -> str:
        return "".join(self._text_parts)

    async def write(self, fragment: str) -> None:
        """Add streamed text; it reaches the Markdown at most every FLUSH_EVERY seconds."""
        if not fragment:
            return
        first = not self._text_parts
        self._text_parts.append(fragment)
        self._pending.append(fragment)
        if first:
            await self._flush()
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(FLUSH_EVERY, self._flush)

    async def _flush(self) -> None:
        self._flush_timer = None
        text = "".join(self._pending)
        self._pending.clear()
        if not text:
            return
        text, self._line_chars, split = split_long_lines(text, self._line_chars)
        self._shown_split = self._shown_split or split
        if self._stream is None:
            self._stream = self.markdown.get_stream(self.markdown)
        await self._stream.write(text)

    async def write_reasoning(self, fragment: str) -> None:
        if not fragment:
            return
        if self.reasoning is None:
            self.reasoning = ReasoningBlock(collapsed=False)
            await self.mount(self.reasoning, before=self.markdown)
        self.reasoning.append(fragment)

    async def finish(self, content: str | None = None, reasoning: str | None = None) -> None:
        """The reply is complete: stop the stream, show exactly `content`, fold the reasoning."""
        await self._stop_stream()
        self.streaming = False
        if content is not None and (content != self.text or self._shown_split):
            self._text_parts = [content]
            self._shown_split = False
            await self.markdown.update(content)
        if reasoning is not None and self.reasoning is not None and reasoning != self.reasoning.text:
            self.reasoning.replace(reasoning)
        if self.reasoning is not None:
            self.reasoning.collapsed = True

    async def discard(self) -> None:
        """A retry: what streamed so far is thrown away."""
        self._cancel_flush()
        self._pending.clear()
        await self._stop_stream()
        self._text_parts = []
        self._line_chars = 0
        self._shown_split = False
        await self.markdown.update("")
        if self.reasoning is not None:
            await self.reasoning.remove()
            self.reasoning = None

    def _cancel_flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None

    async def _stop_stream(self) -> None:
        """Write what is pending, then stop the stream (it renders everything it was given)."""
        self._cancel_flush()
        if self._pending:
            await self._flush()
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()

    async def on_unmount(self) -> None:
        self._cancel_flush()
        self._pending.clear()
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()
