"""A prompt against the offline server over real HTTP: the streamed reply, reasoning, tool blocks, retries."""

from __future__ import annotations

from pathlib import Path

from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.prompt_input import TYPED_AHEAD_SECONDS
from xun.tui.widgets.reasoning_block import ReasoningBlock
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock

from .helpers import finish, idle, of_type, quit_app, session_ready, submit, turn, wait_until


def last_assistant_content(app: XunApp) -> str:
    for message in reversed(app.conversation.messages):
        raw = getattr(message, "raw", None)
        if raw and raw.get("role") == "assistant" and raw.get("content"):
            return raw["content"]
    raise AssertionError("no assistant reply in the conversation")


async def test_prompt_streams_the_reply_and_shows_tool_blocks(offline_server, session_factory, tmp_path: Path):
    (tmp_path / "notes.py").write_text("import os\n\nprint(os.getcwd())\n")
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await turn(pilot, "read notes.py and list .")

        blocks = list(app.main.chat.children)
        assert [type(b) for b in blocks] == [UserBlock, ToolBlock, ToolBlock, AssistantBlock]
        assert blocks[0].text == "read notes.py and list ."
        read, listing = blocks[1], blocks[2]
        assert (read.tool_name, listing.tool_name) == ("read_file", "list_directory")
        assert read.state == listing.state == "done"
        ended = {e.event.id: e.event for e in of_type(seen, m.ToolCallEnded)}
        assert read.result_chars == ended[read.call_id].result_chars > 0
        assert "read_file notes.py" in read.title and "chars" in read.title
        assert not read.query(".tool-result"), "the body is built when the block is first opened"
        read.collapsed = False
        await wait_until(pilot, lambda: read.query(".tool-result"), what="the opened tool block")
        assert "print(os.getcwd())" in str(read.query_one(".tool-result").render())
        assert '"path": "notes.py"' in str(read.query_one(".tool-arguments").render())

        reply = blocks[3]
        assert reply.text == last_assistant_content(app)
        assert reply.markdown.source == last_assistant_content(app)
        assert "read_file" in reply.markdown.source
        assert of_type(seen, m.ReplyText), "the reply was streamed as text deltas"
        assert [type(x) for x in of_type(seen, m.TurnBegan)] == [m.TurnBegan]
        assert of_type(seen, m.TurnEnded)[-1].status == "ok"
        # the gauge shows what the server reported after the last model call
        assert app.main.gauge.reported == app.conversation.total_tokens
        assert len(app.main.gauge.history) == 2  # one point per model call
        assert app.main.chat.border_subtitle.startswith(f"{len(app.conversation.messages)} messages in the context · ")
        assert app.main.chat.border_subtitle.endswith("% of the threshold"), (
            "the gauge in short, for when the side panel is hidden"
        )


async def test_a_long_streamed_reply_arrives_whole(offline_server_factory, session_factory):
    """Hundreds of deltas, batched by the bridge: the reply on screen is exactly the reply."""
    server = offline_server_factory(tokens_per_second=2000)
    app = XunApp(session_factory(server))
    seen: list = []
    async with app.run_test(size=(100, 30), message_hook=seen.append) as pilot:
        await turn(pilot, "write 600 tokens")
        content = last_assistant_content(app)
        assert len(content.split()) == 600
        reply = app.main.chat.query_one(AssistantBlock)
        assert reply.text == content
        assert reply.markdown.source == content
        texts = of_type(seen, m.ReplyText)
        assert texts and texts[-1].stream.written == len(texts[-1].stream.chunks) >= 600


