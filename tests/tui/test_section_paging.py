"""A summary's section of the offload log read a page at a time: Home in a session whose first summary took
out thousands of messages reads only the first of them, the rest of the section staying a lazy entry that
resumes at a byte offset; the pages, one after the other, are the section read whole, a call never parted
from its result nor reasoning from its reply; and the blocks are counted without keeping any of them."""

from __future__ import annotations

import gc
import itertools
import os
import tracemalloc
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

from xun.base import paths
from xun.context import offload
from xun.context.messages import RawOpenAIMessage, UserMessage
from xun.context.offload import append_offload
from xun.tui.chat_window import blocks_left, weight
from xun.tui.transcript import (
    AssistantItem,
    OffloadedItem,
    ToolItem,
    UserItem,
    blocks_in,
    call_marks,
    found_turns,
    history_page,
    history_tail,
    offloaded_items,
    offloaded_page,
    offloaded_prompts,
    said_marks,
    section_pages,
)


def varied_turns(tag: str, rounds: int, result_chars: int = 40) -> list:
    """Rounds of every shape a page's edge could cut: a prompt, reasoning before two calls made at once, their
    results, reasoning before a reply of several lines, and a reply after a lone call."""
    messages: list = []
    for i in range(rounds):
        messages.append(UserMessage(f"{tag} question {i}\nsecond line"))
        calls = [
            {
                "id": f"{tag}_{i}_{k}",
                "type": "function",
                "function": {"name": "read_file", "arguments": f'{{"k": {k}}}'},
            }
            for k in range(2)
        ]
        messages.append(
            RawOpenAIMessage({"role": "assistant", "content": None, "reasoning_content": "why", "tool_calls": calls})
        )
        for k in range(2):
            messages.append(
                RawOpenAIMessage({"role": "tool", "tool_call_id": f"{tag}_{i}_{k}", "content": f"{k}" * result_chars})
            )
        messages.append(
            RawOpenAIMessage({"role": "assistant", "content": f"{tag} answer {i}\n  indented", "reasoning": "so"})
        )
        lone = {"id": f"{tag}_{i}_x", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        messages.append(RawOpenAIMessage({"role": "assistant", "content": "and then", "tool_calls": [lone]}))
        messages.append(RawOpenAIMessage({"role": "tool", "tool_call_id": f"{tag}_{i}_x", "content": "listed"}))
    return messages


def write_log(root: Path, rounds: int, result_chars: int = 40) -> Path:
    log = paths.offload_dir(root) / "one.md"
    log.parent.mkdir(parents=True)
    for k in range(3):
        append_offload(
            log, varied_turns(f"s{k}", rounds, result_chars), conversation_id="one", when=f"2026-01-01T00:00:0{k}Z"
        )
    return log


def pages(item: OffloadedItem, size: int) -> tuple[list, list[OffloadedItem]]:
    """Every page of `item`, one after the other, and the lazy rests between them."""
    shown: list = []
    rests: list[OffloadedItem] = []
    rest: OffloadedItem | None = item
    while rest is not None:
        page, rest = offloaded_page(rest, size)
        assert page, "every page shows something"
        shown += page
        if rest is not None:
            rests.append(rest)
    return shown, rests


def test_the_pages_of_a_section_are_the_section_read_whole(tmp_path: Path):
    log = write_log(tmp_path, rounds=12)
    items = [
        OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 96),
        OffloadedItem(str(log), "2026-01-01T00:00:02Z", 2, "one", 96, carried_head=True),
        OffloadedItem(str(log), None, 0, "one", 96),  # found by its ordinal
    ]
    for item in items:
        whole = offloaded_items(item)
        count = blocks_in(item)
        assert count == len(whole) and all(turn.summarised for turn in whole)
        assert offloaded_prompts(item) == [turn.text for turn in whole if isinstance(turn, UserItem)]
        for size in (1, 2, 3, 5, 7, 20, len(whole) - 1, len(whole), 500):
            shown, rests = pages(item, size)
            assert shown == whole, size
            for rest in rests:
                assert rest.resume_at is not None and rest.whole == item
                assert blocks_left(rest, {item: count}) == len(whole) - rest.shown
                assert offloaded_items(rest) == whole[rest.shown :]  # read from the back: the rest, whole
                assert blocks_left(rest) >= 1  # not counted yet: an estimate
    uncarried = offloaded_items(replace(items[1], carried_head=False))
    assert offloaded_items(items[1]) == uncarried[1:] and uncarried[0] == UserItem(
        "s2 question 0\nsecond line", summarised=True
    )


