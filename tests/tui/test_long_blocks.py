"""Blocks of any length: a 50,000-line prompt, an 800k-character reply, tool result or call draws only a
bounded part in the chat (its first and last lines and a fold line), and the whole text is one click, Enter
or `o` away, in a reader that renders only the rows in view; `/render` still exports it whole. How long a
resize takes with such blocks is in `tests/benchmarks/bench_long_session.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textual.geometry import Region

from xun.context.sessions import SessionStore
from xun.tui.app import XunApp
from xun.tui.folding import HEAD_CHARS, HEAD_LINES, TAIL_CHARS, TAIL_LINES, fold, markdown_fold
from xun.tui.screens.reader import ReaderScreen
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.readable_text import ReadableText
from xun.tui.widgets.text_pager import TextPager
from xun.tui.widgets.user_block import UserBlock

from .helpers import session_ready, submit, turn, wait_idle, wait_until
from .terminal import Terminal, terminal  # noqa: F401 - a fixture

# ruff: noqa: F811 - the tests take the imported `terminal` fixture as a parameter

PASTE = "\n".join(f"pasted line {n} of 50000" for n in range(50_000))
RESULT = "".join(f"word{n} " for n in range(100_000))  # ~790k characters on one line
REPLY = "The file holds these words:\n\n" + "".join(f"term{n} " for n in range(100_000)) + "\n\nThat is all."


def bounded(widget) -> bool:
    """Whether `widget` takes no more rows than a folded text can (its head and tail, each line of them cut at
    its width, its fold line and border): the whole of any of these texts takes thousands of rows."""
    most = HEAD_LINES + TAIL_LINES + (HEAD_CHARS + TAIL_CHARS) // max(1, widget.size.width - 2) + 10
    return 0 < widget.outer_size.height <= most


def long_session(workdir: Path) -> str:
    """A saved session whose first turn holds a 50,000-line paste, a call with 800k characters of result and
    an 800k-character reply, then a short turn."""
    store = SessionStore(workdir)
    conversation = store.new()
    conversation.add_user_message(PASTE)
    conversation.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_big",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": "words.txt"})},
                }
            ],
        }
    )
    conversation.add_tool_result("call_big", RESULT)
    conversation.add_agent_message({"role": "assistant", "content": REPLY})
    conversation.add_user_message("and now a short question")
    conversation.add_agent_message({"role": "assistant", "content": "a short answer"})
    store.save(conversation)
    return conversation.conversation_id


def drawn_rows(widget) -> list[str]:
    """The rows `widget` draws, border and all."""
    width, height = widget.region.size
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, width, height))]


async def loaded(pilot, app: XunApp) -> None:
    await session_ready(pilot, app)
    await wait_until(
        pilot,
        lambda: any(block.text == PASTE for block in app.main.chat.query(UserBlock)),
        what="the long turn in the chat",
    )


# ------------------------------------------------------------------------------------------ in the chat


async def test_a_resumed_session_draws_a_50000_line_paste_and_800k_reply_folded(
    offline_server, session_factory, tmp_path
):
    ident = long_session(tmp_path)
    app = XunApp(session_factory(offline_server, workdir=tmp_path, resume=ident))
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot, app)
        paste = next(block for block in app.main.chat.query(UserBlock) if block.text == PASTE)
        reply = next(block for block in app.main.chat.query(AssistantBlock) if block.text == REPLY)
        await wait_until(pilot, lambda: paste.size.height and reply.size.height, what="the blocks laid out")
        assert bounded(paste) and bounded(reply), (paste.outer_size, reply.outer_size)
        rows = drawn_rows(paste)
        assert "pasted line 0 of 50000" in rows[1] and "pasted line 49999 of 50000" in rows[-2]  # inside its border
        assert any("⋯ 49,950 more lines" in row for row in rows), rows
        shown = " ".join(" ".join(drawn_rows(child)) for child in reply.children)
        assert "The file holds these words" in shown and "That is all." in shown and "more characters" in shown
        await pilot.resize_terminal(70, 30)  # folded again at the new width, still bounded
        await wait_until(pilot, lambda: paste.size.width < 70, what="the chat laid out at the new width")
        await pilot.pause()
        assert bounded(paste) and bounded(reply), (paste.outer_size, reply.outer_size)


async def test_enter_on_a_folded_prompt_opens_it_whole_in_a_reader_that_draws_only_its_view(
    offline_server, session_factory, tmp_path
):
    ident = long_session(tmp_path)
    app = XunApp(session_factory(offline_server, workdir=tmp_path, resume=ident))
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot, app)
        paste = next(block for block in app.main.chat.query(UserBlock) if block.text == PASTE)
        app.main.chat.focus()
        app.main.chat.select(paste)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReaderScreen), what="the reader")
        pager = app.screen.query_one(TextPager)
        await wait_until(pilot, lambda: pager.row_count > 0, what="the reader laid out")
        assert pager.text == PASTE and pager.line_count == 50_000
        assert pager.size.height < 40 and pager.virtual_size.height >= 50_000  # its rows are drawn as they come in view
        await pilot.press("end")
        await wait_until(
            pilot,
            lambda: "pasted line 49999 of 50000" in " ".join(drawn_rows(pager)),
            what="the paste's last line in view",
        )
        await pilot.press("c")
        assert app.clipboard == PASTE
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ReaderScreen), what="the reader closed")
        app.main.chat.focus()
        app.main.chat.select(next(block for block in app.main.chat.query(AssistantBlock) if block.text == REPLY))
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, ReaderScreen), what="the reply in the reader")
        assert app.screen.query_one(TextPager).text == REPLY


async def test_an_800k_tool_result_opens_whole_from_its_preview(offline_server, session_factory, tmp_path):
    ident = long_session(tmp_path)
    app = XunApp(session_factory(offline_server, workdir=tmp_path, resume=ident))
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot, app)
        block = app.main.chat.tool_block("call_big")
        assert block is not None and block.result_text == RESULT
        block.collapsed = False
        await wait_until(
            pilot,
            lambda: block.query(ReadableText) and block.query_one(".tool-result").size.height,
            what="the call opened",
        )
        view = block.query_one(".tool-result", ReadableText)
        assert view.whole == RESULT and bounded(view)
        assert any("click or o opens it whole" in row for row in drawn_rows(view))
        chat = app.main.chat
        for _ in range(100):  # scrolled into view, then laid out: click the middle of what shows
            chat.scroll_to_widget(view, animate=False, immediate=True)
            await pilot.pause()
            seen = view.region.intersection(chat.content_region)
            middle = (seen.x - view.region.x + seen.width // 2, seen.y - view.region.y + seen.height // 2)
            if seen.area and await pilot.click(view, offset=middle):
                break
        else:
            raise AssertionError("the result's preview never took a click")
        await wait_until(pilot, lambda: isinstance(app.screen, ReaderScreen), what="the result in the reader")
        pager = app.screen.query_one(TextPager)
        assert pager.text == RESULT and pager.line_count == 1
        await wait_until(pilot, lambda: pager.row_count >= len(RESULT) // pager.size.width)


async def test_a_call_with_100k_characters_of_arguments_shows_them_folded(offline_server, session_factory, tmp_path):
    content = "\n".join(f"row {n} of the file" for n in range(5_000))
    store = SessionStore(tmp_path)
    conversation = store.new()
    conversation.add_user_message("write the file")
    conversation.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_write",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": "big.txt", "content": content}),
                    },
                }
            ],
        }
    )
    conversation.add_tool_result("call_write", "wrote big.txt")
    conversation.add_agent_message({"role": "assistant", "content": "done"})
    store.save(conversation)
    app = XunApp(session_factory(offline_server, workdir=tmp_path, resume=conversation.conversation_id))
    async with app.run_test(size=(100, 40)) as pilot:
        await session_ready(pilot, app)
        await wait_until(pilot, lambda: app.main.chat.tool_block("call_write") is not None, what="the call in the chat")
        block = app.main.chat.tool_block("call_write")
        block.collapsed = False
        await wait_until(
            pilot,
            lambda: block.query(".tool-arguments") and block.query_one(".tool-arguments").size.height,
            what="the call opened",
        )
        arguments = block.query_one(".tool-arguments", ReadableText)
        assert bounded(arguments) and arguments.whole is not None and json.loads(arguments.whole)["content"] == content
        assert "click opens it whole" in " ".join(row.strip() for row in drawn_rows(arguments))


async def test_render_still_exports_a_folded_block_whole(offline_server, session_factory, tmp_path):
    ident = long_session(tmp_path)
    app = XunApp(session_factory(offline_server, workdir=tmp_path, resume=ident))
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot, app)
        await submit(pilot, "/render long.md")
        exported = tmp_path / "long.md"
        await wait_until(pilot, exported.exists, what="the export")
        text = exported.read_text()
        assert "pasted line 25000 of 50000" in text and "word50000 " in text and "term99999" in text


@pytest.mark.long
async def test_a_streamed_reply_longer_than_the_fold_is_folded_when_complete(offline_server_factory, session_factory):
    app = XunApp(session_factory(offline_server_factory(tokens_per_second=100_000)))
    async with app.run_test(size=(100, 40)) as pilot:
        await turn(pilot, "write 30000 tokens", timeout=60)
        block = app.main.chat.query_one(AssistantBlock)
        assert len(block.text) > 100_000 and block.folded is not None and block.markdown is None
        await wait_until(pilot, lambda: block.size.height, what="the reply laid out")
        assert bounded(block)
        app.main.chat.focus()
        app.main.chat.select(block)
        await pilot.press("o")
        await wait_until(pilot, lambda: isinstance(app.screen, ReaderScreen), what="the reply in the reader")
        assert app.screen.query_one(TextPager).text == block.text


@pytest.mark.long
async def test_a_reply_streaming_past_the_fold_shows_only_its_first_and_newest_parts(
    offline_server_factory, session_factory
):
    # paced so that the reply is still streaming well after it passes the fold (about 20 s in all)
    app = XunApp(session_factory(offline_server_factory(tokens_per_second=3_000)))
    async with app.run_test(size=(100, 40)) as pilot:
        await submit(pilot, "write 60000 tokens")
        await wait_until(
            pilot,
            lambda: app.main.chat.reply is not None and len(app.main.chat.reply.text) > 100_000,
            timeout=60,
            what="the reply past the fold",
        )
        block = app.main.chat.reply
        await pilot.pause()
        shown = [part for part in block.sealed if part.display]
        assert len(block.sealed) > 3 and len(shown) == 2, (len(block.sealed), len(shown))
        assert any("characters folded while the reply streams" in row for row in drawn_rows(block._stream_fold))
        await wait_idle(pilot, timeout=120)
        assert block.folded is not None and block._stream_fold is None and not block.sealed[1:-2]
        assert bounded(block)


async def test_a_big_paste_sent_as_a_prompt_is_folded_in_the_chat(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 40)) as pilot:
        await turn(pilot, PASTE, timeout=60)
        block = next(block for block in app.main.chat.query(UserBlock) if block.text == PASTE)
        await wait_until(pilot, lambda: block.size.height, what="the prompt laid out")
        assert bounded(block) and block.folded is not None


def test_in_a_real_terminal_a_50000_line_paste_is_folded_and_read_whole(terminal, tmp_path: Path):
    """`xun --resume` of a session whose last prompt is a 50,000-line paste: the chat shows its first and
    last lines and the fold line; [ selects it, o opens the reader, End reaches its last lines, and a resize
    of the terminal with the paste mounted redraws at once."""
    workdir = tmp_path / "t0" / "work"  # where the fixture's first terminal runs
    workdir.mkdir(parents=True)
    store = SessionStore(workdir)
    conversation = store.new()
    conversation.add_user_message(PASTE)
    conversation.add_agent_message({"role": "assistant", "content": "a short answer"})
    store.save(conversation)
    term: Terminal = terminal("--resume", conversation.conversation_id, size=(120, 40))
    term.wait_for(
        lambda screen: "⋯ 49,950 more lines" in screen and "pasted line 49999 of 50000" in screen,
        what="the paste folded in the chat",
    )
    term.wait_for(lambda screen: screen.split("\n")[0].rstrip().endswith("ready"), what="the session ready")
    term.keys("BTab")
    term.wait_for(lambda screen: "Open/fold" in screen.rstrip().rsplit("\n", 1)[-1], what="the chat focused")
    term.keys("[")
    term.keys("[")
    term.keys("o")
    term.wait_for(lambda screen: "your message" in screen and "50,000 lines" in screen, what="the reader")
    term.keys("End")
    term.wait_for(
        lambda screen: "pasted line 49975 of 50000" in screen,  # folded in the chat: only the reader has it
        what="the paste's end in the reader",
    )
    term.keys("Escape")
    term.wait_for(lambda screen: "your message" not in screen, what="the reader closed")
    term.tmux("resize-window", "-t", term.name, "-x", "90", "-y", "30")
    term.wait_for(
        lambda screen: screen.split("\n")[1].rstrip().endswith("╮") and len(screen.split("\n")[1].rstrip()) == 90,
        timeout=10,
        what="the app redrawn at 90 columns",
    )
    term.keys("C-q")
    assert term.wait_exit() == 0


# ------------------------------------------------------------------------------------------ the helpers


def test_fold_keeps_the_first_and_last_lines_and_counts_the_rest():
    folded = fold(PASTE)
    assert folded is not None
    assert folded.head.splitlines() == [f"pasted line {n} of 50000" for n in range(HEAD_LINES)]
    assert folded.tail.splitlines() == [f"pasted line {n} of 50000" for n in range(50_000 - TAIL_LINES, 50_000)]
    assert folded.hidden_lines == 50_000 - HEAD_LINES - TAIL_LINES
    assert folded.head + PASTE[len(folded.head) : len(PASTE) - len(folded.tail)] + folded.tail == PASTE
    one_line = fold(RESULT)
    assert one_line is not None and len(one_line.head) + len(one_line.tail) <= 5_000
    assert fold("short\ntext") is None


def test_a_markdown_fold_closes_and_reopens_a_code_fence_it_cuts():
    text = "intro\n\n```python\n" + "\n".join(f"x = {n}" for n in range(3_000)) + "\n```\n\nthe end\n"
    folded = markdown_fold(text)
    assert folded is not None
    assert folded.head.rstrip().endswith("```") and folded.head.count("```") == 2
    assert folded.tail.startswith("```\n") and folded.tail.count("```") == 2


async def test_the_pager_folds_wide_characters_by_cells_and_keeps_its_top_line_on_resize():
    from textual.app import App, ComposeResult

    text = "\n".join(["漢字" * 30] + [f"line {n}" for n in range(1, 200)])

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield TextPager(text)

    app = Host()
    async with app.run_test(size=(20, 10)) as pilot:
        pager = app.query_one(TextPager)
        await wait_until(pilot, lambda: pager.row_count > 0)
        width = pager.scrollable_content_region.width
        rows = drawn_rows(pager)
        assert rows[0] == ("漢字" * 30)[: width // 2] and pager.row_count == -(-60 // (width // 2)) + 199
        pager.scroll_to(y=pager._starts[100], animate=False, immediate=True)
        await pilot.resize_terminal(30, 10)
        await wait_until(pilot, lambda: pager.scrollable_content_region.width != width)
        await pilot.pause()
        assert drawn_rows(pager)[0] == "line 100"
