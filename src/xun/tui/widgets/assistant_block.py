"""One assistant reply: optional reasoning above, the Markdown text streamed into it. A reply that is
already complete (the history of a resumed session, a reply that was not streamed) is drawn once as a
single widget, as a long reply's sealed parts are: a Markdown widget is a widget per paragraph and list
item, and mounting those was most of what a resumed session's first screen cost."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widget import Widget

from xun.base.valid_text import escape_control
from xun.tui.folding import FOLD_CHARS, Folded, markdown_fold, needs_folding
from xun.tui.widgets.measured_once import MeasuredOnce
from xun.tui.widgets.reasoning_block import ReasoningBlock

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.markdown import Markdown as RichMarkdown
    from textual.widgets import Markdown, Static
    from textual.widgets.markdown import MarkdownStream

FLUSH_EVERY = 0.2
"""Seconds between Markdown updates while a reply streams; the first fragment is shown at once. Each
update re-renders the paragraph being written and moves the anchored chat, a frame of tens of ms: at
0.1 s those frames kept the loop busy and a key waited ~25 ms (median, p95 ~60 ms) behind them; at 0.2 s
~5 ms (p95 ~38 ms) while a reply streams at 500 tokens/s (`bench_tui.py`), still several updates a
second at any speed a model writes."""
TYPING_PAUSE = 0.3
"""While keys come closer together than this, a streaming reply's next update waits for a pause in the
typing (`hold_for_typing`): each update lays the screen out, a frame of tens of ms, and a key that came
during it waited for it to end."""
TYPING_HOLD_MAX = 1.0
"""However fast the typing, a streaming reply is updated at least this often (seconds): right after a key
is drawn, the moment least likely to have another key behind it."""
TYPING_HOLD_CHARS = 3_000
"""Nor is more text than this held: a reply streaming faster than anyone reads (a local model, a replay)
is drawn at its usual pace, as each update costs more with the text it adds, and so does the end of the
turn that draws all of it (Esc)."""
SEEN_SLACK = 2
"""Rows below the view's bottom within which a streaming reply counts as seen (`_seen`): the margins
between blocks are not in their heights."""
KEY_DRAWN = 0.02
"""Seconds from a key's arrival until it is drawn, when an overdue update waits for it."""
SEAL_CHARS = 3_000
"""While streaming, once the live Markdown holds this much text, what it holds up to the last paragraph
break (or, in one huge paragraph, the last space) is sealed: drawn once as a single widget, out of every
later layout. Each frame then costs the same whatever the reply's length or the token rate: each update
wraps the paragraph being written again, so this bounds it (a frame's time grows with it: about 100 ms at
12,000 characters, 45 ms at 3,000, at 120x40)."""
REDRAW_WHOLE_CHARS = 200_000
"""A finished reply sealed inside a paragraph at a plain space is drawn again as one up to this length
(~0.1 s to lay out once, as a resumed session does); a longer one keeps its parts, each cut leaving one
short line. A paragraph of plain words is cut where a line starts instead, at whatever width the part is
drawn (`line_start_cut`, `SealedPart`), which leaves no short line at all."""
MARKUP = re.compile(r"[\\`*_\[\]<>!&~|#=\x00-\x1f\x7f-\x9f]")
"""Characters that can make a paragraph's Markdown render otherwise than its words (emphasis, code,
links, entities, breaks, control characters shown escaped): such a paragraph is not cut where a line
starts, its wrap is not the source's."""
BLOCK_START = re.compile(r"([-+*>]|\d+[.)])(\s|$)")
"""What would turn the rest of a cut paragraph into a list item or a quote."""


def seal_point(text: str) -> int:
    """Where `text` may be cut so that both sides are whole Markdown: after the last paragraph break
    outside a code fence, else (one huge paragraph) after its last space; 0 when there is neither."""
    fence = False
    paragraph = at = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        at += len(line)
        if not fence and not line.strip():
            paragraph = at
    if paragraph or fence:
        return paragraph
    return text.rfind(" ") + 1


def line_start_cut(paragraph: str, width: int) -> int:
    """Where one paragraph of plain words may be cut so that both sides wrap exactly as the whole does at
    `width`: the start of a line of it, the last one that leaves a plain paragraph after it. A paragraph
    is wrapped greedily (Rich's `divide_line`), so its lines up to a line's start do not depend on what
    follows, and what follows, starting a line, wraps as it did. 0 when there is no such place."""
    from rich._wrap import divide_line

    if width <= 0 or not paragraph[:1].strip() or MARKUP.search(paragraph):
        return 0
    for start in reversed(divide_line(paragraph, width, fold=True)):
        if paragraph[start - 1].isspace() and not BLOCK_START.match(paragraph, start):
            return start
    return 0


