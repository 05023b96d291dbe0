"""Quitting from every state is clean (exit 0, the session saved); nothing typed ahead is lost."""

from __future__ import annotations

import json
import time

import pytest
from textual import events
from textual.messages import ExitApp

from xun.context.messages import UserMessage
from xun.tui.app import XunApp
from xun.tui.terminal_input import PASTE_QUIET_SECONDS
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.screens.confirm import ConfirmScreen

from .helpers import finish, submit, turn, wait_until
from .terminal import Terminal, terminal  # noqa: F401 - a fixture
# ruff: noqa: F811 - the tests take the imported `terminal` fixture as a parameter


async def quit_and_wait(pilot, seen: list, *keys: str) -> None:
    """Press the quit keys, then wait until the app handles its exit (what was queued before it is handled
    by then; the old quit let the cancelled turn post its last events after it, onto unmounted panes)."""
    await pilot.press(*keys)
    await wait_until(pilot, lambda: any(isinstance(message, ExitApp) for message in seen), what="the exit")


async def test_ctrl_q_while_a_reply_streams_exits_cleanly(offline_server_factory, session_factory):
    server = offline_server_factory(tokens_per_second=200)
    session = session_factory(server)
    app = XunApp(session)
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "write 5000 tokens")
        await wait_until(
            pilot, lambda: app.main.chat.reply is not None and len(app.main.chat.reply.text) > 40, what="streaming"
        )
        await quit_and_wait(pilot, seen, "ctrl+q")
    assert app.return_code == 0
    assert app.saved
    assert session.store.path_for(session.conversation.conversation_id).exists()


