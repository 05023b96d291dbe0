"""Widgets on their own (in a small host app with the real style sheet), and the pure helpers."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget

from xun.base import events
from xun.context.conversation import Conversation
from xun.base.paths import styles_dir
from xun.tui import messages as m
from xun.tui.key_help import key_display
from xun.tui.bridge import EventBridge
from xun.tui.commands import UnknownCommand, completions, parse
from xun.tui.export import ExportError, render_transcript, transcript_markdown
from xun.tui.format import tokens
from xun.tui.screens.confirm import diff_content
from xun.tui.transcript import AssistantItem, ToolItem, UserItem, transcript
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.chat_view import ChatView
from xun.tui.widgets.compaction_log import CompactionLog, entry_from_record
from xun.tui.widgets.context_bar import ESTIMATED, FILLED, MARK, bar_cells
from xun.tui.widgets.context_gauge import ContextGauge, zone_of
from xun.tui.widgets.user_block import UserBlock

from .helpers import wait_until


class Host(App[None]):
    """Mounts one widget with the app's style sheet."""

    CSS_PATH: ClassVar[list[str | Path]] = [styles_dir() / "xun.tcss"]

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


# ---------------------------------------------------------------------------------------------- gauge


async def test_gauge_reads_like_the_spec():
    gauge = ContextGauge()
    async with Host(gauge).run_test(size=(60, 12)) as pilot:
        gauge.set_figures(reported=140_000, estimate=143_200, threshold=192_000, window=200_000)
        await pilot.pause()
        assert gauge.figures_text() == "143.2k / 192k (75%) · window 200k"
        assert gauge.detail_text() == "reported 140k · estimate 143.2k"
        assert gauge.zone == "calm" and gauge.has_class("-calm")
        gauge.streamed(40_000)  # 40k characters streamed: 10k tokens more, just under 80% of the threshold
        assert gauge.figures_text().startswith("153.2k / 192k (80%)")
        await wait_until(pilot, lambda: "153.2k" in str(gauge.query_one("#gauge-figures").render()))
        assert gauge.zone == "calm"
        gauge.streamed(2_000)  # 500 tokens more: over 153.6k, four fifths of the threshold
        assert gauge.figures_text().startswith("153.7k / 192k (80%)")
        await wait_until(pilot, lambda: gauge.zone == "warning", what="the throttled refresh")
        assert gauge.zone == "warning" and gauge.has_class("-warning") and not gauge.has_class("-calm")
        assert gauge.border_subtitle == "warning · 80%"
        gauge.set_estimate(200_000, 199_000)
        gauge.reset_stream()
        assert gauge.zone == "alarm" and gauge.border_subtitle == "over threshold · 104%"
        gauge.set_history([100, 200, 50])
        await pilot.pause()
        history = gauge.query_one("#gauge-history")
        assert history.display
        assert list(history.data) == [100, 200, 50]
        # what the sparkline shows is said (a newcomer could not read it): a column a call, its range, a tooltip
        assert history.size.width == 3, "one column a model call, not three points stretched over the pane"
        label = gauge.query_one("#gauge-history-label")
        assert label.display and str(label.render()) == "context at the last 3 model calls · 50–200"
        assert "a drop is a compaction" in str(history.tooltip) and "not from zero" in str(label.tooltip)
        assert history.size.height == 1, "a short screen: the label takes the sparkline's second row, no more"


async def test_a_tall_screen_draws_the_history_two_rows_high():
    gauge = ContextGauge()
    async with Host(gauge).run_test(size=(60, 40)) as pilot:
        gauge.set_figures(reported=1_000, estimate=1_000, threshold=10_000, window=None)
        gauge.set_history([100, 200, 50, 300])
        await pilot.pause()
        assert gauge.query_one("#gauge-history").size == (4, 2)


def test_the_history_label_fits_a_narrow_panel():
    from xun.tui.widgets.context_gauge import history_label

    points = [1_200, 1_700, 150_000]
    assert history_label(points, 60) == "context at the last 3 model calls · 1.2k–150k"
    assert history_label(points, 34) == "the last 3 model calls · 1.2k–150k"
    assert history_label(points, 27) == "each model call · 1.2k–150k"
    assert history_label(points, 10) == "1.2k–150k"
    kinds = ["call", "compaction", "call"]
    assert history_label(points, 60, kinds) == "context at the last 2 model calls, 1 compaction · 1.2k–150k"
    assert history_label(points, 44, kinds) == "the last 2 calls, 1 compaction · 1.2k–150k"
    assert history_label(points, 36, kinds) == "2 calls, 1 compaction · 1.2k–150k"
    assert history_label(points, 30, kinds) == "1.2k–150k"


