"""Sessions: resume restores every pane, /sessions switches, a 2,000-message history loads page by page."""

from __future__ import annotations

import json
import math
from pathlib import Path

from textual.widgets import DataTable

from xun.context.conversation import Conversation
from xun.tui.app import XunApp
from xun.tui.screens.sessions import SessionsScreen
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.chat_window import FIRST_PAGE, PAGE, WINDOW
from xun.tui.widgets.chat_view import EarlierMarker, LaterMarker
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock

from .helpers import finish, submit, turn, wait_until


async def test_resume_restores_transcript_gauge_log_and_list(offline_server, session_factory, tmp_path: Path):
    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" + "some words to read\n" * 60)
    overrides = ("auto_compact.toolcall_keep_max=1", "auto_compact.summary_keep_max=6")
    first = session_factory(offline_server, *overrides)
    app = XunApp(first)
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            await turn(pilot, f"read f{i}.txt")
        await finish(pilot, lambda: pilot.press("f5"))
        await turn(pilot, "read f3.txt")
        await finish(pilot, lambda: pilot.press("f6"))
        log_lines = [entry.line() for entry in app.main.log_pane.entries]
        recoverable = set(app.main.recoverable.records)
        reclaimed_blocks = {b.call_id for b in app.main.chat.query(ToolBlock) if b.reclaimed}
        figures = app.main.gauge.figures_text()
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.return_code is not None)
    conversation_id = first.conversation.conversation_id
    assert recoverable and reclaimed_blocks
    first.close()  # its lock too: one writer per session

    resumed = session_factory(offline_server, *overrides, resume=conversation_id)
    again = XunApp(resumed)
    async with again.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: again.main.recoverable.records, what="the recoverable list")
        assert again.main.header.query_one("#session-id").render().plain.endswith(conversation_id)
        again.main.chat.focus()
        for _ in range(5):  # what the first screen does not show comes in as the view goes up
            if not again.main.chat.older_count:
                break
            await pilot.press("home")
            await wait_until(pilot, lambda: not (again.main.chat._older_wanted or again.main.chat._loading_older))
        children = list(again.main.chat.children)
        assert isinstance(children[0], UserBlock) and children[0].has_class("-summarised"), "the whole history"
        divider = next(child for child in children if isinstance(child, SummaryDivider))
        assert "messages summarised, offloaded to" in divider.text
        assert all(child.has_class("-summarised") for child in children[: children.index(divider)])
        assert [b.text for b in again.main.chat.query(UserBlock)][-1] == "read f3.txt"
        assert again.main.chat.query(AssistantBlock)
        resumed_reclaimed = {b.call_id for b in again.main.chat.query(ToolBlock) if b.reclaimed}
        assert resumed_reclaimed and resumed_reclaimed <= reclaimed_blocks
        assert [entry.line() for entry in again.main.log_pane.entries] == log_lines
        assert set(again.main.recoverable.records) == recoverable
        assert again.main.gauge.figures_text() == figures
        assert again.main.gauge.history, "the sparkline is rebuilt from the compaction log"
        # and the conversation goes on
        await turn(pilot, "hello again")
        assert again.main.chat.query(UserBlock).last().text == "hello again"


def saved_session(tmp_path: Path, conversation_id: str, prompt: str) -> None:
    from xun.context.sessions import SessionStore

    store = SessionStore(tmp_path)
    conversation = store.new()
    conversation.conversation_id = conversation_id
    conversation.add_user_message(prompt)
    conversation.add_agent_message({"role": "assistant", "content": f"an answer to {prompt}"})
    store.save(conversation)