async def test_ctrl_c_twice_while_a_confirmation_is_open_exits_cleanly(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "run `touch never`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await quit_and_wait(pilot, seen, "ctrl+c", "ctrl+c")
    assert app.return_code == 0
    assert app.saved


@pytest.mark.parametrize("keys", [("ctrl+q",), ("ctrl+c", "ctrl+c")], ids=["ctrl+q", "ctrl+c twice"])
async def test_a_call_waiting_for_its_confirmation_at_quit_is_saved_with_its_not_run_result(
    offline_server, session_factory, keys
):
    """Trial D #23: Ctrl+Q while write_file waited for its confirmation saved the call without a result. The
    resumed session showed it "running…" for ever, and sent a call without its result (a 400 on OpenAI-style
    servers). Every call in the saved session has its result, and the file was not written."""
    session = session_factory(offline_server)
    app = XunApp(session)
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "write bye to bye.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await quit_and_wait(pilot, seen, *keys)
    assert app.return_code == 0 and app.saved
    saved = session.store.load(session.conversation.conversation_id)
    raws = [m.raw for m in saved.messages if hasattr(m, "raw")]
    calls = [call["id"] for raw in raws for call in raw.get("tool_calls") or ()]
    results = {raw["tool_call_id"]: raw["content"] for raw in raws if raw.get("role") == "tool"}
    assert calls and set(calls) == set(results), (calls, results)
    assert all("did not run" in results[ident] for ident in calls), results
    assert not (app.workdir / "bye.txt").exists()


async def test_esc_on_a_confirmation_after_a_summary_at_the_turns_start_answers_the_call(
    offline_server, session_factory
):
    """Trial D #7: when the turn began with a summary (the context was over the threshold), Esc on the
    confirmation left the call without a result: it showed "running…" for ever, /revise warned that it "may
    have changed things", and the saved session carried a call with no result. The cancel looked for calls
    from where the turn began, and the summary had moved that."""
    from xun.tui.widgets.tool_block import ToolBlock

    session = session_factory(offline_server, "auto_compact.summary_keep_max=2")
    app = XunApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await turn(pilot, "write 700 tokens")
        summaries = len(app.conversation.summarizations)
        app.agent.config.auto_compact.token_threshold = app.conversation.estimated_tokens() // 2  # over it now
        await submit(pilot, "write bye to bye.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        assert len(app.conversation.summarizations) > summaries, "the turn began with a summary"
        await finish(pilot, lambda: pilot.press("escape"))
        raws = [m.raw for m in app.conversation.messages if hasattr(m, "raw")]
        calls = [call["id"] for raw in raws for call in raw.get("tool_calls") or ()]
        results = {raw["tool_call_id"] for raw in raws if raw.get("role") == "tool"}
        assert calls and set(calls) <= results
        block = app.main.chat.query(ToolBlock).last()
        assert "running" not in block.title and "cancelled" in block.title, block.title
        assert app.commands._calls_that_acted() == []


async def test_typing_while_the_chat_has_the_keyboard_goes_to_the_prompt_and_is_sent(offline_server, session_factory):
    """Trial D #5: after Tab (the chat has the keyboard) a typed prompt and its Enter went nowhere. Typed in
    one burst too: the space and Enter are keys the chat binds, and they must reach the prompt."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "write 50 tokens")
        app.main.chat.focus()
        await pilot.pause()
        assert not app.main.prompt.has_focus
        await finish(pilot, lambda: pilot.press(*"hi there", "enter"))
        assert [m.text for m in app.conversation.messages if isinstance(m, UserMessage)][-1] == "hi there"
        app.main.chat.focus()
        await pilot.pause()

        def burst() -> None:  # as a terminal sends them: all queued before the first is handled
            for character in "write 20 tokens":
                app.post_message(events.Key("space" if character == " " else character, character))
            app.post_message(events.Key("enter", "\r"))

        await finish(pilot, burst)
        assert [m.text for m in app.conversation.messages if isinstance(m, UserMessage)][-1] == "write 20 tokens"


async def test_typing_and_pasting_at_60x20_with_the_panel_shown_brings_the_prompt_back(offline_server, session_factory):
    """Trial D #2, #5b: at 60x20 F4 puts the panel in place of the chat and the prompt; typed text was lost,
    and so was a paste while the chat had the keyboard. Both land in the prompt, which shows again."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(60, 20)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.main.prompt.has_focus, what="the prompt")
        await pilot.press("f4")
        await pilot.pause()
        assert app.main.gauge.has_focus and not app.main.prompt.region
        await pilot.press(*"abc")
        await pilot.pause()
        assert app.main.prompt.text == "abc" and app.main.prompt.has_focus and app.main.prompt.region
        app.main.chat.focus()
        await pilot.pause()
        app.post_message(events.Paste("".join(f"pasted line {i}\r" for i in range(40))))
        await wait_until(pilot, lambda: "pasted 40 lines" in app.main.prompt.text, what="the paste in the prompt")
        assert app.main.prompt.text.startswith("abc")


async def test_a_paste_while_a_confirmation_is_open_is_kept_aside_and_answers_nothing(offline_server, session_factory):
    """Trial D #24: typed text was kept aside and shown after the confirmation; a paste vanished."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "write yes to yes.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        app.post_message(events.Paste("y\ny\ns\nyes please"))
        await pilot.pause(0.3)
        assert isinstance(app.screen, ConfirmScreen), "a paste answers nothing"
        await finish(pilot, lambda: pilot.press("escape"))
        assert app.main.prompt.text == "y\ny\ns\nyes please", "once it closed, the paste is in the prompt, not sent"
        assert not (app.workdir / "yes.txt").exists()


@pytest.mark.parametrize("opener", ["f1", "/config"])
async def test_a_paste_into_a_dialog_with_no_field_for_it_goes_to_the_prompt(offline_server, session_factory, opener):
    """A paste into the help or /config, which have no field to take it, vanished (trial D, left last stop).
    It goes to the prompt behind the dialog, which says so; the dialog stays open."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.main.prompt.has_focus, what="the prompt")
        if opener.startswith("/"):
            await submit(pilot, opener)
        else:
            await pilot.press(opener)
        await wait_until(pilot, lambda: app.screen is not app.screen_stack[0], what="the dialog")
        dialog = app.screen
        app.post_message(events.Paste("first line\rsecond line\r"))
        await wait_until(pilot, lambda: "second line" in app.main.prompt.text, what="the paste in the prompt")
        assert app.screen is dialog
        assert any("prompt" in toast.message for toast in app._notifications), list(app._notifications)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.screen_stack[0], what="the dialog closed")
        assert app.main.prompt.text == "first line\nsecond line\n"


async def test_a_sentence_typed_at_a_confirmation_keeps_its_first_letter_when_it_is_an_answer_key(
    offline_server, session_factory
):
    # (and the first Ctrl+C at it says "Quit?": it showed nothing, and the second one quit: trial G #26)
    """Trial F #4: "yesterday was fun" typed in one burst at a confirmation that took answers was shown back
    as "esterday was fun": the "y" was no answer (the "e" after it disarmed the question first), and was
    kept nowhere."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        await submit(pilot, "run `echo hi`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.armed, what="armed")
        for character in "yesterday was fun":
            app.post_message(events.Key("space" if character == " " else character, character))
        await pilot.pause(0.3)
        assert isinstance(app.screen, ConfirmScreen), "a sentence answers nothing"
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: any(n.title == "Quit?" for n in app._notifications), what="the Quit? toast")
        await pilot.pause(1.0)
        app.main.prompt.insert("I said: ")  # typed before it opened (trial G #25): the sentence goes on after it
        await finish(pilot, lambda: pilot.press("n"))
        assert app.main.prompt.text == "I said: yesterday was fun"


async def test_keys_typed_at_once_after_esc_go_to_the_prompt_not_to_the_closing_dialog(offline_server, session_factory):
    """Trial F #24, G #14: Esc on F7's preview went on to the dialog behind the keys typed after it, which
    were lost there (or ran its keys: "s" summarises); and F7 pressed at once after an Esc at the prompt
    opened the preview, which the Esc then closed."""
    from xun.tui.screens.preview import PreviewScreen

    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 48)) as pilot:
        await turn(pilot, "hello")
        for key in ("escape", "f7"):
            app.post_message(events.Key(key, "\x1b" if key == "escape" else None))
        await wait_until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview")
        await pilot.pause(0.3)
        assert isinstance(app.screen, PreviewScreen), "the Esc typed before F7 closed it"
        for key in ("escape", *"yes please"):
            app.post_message(
                events.Key({"escape": "escape", " ": "space"}.get(key, key), "\x1b" if key == "escape" else key)
            )
        await wait_until(pilot, lambda: app.main.prompt.text == "yes please", what="the keys in the prompt")
        assert not isinstance(app.screen, PreviewScreen) and not app.conversation.summarizations


def test_esc_then_letters_at_once_in_a_real_terminal_close_the_preview_and_type(terminal):
    """The same in tmux, where the terminal sends ESC and the letters in one read: Textual took ESC and "y"
    for Alt+y, so the Esc was lost and the "s" of "yes" made a summary."""
    term = terminal("--set", "auto_compact.token_threshold=3000", size=(120, 40))
    term.wait_for(ready, what="the app")
    for turns in range(1, 4):
        term.type("write 800 tokens")
        term.keys("Enter")
        term.wait_for(
            lambda s: f"{2 * turns} messages in the context" in s and "ready" in s.splitlines()[0], what=f"turn {turns}"
        )
    term.keys("F7")
    term.wait_for(lambda s: "Summarise now" in s, what="the preview")
    term.keys("Escape")
    term.type("yes please")
    screen = term.wait_for(lambda s: "│ yes please" in s, what="the letters in the prompt")
    assert "Summarise now" not in screen and " summary " not in screen, screen


async def test_a_key_between_two_ctrl_c_cancels_the_quit(offline_server, session_factory):
    """Trial G #43: Ctrl+C, a few words typed, Ctrl+C: the app quit, the words with it."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.main.prompt.has_focus, what="the prompt")
        for key in ("ctrl+c", *"hi", "ctrl+c"):
            app.post_message(events.Key(key, None if key == "ctrl+c" else key))
        await pilot.pause(0.5)
        assert app.return_code is None and not app.quitting and app.main.prompt.text == "hi"
        assert any(n.title == "Quit?" for n in app._notifications), "the second Ctrl+C asks again"


async def test_an_edited_paste_marker_is_not_sent_without_its_paste(offline_server, session_factory):
    """Trial G #6: a letter typed into `[pasted 40 lines #1]`, or a Backspace at its end, and Enter sent the
    broken marker without the 40 lines, silently. It is not sent, and says why; deleted whole, the prompt goes
    without the paste."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.main.prompt.has_focus, what="the prompt")
        app.main.prompt.post_message(events.Paste("".join(f"line {i}\n" for i in range(40))))
        await wait_until(pilot, lambda: "[pasted 40 lines #1]" in app.main.prompt.text, what="the marker")
        await pilot.press("end", "backspace", "enter")
        await pilot.pause()
        assert app.main.prompt.text == "[pasted 40 lines #1", "not sent"
        assert any("was edited" in n.message for n in app._notifications)
        assert not [m for m in app.conversation.messages if m.role == "user"]
        await pilot.press("]", "enter")  # put back: sent with the paste
        await wait_until(pilot, lambda: app.work.finished == 1, what="the turn")
        [sent] = [m.text for m in app.conversation.messages if m.role == "user"]
        assert sent.count("line ") == 40


def ready(screen: str) -> bool:
    return "% of the threshold" in screen and "Ask the agent" in screen


def test_ctrl_q_while_a_reply_streams_in_a_real_terminal_exits_0_and_saves(terminal):
    term = terminal(env={"XUN_OFFLINE_FAULTS": "slow:0.3@1"})  # the first reply streams slowly
    term.wait_for(ready, what="the app")
    term.type("write 5000 tokens")
    term.wait_for(lambda s: "write 5000 tokens" in s, what="the typed prompt")
    term.keys("Enter")
    term.wait_for(lambda s: "streaming…" in s, what="the reply streaming")
    term.keys("C-q")
    assert term.wait_exit() == 0, term.screen()
    screen = term.screen()
    assert "Error" not in screen and "saved; continue it with: xun --resume" in screen, screen
    assert list((term.workdir / ".xun" / "sessions").glob("*.json"))


async def test_prompts_typed_in_one_burst_are_queued_and_sent_in_order(
    offline_server_factory, session_factory, tmp_path
):
    for i in (1, 2, 3):
        (tmp_path / f"mod{i}.py").write_text(f"x = {i}\n")
    server = offline_server_factory(faults="slow:1@1")  # the first turn is still running while the rest is typed
    app = XunApp(session_factory(server))
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        for line in ("read mod1.py", "read mod2.py", "read mod3.py"):
            await pilot.press(*line, "enter")
        assert app.work.busy == "turn"
        assert [text for text, _ in app.work.queued] == ["read mod2.py", "read mod3.py"]
        assert app.main.prompt.text == "", "nothing typed is left half-sent in the input"
        notices = [block.text for block in app.main.chat.query(NoticeBlock)]
        assert any(text.startswith("queued: read mod3.py") for text in notices), notices
        app.main.prompt.post_message(events.Paste("".join(f"pasted line {i}\n" for i in range(40))))  # trial G #23: a
        await wait_until(pilot, lambda: "pasted 40 lines" in app.main.prompt.text, what="the paste")  # big queued paste
        await pilot.press("enter")  # is not written out in full above the reply
        notices = [block.text for block in app.main.chat.query(NoticeBlock)]
        assert any(
            text.startswith("queued: pasted line 0 pasted line 1") and "(40 lines)" in text and len(text) < 400
            for text in notices
        ), notices
        await wait_until(pilot, lambda: app.work.finished == 4 and app.work.busy is None, timeout=30, what="four turns")
        prompts = [msg.text for msg in app.conversation.messages if isinstance(msg, UserMessage)]
        assert prompts[:3] == ["read mod1.py", "read mod2.py", "read mod3.py"] and prompts[3].count("pasted line") == 40
        assert not app.work.queued
        assert not [b for b in app.main.chat.query(NoticeBlock) if b.text.startswith("queued:")], (
            "sent: no longer queued"
        )


async def test_escape_takes_the_queued_prompts_back_into_the_input(offline_server_factory, session_factory):
    server = offline_server_factory(faults="slow:0.3@1")
    app = XunApp(session_factory(server))
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        await pilot.press(*"write 500 tokens", "enter")
        await pilot.press(*"second", "enter")
        await pilot.press(*"//third", "enter")
        assert [text for text, _ in app.work.queued] == ["second", "/third"]
        await pilot.press(*"typing")
        await wait_until(pilot, lambda: app.main.chat.reply is not None and app.main.chat.reply.text, what="the reply")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.work.busy is None, what="the cancel")
        assert app.main.prompt.text == "second\n//third\ntyping"
        assert not app.work.queued
        assert [msg.text for msg in app.conversation.messages if isinstance(msg, UserMessage)] == ["write 500 tokens"]


def test_a_large_bracketed_paste_from_a_real_terminal_is_one_marker_line(terminal):
    """tmux, like a terminal, sends the pasted lines ended by CR; 40 lines (with a final newline) are 40."""
    term = terminal(size=(120, 30))
    term.wait_for(ready, what="the app")
    term.paste("".join(f"pasted line {i}\n" for i in range(1, 41)))
    screen = term.wait_for(lambda s: "[pasted" in s, what="the paste marker")
    assert "[pasted 40 lines #1]" in screen, screen
    assert "pasted line 2" not in screen


async def test_a_long_one_line_paste_says_its_characters_and_is_sent_whole(offline_server, session_factory):
    """Trial G #17: one line of 40,000 characters showed as `[pasted 1 lines #1]`."""
    one_line = " ".join(f"word{i}" for i in range(6_000))[:40_000]
    some_lines = "".join(f"{i:04d} " + "x" * 994 + "\r" for i in range(5))
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        app.main.prompt.focus()
        app.main.prompt.post_message(events.Paste(one_line))
        await wait_until(
            pilot, lambda: app.main.prompt.text == "[pasted 40,000 characters #1]", what="the first marker"
        )
        await pilot.press(*" and ")
        app.main.prompt.post_message(events.Paste(some_lines))
        await wait_until(
            pilot,
            lambda: app.main.prompt.text.endswith(" and [pasted 5 lines, 5,000 characters #2]"),
            what="the second marker",
        )
        await pilot.press(*" and ")
        app.main.prompt.post_message(events.Paste(one_line))  # the same text again: its own marker
        await wait_until(
            pilot, lambda: app.main.prompt.text.endswith("[pasted 40,000 characters #3]"), what="the third"
        )
        await finish(pilot, lambda: pilot.press("enter"))
        sent = [msg.text for msg in app.conversation.messages if isinstance(msg, UserMessage)]
        assert sent == [f"{one_line} and {some_lines.replace(chr(13), chr(10))} and {one_line}"]


async def test_a_paste_counts_lines_and_ctrl_u_twice_clears_a_long_prompt(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        app.main.prompt.focus()
        app.main.prompt.post_message(events.Paste("".join(f"line {i}\r" for i in range(40))))
        await wait_until(pilot, lambda: app.main.prompt.text == "[pasted 40 lines #1]", what="the marker")
        await pilot.press("ctrl+u")
        assert app.main.prompt.text == ""
        await pilot.press(*"first", "shift+enter", *"second", "shift+enter", *"third")
        assert app.main.prompt.text == "first\nsecond\nthird"
        await pilot.press("ctrl+u")
        assert app.main.prompt.text == "first\nsecond\n", "the first Ctrl+U deletes to the start of the line"
        await pilot.press("ctrl+u")
        assert app.main.prompt.text == "", "at the start of a line it clears the whole prompt"


async def test_ctrl_z_brings_back_a_draft_ctrl_u_cleared(offline_server, session_factory):
    """Trial G #3: Ctrl+U twice cleared a three-line draft and Ctrl+Z could not bring it back (the clear reset
    the prompt's undo history); a paste marker undone back still sends what was pasted."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        app.main.prompt.focus()
        await pilot.press(*"first", "shift+enter", *"second", "shift+enter")
        app.main.prompt.post_message(events.Paste("".join(f"line {i}\r" for i in range(30))))
        await wait_until(pilot, lambda: app.main.prompt.text.endswith("[pasted 30 lines #1]"), what="the marker")
        draft = app.main.prompt.text
        await pilot.press("ctrl+u", "ctrl+u")
        assert app.main.prompt.text == ""
        for _ in range(3):
            if app.main.prompt.text == draft:
                break
            await pilot.press("ctrl+z")
        assert app.main.prompt.text == draft
        assert app.main.prompt.expanded(app.main.prompt.text) == "first\nsecond\n" + "".join(
            f"line {i}\n" for i in range(30)
        )


async def test_ctrl_u_twice_clears_one_long_line_wrapped_over_many_rows(offline_server, session_factory):
    """Newcomer trial (issue 25, finding 13): a pasted 3,000-character line wraps over dozens of rows, and
    each Ctrl+U deleted one wrapped row (41 presses to clear it). The line is the logical line."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        app.main.prompt.focus()
        await pilot.press(*"keep", "shift+enter")
        app.main.prompt.post_message(events.Paste("y" * 3000))
        await wait_until(pilot, lambda: app.main.prompt.text == "keep\n" + "y" * 3000, what="the pasted line")
        assert app.main.prompt.wrapped_document.height > 10, "the line is wrapped over many rows"
        await pilot.press("ctrl+u")
        assert app.main.prompt.text == "keep\n", "the first Ctrl+U deletes the whole logical line before the cursor"
        await pilot.press("ctrl+u")
        assert app.main.prompt.text == ""


async def test_the_palette_offers_cancel_only_while_something_runs(offline_server_factory, session_factory):
    app = XunApp(session_factory(offline_server_factory(faults="slow:0.5@1")))
    async with app.run_test(size=(120, 40)) as pilot:
        titles = lambda: {command.title for command in app.get_system_commands(app.screen)}  # noqa: E731
        assert "Cancel the turn" not in titles()
        await submit(pilot, "hello")
        assert app.work.busy == "turn" and "Cancel the turn" in titles()


async def test_a_manual_summary_that_leaves_the_context_over_the_threshold_says_so(offline_server, session_factory):
    """Issue 25: after a huge reply F5 went 74.5k -> 61.8k (309% of the threshold) without a word."""
    from .helpers import finish, turn

    app = XunApp(
        session_factory(
            offline_server,
            "auto_compact.token_threshold=2000",
            "auto_compact.summary_keep_max=2",
            "auto_compact.enabled=false",
        )
    )  # F5's summary alone
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            await turn(pilot, f"hello there {i}, " * 30)
        await turn(pilot, "write 3000 tokens")
        assert app.agent.request_tokens() > 2000
        await finish(pilot, lambda: pilot.press("f5"))
        assert app.conversation.summarizations
        assert app.agent.request_tokens() > 2000, "the kept reply alone is over the threshold"
        said = [b.text for b in app.main.chat.query(NoticeBlock) if "still over the threshold" in b.text]
        assert len(said) == 1, [b.text for b in app.main.chat.query(NoticeBlock)]
        assert "2 messages it kept" in said[0]
        # trial D #13: the advice fits what is there: no tool result to reclaim, and the one big reply is the cause
        assert "F6" not in said[0] and "/compact FOCUS" not in said[0], said[0]
        assert "without the last reply" in said[0] and "/retry asks for it again" in said[0], said[0]


def test_a_read_only_session_says_so_on_screen_and_at_quit_it_is_not_saved(terminal, tmp_path):
    """A newcomer's trial: `--read-only` looked like any session, and quitting printed "saved; continue
    it with…" while nothing of the run was written."""
    first = terminal()
    first.wait_for(ready, what="the app")
    first.type("hello")
    first.keys("Enter")
    first.wait_for(lambda s: "2 messages in the context" in s, what="the reply")
    first.keys("C-q")
    assert first.wait_exit() == 0
    [path] = (first.workdir / ".xun" / "sessions").glob("*.json")
    before = path.read_bytes()
    (tmp_path / "t0" / "exit-status").unlink()  # the second run in the same folder writes its own
    second = Terminal(tmp_path / "t0", "--resume", path.stem, "--read-only", size=(80, 24))
    try:
        screen = second.wait_for(ready, what="the resumed app")
        assert f"{path.stem[:8]} read-only" in screen.splitlines()[0], screen
        assert "opened read-only" in screen
        second.type("not kept")
        second.keys("Enter")
        second.wait_for(lambda s: "4 messages in the context" in s, what="the reply")
        second.keys("C-q")
        assert second.wait_exit() == 0
        screen = "".join(second.screen().splitlines())  # wrapped at 80 columns
        assert "nothing of this run was saved" in screen and "saved; continue it with" not in screen, screen
        assert path.read_bytes() == before
    finally:
        second.close()


def test_a_prompt_and_enter_typed_before_the_first_frame_is_sent(terminal):
    """A newcomer's trial: typed right after `xun`, before the first frame, "prompt⏎" left the prompt with a
    new line in it, never sent: the terminal, not yet in raw mode, turned Enter into a line feed (Ctrl+J)."""
    term = terminal(size=(60, 20))
    term.type("early prompt")  # at once: the app is still importing
    term.keys("Enter")
    screen = term.wait_for(lambda s: "2 messages in the context" in s, what="the prompt sent and answered")
    assert "early prompt" in screen
    assert term.screen().count("early prompt") == 1, "sent: no longer in the prompt"


COLOURED_LOG = "".join(f"\x1b[32mok\x1b[0m test_{i} passed\n" for i in range(25))


def test_a_pasted_coloured_log_is_one_paste_and_sends_nothing(terminal):
    """A newcomer's trial: a bracketed paste of 25 coloured lines (copied test output) sent each line as a
    prompt: Textual's parser read the paste's escape codes as keys, and each line break as Enter."""
    term = terminal(size=(80, 24))
    term.wait_for(ready, what="the app")
    term.paste(COLOURED_LOG)
    screen = term.wait_for(lambda s: "[pasted 25 lines #1]" in s, what="the paste as one marker line")
    assert "0 messages in the context" in screen, "nothing was sent"
    time.sleep(2 * PASTE_QUIET_SECONDS)  # a key within the quiet gap after a paste is the paste's, never a key
    term.keys("Enter")
    term.wait_for(lambda s: "2 messages in the context" in s, what="the one prompt answered")
    term.keys("C-q")
    assert term.wait_exit() == 0
    [path] = (term.workdir / ".xun" / "sessions").glob("*.json")
    users = [m for m in json.loads(path.read_text())["messages"] if m.get("role") == "user" or m.get("kind") == "user"]
    assert len(users) == 1, users
    text = json.dumps(users[0])
    assert "\\u001b" not in text and "ok test_0 passed\\nok test_1 passed" in text and "test_24 passed" in text


def test_a_pasted_line_with_escape_codes_keeps_its_order(terminal):
    """The same trial: `paste with ESC[31mRED ESC[0m and bell BEL and [bold]b[/bold]` arrived as
    `^[31mRED^[0m and bell  and [bold]b[/boldpaste with`: its start moved to its end."""
    term = terminal(size=(80, 24))
    term.wait_for(ready, what="the app")
    term.paste("paste with \x1b[31mRED\x1b[0m and bell \x07 and [bold]b[/bold]")
    term.wait_for(lambda s: "paste with RED and bell  and [bold]b[/bold]" in s, what="the text in order")


@pytest.mark.parametrize("quit_by", ["ctrl+q", "/quit", "ctrl+c twice"])
def test_a_clean_quit_leaves_no_lock_file(terminal, quit_by):
    """A newcomer found a `.lock` per session left in .xun/sessions after every clean quit."""
    term = terminal(size=(80, 24))
    term.wait_for(ready, what="the app")
    term.type("hello")
    term.keys("Enter")
    sessions = term.workdir / ".xun" / "sessions"
    term.wait_for(lambda s: list(sessions.glob("*.json")) and "ready" in s.splitlines()[0], what="the turn saved")
    assert list(sessions.glob("*.lock")), "held while the app runs"
    if quit_by == "/quit":
        term.type("/quit")
        term.keys("Enter")
    elif quit_by == "ctrl+q":
        term.keys("C-q")
    else:
        term.keys("C-c")
        term.keys("C-c")
    assert term.wait_exit() == 0, term.screen()
    assert not list(sessions.glob("*.lock")), sorted(p.name for p in sessions.iterdir())


@pytest.mark.long
@pytest.mark.parametrize(
    ("size", "while_streaming"), [((80, 24), False), ((60, 20), True)], ids=["80x24-idle", "60x20-streaming"]
)
def test_a_toast_leaves_nothing_behind_in_a_real_terminal(terminal, size, while_streaming):
    """Issue 25.8: fragments of an expired toast stayed painted on the prompt's border. In a real terminal,
    once a toast over the prompt has gone, the prompt and the key bar are as they were before it came
    (idle, or while a reply streams and the rows above change)."""
    term = terminal(size=size, env={"XUN_OFFLINE_FAULTS": "slow:0.05@1"})
    term.wait_for(ready, what="the app")
    term.wait_for(lambda s: "Ask the agent" in s and "Recall" in s, what="the prompt and every key")
    time.sleep(0.5)
    before = term.screen().splitlines()[-5:]  # the chat's bottom border, the prompt, the key bar
    if while_streaming:
        term.type("write 3000 tokens")
        term.keys("Enter")
        term.wait_for(lambda s: "streaming…" in s, what="the reply streaming")
    term.type("/name")
    term.keys("Enter")
    term.wait_for(lambda s: "TITLE" in s, what="the toast")
    term.wait_for(lambda s: "TITLE" not in s, timeout=15, what="the toast to expire")
    if while_streaming:
        term.wait_for(lambda s: "streaming…" not in s, timeout=60, what="the reply to end")
    time.sleep(0.5)
    after = term.screen().splitlines()[-5:]
    prompt_rows = slice(1, 5) if not while_streaming else slice(2, 5)  # (the chat's count changes with a turn)
    assert after[prompt_rows] == before[prompt_rows], "\n".join(["before:", *before, "after:", *after])


async def test_text_put_in_the_prompt_never_reaches_the_terminal_raw(offline_server, session_factory):
    """A session file's draft (or unanswered prompt) holding OSC 0 and ESC[2J, put back in the prompt on resume,
    retitled the terminal and cleared it: the prompt's text shows control characters, it never holds them."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.session is not None and app.main.prompt.has_focus, what="the prompt")
        app.main.prompt.set_prompt("before \x1b]0;PWNED\x07 \x1b[2J after\nline two")
        assert "\x1b" not in app.main.prompt.text and "\x07" not in app.main.prompt.text
        assert app.main.prompt.text == "before \\x1b]0;PWNED\\x07 \\x1b[2J after\nline two"
        app.main.prompt.set_prompt("")
        app.main.prompt.post_message(events.Paste("pasted \x1b]52;c;eA==\x07 text"))
        await wait_until(pilot, lambda: "pasted" in app.main.prompt.text, what="the paste")
        assert "\x1b" not in app.main.prompt.text and "\x07" not in app.main.prompt.text