def test_zones():
    assert zone_of(0, 100) == "calm"
    assert zone_of(79, 100) == "calm"
    assert zone_of(80, 100) == "warning"
    assert zone_of(100, 100) == "warning"
    assert zone_of(101, 100) == "alarm"


def test_the_bar_marks_the_threshold():
    cells = bar_cells(20, reported=50, estimate=80, threshold=100, window=None)  # scale 125
    assert len(cells) == 20
    assert cells.index(MARK) == 15  # 100 / 125 of 20 cells, the mark on the last cell of it
    assert cells.count(FILLED) == 8 and cells.count(ESTIMATED) == 5
    windowed = bar_cells(10, reported=100, estimate=100, threshold=160, window=200)
    assert windowed.index(MARK) == 7 and windowed.count(FILLED) == 5
    assert bar_cells(0, 1, 1, 1, None) == ""
    over = bar_cells(10, reported=300, estimate=300, threshold=100, window=None)
    assert over.count(FILLED) == 9 and MARK in over
    # after a reclaim the last reported count is stale and higher: the bar ends where the context does now
    reclaimed = bar_cells(20, reported=150, estimate=25, threshold=100, window=None)
    assert reclaimed.count(FILLED) == 4 and reclaimed.count(ESTIMATED) == 0


def test_token_figures():
    assert [tokens(x) for x in (None, 0, 886, 999.6, 1041, 143_200, 192_000, 1_250_000, 2_000_000)] == [
        "—",
        "0",
        "886",
        "1k",
        "1.0k",
        "143.2k",
        "192k",
        "1.2M",
        "2M",
    ]


# ----------------------------------------------------------------------------------------------- chat


async def test_a_short_chat_starts_at_the_top_and_a_long_one_follows_its_end():
    """The chat follows its end (it is anchored), but while its blocks are shorter than the view they start
    at its top: Textual 8.2.8 gave them a negative scroll and drew them against the bottom (textual#6652)."""
    chat = ChatView(shown_path=lambda path: path or "")
    async with Host(chat).run_test(size=(80, 24)) as pilot:
        first = await chat.add_user("hello there")
        await pilot.pause()
        await pilot.pause()
        assert chat.scroll_y == 0 and first.region.y == chat.content_region.y, (
            "the first block is at the top of the view"
        )
        for n in range(12):
            await chat.add_user(f"prompt {n}")
        last = chat.children[-1]
        await wait_until(
            pilot,
            lambda: (
                chat.scroll_y == chat.max_scroll_y > 0
                and last.region.bottom + last.styles.margin.bottom == chat.content_region.bottom
            ),
            what="the newest block at the bottom of the view",
        )


async def test_older_pages_asked_for_while_a_transcript_is_shown_come_once_and_in_order(monkeypatch):
    """Home pressed while a resumed transcript was still reading its newest page from the offload log
    loaded an older page from the same list at once: two turns came twice and three never (seen in CI).
    The offload log is read slowly here so that the request always lands meanwhile."""
    import xun.tui.widgets.chat_view as chat_view
    from xun.tui.transcript import OffloadedItem

    turns = {f"log{n}": [UserItem(f"summarised {n}.{k}", summarised=True) for k in range(8)] for n in range(3)}

    def slow_history(item, pages, workdir=None):
        import time

        time.sleep(0.15)
        return turns[item.path], []

    monkeypatch.setattr(chat_view, "history_tail", slow_history)
    items = []
    for n in range(3):
        items.append(OffloadedItem(f"log{n}", None, n, "c", 8))
        items += [UserItem(f"live {n}.{k}", index=n * 10 + k) for k in range(4)]
    chat = ChatView(shown_path=lambda path: path or "")
    async with Host(chat).run_test(size=(80, 24)) as pilot:
        showing = asyncio.ensure_future(chat.show_transcript(items))
        await asyncio.sleep(0.05)
        chat.action_scroll_home()  # Home, while the newest page is being read
        await showing
        for _ in range(30):
            await wait_until(pilot, lambda: not (chat._older_wanted or chat._loading_older))
            if not chat.older_count:
                break
            chat.action_scroll_home()
        await pilot.pause()
        shown = [child.text for child in chat.children if isinstance(child, UserBlock)]
        expected = []
        for n in range(3):
            expected += [f"summarised {n}.{k}" for k in range(8)] + [f"live {n}.{k}" for k in range(4)]
        assert shown == expected