def test_a_page_never_parts_a_call_from_its_result_nor_reasoning_from_its_reply(tmp_path: Path):
    log = write_log(tmp_path, rounds=4)
    item = OffloadedItem(str(log), "2026-01-01T00:00:00Z", 0, "one", 28)
    for size in range(1, 30):
        page, rest = offloaded_page(item, size)
        tools = [turn for turn in page if isinstance(turn, ToolItem)]
        assert all(tool.result is not None for tool in tools), size  # both results of the two calls made at once
        assert len(page) >= size or rest is None


def test_a_page_of_a_large_section_reads_only_its_beginning(tmp_path: Path, monkeypatch):
    """A first section of 4,000 rounds (2.5 MB): a page of 40 blocks reads the log's first chunk, and
    keeps nothing of the rest but where it begins."""
    log = write_log(tmp_path, rounds=4000, result_chars=200)
    size = log.stat().st_size
    item = OffloadedItem(str(log), "2026-01-01T00:00:00Z", 0, "one", 28_000)
    reached = read_offsets(monkeypatch)
    gc.collect()
    tracemalloc.start()
    try:
        page, problems = history_page(item, 40)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    rest = page.pop()
    assert problems == [] and isinstance(rest, OffloadedItem) and rest.resume_at is not None
    assert 40 <= len(page) < 60 and rest.shown == len(page)
    assert max(reached) < 2 * offload.FIRST_CHUNK, (max(reached), size)
    assert peak < 1_000_000, peak
    assert weight([rest], {item: blocks_in(item)}) == 7 * 4000 - len(page)


def test_counting_a_large_section_keeps_none_of_it(tmp_path: Path):
    log = write_log(tmp_path, rounds=4000, result_chars=200)
    item = OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 28_000)
    gc.collect()
    tracemalloc.start()
    try:
        count = blocks_in(item)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 7 * 4000
    section = log.stat().st_size // 3
    assert peak < section * 0.4, (peak, section)  # a chunk of the log at a time: read whole, over the section


def test_a_log_that_cannot_be_read_is_a_notice_for_the_page(tmp_path: Path):
    log = write_log(tmp_path, rounds=2)
    missing = OffloadedItem(str(log), "2026-01-01T00:00:09Z", 7, "one", 10)
    page, problems = history_page(missing, 5)
    assert page == [] and len(problems) == 1 and "could not be read" in problems[0]
    assert blocks_in(missing) == 1  # the notice
    gone = OffloadedItem(str(tmp_path / "nowhere.md"), None, 0, "one", 10)
    assert history_page(gone, 5)[0] == [] and blocks_in(gone) == 1


