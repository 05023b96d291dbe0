"""One assistant reply: optional reasoning above, the Markdown text streamed into it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

from xun.tui.widgets.reasoning_block import ReasoningBlock


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
        self.reasoning: ReasoningBlock | None = None
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
        if not fragment:
            return
        self._text_parts.append(fragment)
        if self._stream is None:
            self._stream = Markdown.get_stream(self.markdown)
        await self._stream.write(fragment)

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
        if content is not None and content != self.text:
            self._text_parts = [content]
            await self.markdown.update(content)
        if reasoning is not None and self.reasoning is not None and reasoning != self.reasoning.text:
            self.reasoning.replace(reasoning)
        if self.reasoning is not None:
            self.reasoning.collapsed = True

    async def discard(self) -> None:
        """A retry: what streamed so far is thrown away."""
        await self._stop_stream()
        self._text_parts = []
        await self.markdown.update("")
        if self.reasoning is not None:
            await self.reasoning.remove()
            self.reasoning = None

    async def _stop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()

    async def on_unmount(self) -> None:
        await self._stop_stream()
