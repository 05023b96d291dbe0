"""The chat mounts a bounded window of a session of any length: Home reaches the first prompt at once,
End the newest, every block shows exactly once on the way, and a reply streams below a view far up."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from xun.tui.app import XunApp
from xun.tui.chat_window import PAGE, WINDOW, Released, centred, messages_in, position_text, summarised
from xun.tui.transcript import OffloadedItem, SummaryItem, ToolItem, UserItem
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.chat_view import ChatView, EarlierMarker, LaterMarker
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock

from .helpers import turn, wait_until
from .long_sessions import long_session
from .terminal import Terminal


def window_rows(chat: ChatView) -> list[tuple[str, str, bool]]:
    """The blocks the window shows, in order: kind, what identifies it, dimmed or not."""
    rows = []
    for child in chat._window():
        dim = child.has_class("-summarised")
        if isinstance(child, UserBlock):
            rows.append(("user", child.text, dim))
        elif isinstance(child, ToolBlock):
            rows.append(("tool", child.arguments, dim))
        elif isinstance(child, AssistantBlock):
            rows.append(("assistant", child.text, dim))
        elif isinstance(child, SummaryDivider):
            rows.append(("divider", child.text, dim))
    return rows


def first_prompt(chat: ChatView) -> str:
    prompts = chat.query(UserBlock)
    return prompts.first().text if prompts else ""


def merged(seen: list, window: list, *, downward: bool) -> list:
    """`seen` with the window's new blocks added, after checking that the blocks both hold agree: a
    window that skipped or doubled a block at a page's edge fails here."""
    if not seen:
        return list(window)
    if downward:
        at = seen.index(window[0])
        overlap = seen[at:]
        assert window[: len(overlap)] == overlap, (overlap[-3:], window[: len(overlap)][-3:])
        return seen + window[len(overlap) :]
    at = seen.index(window[-1])
    overlap = seen[: at + 1]
    assert window[-len(overlap) :] == overlap, (overlap[:3], window[-len(overlap) :][:3])
    return window[: -len(overlap)] + seen


async def settled(pilot, chat: ChatView) -> None:
    await wait_until(
        pilot,
        lambda: not (chat._older_wanted or chat._newer_wanted or chat._loading_older),
        what="the window to settle",
    )
    await pilot.pause()


@contextlib.asynccontextmanager
async def resumed_long_session(offline_server, session_factory, tmp_path: Path, rounds: int):
    """The app on a resumed session of `rounds` rounds and two summaries, its newest page shown and the
    window settled: (app, pilot, chat)."""
    conversation_id = long_session(tmp_path, rounds, summaries=2)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: chat.query(EarlierMarker), what="the newest page")
        await settled(pilot, chat)
        yield app, pilot, chat