LINE = st.text(alphabet=st.sampled_from(["a", " ", "\r", "é", "#", "<", "!", "-", ":", "(", ")", "\t"]), max_size=12)
TEXT = st.lists(
    st.one_of(
        LINE, st.sampled_from(["## Offloaded at 2026-01-01T00:00:00Z", "<!-- xun conversation x -->", "Human: hi", ""])
    ),
    max_size=4,
).map("\n".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXT, min_size=1, max_size=8), size=st.integers(1, 6))
def test_any_text_reads_back_the_same_a_page_at_a_time(tmp_path_factory, texts, size):
    """Texts that look like headings, comments or entries, blank and indented lines, carriage returns: the
    section read from its heading is the one the stream reads, and its pages are it read whole."""
    root = tmp_path_factory.mktemp("log")
    log = paths.offload_dir(root) / "one.md"
    log.parent.mkdir(parents=True)
    messages: list = []
    for i, text in enumerate(texts):
        if i % 3 == 0:
            messages.append(UserMessage(text))
        elif i % 3 == 1:
            call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": text}}
            messages.append(
                RawOpenAIMessage(
                    {"role": "assistant", "content": text, "reasoning_content": text, "tool_calls": [call]}
                )
            )
            messages.append(RawOpenAIMessage({"role": "tool", "tool_call_id": f"c{i}", "content": text}))
        else:
            messages.append(RawOpenAIMessage({"role": "assistant", "content": text}))
    for k in range(2):
        append_offload(log, messages, conversation_id="one", when=f"2026-01-01T00:00:0{k + 1}Z")
    sections = offload.read_offload_log(log)
    for k in range(2):
        start = offload.heading_offset(log, f"2026-01-01T00:00:0{k + 1}Z")
        assert start is not None and offload.read_section(log, start) == sections[k]
        item = OffloadedItem(str(log), f"2026-01-01T00:00:0{k + 1}Z", k, "one", len(messages))
        whole = offloaded_items(item)
        assert blocks_in(item) == len(whole)
        assert pages(item, size)[0] == whole
        counted = section_pages(item, size)
        assert counted is not None and counted.blocks == len(whole)
        for key, picks, marks in jumps(whole):  # the marks of any text lead to the page the walk finds
            assert found_turns(item, picks, size, marks=marks, pages=counted) == found_turns(item, picks, size), key


async def walked_up(pilot, chat) -> list:
    """The rows seen scrolling up from the window to the first block, a page at a time, each once."""
    from .test_chat_window import merged, settled, window_rows

    seen: list = []
    for _ in range(200):
        seen = merged(seen, window_rows(chat), downward=False)
        if not chat.older_count:
            break
        chat.scroll_to(y=0, animate=False, immediate=True)
        chat.action_scroll_up()  # at the top: the older page
        await settled(pilot, chat)
    return seen


@pytest.mark.long
async def test_scrolling_up_into_the_rest_of_a_section_shows_every_turn_once(
    offline_server, session_factory, tmp_path: Path
):
    """Home reads the first page of the first summary's turns, a jump far down leaves the rest of them above
    the window, still lazy: scrolling up reads it from where the page ended, each turn shown once."""
    from .test_chat_window import home_pressed, resumed_long_session, settled

    async with resumed_long_session(offline_server, session_factory, tmp_path, 150) as (_, pilot, chat):
        await home_pressed(pilot, chat)
        block = await chat.show_entry(
            lambda entry: isinstance(entry, UserItem) and entry.text.startswith("question 125:")
        )
        assert block is not None
        await settled(pilot, chat)
        rests = [entry for entry in chat._above if isinstance(entry, OffloadedItem) and entry.resume_at is not None]
        assert len(rests) == 1, "the rest of the first summary's turns, above the window, unread"
        seen = await walked_up(pilot, chat)
        users = [text for kind, text, _ in seen if kind == "user"]
        last = int(users[-1].split()[1].rstrip(":"))
        assert users == [f"question {i}: read src/file{i}.py" for i in range(last + 1)] and last >= 125
        assert sum(1 for kind, *_ in seen if kind == "tool") == last + 1