async def test_a_streamed_reply_is_measured_again_when_it_is_complete():
    """Textual 8.2.8 does not count a change of text made while a block's layout is pending, and keeps the
    size it measured before: about one run in fifteen drew a session's first reply as its first line. The
    race is forced here (the pending flag set by hand); the finished reply is laid out again."""
    block = AssistantBlock(streaming=True)
    text = "xun-offline here: a deterministic scripted demo model. " + "the quick brown fox jumps " * 30
    async with Host(block).run_test(size=(80, 24)) as pilot:
        await block.write(text[:32])
        await wait_until(
            pilot, lambda: block.live.children and block.live.children[0].size.height == 1, what="one line"
        )
        paragraph = block.live.children[0]
        paragraph._layout_required = True  # measured, its layout still pending: the moment the race needs
        await block.write(text[32:])
        await block.finish(text)
        await wait_until(pilot, lambda: paragraph.size.height > 5, what="the whole reply laid out")


def timed_writes(block: AssistantBlock) -> list[float]:
    """When each update of `block` writes what streamed to its widgets, from now on (a list it fills)."""
    times: list[float] = []
    write_pending = block._write_pending

    async def timed_write_pending() -> None:
        times.append(time.monotonic())
        await write_pending()

    block._write_pending = timed_write_pending  # type: ignore[method-assign]
    return times


async def test_a_streaming_reply_waits_for_a_pause_in_the_typing_and_when_overdue_runs_after_a_key(monkeypatch):
    """Each update of a streaming reply lays the screen out, a frame of tens of ms that a key typed meanwhile
    waits behind: while keys come, the reply waits for a pause in the typing; an update overdue runs right
    after a key (the moment least likely to have another behind it), and the rest shows once the typing stops."""
    import xun.tui.widgets.assistant_block as assistant_block

    monkeypatch.setattr(assistant_block, "TYPING_PAUSE", 0.8)  # far above a key's gap here, even under load
    monkeypatch.setattr(assistant_block, "TYPING_HOLD_MAX", 1.5)
    block = AssistantBlock(streaming=True)
    updates = timed_writes(block)
    async with Host(block).run_test(size=(80, 24)) as pilot:
        await block.write("the first words show at once ")
        assert updates and not block._pending
        started, keys = time.monotonic(), []
        while time.monotonic() - started < 2.5:  # typing, a key each 50 ms, while the reply streams
            keys.append(time.monotonic())
            block.hold_for_typing()
            await block.write("word ")
            await asyncio.sleep(0.05)
        typed_until = time.monotonic()
        during = [t for t in updates if started < t <= typed_until]
        assert len(during) == 1, f"one overdue update while typing, not one each {assistant_block.FLUSH_EVERY} s"
        assert during[0] - started >= 1.5 - 0.05
        after_key = max(k for k in keys if k <= during[0])
        assert during[0] - after_key < 0.5, "the overdue update ran after a key, not on its own clock"
        assert block._pending, "what streamed after it waits"
        await wait_until(pilot, lambda: not block._pending, what="the rest, once the typing stopped")
        assert updates[-1] - typed_until >= 0.8 - 0.1
        assert block.text.endswith("word ") and block.text.count("word ") == len(keys)


