"""A paste is text: nothing that comes with it answers a question or acts as a key.

Copied text (a web page, a chat message) may hold an end-of-paste marker, `ESC[201~`, and a terminal
passes it on inside the paste as it is (tmux's `paste-buffer -p` does). What follows that inner marker
reached the app as typed keys:

- at an open `run_command` confirmation, a paste ending in `ESC[201~s` allowed the tool for the rest of
  the session: the command ran, and the next one ran unasked (ask mode's question the same, with `o`);
- at the prompt, `…ESC[201~ESC[C…CR` sent a prompt the user never sent; so did a keypad Enter (`ESC O M`),
  kitty's Enter (`ESC[13u`) and a CR in the next read.

The attacks go through the real input parser, the real app on the offline model (Textual's pilot), and the
real `xun --offline` in tmux with the marker inside a bracketed paste.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events

from xun.agent.launch import open_session
from xun.tui.app import XunApp
from xun.tui.screens.confirm import ConfirmScreen
from xun.tui.screens.consent import ConsentScreen
from xun.tui.terminal_input import TerminalInputParser

from tui.helpers import finish, submit, turn, wait_until
from tui.terminal import terminal  # noqa: F401 - a fixture

from .helpers import typing_fast

# ruff: noqa: F811 - the tests take the imported `terminal` fixture as a parameter

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


@pytest.fixture(autouse=True)
def _no_user_settings(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))
    for name in ("XUN_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def session_factory(tmp_path):
    """`session_factory(server, *overrides)`: a session on that server, in `tmp_path`."""
    opened = []

    def make(server, *overrides):
        session = open_session(tmp_path, base_url=server.base_url, overrides=list(overrides), environ={})
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()


def parsed(*reads: str) -> list[events.Event]:
    """What the app's parser makes of these reads, one right after another, then the end of input."""
    parser = TerminalInputParser()
    got: list[events.Event] = []
    for read in (*reads, ""):
        got += parser.feed(read)
    return got


def keys_of(got: list[events.Event]) -> list[str]:
    return [event.key for event in got if isinstance(event, events.Key)]


def pasted(got: list[events.Event]) -> str:
    return "".join(event.text for event in got if isinstance(event, events.Paste))


# ----------------------------------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    ("tail", "text"),
    [
        ("s", "s"),  # the answer key of "allow for this session"
        ("\x1b[C and this\r", " and this\r"),  # an arrow, then text and a line break
        (" keypad\x1bOM", " keypad"),  # the keypad's Enter
        (" kitty\x1b[13u", " kitty"),  # kitty's Enter
        ("\x1b[<0;50;20M\x1b[<0;50;20m", ""),  # a click, wherever the allow button is
    ],
    ids=["answer-key", "arrow-text-cr", "keypad-enter", "kitty-enter", "mouse-click"],
)
@pytest.mark.parametrize("reads", ["one read", "next read"])
def test_what_follows_an_inner_end_marker_is_pasted_text_never_keys(tail, text, reads):
    raw = f"{PASTE_START}copied text{PASTE_END}{tail}{PASTE_END}"  # the inner marker, then the terminal's
    got = parsed(raw) if reads == "one read" else parsed(f"{PASTE_START}copied text{PASTE_END}", f"{tail}{PASTE_END}")
    assert keys_of(got) == [], got
    assert not any(isinstance(event, events.MouseEvent) for event in got), got
    assert pasted(got) == "copied text" + text


def test_a_carriage_return_in_the_read_after_a_paste_is_the_pastes():
    got = parsed(f"{PASTE_START}echo hi{PASTE_END}", "\r")
    assert keys_of(got) == [] and pasted(got) == "echo hi\r", got


def test_a_second_paste_inside_the_first_is_text_too():
    got = parsed(f"{PASTE_START}one{PASTE_END}s{PASTE_START}two{PASTE_END}\r{PASTE_END}")
    assert keys_of(got) == [] and pasted(got) == "onestwo\r", got


# ----------------------------------------------------------------------------------------- the questions


async def test_a_paste_disarms_the_confirmation_and_the_key_after_it_answers_nothing(
    offline_server, session_factory, tmp_path: Path
):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "run `touch pwned`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.armed, what="armed")
        screen = app.screen
        with typing_fast(screen):
            app.post_message(events.Paste("copied from a web page"))
            app.post_message(events.Key("s", "s"))  # what came with the paste, had the parser let it through
            await pilot.pause(0.3)
            assert app.screen is screen and not screen.armed, "a paste makes the question wait again"
            assert not (tmp_path / "pwned").exists() and not app.agent.toolbox.allowed_for_session()
        await wait_until(pilot, lambda: screen.armed, what="the question ready again after a quiet pause")
        await finish(pilot, lambda: pilot.press("n"))
        assert app.main.prompt.text == "copied from a web pages", "kept aside, then in the prompt, not sent"
    assert not (tmp_path / "pwned").exists()
    assert not app.agent.toolbox.allowed_for_session()


