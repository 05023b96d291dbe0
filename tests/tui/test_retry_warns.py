"""/retry drops the last reply: when tool calls in it wrote or ran something, it says which and that their
effects stay, and drops the reply only at a second /retry (trial 2, finding 10)."""

from __future__ import annotations

from xun.context.messages import RawOpenAIMessage
from xun.tui.app import XunApp
from xun.tui.screens.confirm import ConfirmScreen
from xun.tui.widgets.notice_block import NoticeBlock

from .helpers import finish, submit, turn, wait_until
from .test_cancel_and_confirm import armed


async def write_a_file(pilot, app: XunApp) -> None:
    """A turn whose write_file call ran (allowed once): a reply that changed things."""
    await submit(pilot, "write hello world to code.py")
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
    await armed(pilot)
    await finish(pilot, lambda: pilot.press("y"))


def tool_results(app: XunApp) -> list[str]:
    return [
        str(m.raw.get("content")) for m in app.conversation.messages if type(m) is RawOpenAIMessage and m.role == "tool"
    ]


async def test_retry_of_a_reply_that_wrote_a_file_warns_first_and_drops_it_at_the_second(
    offline_server, session_factory, tmp_path
):
    (tmp_path / "code.py").write_text("old\n")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await write_a_file(pilot, app)
        assert "hello world" in (tmp_path / "code.py").read_text()
        kept = list(app.conversation.messages)

        await submit(pilot, "/retry")
        await wait_until(
            pilot, lambda: any("/retry drops" in b.text for b in app.main.chat.query(NoticeBlock)), what="the warning"
        )
        warning = next(b.text for b in app.main.chat.query(NoticeBlock) if "/retry drops" in b.text)
        assert "write_file code.py" in warning and "stays" in warning and "/retry again" in warning
        assert app.work.busy is None and app.conversation.messages == kept, "nothing dropped, no new turn"

        await submit(pilot, "/retry")  # asked twice: the reply goes, the prompt is sent again
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the retried turn's confirmation")
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("n"))
        assert len(tool_results(app)) == 1 and "declined" in tool_results(app)[0]


async def test_retry_of_a_reply_whose_writes_were_refused_or_that_only_read_needs_no_warning(
    offline_server, session_factory, tmp_path
):
    (tmp_path / "a.py").write_text("x = 1\n")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "read a.py")
        await finish(pilot, lambda: submit(pilot, "/retry"))
        assert not any("/retry drops" in b.text for b in app.main.chat.query(NoticeBlock))

        await submit(pilot, "write hello world to b.py")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("n"))
        await submit(pilot, "/retry")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the retried turn's confirmation")
        assert not any("/retry drops" in b.text for b in app.main.chat.query(NoticeBlock))
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("n"))


async def test_revise_of_a_turn_that_wrote_a_file_warns_first_and_keeps_what_was_typed(
    offline_server, session_factory, tmp_path
):
    """/revise drops the prompt and its reply: it dropped a turn that had written a file without the warning
    /retry gives (round three's closing note). The new text typed after it waits in the input."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await write_a_file(pilot, app)
        kept = list(app.conversation.messages)

        await submit(pilot, "/revise write goodbye to code.py")
        await wait_until(
            pilot, lambda: any("/revise drops" in b.text for b in app.main.chat.query(NoticeBlock)), what="the warning"
        )
        warning = next(b.text for b in app.main.chat.query(NoticeBlock) if "/revise drops" in b.text)
        assert "write_file code.py" in warning and "/revise again" in warning
        assert app.work.busy is None and app.conversation.messages == kept, "nothing dropped, no new turn"
        assert app.main.prompt.text == "/revise write goodbye to code.py"

        await pilot.press("enter")  # asked twice: the turn goes, the new prompt is sent
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the revised turn's confirmation")
        await armed(pilot)
        await finish(pilot, lambda: pilot.press("n"))
        prompts = [m.text for m in app.conversation.messages if hasattr(m, "text") and m.role == "user"]
        assert prompts == ["write goodbye to code.py"]