@contextlib.asynccontextmanager
async def opened_long_session(server, session_factory, tmp_path: Path):
    """The app on a resumed session of 500 rounds, once it is open: (app, pilot, chat)."""
    conversation_id = long_session(tmp_path, 500)
    app = XunApp(session_factory(server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        yield app, pilot, chat


@contextlib.asynccontextmanager
async def reply_streaming(server, session_factory, tmp_path: Path, prompt: str):
    """`opened_long_session`, `prompt` sent and its reply streaming: (app, pilot, chat)."""
    from .helpers import submit

    async with opened_long_session(server, session_factory, tmp_path) as (app, pilot, chat):
        await submit(pilot, prompt)
        await wait_until(pilot, lambda: chat.reply is not None and chat.reply.text, what="the reply streaming")
        yield app, pilot, chat


async def home_pressed(pilot, chat: ChatView) -> None:
    """Home in the chat, until the first prompt shows and the window settles."""
    chat.focus()
    await pilot.press("home")
    await wait_until(pilot, lambda: first_prompt(chat).startswith("question 0:"), what="the first prompt")
    await settled(pilot, chat)


def test_the_window_s_position_and_a_jump_s_page_are_counted_over_the_whole_session():
    lazy = OffloadedItem("log.md", None, 0, "c", condensed=400)
    above = [lazy, SummaryItem(400, 4, "log.md", "s"), UserItem("q", index=401)]
    assert position_text([], 30, []) == ""  # everything mounted: nothing to say
    assert position_text(above, 160, [UserItem("r")] * 10) == "blocks 403–562 of ~572"  # about: 400 unread
    assert position_text(above, 160, [UserItem("r")] * 10, counts={lazy: 300}) == "blocks 303–462 of 472"
    assert position_text([UserItem("q")], 2, [], later=3) == "blocks 2–3 of 6"
    assert centred(30_000, 0, 40) == (0, 40) and centred(30_000, 29_999, 40) == (29_960, 30_000)
    assert centred(30_000, 15_000, 40) == (14_987, 15_027) and centred(10, 5, 40) == (0, 10)
    assert messages_in(above) == 401 and messages_in([UserItem("q", index=5), UserItem("r", index=9)]) == 5


def test_a_block_released_from_the_window_is_dimmed_by_a_later_summary():
    released = Released(ToolItem("c1", "read_file", "{}", "x", 1), frozenset({"-done"}), (("state", "done"),))
    dim = summarised(released)
    assert dim.item.summarised and dim.classes == {"-done", "-summarised"} and dim.attributes == released.attributes
    divider = SummaryItem(1, 1, None, "s")
    assert summarised(UserItem("q")).summarised and summarised(divider) == divider


@pytest.mark.long
async def test_every_block_shows_once_between_home_and_end_with_a_bounded_window(
    offline_server, session_factory, tmp_path: Path
):
    rounds = 150  # 452 blocks: four and a half windows, 22 pages each way
    async with resumed_long_session(offline_server, session_factory, tmp_path, rounds) as (app, pilot, chat):
        await home_pressed(pilot, chat)
        assert chat.scroll_y == 0 and not chat.query(EarlierMarker) and chat.query(LaterMarker)
        assert chat.border_title.startswith("chat · blocks 1–")

        seen: list = []
        steps = 0
        while True:  # down to the newest, a page at a time, as scrolling down does
            assert len(chat._window()) <= WINDOW
            seen = merged(seen, window_rows(chat), downward=True)
            if chat.at_end:
                break
            chat.scroll_to(y=chat.max_scroll_y, animate=False, immediate=True)
            await settled(pilot, chat)
            steps += 1
            assert steps < 200, "the window never reached the newest"
        assert not chat.query(LaterMarker) and chat.query(EarlierMarker)
        assert chat.border_title == "chat · blocks " + chat.border_title.split("blocks ")[1]

        users = [text for kind, text, _ in seen if kind == "user"]
        assert users == [f"question {i}: read src/file{i}.py" for i in range(rounds)]
        assert sum(1 for kind, *_ in seen if kind == "tool") == rounds
        assert sum(1 for kind, *_ in seen if kind == "assistant") == rounds
        dividers = [i for i, row in enumerate(seen) if row[0] == "divider"]
        assert len(dividers) == 2 and len(seen) == 3 * rounds + 2
        # what the summaries took out is dimmed, what is in the context is not
        assert all(dim for kind, _, dim in seen[: dividers[-1]] if kind != "divider")
        assert not any(dim for _, _, dim in seen[dividers[-1] + 1 :])

        going_up: list = []
        steps = 0
        while True:  # and back up to the first prompt, releasing at the bottom
            assert len(chat._window()) <= WINDOW
            going_up = merged(going_up, window_rows(chat), downward=False)
            if not chat.older_count:
                break
            chat.scroll_to(y=0, animate=False, immediate=True)
            await settled(pilot, chat)
            steps += 1
            assert steps < 200, "the window never reached the first block"
        assert going_up == seen

        await pilot.press("end")
        await wait_until(pilot, lambda: chat.at_end, what="the newest")
        await settled(pilot, chat)
        assert chat.query(UserBlock).last().text == f"question {rounds - 1}: read src/file{rounds - 1}.py"
        assert chat.scroll_y == chat.max_scroll_y and len(chat._window()) <= WINDOW


async def test_home_shows_the_first_prompt_of_a_short_session_whose_summaries_are_unread(
    offline_server, session_factory, tmp_path: Path
):
    """A session that fits the window whole, two summaries' turns still unread in the offload log (one entry
    each above the window, dozens of blocks once read): one Home mounts every block, the first prompt on top."""
    rounds = 32
    async with resumed_long_session(offline_server, session_factory, tmp_path, rounds) as (app, pilot, chat):
        assert any(isinstance(entry, OffloadedItem) for entry in chat._above)
        await home_pressed(pilot, chat)
        assert chat.older_count == 0 and not chat.query(EarlierMarker) and chat.at_end
        users = [text for kind, text, _ in window_rows(chat) if kind == "user"]
        assert users == [f"question {i}: read src/file{i}.py" for i in range(rounds)]
        assert len(window_rows(chat)) == 3 * rounds + 2 <= WINDOW


def title_total(chat: ChatView) -> str:
    """The whole session's count of blocks the title gives (`~` when it is about)."""
    return chat.border_title.rsplit(" of ", 1)[1]


async def test_the_title_counts_the_blocks_a_turn_adds_at_the_newest(offline_server, session_factory, tmp_path: Path):
    """A turn run with the view at the newest adds its blocks to the window, and the title's total counts
    them (it stayed at the total the session opened with)."""
    async with resumed_long_session(offline_server, session_factory, tmp_path, 100) as (app, pilot, chat):
        await wait_until(pilot, lambda: not title_total(chat).startswith("~"), what="the summarised turns counted")
        before = int(title_total(chat).replace(",", ""))
        await turn(pilot, "hello")
        await wait_until(pilot, lambda: int(title_total(chat).replace(",", "")) == before + 2, what="prompt and reply")
        assert chat.border_title.endswith(f"–{before + 2:,} of {before + 2:,}")


async def test_the_title_counts_exactly_the_blocks_seen_from_home_to_end(
    offline_server, session_factory, tmp_path: Path
):
    """The turns two summaries took out are counted from the offload log off the event loop: from then on,
    at Home too (before any of them is shown), the title's total is the number of blocks the walk down
    to the newest shows, not an estimate from their messages."""
    rounds = 100
    async with resumed_long_session(offline_server, session_factory, tmp_path, rounds) as (app, pilot, chat):
        await wait_until(pilot, lambda: not title_total(chat).startswith("~"), what="the summarised turns counted")
        total = title_total(chat)
        await home_pressed(pilot, chat)
        assert chat.older_count == 0 and any(isinstance(entry, OffloadedItem) for entry in chat._below), (
            "summarised turns below the window, not read yet"
        )
        rest = next(entry for entry in chat._below if isinstance(entry, OffloadedItem))
        assert rest.resume_at is not None and rest.shown >= 40, "the first summary's turns read a page at a time"
        assert chat._below.index(rest) < 2 * PAGE, "and only the turns of its first page"
        assert title_total(chat) == total and chat.border_title.startswith("chat · blocks 1–")
        seen: list = []
        while True:
            seen = merged(seen, window_rows(chat), downward=True)
            if chat.at_end:
                break
            chat.scroll_to(y=chat.max_scroll_y, animate=False, immediate=True)
            await settled(pilot, chat)
        assert len(seen) == 3 * rounds + 2
        assert total == f"{len(seen):,}" == title_total(chat)


def test_home_reaches_the_first_prompt_in_one_press_in_a_real_terminal(tmp_path: Path):
    """5,000 messages, three quarters of them summarised into the offload log: Home shows the first prompt
    at once (it loaded one page a press: 740 presses at 20,000 messages), End the newest again."""
    long_session(tmp_path / "t0" / "work", 1250, summaries=3)
    term = Terminal(tmp_path / "t0", "--resume", "long-session", size=(160, 48))
    try:
        term.wait_for(
            lambda s: "question 1249: read" in s and "offline demo model" in s and "Ask the agent" in s,
            timeout=60,
            what="the session open at its newest turns",
        )
        term.keys("BTab")  # Shift+Tab: from the prompt to the chat
        term.wait_for(lambda s: "Previous block" in s, what="the chat focused")
        term.keys("Home")
        term.wait_for(
            lambda s: "question 0: read src/file0.py" in s and "chat · blocks 1–" in s,
            timeout=10,
            what="the first prompt, the title saying where it is",
        )
        term.keys("End")
        term.wait_for(
            lambda s: "question 1249: read" in s and "question 0: read" not in s, timeout=10, what="the newest"
        )
    finally:
        term.close()


async def test_a_jump_to_an_early_message_mounts_its_page_not_every_page_between(
    offline_server, session_factory, tmp_path: Path
):
    """/context's jump (and any other) to the second message of 2,000: its page is mounted at once, the
    window stays bounded, and the jump marks the block; End comes back to the newest."""
    async with opened_long_session(offline_server, session_factory, tmp_path) as (app, pilot, chat):
        await settled(pilot, chat)
        messages = app.conversation.messages
        prompt = next(i for i, message in enumerate(messages) if getattr(message, "text", "").startswith("question 1:"))
        block = await app.main.jump_to_message(prompt)
        assert isinstance(block, UserBlock) and block.text == "question 1: read src/file1.py"
        at_top = lambda widget: 0 <= widget.virtual_region.y - chat.scroll_y <= 1  # noqa: E731
        assert at_top(block), "scrolled to before the first frame of the new page is painted"
        assert chat.selected is block and block.has_class("-jump-target")
        await settled(pilot, chat)
        assert len(chat._window()) <= WINDOW and chat.query(LaterMarker)
        assert block.region.height and chat.screen.find_widget(block), "in view"
        tool = await app.main.jump_to_message(
            prompt + 4 * 249 + 2
        )  # the result of question 250's read_file: its tool block
        assert isinstance(tool, ToolBlock) and tool.call_id == "call_250"
        assert at_top(tool)
        await settled(pilot, chat)
        assert len(chat._window()) <= WINDOW
        chat.focus()
        await pilot.press("end")
        await wait_until(pilot, lambda: chat.at_end, what="the newest")
        assert chat.query(UserBlock).last().text == "question 499: read src/file499.py"


async def test_a_call_a_summary_took_out_is_shown_in_the_chat_from_the_offload_log(
    offline_server, session_factory, tmp_path: Path
):
    """A search hit or a recoverable result jumps the chat to its call: a summarised one is read from the
    offload log (only the parts until it is found), its page mounted, dimmed as summarised."""
    from xun.tui import messages as m

    conversation_id = long_session(tmp_path, 400, summaries=3)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat = app.main.chat
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        await settled(pilot, chat)
        app.post_message(m.ShowInChat("call_200"))  # early in the third summary's part: two unread parts just above it
        await wait_until(pilot, lambda: isinstance(chat.selected, ToolBlock), what="the call shown")
        assert chat.selected.call_id == "call_200" and chat.selected.is_attached
        chat.select(None)
        app.post_message(m.ShowInChat("call_3"))
        await wait_until(pilot, lambda: isinstance(chat.selected, ToolBlock), what="the call shown")
        block = chat.selected
        assert block.call_id == "call_3" and block.has_class("-summarised") and block.is_attached
        assert app.focused is chat and len(chat._window()) <= WINDOW
        app.post_message(m.ShowInChat("", "Human", "question 350: read src/file350.py"))
        await wait_until(pilot, lambda: isinstance(chat.selected, UserBlock), what="the prompt shown")
        assert chat.selected.text == "question 350: read src/file350.py"
        app.post_message(m.ShowInChat("call_nowhere"))
        await wait_until(
            pilot, lambda: any("not in the chat" in str(n.message) for n in app._notifications), what="the warning"
        )


async def test_g_on_a_compaction_log_row_shows_its_summary_divider_or_its_call_in_the_chat(
    offline_server, session_factory, tmp_path: Path
):
    """The compaction log's g: a summary row jumps the chat to that summary's divider (the second row to
    the second divider, its page mounted at once, the window bounded), a restore row to its call, and a row
    with no turn says so."""
    from xun.base.events import CompactionSkipped, ToolResultRestored
    from xun.context.sessions import SessionStore

    conversation_id = long_session(tmp_path, 400, summaries=3, logged=True)
    store = SessionStore(tmp_path)
    conversation = store.load(conversation_id)
    conversation.compaction_log += [
        ToolResultRestored(id="call_350", tokens_before=20_000, tokens_after=20_400).to_json(),
        CompactionSkipped(reason="below the threshold", trigger="manual").to_json(),
    ]
    store.save(conversation)
    app = XunApp(session_factory(offline_server, resume=conversation_id))
    async with app.run_test(size=(120, 40)) as pilot:
        chat, log = app.main.chat, app.main.log_pane
        await wait_until(pilot, lambda: app.session is not None and chat.query(EarlierMarker), what="the session")
        await settled(pilot, chat)
        assert [entry.kind for entry in log.entries] == ["summary"] * 3 + ["restore", "skipped"]
        second = app.conversation.summarizations[1]
        assert not any(
            isinstance(getattr(w, "chat_entry", None), SummaryItem) and w.chat_entry.time == second.time
            for w in chat._window()
        ), "the second divider is far above the window"
        log.focus()
        log.move_cursor(row=1)
        await pilot.press("g")
        await wait_until(pilot, lambda: isinstance(chat.selected, SummaryDivider), what="the divider shown")
        divider = chat.selected
        entry = divider.chat_entry
        assert (entry.item if isinstance(entry, Released) else entry).time == second.time
        await settled(pilot, chat)
        assert divider.is_attached and len(chat._window()) <= WINDOW and app.focused is chat
        assert divider.region.height and chat.screen.find_widget(divider), "in view"
        log.focus()
        log.move_cursor(row=3)
        await pilot.press("g")
        await wait_until(pilot, lambda: isinstance(chat.selected, ToolBlock), what="the restored call shown")
        assert chat.selected.call_id == "call_350" and chat.selected.is_attached
        log.focus()
        log.move_cursor(row=4)
        await pilot.press("g")
        await wait_until(
            pilot, lambda: any("no single turn" in str(n.message) for n in app._notifications), what="the toast"
        )


async def test_a_reply_streaming_below_the_view_waits_for_the_view(
    offline_server_factory, session_factory, tmp_path: Path
):
    """Scrolled up a few pages, the reply still mounted below the view: what streams waits, since each update
    would lay the screen out, unseen, and a key typed meanwhile would wait for it. End shows all of it at
    once, and from there the reply follows the stream again."""
    import asyncio

    server = offline_server_factory(tokens_per_second=100)  # streams for the whole test
    async with reply_streaming(server, session_factory, tmp_path, "write 100000 tokens") as (app, pilot, chat):
        reply = chat.reply
        await wait_until(pilot, lambda: reply.live.source, what="the reply shown")
        chat.focus()
        chat.scroll_to(y=chat.max_scroll_y - 3 * chat.size.height, animate=False, immediate=True)  # 3 pages up
        await settled(pilot, chat)
        below = reply.virtual_region.y >= chat.scroll_y + chat.scrollable_content_region.height
        assert reply.display and reply in chat._window() and below, "mounted below the view"
        shown = reply._flushed()
        await asyncio.sleep(1.0)  # five times FLUSH_EVERY
        assert len(reply.text) > len(shown) + 200, "it streamed"
        assert reply._flushed() == shown, "nothing written below the view"
        await pilot.press("end")
        streamed = len(reply.text)
        await wait_until(pilot, lambda: len(reply._flushed()) >= streamed, what="what streamed meanwhile")
        more = len(reply._flushed())
        await wait_until(pilot, lambda: len(reply._flushed()) > more, what="the reply following the stream")
        assert chat.scroll_y == chat.max_scroll_y or chat.is_anchored
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.work.busy is None, timeout=60, what="the turn cancelled")


async def test_a_reply_streams_below_a_view_far_up_and_is_there_at_end(
    offline_server_factory, session_factory, tmp_path: Path
):
    """Home while a reply streams: the reply is written into a hidden block below the window, which neither
    mounts a block nor changes while it streams; End shows the reply, whole, at the bottom."""
    from .helpers import idle

    server = offline_server_factory(tokens_per_second=10)  # the reply streams for seconds
    async with reply_streaming(server, session_factory, tmp_path, "tell me a long story") as (app, pilot, chat):
        chat.focus()
        await pilot.press("home")
        await wait_until(pilot, lambda: first_prompt(chat).startswith("question 0:"), what="the top")
        await settled(pilot, chat)
        assert chat.reply is not None and not chat.reply.display and chat.reply in chat._tail, "streaming, hidden"
        window = list(chat._window())
        await wait_until(pilot, lambda: idle(app), timeout=60, what="the reply to end")
        assert chat._window() == window, "nothing was mounted into the window, nothing left it"
        reply = app.conversation.messages[-1].raw["content"]
        await pilot.press("end")
        await wait_until(pilot, lambda: chat.at_end, what="the newest")
        await settled(pilot, chat)
        last = chat.query(AssistantBlock).last()
        assert last.display and last.text == reply
        assert chat.query(UserBlock).last().text == "tell me a long story"
        assert chat.scroll_y == chat.max_scroll_y and len(chat._window()) <= WINDOW