def test_a_search_reads_only_the_page_that_holds_the_turn(tmp_path: Path):
    """The turns before and after the page that holds the call stay lazy parts of the section; read, the parts
    are the section whole, and each part's blocks are known without counting the section."""
    log = write_log(tmp_path, rounds=12)
    item = OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 96, carried_head=True)
    whole = offloaded_items(item)
    assert found_turns(item, lambda turn: isinstance(turn, ToolItem) and turn.call_id == "nowhere", 5) is None
    for call_id in ("s1_0_0", "s1_5_x", "s1_11_1"):
        for size in (1, 4, 20):
            parts = found_turns(item, lambda turn: isinstance(turn, ToolItem) and turn.call_id == call_id, size)
            assert parts is not None
            lazy = [part for part in parts if isinstance(part, OffloadedItem)]
            assert len(lazy) <= 2 and all(part.whole == item for part in lazy)
            read: list = []
            for part in parts:
                if isinstance(part, OffloadedItem):
                    turns = offloaded_items(part)
                    assert blocks_left(part, {item: len(whole)}) == len(turns)
                    assert pages(part, 3)[0] == turns  # a part read a page at a time ends where it ends
                    read += turns
                else:
                    read.append(part)
            assert read == whole, (call_id, size)
            found = next(part for part in parts if isinstance(part, ToolItem) and part.call_id == call_id)
            assert found.result is not None


@pytest.mark.long
async def test_after_a_jump_into_a_summary_s_turns_every_turn_shows_once_from_home_to_end(
    offline_server, session_factory, tmp_path: Path
):
    """A jump to a call in the middle of the first summary's turns reads only the page that holds it: the
    turns before it and after it stay lazy, and the walk up to the first block and down to the newest shows
    every turn once, in order."""
    from xun.tui import messages as m
    from xun.tui.widgets.tool_block import ToolBlock

    from .helpers import wait_until
    from .test_chat_window import merged, resumed_long_session, settled, title_total, window_rows

    rounds = 150
    async with resumed_long_session(offline_server, session_factory, tmp_path, rounds) as (app, pilot, chat):
        app.post_message(m.ShowInChat("call_25"))
        await wait_until(pilot, lambda: isinstance(chat.selected, ToolBlock), what="the call shown")
        await settled(pilot, chat)
        assert chat.selected.call_id == "call_25"
        parts = [entry for entry in (*chat._above, *chat._below) if isinstance(entry, OffloadedItem)]
        assert any(part.upto is not None for part in parts), "the turns before the call's page, lazy"
        assert any(part.resume_at is not None for part in parts), "and those after it"
        chat.select(None)
        upward, seen = await walked_up(pilot, chat), []
        for _ in range(200):
            seen = merged(seen, window_rows(chat), downward=True)
            if chat.at_end:
                break
            chat.scroll_to(y=chat.max_scroll_y, animate=False, immediate=True)
            chat.action_scroll_down()
            await settled(pilot, chat)
        assert seen[: len(upward)] == upward
        users = [text for kind, text, _ in seen if kind == "user"]
        assert users == [f"question {i}: read src/file{i}.py" for i in range(rounds)]
        assert len(seen) == 3 * rounds + 2
        await wait_until(pilot, lambda: not title_total(chat).startswith("~"), what="the summarised turns counted")
        assert title_total(chat) == f"{len(seen):,}"


def jumps(turns: list) -> list[tuple[str, object, tuple[str, ...]]]:
    """A jump to each turn of `turns` as the recall screen asks for it: what picks it, and its marks."""
    out: list = []
    for turn in turns:
        if isinstance(turn, ToolItem):
            out.append(
                (
                    turn.call_id,
                    lambda t, c=turn.call_id: isinstance(t, ToolItem) and t.call_id == c,
                    call_marks(turn.call_id),
                )
            )
        elif isinstance(turn, UserItem):
            out.append(
                (
                    turn.text,
                    lambda t, x=turn.text: isinstance(t, UserItem) and t.text == x,
                    said_marks("Human", turn.text),
                )
            )
        elif isinstance(turn, AssistantItem):
            if turn.content:
                picks = lambda t, x=turn.content: isinstance(t, AssistantItem) and t.content == x  # noqa: E731
                out.append((turn.content, picks, said_marks("AI", turn.content)))
            if turn.reasoning:
                picks = lambda t, x=turn.reasoning: isinstance(t, AssistantItem) and x in t.reasoning  # noqa: E731
                out.append((turn.reasoning, picks, said_marks("AI reasoning", turn.reasoning)))
    return out


