"""Esc cancels a turn mid-stream (the reply so far is kept) or before any text (the prompt comes back);
tool confirmations in a modal."""

from __future__ import annotations

from pathlib import Path

from xun.agent.tools import Decision
from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.screens.confirm import ConfirmScreen
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock

from .helpers import finish, of_type, quit_app, session_ready, submit, turn, wait_until


async def armed(pilot) -> None:
    """Until the confirmation takes answers (keys typed ahead are ignored for a moment)."""
    await wait_until(pilot, lambda: getattr(pilot.app.screen, "armed", False), what="the confirmation to take answers")


async def test_escape_mid_stream_keeps_the_reply_so_far_marked_cancelled(offline_server_factory, session_factory):
    server = offline_server_factory(tokens_per_second=200)
    app = XunApp(session_factory(server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "write 5000 tokens")
        await wait_until(
            pilot, lambda: app.main.chat.reply is not None and len(app.main.chat.reply.text) > 40, what="streaming"
        )
        assert app.work.busy == "turn"
        await finish(pilot, lambda: pilot.press("escape"))

        ended = of_type(seen, m.TurnEnded)[-1]
        assert ended.status == "cancelled" and ended.restored_prompt is None
        last = app.conversation.messages[-1]
        assert last.raw["content"].endswith("[cancelled by the user]"), "the partial reply is kept in the session"
        reply = app.main.chat.query(AssistantBlock).last()
        assert reply.has_class("-cancelled") and reply.text == last.raw["content"]
        assert [b.text for b in app.main.chat.query(UserBlock)] == ["write 5000 tokens"]
        notices = list(app.main.chat.query(NoticeBlock))
        assert notices[-1].level == "cancelled" and "reply so far is kept" in notices[-1].text
        assert app.main.prompt.text == "" and app.main.prompt.has_focus
        assert app.main.gauge.streaming_chars == 0
        assert app.main.header.status == "ready"

        await turn(pilot, "hello again")
        assert of_type(seen, m.TurnEnded)[-1].status == "ok"


async def test_escape_before_any_text_gives_the_prompt_back_before_the_queued_ones(
    offline_server_factory, session_factory
):
    """In the order typed (issue 25, newcomer finding 27): the prompt given back first, then the queued."""
    server = offline_server_factory(tokens_per_second=10, reasoning="reasoning_content")
    app = XunApp(session_factory(server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "write 5000 tokens")
        await submit(pilot, "queued after it")
        assert [text for text, _ in app.work.queued] == ["queued after it"]
        await wait_until(
            pilot,
            lambda: app.main.chat.reply is not None and app.main.chat.reply.reasoning is not None,
            what="reasoning",
        )
        await finish(pilot, lambda: pilot.press("escape"))
        assert app.main.prompt.text == "write 5000 tokens\nqueued after it"
        assert not app.work.queued


async def test_escape_before_any_text_gives_the_prompt_back_and_says_so_truly(offline_server_factory, session_factory):
    server = offline_server_factory(tokens_per_second=10, reasoning="reasoning_content")
    app = XunApp(session_factory(server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "write 5000 tokens")
        await wait_until(
            pilot,
            lambda: app.main.chat.reply is not None and app.main.chat.reply.reasoning is not None,
            what="reasoning",
        )
        await finish(pilot, lambda: pilot.press("escape"))
        ended = of_type(seen, m.TurnEnded)[-1]
        assert ended.status == "cancelled" and ended.restored_prompt == "write 5000 tokens"
        assert app.main.prompt.text == "write 5000 tokens"
        assert not app.main.chat.query(UserBlock)
        assert "prompt is back in the input" in list(app.main.chat.query(NoticeBlock))[-1].text
        assert not any(getattr(msg, "role", "") == "user" for msg in app.conversation.messages)

        # again, with new text typed in the input meanwhile: it stays, and the notice does not claim otherwise
        await submit(pilot, "write 5000 tokens")
        await wait_until(
            pilot,
            lambda: app.main.chat.reply is not None and app.main.chat.reply.reasoning is not None,
            what="reasoning",
        )
        await pilot.press("a", "b", "c")
        await finish(pilot, lambda: pilot.press("escape"))
        assert app.main.prompt.text == "abc"
        notice = list(app.main.chat.query(NoticeBlock))[-1].text
        assert "was not put back" in notice and "back in the input" not in notice


async def test_escape_in_the_same_instant_as_enter_leaves_the_app_ready(offline_server, session_factory):
    """Esc handled before the turn's worker ever ran (Enter and Esc in one read, as a pasted or scripted
    burst of keys delivers them): the worker is cancelled before its first step, so nothing inside it
    can say the work is over; the app must still become ready, with the prompt back."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await session_ready(pilot, app)
        await app.send_prompt("hello there")
        assert app.work.busy == "turn"
        app.action_cancel_turn()  # before any await: the worker's task has not started yet
        await wait_until(pilot, lambda: app.work.busy is None, what="the app to be ready again")
        assert app.main.header.status == "ready"
        assert app.work.finished == 1
        assert not any(getattr(msg, "text", None) == "hello there" for msg in app.conversation.messages)
        assert app.main.prompt.text == "hello there", "the unsent prompt is back in the input"
        assert not app.main.chat.query(UserBlock), "and not in the chat"
        app.main.prompt.clear()
        await finish(pilot, lambda: submit(pilot, "read nothing, just answer"))
        assert app.conversation.messages[-1].role == "assistant", "the next prompt is answered"


async def test_escape_does_nothing_when_idle(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.check_action("cancel_turn", ()) is False
        await pilot.press("escape")
        assert app.work.busy is None and app.work.finished == 0


async def test_a_denied_command_is_not_run(offline_server, session_factory, tmp_path: Path):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "run `touch made-by-command`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        assert screen.request.tool == "run_command"
        assert "touch made-by-command" in screen.request.title
        assert app.main.header.status == "waiting for you"
        assert app.check_action("compact", ()) is False, "main-screen keys are off under a modal"
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("n"))

        assert not (tmp_path / "made-by-command").exists()
        block = app.main.chat.query_one(ToolBlock)
        assert block.state == "denied" and "denied" in block.title
        assert app.main.chat.query(AssistantBlock), "the model answered after the refusal"


async def test_allow_once_and_allow_for_the_session(offline_server, session_factory, tmp_path: Path):
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "write hello to first.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        assert app.screen.request.kind == "new_file"
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("y"))
        assert (tmp_path / "first.txt").read_text() == "hello"

        await submit(pilot, "write again to second.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the second confirmation")
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("s"))
        assert (tmp_path / "second.txt").read_text() == "again"
        assert len(of_type(seen, m.ConfirmationAsked)) == 2
        notices = [block.text for block in app.main.chat.query(NoticeBlock)]
        assert any(text.startswith("write_file is allowed without asking") for text in notices), notices

        await turn(pilot, "write more to third.txt")
        assert (tmp_path / "third.txt").read_text() == "more"
        assert len(of_type(seen, m.ConfirmationAsked)) == 2, "allowed for the session: not asked again"


async def test_cancelling_while_asked_closes_the_modal(offline_server, session_factory, tmp_path: Path):
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "run `touch never`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        asked = of_type(seen, m.ConfirmationAsked)[-1]
        await finish(pilot, lambda: app.action_cancel_turn())
        assert not isinstance(app.screen, ConfirmScreen)
        assert asked.answer.cancelled()
        assert of_type(seen, m.TurnEnded)[-1].status == "cancelled"
        assert not (tmp_path / "never").exists()


async def test_the_buttons_answer_too(offline_server, session_factory, tmp_path: Path):
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "run `touch by-button`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await armed(pilot)
        await finish(pilot, lambda: pilot.click("#allow_once"))
        assert of_type(seen, m.ConfirmationAsked)[-1].answer.result() is Decision.ALLOW_ONCE
        assert (tmp_path / "by-button").exists()


async def test_escape_at_a_confirmation_denies_and_stops_the_turn(offline_server, session_factory, tmp_path: Path):
    """Issue 25, a newcomer's trial: a model asks again for what was denied (the offline planner does, by
    design), so `n` brought the same dialog back each time and Esc only denied: no way out but to allow or
    quit. Esc denies and stops the turn, at once (no key guard: nobody types Esc inside a sentence)."""
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "append the numbers 1 to 60 to steps.txt")
        for count, key in ((1, "y"), (2, "y"), (3, "n")):
            await wait_until(
                pilot,
                lambda: len(of_type(seen, m.ConfirmationAsked)) == count and isinstance(app.screen, ConfirmScreen),
                what=f"confirmation {count}",
            )
            await armed(pilot)
            await pilot.press(key)
        await wait_until(
            pilot,
            lambda: len(of_type(seen, m.ConfirmationAsked)) == 4 and isinstance(app.screen, ConfirmScreen),
            what="the same call again",
        )
        assert "echo 3" in app.screen.request.title
        await finish(pilot, lambda: pilot.press("escape"))  # before the dialog takes answers, too
        await pilot.pause(0.5)
        assert not isinstance(app.screen, ConfirmScreen) and app.work.busy is None
        assert len(of_type(seen, m.ConfirmationAsked)) == 4, "no dialog after Esc"
        assert of_type(seen, m.TurnEnded)[-1].status == "cancelled"
        assert (tmp_path / "steps.txt").read_text().split() == ["1", "2"]
        assert app.main.prompt.has_focus
        states = [block.state for block in app.main.chat.query(ToolBlock)]
        assert states == ["done", "done", "denied", "cancelled"], "no block left 'running…' after the turn"
        sent = [msg.completion_param() for msg in app.conversation.messages]
        calls = [call["id"] for msg in sent if msg["role"] == "assistant" for call in msg.get("tool_calls") or []]
        answered = {msg["tool_call_id"] for msg in sent if msg["role"] == "tool"}
        assert calls and set(calls) <= answered, "every call in the context has its result"

        # the call stopped at its dialog is recorded as not run: asked again, the model goes on from it
        await submit(pilot, "append the numbers 1 to 60 to steps.txt")
        await wait_until(
            pilot,
            lambda: len(of_type(seen, m.ConfirmationAsked)) == 5 and isinstance(app.screen, ConfirmScreen),
            what="the next confirmation",
        )
        assert "echo 3 " in app.screen.request.title, "the stopped step was taken for done (a newcomer's trial)"
        await finish(pilot, lambda: pilot.press("escape"))


async def test_the_keys_scroll_a_long_diff_from_the_dialog_as_it_opens(offline_server, session_factory, tmp_path: Path):
    """A newcomer's trial: PageDown and End did nothing until Tab reached the diff (600 lines to approve,
    6 seen)."""
    (tmp_path / "step1.txt").write_text("".join(f"old content line {i}\n" for i in range(200)))
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(60, 20)) as pilot:
        await submit(pilot, "write files step1 to step1 of 5000 characters")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        screen = app.screen
        preview = screen.query_one("#confirm-preview")
        await armed(pilot)
        assert screen.query_one("#deny").has_focus
        await pilot.press("pagedown")
        assert preview.scroll_y > 0, "PageDown scrolled the diff"
        await pilot.press("end")
        assert preview.scroll_y == preview.max_scroll_y > 0
        await pilot.press("home")
        assert preview.scroll_y == 0
        assert app.screen is screen, "the keys answered nothing"
        await finish(pilot, lambda: pilot.press("escape"))


async def test_tab_and_enter_at_a_confirmation_never_allow(offline_server, session_factory):
    """Trial G #18: Tab, Tab, Enter, meant to reach Deny, pressed "Allow once": the focus went on from the
    preview to the allow buttons, and the file was overwritten. Tab moves between the preview and Deny."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(60, 20)) as pilot:
        (app.workdir / "big.txt").write_text("keep me\n")
        await submit(pilot, "write changed to big.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await armed(pilot)
        focused = []
        for _ in range(4):
            await pilot.press("tab")
            focused.append(app.focused.id)
        assert "allow_once" not in focused and "allow_session" not in focused, focused
        await finish(pilot, lambda: pilot.press("enter"))
        assert (app.workdir / "big.txt").read_text() == "keep me\n"


async def test_a_very_long_command_leaves_its_preview_and_the_buttons_in_view(offline_server, session_factory):
    """Trial G #48: a 3,000-character command filled the dialog with its heading; the command box and the
    buttons were out of sight, where the user has to read what will run."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "run `echo " + "z" * 3000 + "`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await armed(pilot)
        screen = app.screen
        title = screen.query_one("#confirm-title")
        assert title.region.height <= 3 and str(title.render()).endswith("…")
        preview = screen.query_one("#confirm-preview")
        assert preview.region.height >= 3
        for button in ("#allow_once", "#deny"):
            region = screen.query_one(button).region
            assert region.height and region.bottom <= 24, (button, region)
        await finish(pilot, lambda: pilot.press("n"))


async def test_a_denied_call_still_reads_denied_after_a_resume(offline_server, session_factory):
    """Trial F #16: `· denied ·` live, `· done ·` once resumed (the result was read back without its state)."""
    from xun.agent.tools.toolbox import ERROR_PREFIX
    from xun.tui.widgets.tool_block import DECLINED_RESULT

    first = session_factory(offline_server)
    app = XunApp(first)
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write no to no.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await armed(pilot)
        await pilot.press("n")
        await wait_until(
            pilot,
            lambda: (
                app.work.busy is None
                or isinstance(app.screen, ConfirmScreen)
                and app.screen.armed
                and app.main.chat.query(ToolBlock).first().state == "denied"
            ),
            what="the denial",
        )
        if isinstance(app.screen, ConfirmScreen):  # the model asked again: stop there
            await finish(pilot, lambda: pilot.press("escape"))
        live = app.main.chat.query(ToolBlock).first()
        assert live.state == "denied"
        result = [m for m in app.conversation.messages if m.role == "tool"][0].raw["content"]
        assert result.startswith(DECLINED_RESULT) and DECLINED_RESULT.startswith(ERROR_PREFIX)
        await quit_app(pilot, app)
    first.close()
    again = XunApp(session_factory(offline_server, resume=first.conversation.conversation_id))
    async with again.run_test(size=(100, 30)) as pilot:
        await session_ready(pilot, again)
        assert again.main.chat.query(ToolBlock).first().state == "denied"