async def test_each_update_of_a_streaming_reply_lays_the_screen_out_once(offline_server_factory, session_factory):
    """Each update of a streaming reply grows its paragraph (and the Markdown, and the block) by a line: the
    layout that measured them is the only one, the widgets do not ask for a second that changes nothing
    (13 updates cost 26 layouts); the gauge moving with the stream redraws its figures without one. Counted
    in the middle of the reply (its start and its end, the call's usage, lay out the panes as well); the
    chat's scrollbar appearing, once, narrows every block, which takes a layout of its own."""
    server = offline_server_factory(tokens_per_second=60)
    app = XunApp(session_factory(server))
    async with app.run_test(size=(100, 30)) as pilot:
        await session_ready(pilot, app)
        sources: list[str] = []

        def laid_out(_screen: object) -> None:
            reply = app.main.chat.reply
            if reply is not None and reply.markdown is not None and 100 <= len(reply.live.source) < 900:
                sources.append(reply.live.source)

        app.screen.screen_layout_refresh_signal.subscribe(app.screen, laid_out, immediate=True)
        await submit(pilot, "write 300 tokens")
        await wait_until(pilot, lambda: idle(app), timeout=30, what="the reply to end")
        updates = len(set(sources))
        assert updates >= 10, f"the reply was written in {updates} updates: too few to tell"
        assert len(sources) <= updates + 2, f"{len(sources)} layouts for {updates} updates of the reply"


def shown_lines(block: AssistantBlock) -> list[str]:
    """The reply's text as drawn, line by line, over all its widgets (sealed parts and the live Markdown)."""
    from textual.geometry import Region

    lines: list[str] = []
    for leaf in block.walk_children():
        if not leaf.children:
            width, height = leaf.size
            lines += [strip.text.strip() for strip in leaf.render_lines(Region(0, 0, width, height))]
    return [line for line in lines if line]


async def test_a_streamed_reply_longer_than_a_seal_wraps_as_one_paragraph(offline_server, session_factory):
    """Issue 25.10: one huge paragraph sealed at a space was drawn as two widgets wrapped apart, so the line
    before the cut ended short ("…two owl saw" / "one"); the finished reply wraps as a resumed one does."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "write 3100 tokens")  # just over SEAL_CHARS: the last flush seals it
        block = app.main.chat.query_one(AssistantBlock)
        content = last_assistant_content(app)
        assert block.text == content and "\n" not in content.strip()
        await wait_until(pilot, lambda: all(leaf.size.height for leaf in block.walk_children() if not leaf.children))
        lines = shown_lines(block)
        width = max(len(line) for line in lines)
        short = [
            (line, after) for line, after in zip(lines, lines[1:]) if len(line) + 1 + len(after.split()[0]) <= width
        ]
        assert not short, f"a line ends before the width ({width}) although the next word fits: {short[:3]}"
        assert " ".join(lines).split() == content.split()


def lines_cut_short(block: AssistantBlock) -> list[tuple[str, str]]:
    """Lines of a reply of one paragraph that end although the next line's first word would fit on them."""
    lines = shown_lines(block)
    width = max(len(line) for line in lines)
    return [(line, after) for line, after in zip(lines, lines[1:]) if len(line) + 1 + len(after.split()[0]) <= width]


async def test_a_reply_too_long_to_draw_again_joins_its_parts_at_any_width(
    offline_server_factory, session_factory, monkeypatch
):
    """Trial D #4: past REDRAW_WHOLE_CHARS a finished reply keeps its sealed parts, and each seal inside the
    one huge paragraph left a line ending short ("…one big red sun" / "set"). Seals are now cut where a line
    starts, so the parts join as the whole text wraps; after a resize the reply is drawn again as one."""
    from xun.tui.widgets import assistant_block

    monkeypatch.setattr(assistant_block, "REDRAW_WHOLE_CHARS", 1_000)
    app = XunApp(session_factory(offline_server_factory(tokens_per_second=10_000)))
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "write 12000 tokens")  # over a second: several flushes, each sealing
        block = app.main.chat.query_one(AssistantBlock)
        content = last_assistant_content(app)
        assert "\n" not in content.strip() and len(block.sealed) >= 2 and block.markdown is not None
        for size in ((80, 24), (60, 20), (160, 48)):
            await pilot.resize_terminal(*size)
            await wait_until(
                pilot, lambda: all(leaf.size.height for leaf in block.walk_children() if not leaf.children)
            )
            await pilot.pause()
            assert not (short := lines_cut_short(block)), f"at {size} a line ends short: {short[:3]}"
            assert " ".join(shown_lines(block)).split() == content.split()