async def test_a_reply_streaming_faster_than_anyone_reads_is_not_held_for_the_typing(monkeypatch):
    """A flood (a local model, a replay) is drawn at its usual pace while keys come: held, each update would
    draw more text at once, and so would the end of the turn."""
    import xun.tui.widgets.assistant_block as assistant_block

    monkeypatch.setattr(assistant_block, "TYPING_PAUSE", 5.0)
    monkeypatch.setattr(assistant_block, "TYPING_HOLD_MAX", 5.0)
    block = AssistantBlock(streaming=True)
    async with Host(block).run_test(size=(80, 24)) as pilot:
        await block.write("the first words show at once ")
        block.hold_for_typing()
        await block.write("word " * 100)  # under TYPING_HOLD_CHARS: held
        await asyncio.sleep(3 * assistant_block.FLUSH_EVERY)
        assert block._pending, "held while the typing goes on"
        block.hold_for_typing()
        await block.write("word " * (assistant_block.TYPING_HOLD_CHARS // 5))  # over it
        await wait_until(pilot, lambda: not block._pending, timeout=2 * assistant_block.FLUSH_EVERY, what="drawn")


async def test_a_hidden_reply_is_written_only_once_it_shows():
    """Hidden below a view far up (the chat's `_tail`), a streaming reply's widgets are not touched: any change
    to a hidden widget still lays the whole screen out, and a key typed meanwhile waits for it. Shown again,
    it shows every character that streamed, once and in order."""
    import xun.tui.widgets.assistant_block as assistant_block

    block = AssistantBlock(streaming=True)
    writes = timed_writes(block)
    paragraph = "the fox ran far and sat low now two owl saw one big red sun set " * 3 + "\n\n"
    async with Host(block).run_test(size=(100, 30)) as pilot:
        await block.write("the first words show at once\n\n")
        block.display = False
        await pilot.pause()
        hidden_at = time.monotonic()
        while time.monotonic() - hidden_at < 1.5:  # longer than any timer the block ever set
            await block.write(paragraph)
            await asyncio.sleep(assistant_block.FLUSH_EVERY / 4)
        assert len(writes) == 1, "nothing written while hidden"
        assert block.live.source == "the first words show at once\n\n" and not block.sealed
        block.display = True
        await wait_until(pilot, lambda: not block._pending, what="the text that streamed meanwhile")
        assert len(writes) == 2, "written at once, in one update"
        width = block._sealed_width
        sealed = "".join(block.part_text(i, width) for i in range(len(block.sealed)))
        assert sealed + block.live.source == block.text
        assert all(part.display for part in block.sealed), "shorter than the fold: every part shows"


@pytest.mark.long
async def test_a_long_backlog_is_sealed_in_short_parts_about_the_fold():
    """A reply that streamed past FOLD_CHARS while hidden shows the way a reply streamed in view does: a
    short first part, the fold line, a short newest part, and the live Markdown; the middle, one hidden part,
    is never laid out. Its text is whole, in order, and the finished reply is folded as a resumed one is."""
    from xun.tui.folding import FOLD_CHARS
    from xun.tui.widgets.assistant_block import SEAL_CHARS

    paragraph = "the fox ran far and sat low now two owl saw one big red sun set " * 20 + "\n\n"
    backlog = paragraph * (FOLD_CHARS // len(paragraph) + 20)
    block = AssistantBlock(streaming=True)
    async with Host(block).run_test(size=(100, 30)) as pilot:
        await block.write("The story:\n\n")
        block.display = False
        await pilot.pause()
        for at in range(0, len(backlog), 500):
            await block.write(backlog[at : at + 500] + ("tail words" if at + 500 >= len(backlog) else ""))
        block.display = True
        await wait_until(pilot, lambda: not block._pending, what="the backlog")
        await pilot.pause()
        width = block._sealed_width
        texts = [block.part_text(i, width) for i in range(len(block.sealed))]
        assert "".join(texts) + block.live.source == block.text
        shown = [text for part, text in zip(block.sealed, texts, strict=True) if part.display]
        assert len(shown) == 2 and all(len(text) <= 2 * SEAL_CHARS for text in shown), [len(t) for t in texts]
        assert block._stream_fold is not None and block._stream_fold.display, "the fold line"
        assert block.live.source == "tail words", "the live Markdown holds the paragraph being written"
        await block.finish(block.text)
        assert block.folded is not None and block.markdown is None


@pytest.mark.long
async def test_a_flush_under_way_when_a_long_reply_ends_does_not_seal_into_the_reply_drawn_folded():
    """A reply past FOLD_CHARS ends (the reply's last event) while a timed flush is sealing a part: the end
    waits for the flush, then draws the reply folded; the flush, resumed after the fold, mounted its part
    into the folded reply and failed on the parts the fold had taken (an IndexError that ended the app)."""
    from xun.tui.folding import FOLD_CHARS
    from xun.tui.widgets.assistant_block import SEAL_CHARS

    paragraph = "the fox ran far and sat low now two owl saw one big red sun set " * 20 + "\n\n"
    text = paragraph * (FOLD_CHARS // len(paragraph) + 20)
    block = AssistantBlock(streaming=True)
    async with Host(block).run_test(size=(100, 30)) as pilot:
        written = 0
        while written < FOLD_CHARS + len(paragraph):  # streamed past the fold, a flush at a time
            await block.write(text[written : written + SEAL_CHARS // 2])
            written += SEAL_CHARS // 2
            await wait_until(pilot, lambda: not block._pending, what="the flush")
        assert len(block.sealed) > 2, "sealed parts, folded while streaming"
        await block.write(text[written : written + SEAL_CHARS])  # enough to seal once more at the next flush
        parts = len(block.sealed)
        flushing = asyncio.ensure_future(block._flush())
        while len(block.sealed) == parts:  # the flush is sealing a part, its mount not done yet
            await asyncio.sleep(0)
        await block.finish(text)
        await flushing
        await pilot.pause()
        assert block.folded is not None and block.markdown is None
        assert list(block.children) == block.sealed and len(block.sealed) == 3, "the head, the fold line, the tail"
        assert block.text == text


# ------------------------------------------------------------------------------------------------ log


def test_log_entries_from_records():
    def clock(_t: float) -> str:
        return "09:30:00"

    def where(path: str | None) -> str:
        return path.replace("/work/", "") if path else ""

    reclaim = entry_from_record(
        events.ToolResultsReclaimed(
            ids=("a", "b"), count=2, tokens_before=150_000, tokens_after=90_000, trigger="auto"
        ).to_json(),
        clock,
        where,
    )
    assert reclaim.line() == "09:30:00 reclaim 150k → 90k 2 results"
    summary = entry_from_record(
        events.SummaryFinished(
            condensed=40,
            kept=16,
            tokens_before=180_000,
            tokens_after=12_000,
            offload_path="/work/.xun/h/x.md",
            trigger="emergency",
        ).to_json(),
        clock,
        where,
    )
    assert summary.kind == "emergency"
    assert summary.line() == "09:30:00 emergency 180k → 12k 40 summarised, 16 kept", "one line, the kind said once"
    assert "originals in the offload log .xun/h/x.md" in summary.detail()
    weeks = entry_from_record(events.SummaryFinished(condensed=4280, kept=4).to_json(), clock, where)
    assert "4,280 summarised, 4 kept" in weeks.line()
    failed = entry_from_record(events.CompactionFailed(reason="no summary", trigger="manual").to_json(), clock, where)
    assert failed.line() == "09:30:00 failed no summary"
    assert failed.detail() == "failed at 09:30:00 (by hand)\nreason: no summary"
    skipped = entry_from_record(events.CompactionSkipped(reason="short").to_json(), clock, where)
    assert skipped.kind == "skipped"
    restored = entry_from_record(
        events.ToolResultRestored(id="call_123456789", tokens_before=1, tokens_after=2).to_json(), clock, where
    )
    assert restored.count == "id …23456789"
    assert entry_from_record({"type": "summary_started"}, clock, where) is None
    cached = entry_from_record(
        events.ToolResultsReclaimed(
            ids=("a",), count=1, tokens_before=9_000, tokens_after=6_000, cache_miss_tokens=4_500, saved_per_call=3_000
        ).to_json(),
        clock,
        where,
    )
    assert cached.line().startswith("09:30:00 reclaim 9k → 6k 1 result · cache 4.5k once, saves")
    assert cached.what == "1 result · cache 4.5k once, saves 3k/call", "said as the detail says it (trial F #8)"
    assert "cache: next call 4.5k uncached, saves 3k/call" in cached.detail()
    rejected = entry_from_record(
        events.SummaryRejected(reason="the summary lacks the required sections decisions", next="extractive").to_json(),
        clock,
        where,
    )
    assert rejected.kind == "rejected" and "xun's extractive summary instead" in rejected.detail()
    back = entry_from_record(
        events.ToolResultRestored(
            id="c1", tokens_before=6_000, tokens_after=7_000, cache_miss_tokens=2_000, saved_per_call=-1_000
        ).to_json(),
        clock,
        where,
    )
    assert (
        back.cache == "cache: next call 2k uncached, adds 1k/call" and back.cache_short == "cache 2k once, adds 1k/call"
    )
    # trial F #8: a reclaim that freed 6 tokens read "3.4k → 3.4k", as if nothing was done
    few = entry_from_record(
        events.ToolResultsReclaimed(ids=("a",), count=1, tokens_before=3_412, tokens_after=3_406).to_json(),
        clock,
        where,
    )
    assert few.figures == "3.4k, 6 freed" and "tokens 3.4k → 3.4k (6 freed)" in few.detail()


async def test_the_gauge_shows_the_cache_share_only_when_the_server_said_it():
    gauge = ContextGauge()
    async with Host(gauge).run_test(size=(60, 12)) as pilot:
        gauge.set_figures(reported=10_000, estimate=10_500, threshold=20_000, window=None)
        gauge.set_cache_share(0.873)
        await pilot.pause()
        assert gauge.detail_text() == "reported 10k · estimate 10.5k · cache 87%"
        assert "cache 87%" in str(gauge.query_one("#gauge-detail").render())
        gauge.set_cache_share(None)  # unknown is not 0%
        assert gauge.detail_text() == "reported 10k · estimate 10.5k"


async def test_the_log_pane_counts_what_it_freed():
    log = CompactionLog(clock=lambda _t: "10:00:00", shown_path=lambda p: p or "")
    async with Host(log).run_test(size=(50, 10)) as pilot:
        log.load(
            [
                events.ToolResultsReclaimed(count=3, tokens_before=5000, tokens_after=2000).to_json(),
                {"type": "summary_started"},
            ]
        )
        log.add_record(events.CompactionFailed(reason="x").to_json())
        for _ in range(3):  # automatic checks that changed nothing are counted, not listed
            log.add_record(events.ToolResultsReclaimed(count=0, tokens_before=8500, tokens_after=8500).to_json())
        for _ in range(3):  # an automatic skip is a row once, then counted while it repeats
            log.add_record(events.CompactionSkipped(reason="automatic summaries are off").to_json())
        await pilot.pause()
        assert [e.kind for e in log.entries] == ["reclaim", "failed", "skipped"]
        assert log.row_count == 3
        assert log.border_subtitle == "3 events · 3k tokens freed · 5 checks changed nothing"
        assert log.highlighted is log.entries[-1] and "reason: automatic summaries are off" in str(log.tooltip)


async def test_a_log_row_is_whole_as_soon_as_it_is_added():
    """Trial F: the first row of a new log was drawn cut to the labels' widths ("16:5  skip") until the table
    measured its cells when next idle; and "what" stopped at 40 characters with the pane's room left over."""
    log = CompactionLog(clock=lambda _t: "16:51:50", shown_path=lambda p: p or "")
    async with Host(log).run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        log.add_record(
            events.CompactionSkipped(
                reason="Nothing to condense: the history is already as short as it "
                "can be, and nothing is older than the newest turns",
                trigger="manual",
            ).to_json()
        )
        row = "".join(segment.text for segment in log.render_line(1))  # before the table is idle again
        assert row.split()[:2] == ["16:51:50", "skipped"], row
        assert "the history is already" in row and row.rstrip().endswith("…"), row


# --------------------------------------------------------------------------------------- the bridge


def test_text_deltas_are_batched_never_dropped():
    posted: list = []
    bridge = EventBridge(posted.append)
    for piece in ("Hel", "lo ", "world"):
        bridge(events.TextDelta(text=piece))
    texts = [p for p in posted if isinstance(p, m.ReplyText)]
    assert len(texts) == 3 and all(t.stream is texts[0].stream for t in texts)
    assert texts[0].can_replace(texts[2])
    # a handler that only sees the newest message still writes everything
    assert texts[2].stream.take(texts[2].upto) == "Hello world"
    assert texts[0].stream.take(texts[0].upto) == ""
    bridge(events.AssistantMessage(content="Hello world"))
    bridge(events.TextDelta(text="next"))
    newer = posted[-1]
    assert isinstance(newer, m.ReplyText) and newer.stream is not texts[0].stream
    assert not texts[2].can_replace(newer), "a new reply is a new stream"


def test_usage_after_a_model_call_is_never_replaced():
    posted: list = []
    bridge = EventBridge(posted.append)
    bridge(events.AssistantMessage(content="x"))
    bridge(events.Usage(total_tokens=10))
    bridge(events.Usage(total_tokens=11))
    bridge(events.Usage(total_tokens=12))
    first, second, third = posted[1:]
    assert first.after_model_call and not second.after_model_call
    assert not first.can_replace(second)
    assert second.can_replace(third)


async def test_confirmations_go_through_a_message():
    posted: list = []
    bridge = EventBridge(posted.append)
    from xun.agent.tools import ConfirmationRequest, Decision

    request = ConfirmationRequest(tool="run_command", title="Run: ls", preview="$ ls", kind="command")
    waiting = asyncio.ensure_future(bridge.confirm(request))
    await asyncio.sleep(0)
    asked = posted[-1]
    assert isinstance(asked, m.ConfirmationAsked) and asked.request is request
    asked.answer.set_result(Decision.DENY)
    assert await waiting is Decision.DENY


# ------------------------------------------------------------------------------------------ commands


def test_parsing_commands():
    assert parse("hello") is None
    assert parse("//etc") is None
    assert parse("/compact  keep the API ") == m_parsed("/compact", "keep the API")
    assert parse("/RETRY") == m_parsed("/retry", "")
    with pytest.raises(UnknownCommand, match="unknown command /nope"):
        parse("/nope")


def m_parsed(name: str, argument: str):
    from xun.tui.commands import ParsedCommand

    return ParsedCommand(name, argument)


def test_completions():
    assert [c.usage for c in completions("/c")] == [
        "/compact [focus]",
        "/compact toolcall",
        "/compact preview",
        "/clear",
        "/context",
        "/config",
    ]
    assert [c.usage for c in completions("/compact")] == ["/compact toolcall", "/compact preview"]
    assert [c.usage for c in completions("/compact t")] == ["/compact toolcall"]
    assert [c.usage for c in completions("/compact p")] == ["/compact preview"]
    assert [c.usage for c in completions("/rec")] == ["/recall [query]"]
    assert completions("/help") == [] and completions("hi") == [] and completions("/x\ny") == []


def test_key_display():
    assert key_display("f5") == "F5"
    assert key_display("ctrl+q") == "Ctrl+Q"
    assert key_display("escape") == "Esc"
    assert key_display("f6,ctrl+r") == "F6 / Ctrl+R"


# ----------------------------------------------------------------------------------- transcript, export


def small_conversation() -> Conversation:
    c = Conversation(conversation_id="t1")
    c.add_user_message("read a.py")
    c.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I read it",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": "a.py"})},
                }
            ],
        }
    )
    c.add_tool_result("c1", "print('```')\n" + "x = 1\n" * 80)
    c.add_agent_message({"role": "assistant", "content": "It prints **three** backticks."})
    return c