def drawn_once(text: str) -> Static:
    """Markdown drawn as one widget (Rich's renderer): for text that will not change."""
    from textual.widgets import Static

    return Static(rich_markdown(text), classes="reply-sealed")


def drawn_folded(folded: Folded, whole: str) -> list[Static]:
    """A reply too long to lay out at each resize (`xun.tui.folding`): its head and its tail drawn once, and
    the fold line between them, which a click opens whole."""
    from textual.content import Content

    from xun.tui.widgets.readable_text import ReadableText

    parts = [
        drawn_once(folded.head),
        ReadableText(
            Content.styled(folded.fold_line(), "dim italic"), title=READER_TITLE, whole=whole, classes="fold-line"
        ),
    ]
    if folded.tail:
        parts.append(drawn_once(folded.tail))
    return parts


READER_TITLE = "the assistant's reply"


def rich_markdown(text: str) -> RichMarkdown:
    from rich.markdown import Markdown as RichMarkdown

    return RichMarkdown(escape_control(text))


class SealedPart:
    """A sealed part of a streamed reply as Markdown, cut for the width it is drawn at: a resize draws it
    once, at the new width, and the parts still join (`AssistantBlock.part_text`)."""

    def __init__(self, block: AssistantBlock, index: int) -> None:
        self.block = block
        self.index = index

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield rich_markdown(self.block.part_text(self.index, options.max_width))