async def test_a_reply_resized_while_it_streams_joins_its_parts_at_the_new_width(
    offline_server_factory, session_factory, monkeypatch
):
    """The parts sealed before a resize were cut where lines start at the old width: they are sealed again
    as one at the new width, and the seals after it are cut for it."""
    from textual.events import Resize
    from textual.geometry import Size

    from xun.tui.widgets import assistant_block

    monkeypatch.setattr(assistant_block, "REDRAW_WHOLE_CHARS", 1_000)
    app = XunApp(session_factory(offline_server_factory(tokens_per_second=8_000)))
    seal = AssistantBlock._seal
    resized: list[bool] = []

    async def seal_then_resize(block: AssistantBlock) -> None:  # the terminal shrinks after the first seal
        await seal(block)
        if block.sealed and not resized:
            resized.append(block.streaming)
            app._driver._size = Size(80, 24)  # as Pilot.resize_terminal does, from inside the stream
            app.post_message(Resize(Size(80, 24), Size(80, 24)))

    monkeypatch.setattr(AssistantBlock, "_seal", seal_then_resize)
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "write 16000 tokens")
        block = app.main.chat.query_one(AssistantBlock)
        assert resized == [True] and app.size == Size(80, 24)
        assert len(block.sealed) >= 2 and block.markdown is not None, "sealed again after the resize"
        await wait_until(pilot, lambda: all(leaf.size.height for leaf in block.walk_children() if not leaf.children))
        await pilot.pause()
        assert not (short := lines_cut_short(block)), f"a line ends short: {short[:3]}"
        assert " ".join(shown_lines(block)).split() == last_assistant_content(app).split()


async def test_reasoning_is_dimmed_and_folds_when_the_reply_is_in(offline_server_factory, session_factory):
    server = offline_server_factory(reasoning="reasoning_content")
    app = XunApp(session_factory(server))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "hello there")
        block = app.main.chat.query_one(AssistantBlock)
        reasoning = block.query_one(ReasoningBlock)
        assert reasoning.text
        assert reasoning.collapsed
        assert "reasoning" in reasoning.title
        assert reasoning.has_class("reasoning")


async def test_a_retry_discards_the_partial_reply(offline_server_factory, session_factory):
    """The stream drops mid-reply, the engine retries: only the complete second reply stays on screen."""
    server = offline_server_factory(faults="disconnect@1")
    app = XunApp(session_factory(server, "retry.backoff_base=0.01", "retry.backoff_max=0.02"))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "write 200 tokens")
        notices = [n for n in app.main.chat.query(NoticeBlock) if n.level == "retry"]
        assert len(notices) == 1 and "retrying (1/2)" in notices[0].text
        replies = list(app.main.chat.query(AssistantBlock))
        assert len(replies) == 1
        assert replies[0].text == last_assistant_content(app)
        assert len(replies[0].text.split()) == 200


async def test_an_error_turn_is_reported(offline_server_factory, session_factory):
    server = offline_server_factory(faults="500@1-9")
    app = XunApp(session_factory(server, "retry.attempts=1"))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "hello")
        errors = [n for n in app.main.chat.query(NoticeBlock) if n.level == "error"]
        assert errors and "500" in errors[0].text
        assert app.work.busy is None


async def test_a_failed_prompt_stays_in_the_session_and_comes_back_to_the_input(
    offline_server_factory, session_factory
):
    """Every attempt fails: the prompt is kept (in the saved session, and back in the input), the error is
    a toast and a notice; sending it again replaces the unanswered prompt instead of adding a second."""
    server = offline_server_factory(faults="500@1-2")
    session = session_factory(server, "retry.attempts=2", "retry.backoff_base=0.01", "retry.backoff_max=0.02")
    app = XunApp(session)
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "read notes.txt please")
        assert app.main.prompt.text == "read notes.txt please"
        assert [n for n in app.main.chat.query(NoticeBlock) if n.level == "error" and "500" in n.text]
        assert any(n.severity == "error" and "500" in n.message for n in app._notifications)
        saved = session.store.load(app.conversation.conversation_id)
        assert saved.messages[-1].text == "read notes.txt please"  # saved after the turn: nothing lost
        await pilot.press("enter")  # the same prompt again; the server answers now
        await wait_until(pilot, lambda: app.work.finished == 2, what="the second turn")
        users = [msg.text for msg in app.conversation.messages if msg.role == "user"]
        assert users == ["read notes.txt please"]
        assert app.agent.last_reply() and app.main.prompt.text == ""