def test_the_transcript_joins_calls_and_results():
    c = small_conversation()
    items = transcript(c).items
    assert [type(i) for i in items] == [UserItem, AssistantItem, ToolItem, AssistantItem]
    assert items[1].reasoning == "I read it" and items[1].content == ""
    tool = items[2]
    assert tool.name == "read_file" and tool.result_chars == len(tool.result) and not tool.reclaimed
    c.reclaim_tool_results(keep_max=0)
    tool = transcript(c).items[2]
    assert tool.reclaimed and tool.result_chars is None


def test_markdown_export_fences_survive_backticks(tmp_path):
    c = small_conversation()
    text = transcript_markdown(c, "t")
    assert "````\nprint('```')" in text, "the fence is longer than any run of backticks inside"
    assert "*Reasoning:*" in text and "It prints **three** backticks." in text
    with pytest.raises(ExportError, match=".html or .md"):
        render_transcript(c, "out.pdf", tmp_path)
    with pytest.raises(ExportError, match="give a file name"):
        render_transcript(c, " ", tmp_path)
    (tmp_path / "sub").mkdir()  # /render makes no folder (issue 13): a missing one is an error
    page = render_transcript(c, "sub/out.html", tmp_path).read_text()
    assert "<strong>three</strong>" in page and "<title>xun session t1</title>" in page