class AssistantBlock(Vertical, MeasuredOnce):
    """Owns its `MarkdownStream` while streaming; `finish()` (or unmounting) stops it. Only a block made
    with `streaming=True` has a live `markdown` to write into; a complete reply is drawn once."""

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
        self._typed_at = 0.0
        """When a key was last typed (`hold_for_typing`)."""
        self._updated_at = 0.0
        """When the live Markdown was last given what streamed."""
        self._update_after_key = False
        """An update is overdue and waits for the next key to be drawn (`hold_for_typing`)."""
        self._unseen = False
        """What streamed waits for the block to come into view (`_seen`, `catch_up`)."""
        self._writing = asyncio.Lock()
        """One change of the live Markdown and the sealed parts at a time (a flush, the end, a discard, a
        resize): a flush still sealing when the reply ended mounted its part into the reply drawn folded."""
        self._live: list[str] = []
        """What the live Markdown holds since the last seal."""
        self._live_chars = 0
        self.sealed: list[Static] = []
        """Parts of a long streamed reply drawn once (see SEAL_CHARS)."""
        self._seal_ends: list[int] = []
        """Where each sealed part ended when it was sealed (an offset in the text)."""
        self._sealed_text = ""
        """The text up to the last of those ends."""
        self._ends_at: dict[int, list[int]] = {}
        """Where the parts end at each width they were drawn at (`_part_end`)."""
        self._live_start = 0
        """Where in the text the live Markdown starts."""
        self._cut_in_a_paragraph = False
        """A seal cut one huge paragraph at a space: its two sides are wrapped apart, so the line before the
        cut ends short (a last word alone on its line); the finished reply is drawn again as one."""
        self.reasoning: ReasoningBlock | None = None
        self.markdown: Markdown | None = None
        self.folded: Folded | None = None
        """What is drawn of a reply too long to draw whole."""
        self._stream_fold: Static | None = None
        """The line standing for the sealed parts hidden while a long reply streams (`_fold_streamed`)."""
        if streaming or not content:
            from xun.tui.widgets.live_markdown import LiveMarkdown  # here: an empty chat's first frame does without it

            self.markdown = LiveMarkdown(escape_control(content), classes="reply")
        elif (folded := markdown_fold(content)) is not None:
            self.folded = folded
            self.sealed += drawn_folded(folded, content)
        else:
            self.sealed.append(drawn_once(content))

    def compose(self) -> ComposeResult:
        if self._reasoning_text:
            self.reasoning = ReasoningBlock(self._reasoning_text, collapsed=not self.streaming)
            yield self.reasoning
        yield from self.sealed
        if self.markdown is not None:
            yield self.markdown

    @property
    def live(self) -> Markdown:
        """The Markdown a streaming block writes into."""
        assert self.markdown is not None, "a complete reply is drawn once; only a streaming block is written into"
        return self.markdown

    @property
    def text(self) -> str:
        return "".join(self._text_parts)

    async def write(self, fragment: str) -> None:
        """Add streamed text; it reaches the Markdown at most every FLUSH_EVERY seconds, and only while it
        could be seen (`_seen`)."""
        if not fragment:
            return
        first = not self._text_parts
        self._text_parts.append(fragment)
        self._pending.append(fragment)
        if first:
            await self._update()
        elif not self.display:
            self._unseen = True
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(FLUSH_EVERY, self._flush)

    def _seen(self) -> bool:
        """Whether an update could be seen: the block is shown and starts above the bottom of the view it
        scrolls in. Below a view far up (hidden in the chat's `_tail`, or mounted below the view), what
        streams waits: any change, even to a hidden widget, lays the whole screen out, a frame of tens of
        ms that a key typed meanwhile waits for.
        The block's top is found from the heights of the blocks from it to the view's end (it is the newest,
        or nearly): its `virtual_region`, for a block out of view, has Textual arrange every widget of the
        screen again after any layout, the very cost this check avoids."""
        if not self.display:
            return False
        view = self.parent
        if not isinstance(view, Widget) or not view.is_scrollable:
            return True
        rows_from_top = 0
        for child in reversed(view.children):
            if child.display:
                rows_from_top += child.outer_size.height
            if child is self:
                break
        top = view.virtual_size.height - rows_from_top
        return top <= view.scroll_y + view.scrollable_content_region.height + SEEN_SLACK

    def _wait_until_seen(self) -> None:
        """A held update is tried again every FLUSH_EVERY seconds while the block is shown (the view may
        scroll to it); a hidden block is written when it shows (`on_show`)."""
        self._unseen = True
        if self.display and self._flush_timer is None:
            self._flush_timer = self.set_timer(FLUSH_EVERY, self._flush)

    def catch_up(self) -> None:
        """The view moved (End, a scroll down): an update held out of view runs now if the block can be seen,
        not at the next try. (An update not held keeps its pace: the view following the reply moves at each.)"""
        if self._unseen and self._seen():
            self._unseen = False
            self._cancel_flush()
            self.call_later(self._update)

    def on_show(self) -> None:
        """Laid out again (End, or a scroll down, reached the hidden block): what streamed meanwhile shows."""
        self.catch_up()

    def hold_for_typing(self) -> None:
        """A key was typed: the next update waits until the typing pauses (TYPING_PAUSE), so typing is
        answered first while a reply streams; an update overdue (TYPING_HOLD_MAX), or holding much text
        (TYPING_HOLD_CHARS), runs once this key is drawn or at its usual time."""
        self._typed_at = time.monotonic()
        if self._update_after_key:
            self._update_after_key = False
            self._cancel_flush()
            self._flush_timer = self.set_timer(KEY_DRAWN, self._update)

    async def _flush(self) -> None:
        self._flush_timer = None
        if not self._seen():
            self._wait_until_seen()
            return
        now = time.monotonic()
        if now - self._typed_at >= TYPING_PAUSE or sum(map(len, self._pending)) >= TYPING_HOLD_CHARS:
            await self._update()
            return
        if now - self._updated_at < TYPING_HOLD_MAX:
            wait = min(self._typed_at + TYPING_PAUSE, self._updated_at + TYPING_HOLD_MAX) - now
        else:
            self._update_after_key, wait = True, TYPING_PAUSE
        self._flush_timer = self.set_timer(min(wait, FLUSH_EVERY), self._flush)  # (the held text is weighed again)

    async def _update(self) -> None:
        """Give the live Markdown what streamed since the last update, once it could be seen."""
        self._flush_timer = None
        self._update_after_key = False
        if not self._seen():
            self._wait_until_seen()
            return
        self._unseen = False
        self._updated_at = time.monotonic()
        async with self._writing:
            await self._write_pending()

    async def _write_pending(self) -> None:
        """What streamed goes to the live Markdown, or, once that would hold SEAL_CHARS, into sealed parts
        with the rest given to the live Markdown anew (text sealed is never parsed into it first)."""
        text = "".join(self._pending)
        self._pending.clear()
        if not text or self.markdown is None:  # nothing, or the reply is complete (drawn once)
            return
        self._live.append(text)
        self._live_chars += len(text)
        if self._live_chars >= SEAL_CHARS:
            await self._seal()
            return
        if self._stream is None:
            self._stream = self.live.get_stream(self.live)
        await self._stream.write(escape_control(text))  # a reply's escape codes (a clipboard write, a title,
        # a screen clear) are shown, never sent to the terminal; escaping one character at a time, fragments
        # can be escaped apart

    @property
    def _sealed_width(self) -> int:
        """The width a sealed part wraps its text at: the block's, less the part's padding (0 1)."""
        return self.content_size.width - 2

    @staticmethod
    def _cut_at(text: str, width: int) -> tuple[int, bool]:
        """Where to seal `text` (which starts a line) at `width`, and whether the two sides join seamlessly:
        at a paragraph break, else where a line of its paragraph starts, else (markup) at its last space."""
        cut = seal_point(text)
        if cut <= 0 or text[:cut].endswith("\n"):
            return cut, True
        blank = text.rfind("\n\n")
        start = blank + 2 if blank >= 0 else 0
        aligned = line_start_cut(text[start:], width)
        return (start + aligned, True) if aligned else (cut, False)

    def _part_end(self, index: int, width: int) -> int:
        """Where sealed part `index` ends when drawn at `width`: each part is cut again for the width it is
        drawn at, near where it was sealed, so the parts join at any width (cut once per width, then kept)."""
        ends = self._ends_at.setdefault(width, [])
        while len(ends) <= index:
            start = ends[-1] if ends else 0
            end = self._seal_ends[len(ends)]
            cut, _ = self._cut_at(self._sealed_text[start:end], width)
            ends.append(start + (cut or end - start))
        return ends[index]

    def part_text(self, index: int, width: int) -> str:
        """The text of sealed part `index` drawn at `width` (`SealedPart`)."""
        start = self._part_end(index - 1, width) if index else 0
        return self._sealed_text[start : self._part_end(index, width)]

    def _flushed(self) -> str:
        """The text the widgets were given: all of it but what waits for the next flush."""
        text = self.text
        return text[: len(text) - sum(map(len, self._pending))]

    async def _set_live(self, start: int) -> None:
        """The live Markdown holds the text from `start` on (it starts where the last part ends)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()
        rest = self._flushed()[start:]
        await self.live.update(escape_control(rest))
        self._live = [rest] if rest else []
        self._live_chars = len(rest)
        self._live_start = start

    async def _seal(self) -> None:
        """Seal the live text up to its last break (`_cut_at`) and give the live Markdown the rest. The text
        is sealed in one part, or in up to three when it is long (text that streamed while the block was
        hidden): a short first part when none was sealed yet, the middle, and a short newest part, so that
        the parts shown about the fold stay short (`_fold_streamed`)."""
        from textual.widgets import Static

        width = self._sealed_width
        if self._seal_ends and self._part_end(len(self._seal_ends) - 1, width) != self._live_start:
            await self._set_live(self._part_end(len(self._seal_ends) - 1, width))  # the width changed
        live = "".join(self._live)
        ends: list[int] = []
        cut_at = 0
        for limit in self._seal_limits(len(live)):
            cut, seamless = self._cut_at(live[cut_at:limit], width)
            if cut > 0:
                self._cut_in_a_paragraph |= not seamless
                cut_at += cut
                ends.append(self._live_start + cut_at)
        if ends:
            self._sealed_text = self._flushed()[: ends[-1]]
            parts = [Static(SealedPart(self, len(self.sealed) + i), classes="reply-sealed") for i in range(len(ends))]
            self._seal_ends += ends
            self.sealed += parts
            folding = ends[-1] > FOLD_CHARS and len(self.sealed) > 2
            for part in self.sealed[1:-1] if folding else ():
                part.display = False  # before the new parts show: never more than two parts on screen
            await self.mount_all(parts, before=self.live)
            if folding:
                await self._fold_streamed()
        await self._set_live(self._live_start + cut_at)  # (no place to cut: the live Markdown is given it all anew)

    def _seal_limits(self, length: int) -> list[int]:
        """Where the parts that seal `length` characters of live text may end at most (`_seal`)."""
        if length <= 2 * SEAL_CHARS:
            return [length]
        head = [] if self._seal_ends else [SEAL_CHARS]
        return [*head, length - SEAL_CHARS, length]

    async def _fold_streamed(self) -> None:
        """While a reply past FOLD_CHARS streams, only its first and newest sealed parts are shown, the ones
        between hidden (by `_seal`) behind this fold line: a hidden widget is not laid out, so a resize costs
        the same at any length (the finished reply is folded as a resumed one is)."""
        from textual.content import Content

        from xun.tui.widgets.readable_text import ReadableText

        hidden = self._seal_ends[-2] - self._seal_ends[0]
        line = Content.styled(f"⋯ {hidden:,} characters folded while the reply streams", "dim italic")
        if self._stream_fold is None:
            self._stream_fold = ReadableText(line, title=READER_TITLE, classes="fold-line")
            await self.mount(self._stream_fold, after=self.sealed[0])
        else:
            self._stream_fold.update(line)

    async def on_resize(self, event: events.Resize) -> None:
        """The parts are drawn again for the new width by themselves; the live Markdown starts where the
        last of them ends now."""
        async with self._writing:
            if self._seal_ends and self.markdown is not None and self.is_attached and self._sealed_width > 0:
                start = self._part_end(len(self._seal_ends) - 1, self._sealed_width)
                if start != self._live_start:
                    await self._set_live(start)

    async def write_reasoning(self, fragment: str) -> None:
        if not fragment:
            return
        if self.reasoning is None:
            self.reasoning = ReasoningBlock(collapsed=False)
            await self.mount(self.reasoning, before=self.live)
        self.reasoning.append(fragment)

    async def finish(self, content: str | None = None, reasoning: str | None = None) -> None:
        """The reply is complete: stop the stream, show exactly `content`, fold the reasoning."""
        async with self._writing:
            await self._finish(content, reasoning)

    async def _finish(self, content: str | None, reasoning: str | None) -> None:
        await self._stop_stream()
        self.streaming = False
        if content is not None and content != self.text:
            shown = self.text
            self._text_parts = [content]
            if needs_folding(content):
                pass  # drawn folded below, never whole
            elif shown and content.startswith(shown):  # e.g. a cancelled reply's mark: only the end is new
                await self.live.append(escape_control(content[len(shown) :]))
            else:
                await self._remove_sealed()
                await self.live.update(escape_control(content))
        if (folded := markdown_fold(self.text)) is not None:
            await self._draw_folded(folded)
        elif self._cut_in_a_paragraph and len(self.text) <= REDRAW_WHOLE_CHARS:
            await self._draw_whole()
        if reasoning is not None and self.reasoning is not None and reasoning != self.reasoning.text:
            self.reasoning.replace(reasoning)
        if self.reasoning is not None:
            self.reasoning.collapsed = True
        self.call_after_refresh(self._measure_again)

    async def _draw_whole(self) -> None:
        """Draw the complete reply once, as a resumed session shows it: one widget, wrapped as one text."""
        text = self.text
        await self._remove_sealed()
        whole = drawn_once(text)
        self.sealed.append(whole)
        live, self.markdown = self.markdown, None
        if live is not None:
            await self.mount(whole, before=live)
            await live.remove()
        else:
            await self.mount(whole)

    async def _draw_folded(self, folded: Folded) -> None:
        """Draw the complete reply folded, as a resumed session shows it: the parts it streamed into go."""
        await self._remove_sealed()
        self.folded = folded
        self.sealed += drawn_folded(folded, self.text)
        live, self.markdown = self.markdown, None
        if live is not None:
            await self.mount_all(self.sealed, before=live)
            await live.remove()
        else:
            await self.mount_all(self.sealed)

    def read_whole(self) -> None:
        from xun.tui.screens.reader import read_whole  # read when first opened, not at start-up

        read_whole(self.app, READER_TITLE, self.text)

    def _measure_again(self, tries: int = 3) -> None:
        """Lay the reply's blocks out once more. Textual 8.2.8 keeps the size a block was measured at when
        its text changes while that layout is still pending (it does not count the change), so a streamed
        paragraph could stay as tall as its first fragment: a reply of seven lines was drawn as one."""
        live = self.markdown
        if live is None or not live.is_attached:
            return
        if tries and any(child._layout_required for child in live.children):  # the stale layout is not applied yet
            self.call_after_refresh(self._measure_again, tries - 1)
            return
        for child in live.children:
            child.refresh(layout=True)

    async def discard(self) -> None:
        """A retry: what streamed so far is thrown away."""
        async with self._writing:
            await self._discard()

    async def _discard(self) -> None:
        self._cancel_flush()
        self._pending.clear()
        await self._stop_stream()
        self._text_parts = []
        await self._remove_sealed()
        await self.live.update("")
        if self.reasoning is not None:
            await self.reasoning.remove()
            self.reasoning = None

    async def _remove_sealed(self) -> None:
        sealed, self.sealed = self.sealed, []
        self._seal_ends, self._sealed_text, self._ends_at, self._live_start = [], "", {}, 0
        self._live, self._live_chars = [], 0
        self._cut_in_a_paragraph = False
        self.folded = None
        if self._stream_fold is not None:
            sealed.append(self._stream_fold)
            self._stream_fold = None
        if sealed:
            await self.remove_children(sealed)

    def _cancel_flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None

    async def _stop_stream(self) -> None:
        """Write what is pending, then stop the stream (it renders everything it was given)."""
        self._cancel_flush()
        if self._pending:
            await self._write_pending()
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()

    async def on_unmount(self) -> None:
        self._cancel_flush()
        self._pending.clear()
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()