async def test_a_resumed_session_whose_last_prompt_was_never_answered_offers_it_again(
    offline_server_factory, session_factory
):
    """Trial D #19: the server was down, xun quit, and the resumed session showed the unanswered prompt with
    an empty input and no word; the next prompt went after it, two user turns in a row. On resume it is back
    in the input, as it was before quitting, and sending it replaces the unanswered one."""
    from .helpers import wait_idle

    server = offline_server_factory(faults="500@1-2")
    first = session_factory(server, "retry.attempts=2", "retry.backoff_base=0.01", "retry.backoff_max=0.02")
    app = XunApp(first)
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "first prompt never answered")
        await quit_app(pilot, app)
    first.close()
    again = XunApp(session_factory(server, resume=first.conversation.conversation_id))
    async with again.run_test(size=(80, 24)) as pilot:
        await session_ready(pilot, again)
        assert again.main.prompt.text == "first prompt never answered"
        notice = again.main.chat.query(NoticeBlock).last().text
        assert "never answered" in notice and "back in the input" in notice, notice
        await pilot.press("enter")  # the server answers now
        await wait_until(pilot, lambda: again.work.finished == 1, what="the turn")
        await wait_idle(pilot)
        users = [msg.text for msg in again.conversation.messages if msg.role == "user"]
        assert users == ["first prompt never answered"], users
        assert again.agent.last_reply() and again.main.prompt.text == ""


async def test_a_replaced_unanswered_prompt_is_marked_in_the_chat(offline_server_factory, session_factory):
    """Trial F #25: the resumed unanswered prompt, replaced by another one, stayed in the chat as if the model
    had it; its block is dimmed and says "replaced, not sent"."""
    from .helpers import wait_idle

    server = offline_server_factory(faults="500@1-2")
    first = session_factory(server, "retry.attempts=2", "retry.backoff_base=0.01", "retry.backoff_max=0.02")
    app = XunApp(first)
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "my unanswered prompt")
        await quit_app(pilot, app)
    first.close()
    again = XunApp(session_factory(server, resume=first.conversation.conversation_id))
    async with again.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: again.main.prompt.text == "my unanswered prompt", what="the prompt back")
        await pilot.press("ctrl+u", "ctrl+u", *"a different prompt", "enter")
        await wait_until(pilot, lambda: again.work.finished == 1, what="the turn")
        await wait_idle(pilot)
        assert [msg.text for msg in again.conversation.messages if msg.role == "user"] == ["a different prompt"]
        blocks = list(again.main.chat.query(UserBlock))
        assert [(b.text, b.has_class("-replaced")) for b in blocks] == [
            ("my unanswered prompt", True),
            ("a different prompt", False),
        ]
        assert blocks[0].border_title == "you · replaced, not sent" and blocks[1].border_title == "you"


async def test_a_failed_prompt_and_a_queued_one_stay_two_prompts_in_the_order_typed(
    offline_server_factory, session_factory
):
    """The turn fails while a second prompt is queued: the failed one is back in the input, the queued one
    waits behind it (it was not merged into the input, before it); Enter sends them one after the other."""
    server = offline_server_factory(faults="500@1-2")
    session = session_factory(server, "retry.attempts=2", "retry.backoff_base=1", "retry.backoff_max=1")
    app = XunApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        for text in ("hello server", "hello again"):  # the second while the first one's model call is retried
            app.main.prompt.set_prompt(text)
            await pilot.press("enter")
        assert [text for text, _ in app.work.queued] == ["hello again"]
        await wait_until(pilot, lambda: app.work.finished == 1 and app.work.busy is None, what="the failed turn")
        await pilot.pause()
        assert app.main.prompt.text == "hello server", "the failed prompt alone, not merged with the queued one"
        assert [text for text, _ in app.work.queued] == ["hello again"], "still queued, behind it"
        notice = app.main.chat.query(NoticeBlock).last().text
        assert "1 queued prompt typed after it will go out once it is answered" in notice, notice
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.work.finished == 3 and app.work.busy is None, timeout=30, what="both turns")
        users = [msg.text for msg in app.conversation.messages if msg.role == "user"]
        assert users == ["hello server", "hello again"]
        assert not app.work.queued and app.main.prompt.text == ""