def test_an_export_never_replaces_a_file_it_did_not_write(tmp_path):
    """A newcomer's trial: `/render notes.md`, as the app's own hint said, replaced the user's notes."""
    c = small_conversation()
    with pytest.raises(ExportError, match="give a file name: /render transcript.md"):
        render_transcript(c, "", tmp_path)
    (tmp_path / "notes.md").write_text("MY IMPORTANT NOTES\n")
    with pytest.raises(ExportError, match="exists and is not a transcript xun wrote"):
        render_transcript(c, "notes.md", tmp_path)
    assert (tmp_path / "notes.md").read_text() == "MY IMPORTANT NOTES\n"
    for name in ("again.md", "again.html"):  # an earlier export is replaced: rendering twice works
        render_transcript(c, name, tmp_path)
        (tmp_path / name).write_text((tmp_path / name).read_text().replace("It prints", "It printed"))
        assert "It prints" in render_transcript(c, name, tmp_path).read_text()


def test_diff_preview_colours():
    content = diff_content("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same")
    styles = {str(span.style) for span in content.spans}
    assert {"$text-success", "$text-error", "$text-accent", "bold"} <= styles
    assert content.plain.splitlines()[-1] == " same"


def test_a_long_stream_is_sealed_where_markdown_can_be_cut():
    from xun.tui.widgets.assistant_block import seal_point

    text = "para one\n\n```\ncode\n\nmore code\n"
    assert seal_point(text) == len("para one\n\n"), "never inside a fence"
    assert seal_point("one huge paragraph of words") == len("one huge paragraph of ")
    assert seal_point("```\nopen fence without a break") == 0
    assert seal_point("nospace") == 0