def read_offsets(monkeypatch) -> list[int]:
    """The offsets of the log's lines read from now on."""
    reached: list[int] = []
    lines = offload._lines

    def counted(data, start, end):
        for offset, line in lines(data, start, end):
            reached.append(offset)
            yield offset, line

    monkeypatch.setattr(offload, "_lines", counted)
    return reached


def test_a_jump_with_the_counted_pages_finds_what_the_walk_finds(tmp_path: Path):
    """Every turn of a section, at every page size, and in the parts a first jump left: the page the marks
    lead to is the one the walk from the section's start finds, with the same lazy parts around it."""
    log = write_log(tmp_path, rounds=6)
    for item in (
        OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 48),
        OffloadedItem(str(log), "2026-01-01T00:00:02Z", 2, "one", 48, carried_head=True),
    ):
        whole = offloaded_items(item)
        targets = jumps(whole)
        assert len(targets) > len(whole)
        for size in (1, 2, 3, 5, 8, 13, 60):
            pages = section_pages(item, size)
            assert pages is not None and pages.blocks == len(whole) == blocks_in(item)
            assert [pages.before[0], *pages.before[1:]] == sorted(pages.before)
            for key, picks, marks in targets:
                walked = found_turns(item, picks, size)
                assert walked is not None, key
                assert found_turns(item, picks, size, marks=marks, pages=pages) == walked, (key, size)
            _, picks, marks = targets[len(targets) // 2]
            parts = found_turns(item, picks, size, marks=marks, pages=pages)
            for part in (part for part in parts or () if isinstance(part, OffloadedItem)):
                for key, picks, marks in jumps(offloaded_items(part)):
                    walked = found_turns(part, picks, size)
                    assert found_turns(part, picks, size, marks=marks, pages=pages) == walked, (key, size, part)
        missing = call_marks("s1_99_0")
        assert found_turns(item, lambda t: False, 3, marks=missing, pages=section_pages(item, 3)) is None


def test_a_jump_reads_only_the_page_that_holds_the_turn(tmp_path: Path, monkeypatch):
    """A section of 4,000 rounds: with its pages counted, a jump to a turn at a page's first entry, its last,
    or in the middle of the section reads the log's lines of that page alone (the walk reads from the start)."""
    log = write_log(tmp_path, rounds=4000, result_chars=200)
    item = OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 28_000)
    pages = section_pages(item, 20)
    assert pages is not None and pages.blocks == 7 * 4000 and len(pages.starts) > 1000
    reached = read_offsets(monkeypatch)
    middle = len(pages.starts) // 2
    for call_id in ("s1_0_0", "s1_2000_1", "s1_3999_x"):
        picks = lambda t, c=call_id: isinstance(t, ToolItem) and t.call_id == c  # noqa: E731
        reached.clear()
        parts = found_turns(item, picks, 20, marks=call_marks(call_id), pages=pages)
        assert parts is not None and any(picks(part) for part in parts)
        page = max(i for i, start in enumerate(pages.starts) if start <= min(reached))
        end = pages.starts[page + 1] if page + 1 < len(pages.starts) else pages.end
        assert pages.starts[page] == min(reached) and max(reached) < end + 1000, call_id  # and the next entry
        assert len(reached) < 200, len(reached)
    for page in (middle, middle + 1):
        entries = offload.SectionReader(log, pages.starts[page]).entries()
        prompts = [
            e.text
            for o, e in itertools.takewhile(lambda oe: oe[0] < pages.starts[page + 1], entries)
            if e.speaker == "Human"
        ]
        for text in (prompts[0], prompts[-1]):  # the first prompt of the page, and its last
            picks = lambda t, x=text: isinstance(t, UserItem) and t.text == x  # noqa: E731
            reached.clear()
            parts = found_turns(item, picks, 20, marks=said_marks("Human", text), pages=pages)
            assert parts is not None and any(picks(part) for part in parts)
            assert min(reached) == pages.starts[page] and max(reached) < pages.starts[page + 1] + 1000, text
            lazy = [part for part in parts if isinstance(part, OffloadedItem)]
            assert [part.upto for part in lazy if part.upto is not None] == [pages.before[page]]
            assert [part.shown for part in lazy if part.resume_at is not None] == [pages.before[page + 1]]