async def test_sessions_screen_switches_session(offline_server, session_factory, tmp_path: Path):
    saved_session(tmp_path, "older-session", "what was I doing")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(140, 44)) as pilot:
        await turn(pilot, "hello")
        current = app.conversation.conversation_id
        await submit(pilot, "/sessions")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
        screen = app.screen
        ids = [info.conversation_id for info in screen.sessions]
        assert set(ids) == {current, "older-session"}
        table = screen.query_one(DataTable)
        table.move_cursor(row=ids.index("older-session"))
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.conversation.conversation_id == "older-session", what="the switch")
        await wait_until(pilot, lambda: app.main.chat.query(UserBlock))
        assert [b.text for b in app.main.chat.query(UserBlock)] == ["what was I doing"]
        assert app.main.chat.query_one(AssistantBlock).text == "an answer to what was I doing"
        assert "older-session" in str(app.main.header.query_one("#session-id").render())
        # the session we left was saved on the way
        assert app.session.store.load(current).messages


async def test_a_session_open_in_another_xun_is_marked_and_refused_in_the_apps_words(
    offline_server, session_factory, tmp_path: Path
):
    import subprocess
    import sys

    saved_session(tmp_path, "held-session", "held elsewhere")
    saved_session(tmp_path, "free-session", "free to take")
    holder = subprocess.Popen(  # another process holds the session's lock, as another xun does
        [
            sys.executable,
            "-c",
            "import sys, time; from xun.context.sessions import SessionStore; "
            "SessionStore(sys.argv[1]).lock('held-session'); print('locked', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        app = XunApp(session_factory(offline_server))
        async with app.run_test(size=(140, 44), notifications=True) as pilot:
            await turn(pilot, "hello")
            await submit(pilot, "/sessions")
            await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
            screen = app.screen
            table = screen.query_one(DataTable)
            assert str(table.get_row("held-session")[0]) == "open"
            assert str(table.get_row("free-session")[0]) == ""
            assert str(table.get_row(app.conversation.conversation_id)[0]) == "●"
            note = str(screen.query_one("#sessions-elsewhere").render())
            assert f"held-ses by pid {holder.pid}:" in note, note
            ids = [info.conversation_id for info in screen.sessions]
            table.move_cursor(row=ids.index("held-session"))
            await pilot.press("enter")
            await wait_until(pilot, lambda: app._notifications, what="the refusal")
            message = list(app._notifications)[-1].message
            assert f"session held-session is open in another xun (pid {holder.pid}:" in message
            assert "you stay in this session. Switch to it once that xun has ended" in message
            assert "add --fork" not in message and "--read-only" not in message, "no flags to add in the app"
            assert app.conversation.conversation_id != "held-session"
    finally:
        holder.kill()
        holder.wait()


async def test_the_sessions_screen_counts_this_sessions_messages_as_they_are_now(offline_server, session_factory):
    """After /revise the file still holds the turn taken back; the row of the current session must not."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(140, 44)) as pilot:
        await turn(pilot, "one")
        await turn(pilot, "two")
        await turn(pilot, "three")
        await submit(pilot, "/revise")
        await wait_until(pilot, lambda: app.main.prompt.text == "three", what="the prompt taken back")
        on_disk = app.session.store.load(app.conversation.conversation_id)
        assert len(on_disk.messages) > len(app.conversation.messages), "the file is older than the app's state"
        await submit(pilot, "/sessions")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
        row = next(i for i in app.screen.sessions if i.conversation_id == app.conversation.conversation_id)
        assert row.messages == len(app.conversation.messages)
        table = app.screen.query_one(DataTable)
        assert str(table.get_cell(row.conversation_id, "messages")) == f"{len(app.conversation.messages):,}"


def big_session(tmp_path: Path, rounds: int = 500) -> str:
    """2,000 messages: each round is a prompt, a tool call, its result and an answer."""
    from xun.context.sessions import SessionStore

    store = SessionStore(tmp_path)
    conversation: Conversation = store.new()
    conversation.conversation_id = "big-session"
    for i in range(rounds):
        conversation.add_user_message(f"question {i}: read src/file{i}.py")
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/file{i}.py"})},
                    }
                ],
            }
        )
        conversation.add_tool_result(f"call_{i}", f"[src/file{i}.py]\n" + "print('hello')\n" * 30)
        conversation.add_agent_message({"role": "assistant", "content": f"Answer **{i}**: the file prints hello."})
    conversation.record_usage(60_000)
    store.save(conversation)
    return conversation.conversation_id


async def test_a_long_history_mounts_the_newest_first(offline_server, session_factory, tmp_path: Path):
    conversation_id = big_session(tmp_path)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert len(app.conversation.messages) == 2000
        chat = app.main.chat
        # the newest page first; older pages only until the view is filled (these blocks are short)
        await wait_until(pilot, lambda: chat.max_scroll_y > 0 and not chat._older_wanted, what="a filled view")
        children = list(chat.children)
        assert isinstance(children[0], EarlierMarker)
        mounted = len(children) - 1
        assert mounted >= FIRST_PAGE and (mounted - FIRST_PAGE) % PAGE == 0 and mounted <= FIRST_PAGE + 2 * PAGE
        assert chat.query(UserBlock).last().text == "question 499: read src/file499.py"
        assert "earlier messages" in str(children[0].render())
        assert chat.older_count > 1000

        chat.focus()
        await pilot.press("home")  # the first prompt at once, not one more page a press (issue 32)
        await wait_until(
            pilot,
            lambda: chat.query(UserBlock).first().text == "question 0: read src/file0.py",
            what="the first prompt",
        )
        await wait_until(pilot, lambda: not (chat._newer_wanted or chat._loading_older), what="a filled view")
        await pilot.pause()
        assert chat.scroll_y == 0, "Home goes to the very top (issue 14: it stopped short)"
        assert not chat.query(EarlierMarker) and isinstance(chat.children[-1], LaterMarker)
        assert len(chat.children) - 1 <= WINDOW, "only the first pages are mounted, not all 2,000"
        await pilot.press("end")
        await wait_until(pilot, lambda: chat.at_end, what="the newest")
        assert chat.query(UserBlock).last().text == "question 499: read src/file499.py"


async def test_scrolling_up_reaches_the_first_message(offline_server, session_factory, tmp_path: Path):
    conversation_id = big_session(tmp_path, rounds=30)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: chat.query(EarlierMarker))
        pages = 0
        while chat.query(EarlierMarker):
            count = len(chat.children)
            chat.scroll_to(y=0, animate=False, immediate=True)
            await wait_until(pilot, lambda count=count: len(chat.children) != count, what="an older page")
            chat.scroll_end(animate=False, immediate=True)
            await pilot.pause()
            pages += 1
        assert 1 <= pages <= math.ceil((90 - FIRST_PAGE) / PAGE)  # some pages came with the first screen
        assert chat.query(UserBlock).first().text == "question 0: read src/file0.py"
        assert len(chat.query(UserBlock)) == 30 and len(chat.query(ToolBlock)) == 30


async def test_quitting_while_the_chat_asks_for_older_blocks_is_clean(offline_server, session_factory, tmp_path: Path):
    """The chat reaching its top just as the app quits: the older page is not loaded into a chat that is gone
    (the app once looked for the chat to load it and raised NoMatches on the way out)."""
    conversation_id = big_session(tmp_path, rounds=60)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: chat.max_scroll_y > 0 and not chat._older_wanted, what="a filled view")
        chat.scroll_to(y=0, animate=False, immediate=True)
        assert chat._older_wanted
        await chat.remove()
        await pilot.pause(0.1)  # (the old way raised NoMatches here, out of run_test)
    assert not chat.is_attached


async def test_a_tall_terminal_fills_itself_with_older_blocks(offline_server, session_factory, tmp_path: Path):
    """The first page is small; when it leaves the view unfilled, older pages follow without a scroll."""
    conversation_id = big_session(tmp_path, rounds=200)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 120)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: chat.max_scroll_y > 0, what="the view to fill")
        mounted = len(chat.children) - 1
        assert mounted > FIRST_PAGE and chat.query(EarlierMarker)  # more than the first page, far from all of it
        await pilot.pause(0.2)
        assert len(chat.children) - 1 == mounted  # and no more once the view is full


async def test_the_sessions_screen_lists_a_file_it_cannot_read(offline_server, session_factory, tmp_path: Path):
    """`xun sessions` lists an unreadable session file with its problem; the app's /sessions left it out, so
    a session seemed lost (round three's closing note). It is listed, says why, and Enter on it stays."""
    saved_session(tmp_path, "older-session", "what was I doing")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(140, 44)) as pilot:
        await turn(pilot, "hello")
        broken = app.session.store.root / "broken-session.json"
        broken.write_text('{"version": 1, "messages": [')
        await submit(pilot, "/sessions")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
        screen = app.screen
        table = screen.query_one(DataTable)
        assert table.row_count == 3
        row = dict(zip([column.key.value for column in table.ordered_columns], map(str, table.get_row_at(2))))
        assert row["session"] == "broken-s" and row["title"].startswith("cannot read:")
        assert "1 unreadable" in str(screen.query_one("#sessions-box").border_title)
        table.move_cursor(row=2)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen is screen and app.conversation.conversation_id != "broken-session"


async def test_at_60x20_the_sessions_list_fits_with_a_short_time(offline_server, session_factory, tmp_path: Path):
    """Newcomer trial D, finding 17: at 60x20 the "updated" column read "2026-12-05 11" (the minutes cut
    by the box's edge, no ellipsis), the same for every session of the day."""
    saved_session(tmp_path, "older-session", "what was I doing with that long title of mine")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(60, 20)) as pilot:
        await turn(pilot, "hello")
        await submit(pilot, "/sessions")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the sessions screen")
        table = app.screen.query_one(DataTable)
        await pilot.pause()
        keys = [column.key.value for column in table.ordered_columns]
        assert "updated" in keys
        box = app.screen.query_one("#sessions-box")
        assert table.virtual_size.width <= table.scrollable_content_region.width, "no column cut by the box"
        assert table.region.right <= box.content_region.right, (table.region, box.content_region)
        for i in range(table.row_count):
            updated = str(table.get_row_at(i)[keys.index("updated")])
            assert len(updated) == 5 and updated[2] == ":", updated  # saved today: "11:29"


def test_a_moment_is_as_short_as_tells_it_apart():
    import time

    from xun.tui.format import local_moment

    now = time.mktime((2026, 12, 5, 11, 45, 0, 0, 0, -1))
    assert local_moment(time.mktime((2026, 12, 5, 11, 29, 0, 0, 0, -1)), now) == "11:29"
    assert local_moment(time.mktime((2026, 12, 4, 9, 5, 0, 0, 0, -1)), now) == "Dec 04 09:05"
    assert local_moment(time.mktime((2025, 12, 31, 23, 0, 0, 0, 0, -1)), now) == "2025-12-31"


async def test_up_in_a_resumed_session_recalls_its_own_prompts_summarised_ones_too(offline_server, session_factory):
    """Trial F #29: after a resume, Up recalled nothing; the session's prompts are the prompt's history, oldest
    first, those a summary took out of the context included (read from the offload log)."""
    first = session_factory(offline_server, "auto_compact.summary_keep_max=2")
    app = XunApp(first)
    async with app.run_test(size=(100, 30)) as pilot:
        for text in ("write 400 tokens", "write 410 tokens", "write 420 tokens"):
            await turn(pilot, text)
        await finish(pilot, lambda: pilot.press("f5"))
        assert sum(msg.role == "user" for msg in first.conversation.messages) < 3, "a prompt was summarised"
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.return_code is not None)
    first.close()
    again = XunApp(session_factory(offline_server, resume=first.conversation.conversation_id))
    async with again.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: again.main.prompt.prompt_history, what="the resumed prompts")
        await turn(pilot, "write 30 tokens")
        recalled = []
        for _ in range(5):
            await pilot.press("up")
            recalled.append(again.main.prompt.text)
        assert recalled == [
            "write 30 tokens",
            "write 420 tokens",
            "write 410 tokens",
            "write 400 tokens",
            "write 400 tokens",
        ], recalled
