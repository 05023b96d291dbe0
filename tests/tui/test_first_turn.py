"""The first turn, as a newcomer sees it: it took ~4 s before anything moved, with the chat and its footer
unchanged; now the chat says at once that the model has the prompt, and the footer counts the turn."""

from __future__ import annotations

import sys
import threading

from xun.tui import app_actions
from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.widgets.user_block import UserBlock
from xun.tui.widgets.waiting_line import WaitingLine

from .helpers import submit, wait_idle, wait_until


async def test_the_chat_says_the_turn_started_until_the_first_token(offline_server_factory, session_factory):
    server = offline_server_factory(faults="slow:0.5@1")  # the first reply is slow to come
    app = XunApp(session_factory(server))
    seen: list = []
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        await submit(pilot, "hello")
        await wait_until(pilot, lambda: app.main.chat.query(WaitingLine), what="the waiting line")
        assert not any(isinstance(message, m.ReplyText) for message in seen), "shown before the first token"
        children = list(app.main.chat.children)
        assert isinstance(children[-2], UserBlock) and isinstance(children[-1], WaitingLine)
        assert str(children[-1].render()).startswith("thinking… the model has the prompt")
        await wait_until(
            pilot, lambda: app.main.chat.reply is not None and app.main.chat.reply.text, what="the first token"
        )
        assert not app.main.chat.query(WaitingLine), "gone with the first token"
        await wait_idle(pilot)
        assert not app.main.chat.query(WaitingLine)


async def test_the_waiting_line_goes_when_a_tool_runs_or_the_turn_fails(
    offline_server_factory, session_factory, tmp_path
):
    (tmp_path / "notes.txt").write_text("a note\n")
    server = offline_server_factory(faults="500@2-9")  # the tool runs; the call after it fails
    app = XunApp(session_factory(server, "retry.attempts=1"))
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "read notes.txt")
        await wait_idle(pilot)
        assert not app.main.chat.query(WaitingLine)


async def test_the_chat_footer_counts_the_turn_while_it_runs(offline_server_factory, session_factory, tmp_path):
    """It counted only when the turn was over: a turn of tool calls showed "1 message" all along."""
    (tmp_path / "notes.txt").write_text("a note\n")
    server = offline_server_factory(faults="slow:0.5@2")  # the reply after the tool call is slow to come
    app = XunApp(session_factory(server))
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.main.chat.border_subtitle.startswith("0 messages in the context")
        await submit(pilot, "read notes.txt")
        # the prompt, the call and its result, while the model is asked again
        await wait_until(
            pilot,
            lambda: app.main.chat.border_subtitle.startswith("3 messages in the context"),
            what="the footer to count the tool round",
        )
        assert app.work.busy == "turn", "counted while the turn runs, not only after it"
        await wait_idle(pilot)
        assert app.main.chat.border_subtitle.startswith("4 messages in the context")


async def test_the_first_turn_imports_the_sdk_off_the_loop(offline_server, session_factory, monkeypatch):
    """The SDK's import (a second, several on a busy machine) froze the screen on the first Enter."""
    import openai

    real_import = app_actions.importlib.import_module
    threads: list[int] = []

    def import_module(name: str, *args):
        if name != "openai":
            return real_import(name, *args)
        threads.append(threading.get_ident())
        sys.modules["openai"] = openai
        return openai

    monkeypatch.delitem(sys.modules, "openai")
    monkeypatch.setattr(app_actions.importlib, "import_module", import_module)
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "hello")
        await wait_idle(pilot)
        assert "xun-offline here" in app.conversation.messages[-1].raw["content"], "the turn ran"
    assert threads and threading.main_thread().ident not in threads