def test_a_paragraph_of_plain_words_is_cut_where_a_line_starts():
    """Trial D #4: the two sides of a cut at a line's start wrap as the whole paragraph does."""
    from rich.console import Console
    from rich.markdown import Markdown

    from xun.tui.widgets.assistant_block import line_start_cut

    words = " ".join(["the fox ran far and sat low now two owl saw one big red sun set"] * 40)
    console = Console(width=50)

    def lines(text: str) -> list[str]:
        return ["".join(segment.text for segment in row).rstrip() for row in console.render_lines(Markdown(text))]

    cut = line_start_cut(words, 50)
    assert 0 < cut < len(words) and words[cut - 1] == " "
    assert lines(words[:cut]) + lines(words[cut:]) == lines(words)
    assert line_start_cut("some *emphasis* here " * 20, 50) == 0, "markup wraps otherwise than its source"
    assert line_start_cut("a b - c d", 4) == 8, "never a rest that reads as a list item"
    assert line_start_cut(" starts with a space", 8) == 0


def test_the_subject_of_reclaimed_arguments_cut_short_is_their_path_or_command():
    """A newcomer's trial: the recoverable list showed `{"path"…` for every reclaimed write_file, so twenty
    step files looked the same; the list's preview of reclaimed arguments is JSON cut short."""
    from xun.tui.widgets.tool_block import call_subject

    assert call_subject('{"path": "step20.txt", "content": "aaaaaaaaaaaa') == "step20.txt"
    assert call_subject('{"command": "echo \\"hi\\" >> x", "timeout": 3') == 'echo "hi" >> x'
    assert call_subject('{"content": "a \\"path\\": \\"no\\" b') == '{"content": "a \\"path\\": \\"no\\" b'
    assert call_subject("plain text") == "plain text"