async def test_a_paste_disarms_ask_modes_question_and_o_after_it_answers_nothing(
    offline_server, session_factory, tmp_path: Path
):
    (tmp_path / "big.txt").write_text(
        "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(80))
    )
    app = XunApp(
        session_factory(
            offline_server,
            "auto_compact.mode=ask",
            "auto_compact.token_threshold=2400",
            "auto_compact.summary_keep_max=4",
        )
    )
    async with app.run_test(size=(140, 44)) as pilot:
        await turn(pilot, "please remember: " + "the quick brown fox jumps " * 80)
        await submit(pilot, "read big.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen) and app.screen.armed, what="armed")
        screen = app.screen
        with typing_fast(screen):
            app.post_message(events.Paste("copied text"))
            app.post_message(events.Key("o", "o"))  # "off for this session"
            await pilot.pause(0.3)
            assert app.screen is screen and not screen.armed, "a paste makes the question wait again"
            assert app.session.config.auto_compact.mode == "ask"
        await wait_until(pilot, lambda: screen.armed, what="the question ready again after a quiet pause")
        await finish(pilot, lambda: pilot.press("n"))
        assert app.session.config.auto_compact.mode == "ask", "summaries were not turned off"


# ----------------------------------------------------------------------------------------- a real terminal


def ready(screen: str) -> bool:
    return "% of the threshold" in screen and "Ask the agent" in screen


ASKING = "y allow once · s session"


def test_a_paste_ending_in_the_marker_and_s_allows_nothing_in_a_real_terminal(terminal):
    term = terminal(size=(120, 40))
    term.wait_for(ready, what="the app")
    term.type("run `touch pwned`")
    term.keys("Enter")
    term.wait_for(lambda s: ASKING in s, what="the confirmation taking answers")
    term.paste(f"copied from a web page{PASTE_END}s")
    screen = term.wait_for(lambda s: ASKING not in s, what="the paste to reach the confirmation")
    assert "wants to run" in screen and "wait…" in screen, "the dialog is open and waits again"
    assert "allowed without asking" not in screen and not (term.workdir / "pwned").exists(), screen
    term.wait_for(lambda s: ASKING in s, what="the confirmation taking answers again")
    term.keys("n")
    term.wait_for(lambda s: "wants to run" not in s and "ready" in s.splitlines()[0], what="the turn over")
    assert not (term.workdir / "pwned").exists()
    term.wait_for(lambda s: "copied from a web pages" in s, what="the paste in the prompt, not sent")
    term.keys("C-u")  # one line, the cursor at its end: cleared
    term.wait_for(lambda s: "Ask the agent" in s, what="the prompt cleared")
    term.type("run `touch second`")
    term.keys("Enter")
    screen = term.wait_for(lambda s: ASKING in s, what="the next command asked about too")
    assert "allowed without asking" not in screen and not (term.workdir / "second").exists()
    term.keys("Escape")


@pytest.mark.parametrize(
    ("copied", "seen"),
    [
        (f"first{PASTE_END}\x1b[C and this\r", "first and this"),
        (f"second{PASTE_END} keypad\x1bOM", "second keypad"),
        (f"third{PASTE_END} kitty\x1b[13u", "third kitty"),
    ],
    ids=["arrow-text-cr", "keypad-enter", "kitty-enter"],
)
def test_an_enter_after_the_marker_sends_nothing_in_a_real_terminal(terminal, copied, seen):
    term = terminal(size=(100, 30))
    term.wait_for(ready, what="the app")
    term.paste(copied)
    term.wait_for(lambda s: seen in s, what="the paste")
    term.type("!")  # typed later: once it shows, every key sent before it has been handled
    screen = term.wait_for(lambda s: "!" in prompt_of(s), what="the key typed after the paste")
    assert seen in prompt_of(screen) and "0 messages in the context" in screen, screen
    term.keys("Enter")
    term.wait_for(
        lambda s: "2 messages in the context" in s and f"You said “{seen}" in " ".join(s.split()),
        what="the pasted text, sent once, by the Enter, and its answer drawn",
    )


def prompt_of(screen: str) -> str:
    """The text in the prompt's box, its rows joined."""
    rows = screen.splitlines()
    top = next(i for i, row in enumerate(rows) if row.startswith("╭─ prompt"))
    bottom = next(i for i in range(top + 1, len(rows)) if rows[i].startswith("╰"))
    return " ".join(row.split("│")[1].strip() for row in rows[top + 1 : bottom])


def test_the_browser_driver_of_xun_serve_reads_input_with_the_same_parser(monkeypatch):
    """Under `xun serve` the app reads what the page's terminal (xterm.js) sends, which brackets a paste
    without looking inside it: the same attacks reach the app there, unless its driver uses this parser."""
    from textual import constants
    from textual.drivers import linux_driver, web_driver

    from xun.tui import terminal_input

    monkeypatch.setattr(linux_driver, "XTermParser", linux_driver.XTermParser)  # put back after the test
    monkeypatch.setattr(web_driver, "XTermParser", web_driver.XTermParser)
    monkeypatch.setattr(constants, "DRIVER", "textual.drivers.web_driver:WebDriver")  # what textual-serve sets
    terminal_input.install()
    assert web_driver.XTermParser is TerminalInputParser and linux_driver.XTermParser is TerminalInputParser