async def test_escape_takes_back_the_prompts_queued_behind_a_failed_one(offline_server_factory, session_factory):
    server = offline_server_factory(faults="500@1-2")
    session = session_factory(server, "retry.attempts=2", "retry.backoff_base=1", "retry.backoff_max=1")
    app = XunApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        for text in ("first", "second", "third"):
            app.main.prompt.set_prompt(text)
            await pilot.press("enter")
        await wait_until(pilot, lambda: app.work.finished == 1 and app.work.busy is None, what="the failed turn")
        await pilot.pause()
        assert app.main.prompt.text == "first"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.work.queued, what="the queue taken back")
        assert app.main.prompt.text == "first\nsecond\nthird", "in the order typed"


async def test_retry_after_a_failed_prompt_sends_it_once(offline_server_factory, session_factory):
    server = offline_server_factory(faults="500@1")
    app = XunApp(session_factory(server, "retry.attempts=1"))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "hello")
        assert app.main.prompt.text == "hello"
        await finish(pilot, app.commands.retry)
        assert app.main.prompt.text == ""
        assert [msg.role for msg in app.conversation.messages][-2:] == ["user", "assistant"]
        assert sum(msg.role == "user" for msg in app.conversation.messages) == 1


async def test_enter_sends_and_new_line_keys_do_not(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(100, 30), message_hook=seen.append) as pilot:
        # a Ctrl+J in the prompt's first half second is an Enter typed before the app started (it sends); typed
        # here, on a loaded machine, it came within that and sent "first"
        await wait_until(pilot, lambda: app.main.prompt.shown_for() >= TYPED_AHEAD_SECONDS, what="the prompt up")
        await pilot.press("f", "i", "r", "s", "t", "ctrl+j", "s", "e", "c", "o", "n", "d", "shift+enter", "x")
        assert app.main.prompt.text == "first\nsecond\nx"
        assert not of_type(seen, m.PromptSubmitted)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.work.finished == 1, what="the turn")
        assert of_type(seen, m.PromptSubmitted)[0].text == "first\nsecond\nx"
        assert app.main.chat.query_one(UserBlock).text == "first\nsecond\nx"
        assert app.main.prompt.text == ""


async def test_up_and_down_walk_the_prompt_history(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "one")
        await turn(pilot, "two")
        await pilot.press("d", "r", "a", "f", "t")
        await pilot.press("up")
        assert app.main.prompt.text == "two"
        await pilot.press("up")
        assert app.main.prompt.text == "one"
        await pilot.press("up")
        assert app.main.prompt.text == "one"
        await pilot.press("down")
        assert app.main.prompt.text == "two"
        await pilot.press("down")
        assert app.main.prompt.text == "draft"