def test_a_paste_split_anywhere_between_reads_is_one_paste_without_escapes():
    """The terminal's bytes come in reads of any size: a paste's markers and escapes may be cut anywhere."""
    from textual import events

    from xun.tui.terminal_input import TerminalInputParser

    raw = "a\x1b[200~one \x1b[31mred\x1b[0m \x1b]0;TITLE\x07two\rthree\x1b[201~b"
    for cut in range(1, len(raw)):
        parser = TerminalInputParser()
        got = [*parser.feed(raw[:cut]), *parser.feed(raw[cut:]), *parser.feed("")]
        pastes = [event.text for event in got if isinstance(event, events.Paste)]
        keys = [event.key for event in got if isinstance(event, events.Key)]
        assert pastes == ["one red two\rthree", "b"] and keys == ["a"], (cut, pastes, keys)  # "b" came with it


def test_a_line_break_after_a_pasted_end_marker_never_sends():
    """Trial G #29: copied text holding the end-of-paste marker, `safe text ESC[201~injected CR`, sent
    "safe textinjected" as a prompt: what follows the marker, until the input pauses, is pasted."""
    from xun.tui.terminal_input import PASTE_QUIET_SECONDS, TerminalInputParser

    parser = TerminalInputParser()
    got = [*parser.feed("\x1b[200~safe text\x1b[201~injected\r/tokens\r"), *parser.feed("")]
    assert [type(event).__name__ for event in got] == ["Paste", "Paste"], got
    assert [event.text for event in got] == ["safe text", "injected\r/tokens\r"]
    parser = TerminalInputParser()  # keys typed after a paste, once the input has paused, are keys
    got = [*parser.feed("\x1b[200~text\x1b[201~")]
    time.sleep(PASTE_QUIET_SECONDS)
    got += [*parser.feed("ab\r"), *parser.feed("")]
    assert [getattr(event, "key", None) for event in got] == [None, "a", "b", "enter"]


def test_esc_and_a_letter_typed_at_once_are_esc_and_the_letter():
    """Trial F #24: Esc, then "yes please" 50 ms later, was Alt+y: the Esc was lost, F7's preview stayed
    open, and its "s" made a summary. Keys that begin longer sequences (F1, arrows, Alt+Backspace) are kept."""
    from textual import events

    from xun.tui.terminal_input import TerminalInputParser

    def keys(raw: str) -> list[str]:
        parser = TerminalInputParser()
        return [event.key for event in [*parser.feed(raw), *parser.feed("")] if isinstance(event, events.Key)]

    assert keys("\x1byes") == ["escape", "y", "e", "s"]
    assert keys("\x1b1") == ["escape", "1"]
    assert keys("\x1bOP") == ["f1"] and keys("\x1b[D") == ["left"] and keys("\x1b\x1b[18~") == ["escape", "f7"]
    assert keys("\x1b\x7f") == ["ctrl+w"]
    assert keys("\x1b\r") == ["alt+enter"]  # trial G #46: it was Enter, and sent the prompt
