"""The chat's scrollbar says where the view is in the whole session, not in the mounted window: Home puts
its thumb at the top, End at the bottom, a jump to a middle turn in the middle, its thumb is small in a
long session, and a click on its track brings that part of the session into view."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from xun.tui.app import XunApp
from xun.tui.widgets.chat_view import ChatView, EarlierMarker
from xun.tui.widgets.user_block import UserBlock

from .helpers import wait_until
from .long_sessions import long_session
from .test_chat_window import settled

ROUNDS = 1250  # 5,000 messages


def thumb_rows(chat: ChatView) -> tuple[list[int], int]:
    """The rows of the track the drawn thumb covers (the ones a mouse down grabs), and the track's height."""
    bar = chat.vertical_scrollbar
    track = bar.size.height
    console = Console(width=bar.size.width, height=track, color_system=None)
    lines = console.render_lines(bar.render(), console.options.update(width=bar.size.width, height=track))
    rows = [
        y for y, line in enumerate(lines) if any((s.style and s.style.meta.get("@mouse.down")) == "grab" for s in line)
    ]
    return rows, track


def first_question_in_view(chat: ChatView) -> int:
    top = chat.scroll_y
    for block in chat.query(UserBlock):
        if block.display and block.virtual_region.bottom > top:
            return int(re.match(r"question (\d+):", block.text).group(1))
    raise AssertionError("no prompt in view")


async def test_the_thumb_says_where_the_view_is_in_a_5000_message_session(
    offline_server, session_factory, tmp_path: Path
):
    conversation_id = long_session(tmp_path, ROUNDS)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        await settled(pilot, chat)
        assert chat.show_vertical_scrollbar
        rows, track = thumb_rows(chat)
        assert rows and rows[-1] == track - 1, f"the newest page: thumb at the bottom, {rows} of {track}"
        assert len(rows) <= 2, f"a small thumb in a session of 5,000 messages, not {len(rows)} rows of {track}"

        chat.focus()
        await pilot.press("home")
        await wait_until(pilot, lambda: chat.older_count == 0, what="the first page")
        await settled(pilot, chat)
        rows, track = thumb_rows(chat)
        assert rows and rows[0] == 0 and len(rows) <= 2, f"Home: thumb at the top, {rows} of {track}"

        messages = app.conversation.messages
        middle = next(
            i for i, m in enumerate(messages) if getattr(m, "text", "").startswith(f"question {ROUNDS // 2}:")
        )
        await app.main.jump_to_message(middle)
        await settled(pilot, chat)
        rows, track = thumb_rows(chat)
        assert rows and abs((rows[0] + rows[-1]) / 2 - track / 2) <= track / 10, (
            f"a middle turn: thumb in the middle, {rows} of {track}"
        )

        await pilot.press("end")
        await wait_until(pilot, lambda: chat.at_end, what="the newest")
        await settled(pilot, chat)
        rows, track = thumb_rows(chat)
        assert rows and rows[-1] == track - 1, f"End: thumb at the bottom, {rows} of {track}"


async def test_a_click_on_the_track_s_middle_brings_a_middle_turn_into_view(
    offline_server, session_factory, tmp_path: Path
):
    conversation_id = long_session(tmp_path, ROUNDS)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        await settled(pilot, chat)
        bar = chat.vertical_scrollbar
        assert first_question_in_view(chat) > ROUNDS - 20
        await pilot.click(bar, offset=(0, bar.size.height // 2))
        await wait_until(pilot, lambda: first_question_in_view(chat) < ROUNDS * 0.9, what="the jump")
        await settled(pilot, chat)
        question = first_question_in_view(chat)
        assert ROUNDS * 0.4 <= question <= ROUNDS * 0.6, f"question {question} of {ROUNDS} at the top of the view"
        rows, track = thumb_rows(chat)
        assert rows and abs((rows[0] + rows[-1]) / 2 - track / 2) <= track / 10, f"{rows} of {track}"
        assert not chat.at_end and chat.older_count > 0


async def test_a_thumb_dragged_up_a_quarter_of_the_track_shows_that_part_of_the_session(
    offline_server, session_factory, tmp_path: Path
):
    conversation_id = long_session(tmp_path, ROUNDS)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        await settled(pilot, chat)
        bar = chat.vertical_scrollbar
        rows, track = thumb_rows(chat)
        await pilot.mouse_down(bar, offset=(0, rows[-1]))
        await pilot.hover(bar, offset=(0, rows[-1] - track // 2))
        await pilot.hover(bar, offset=(0, rows[-1] - 3 * track // 4))
        rows, _ = thumb_rows(chat)
        assert abs(rows[0] - track / 4) <= 2, f"the thumb follows the mouse: {rows} of {track}"
        await pilot.mouse_up(bar, offset=(0, rows[0]))
        await wait_until(pilot, lambda: first_question_in_view(chat) < ROUNDS * 0.9, what="the jump")
        await settled(pilot, chat)
        question = first_question_in_view(chat)
        assert ROUNDS * 0.15 <= question <= ROUNDS * 0.35, f"question {question} of {ROUNDS} at the top of the view"
        rows, _ = thumb_rows(chat)
        assert abs(rows[0] - track / 4) <= 2, f"the thumb stays where it was let go: {rows} of {track}"


async def test_a_click_among_the_turns_summaries_took_out_reads_them_and_shows_that_place(
    offline_server, session_factory, tmp_path: Path
):
    """Three quarters of the session went to the offload log: a click a third of the way down the track
    reads the turns there (off the event loop) and shows them, dimmed, at the top of the view."""
    conversation_id = long_session(tmp_path, ROUNDS, summaries=3)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        await settled(pilot, chat)
        await wait_until(pilot, lambda: "~" not in chat.border_title, what="the summarised turns counted")
        bar = chat.vertical_scrollbar
        await pilot.click(bar, offset=(0, (bar.size.height - 1) // 3))
        await wait_until(pilot, lambda: first_question_in_view(chat) < ROUNDS * 0.9, what="the jump")
        await settled(pilot, chat)
        question = first_question_in_view(chat)
        assert ROUNDS * 0.23 <= question <= ROUNDS * 0.43, f"question {question} of {ROUNDS} at the top of the view"
        prompt = next(b for b in chat.query(UserBlock) if b.text.startswith(f"question {question}:"))
        assert prompt.has_class("-summarised"), "a turn a summary took out, read from the offload log"
        rows, track = thumb_rows(chat)
        assert abs(rows[0] - (track - 1) / 3) <= 2, f"the thumb where the click was: {rows} of {track}"
