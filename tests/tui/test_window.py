"""The window in the app: a prompt that cannot fit comes back into the input with nothing sent, a session
left stuck by an unanswered oversized prompt gets out with /retry, and the gauge says where its window
came from. Against the offline server's llama.cpp profile (its window at /props, no usage in streams)."""

from __future__ import annotations

from xun.tui.app import XunApp

from .helpers import finish, submit, turn, wait_until

HUGE = "please look at all of this: " + "word " * 4000 + "and the end"


async def test_a_prompt_too_large_for_the_window_comes_back_into_the_input(offline_server_factory, session_factory):
    server = offline_server_factory(context_window=3000, profile="llamacpp")
    app = XunApp(session_factory(server))
    async with app.run_test(size=(120, 40)) as pilot:
        # The window is learnt by a worker and reaches the gauge in a message after it.
        await wait_until(pilot, lambda: "window 3k" in app.main.gauge.figures_text(), what="the window from /props")
        assert "the server's /props" in str(app.main.gauge.tooltip)
        await turn(pilot, "hello")
        assert "the server sends no counts" in app.main.gauge.detail_text()
        sent, messages = server.request_count, list(app.conversation.messages)
        await finish(pilot, lambda: submit(pilot, HUGE))
        assert server.request_count == sent, "nothing was sent"
        assert list(app.conversation.messages) == messages, "nothing was added to the session"
        assert app.main.prompt.text == HUGE
        notices = [n.text for n in app.main.chat.query("NoticeBlock")]
        assert any("does not fit the model's context window" in n and "3,000" in n for n in notices), notices
        assert any("back in the input" in n for n in notices)


async def test_retry_gets_a_stuck_session_out(offline_server_factory, session_factory):
    """A session an older xun left with an oversized prompt at its end: /retry neither sends it nor keeps
    it; the prompt comes back into the input, and the next prompt works."""
    server = offline_server_factory(context_window=3000, profile="llamacpp")
    session = session_factory(server)
    conversation = session.agent.conversation
    conversation.add_user_message("an earlier question")
    conversation.add_agent_message({"role": "assistant", "content": "an earlier answer"})
    conversation.add_user_message(HUGE)
    app = XunApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.agent.window.known, what="the window from /props")
        sent = server.request_count
        await finish(pilot, lambda: submit(pilot, "/retry"))
        assert server.request_count == sent
        assert conversation.messages[-1].role == "assistant" and app.main.prompt.text == HUGE
        app.main.prompt.clear()
        await turn(pilot, "a short question instead")
        assert conversation.messages[-1].role == "assistant" and server.request_count > sent