async def test_slash_commands_complete_as_they_are_typed(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        menu = app.query_one("#command-menu")
        await pilot.press("/", "c", "o")
        assert menu.display
        assert [c.usage for c in menu.commands] == [
            "/compact [focus]",
            "/compact toolcall",
            "/compact preview",
            "/context",
            "/config",
        ]
        await pilot.press("down", "tab")
        assert app.main.prompt.text == "/compact toolcall"
        assert not menu.display
        app.main.prompt.load_text("")
        await pilot.press("/", "h", "i")
        assert [c.usage for c in menu.commands] == ["/history"]
        await pilot.press("enter")  # an unfinished command word: Enter completes it
        assert app.main.prompt.text == "/history"
        await pilot.press("escape")
        assert not menu.display
        assert app.work.busy is None


async def test_an_unknown_command_stays_in_the_prompt(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await submit(pilot, "/nope at all")
        await pilot.pause()
        assert app.main.prompt.text == "/nope at all"
        assert any("unknown command /nope" in n.message for n in app._notifications)
        assert not app.conversation.messages


async def test_a_double_slash_sends_a_prompt_that_starts_with_a_slash(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "//etc is a folder")
        assert app.main.chat.query_one(UserBlock).text == "/etc is a folder"


async def quit_by(pilot, app, *keys: str) -> None:
    """Press the keys at once, as a terminal sends them (Pilot's press waits for a calm screen after each:
    2 s apart during a fast tool loop, too slow for Ctrl+C twice)."""
    from textual import events

    for key in keys:
        app.post_message(events.Key(key, None))
    await wait_until(pilot, lambda: app.return_code is not None, what="the quit")


async def test_what_the_prompt_held_at_quit_comes_back_on_resume(offline_server, session_factory):
    """Trial G #12: a draft typed and not sent was lost at quit; and prompts queued behind a turn."""
    first = session_factory(offline_server)
    app = XunApp(first)
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "hello")
        app.main.prompt.set_prompt("some draft text\nwith a second line")
        await quit_by(pilot, app, "ctrl+q")
    first.close()
    again = XunApp(session_factory(offline_server, resume=first.conversation.conversation_id))
    async with again.run_test(size=(80, 24)) as pilot:
        await session_ready(pilot, again)
        assert again.main.prompt.text == "some draft text\nwith a second line"
        assert "back in the input, not sent" in again.main.chat.query(NoticeBlock).last().text
        assert [m.text for m in again.conversation.messages if m.role == "user"] == ["hello"]


async def test_a_prompt_waiting_for_the_ask_question_at_quit_comes_back_on_resume(offline_server, session_factory):
    """Trial F #26: Ctrl+Q while ask mode's question stood open: the prompt waiting for it was nowhere after
    the resume (not in the session, not in the input)."""
    from xun.tui.screens.consent import ConsentScreen

    settings = ("auto_compact.token_threshold=3000", "auto_compact.mode=ask", "auto_compact.ask_timeout=600")
    first = session_factory(offline_server, *settings)
    app = XunApp(first)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await turn(pilot, "write 800 tokens")
        await submit(pilot, "write 800 tokens, the fourth")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question")
        await quit_by(pilot, app, "ctrl+q")
    first.close()
    again = XunApp(session_factory(offline_server, *settings, resume=first.conversation.conversation_id))
    async with again.run_test(size=(120, 40)) as pilot:
        await session_ready(pilot, again)
        assert again.main.prompt.text == "write 800 tokens, the fourth"


async def test_a_turn_cut_off_between_its_tool_calls_and_its_reply_says_so_on_resume(
    offline_server_factory, session_factory
):
    """Trial F #6, G #16: Ctrl+C twice in the middle of a long tool loop; the resumed chat ended on the last
    call with no word that the turn had stopped, or how to go on."""
    server = offline_server_factory(tokens_per_second=2000)
    first = session_factory(server, "auto_confirm=true")
    app = XunApp(first)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "append the numbers 1 to 300 to steps.txt")
        await wait_until(
            pilot, lambda: sum(m.role == "tool" for m in app.conversation.messages) >= 5, what="some steps"
        )
        await quit_by(pilot, app, "ctrl+c", "ctrl+c")
    first.close()
    again = XunApp(session_factory(server, resume=first.conversation.conversation_id))
    async with again.run_test(size=(120, 40)) as pilot:
        await session_ready(pilot, again)
        notices = [block.text for block in again.main.chat.query(NoticeBlock)]
        assert any("stopped before the model's reply" in text for text in notices), notices


async def test_a_failed_attempts_text_goes_and_the_retry_line_stays_above_the_reply(
    offline_server_factory, session_factory
):
    """Trial F #37: the text a malformed stream sent stayed in the chat as if it were a reply, and the next
    attempt wrote into that block, above the "retrying" line, so the chat ended on "retrying…"."""
    from xun.tui.widgets.notice_block import NoticeBlock

    server = offline_server_factory(faults="malformed@1,malformed@2,malformed@3,malformed@4")
    settings = ("retry.attempts=3", "retry.backoff_base=0.01", "retry.backoff_max=0.02")
    app = XunApp(session_factory(server, *settings))
    async with app.run_test(size=(100, 30)) as pilot:
        await turn(pilot, "write 20 tokens")  # three malformed attempts: it fails
        assert not app.main.chat.query(AssistantBlock), "no failed attempt's text is left looking like a reply"
        await turn(pilot, "write 20 tokens")  # a malformed attempt, then a good one
        kinds = [type(child).__name__ for child in app.main.chat.children]
        last_retry = max(
            i
            for i, child in enumerate(app.main.chat.children)
            if isinstance(child, NoticeBlock) and child.text.startswith("retrying")
        )
        assert kinds[-1] == "AssistantBlock" and kinds.index("AssistantBlock") > last_retry, kinds
        assert len(app.main.chat.query(AssistantBlock)) == 1