def test_a_jump_after_the_log_changed_walks_it_unless_it_was_only_appended_to(tmp_path: Path, monkeypatch):
    """Pages counted before the log changed never lead a jump astray: a later summary appended to the log
    keeps them (only the page is read), a log rewritten in place or replaced is walked from the section's start;
    either way the jump finds what a walk of the log as it is now finds."""
    log = write_log(tmp_path, rounds=40)
    item = OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 280)
    pages = section_pages(item, 5)
    assert pages is not None
    reached = read_offsets(monkeypatch)

    def jump(call_id: str) -> list | None:
        picks = lambda t: isinstance(t, ToolItem) and t.call_id == call_id  # noqa: E731
        reached.clear()
        parts = found_turns(item, picks, 5, marks=call_marks(call_id), pages=pages)
        indexed = list(reached)
        assert parts == found_turns(item, picks, 5), call_id  # the walk of the log as it is now
        reached[:] = indexed
        return parts

    append_offload(log, varied_turns("s3", 2), conversation_id="one", when="2026-01-01T00:00:03Z")
    assert jump("s1_30_1") is not None and min(reached) > pages.starts[10]  # appended to: only the page is read
    stamp = pages.stamp
    assert stamp[2] == log.stat().st_size  # checked once, then trusted

    text = log.read_text(encoding="utf-8")
    with log.open("r+", encoding="utf-8") as handle:  # the same file, rewritten: every offset after moves
        handle.write(text.replace("s1 question 2\n", "s1 question 2, asked again at length\n"))
    assert log.stat().st_ino == stamp[1]
    assert jump("s1_30_1") is not None and min(reached) < pages.starts[0]  # walked from the heading

    pages = section_pages(item, 5)
    assert pages is not None
    status = log.stat()  # the same size and time, two calls' ids swapped: the page read still holds the call
    log.write_text(
        log.read_text(encoding="utf-8")
        .replace("s1_31_", "s1_xx_")
        .replace("s1_11_", "s1_31_")
        .replace("s1_xx_", "s1_11_"),
        encoding="utf-8",
    )
    os.utime(log, ns=(status.st_atime_ns, status.st_mtime_ns))
    parts = jump("s1_31_0")
    assert parts is not None and min(reached) > pages.starts[0]
    found = next(part for part in parts if isinstance(part, ToolItem) and part.call_id == "s1_31_0")
    assert found.result == "0" * 40

    replacement = log.with_name("new.md")
    replacement.write_text(log.read_text(encoding="utf-8").replace("s1 question 1\n", "s1 question one\n"))
    os.replace(replacement, log)
    assert jump("s1_30_1") is not None and min(reached) < pages.starts[0]
    log.write_text(log.read_text(encoding="utf-8")[: pages.starts[0] + 100], encoding="utf-8")  # cut short
    assert jump("s1_30_1") is None


def from_below(item: OffloadedItem, pages) -> list:
    """Every turn of `item` read from below a page at a time (`history_tail`), as the chat scrolls up into it."""
    shown: list = []
    rest: OffloadedItem | None = item
    while rest is not None:
        parts, problems = history_tail(rest, pages)
        assert problems == [] and parts
        rest = parts[0] if isinstance(parts[0], OffloadedItem) else None
        page = parts[1:] if rest is not None else parts
        assert page and not any(isinstance(part, OffloadedItem) for part in page), "a page, below a lazy part"
        if rest is not None:
            assert blocks_left(rest) == rest.upto - rest.shown
        shown[:0] = page
    return shown


def test_a_section_read_from_below_a_page_at_a_time_is_the_section_read_whole(tmp_path: Path):
    """Scrolling up into a summary's turns from below reads its last page, then the one before, each from
    where it was counted to begin: the pages, at every size and from a part a jump left, are the section
    read whole, every turn once and in order; without its counted pages the part is read whole."""
    log = write_log(tmp_path, rounds=6)
    for item in (
        OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 48),
        OffloadedItem(str(log), "2026-01-01T00:00:02Z", 2, "one", 48, carried_head=True),  # ends at the log's end
    ):
        whole = offloaded_items(item)
        for size in (1, 2, 3, 5, 8, 60):
            pages = section_pages(item, size)
            assert pages is not None
            assert from_below(item, pages) == whole, size
            _, picks, marks = jumps(whole)[len(whole) // 2]
            parts = found_turns(item, picks, size, marks=marks, pages=pages)
            assert parts is not None
            for part in (part for part in parts if isinstance(part, OffloadedItem)):
                assert from_below(part, pages) == offloaded_items(part), (size, part)
        assert history_tail(item, None) == (whole, [])


def test_a_section_read_from_below_reads_only_its_last_page(tmp_path: Path, monkeypatch):
    """A section of 4,000 rounds with its pages counted: reading it from below reads the log's lines of its
    last page alone (the whole section was read before), and a log rewritten since is read whole."""
    log = write_log(tmp_path, rounds=4000, result_chars=200)
    item = OffloadedItem(str(log), "2026-01-01T00:00:01Z", 1, "one", 28_000)
    pages = section_pages(item, 20)
    assert pages is not None and len(pages.starts) > 1000
    reached = read_offsets(monkeypatch)
    parts, problems = history_tail(item, pages)
    rest = parts[0]
    assert problems == [] and isinstance(rest, OffloadedItem)
    assert rest.stop_at == pages.starts[-1] and rest.upto == pages.before[-1] == pages.blocks - len(parts[1:])
    assert min(reached) == pages.starts[-1] and max(reached) <= pages.end + 1000 and len(reached) < 200
    reached.clear()
    parts, _ = history_tail(rest, pages)
    assert parts[0].stop_at == pages.starts[-2] == min(reached) and max(reached) <= pages.starts[-1] + 1000

    text = log.read_text(encoding="utf-8")
    log.write_text(text.replace("s1 question 2\n", "s1 question 2, asked again\n"), encoding="utf-8")
    reached.clear()
    parts, _ = history_tail(item, pages)
    assert not any(isinstance(part, OffloadedItem) for part in parts) and min(reached) < pages.starts[0]
    assert len(parts) == 7 * 4000


async def test_a_jump_from_recall_reads_only_the_page_of_the_turn_once_the_turns_are_counted(
    offline_server, session_factory, tmp_path: Path, monkeypatch
):
    """Once the chat has counted the summaries' turns, "show in the chat" for a call in the middle of the first
    summary's turns reads none of the log before that call's page, and shows the call with its result."""
    from xun.tui import messages as m
    from xun.tui.widgets.tool_block import ToolBlock

    from .helpers import wait_until
    from .test_chat_window import resumed_long_session, settled, title_total

    async with resumed_long_session(offline_server, session_factory, tmp_path, 150) as (app, pilot, chat):
        await wait_until(pilot, lambda: not title_total(chat).startswith("~"), what="the summarised turns counted")
        first = next(item for item in chat._above if isinstance(item, OffloadedItem))
        pages = chat._pages[first]
        reached = read_offsets(monkeypatch)
        app.post_message(m.ShowInChat("call_25"))
        await wait_until(pilot, lambda: isinstance(chat.selected, ToolBlock), what="the call shown")
        await settled(pilot, chat)
        assert chat.selected.call_id == "call_25" and chat.selected.result_text
        assert min(reached) in pages.starts[2:], "read from the call's page on, not from the section's start"
