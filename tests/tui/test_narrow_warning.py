"""Below 100 columns the side panel (and its gauge) is hidden: the "nearly full" warning then names the
key that shows the gauge, instead of pointing at a gauge that is not on screen (trial 2, finding 12)."""

from __future__ import annotations

import pytest

from xun.tui.app import XunApp

from .helpers import submit, turn, wait_until
from .terminal import terminal  # noqa: F401 - a fixture
# ruff: noqa: F811 - the tests take the imported `terminal` fixture as a parameter

TITLES = ("the context is nearly full", "the context is past the threshold")


async def two_long_replies(pilot) -> None:
    """The context at about 94% of a threshold of 3,400 when the work is over: the warning is due."""
    for _ in range(2):
        await turn(pilot, "write 1000 tokens")


@pytest.mark.parametrize(
    ("size", "says"), [((80, 24), "F4 shows the gauge"), ((140, 44), "the gauge shows where it is")]
)
async def test_the_nearly_full_warning_names_what_is_on_screen(offline_server, session_factory, size, says):
    from textual.notifications import Notify

    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=3400"))
    seen: list = []
    async with app.run_test(size=size, notifications=True, message_hook=seen.append) as pilot:
        await two_long_replies(pilot)
        warned = [m.notification.message for m in seen if isinstance(m, Notify) and m.notification.title in TITLES]
        assert len(warned) == 1 and says in warned[0], warned


async def test_a_warning_that_a_compaction_answers_at_once_is_not_given(offline_server, session_factory):
    """Trial D #15: a big paste took the context past the threshold, the summary brought it back to "calm",
    and the toast "the context is past the threshold" stood beside the gauge: the warning is given when the
    work is over, if it still holds."""
    from textual.notifications import Notify

    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=6000"))
    seen: list = []
    async with app.run_test(size=(160, 48), notifications=True, message_hook=seen.append) as pilot:
        await two_long_replies(pilot)
        assert app.main.gauge.now < 0.9 * 6000, app.main.gauge.figures_text()
        await turn(pilot, "here is my text: " + "many words of pasted text " * 500)
        assert [e for e in app.main.log_pane.entries if e.kind == "summary"], "the paste was summarised"
        assert app.main.gauge.now < 0.9 * 6000, app.main.gauge.figures_text()
        assert not [m for m in seen if isinstance(m, Notify) and m.notification.title in TITLES]


async def test_a_warning_that_no_longer_holds_is_withdrawn(offline_server, session_factory):
    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=3400"))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await two_long_replies(pilot)
        assert [n for n in app._notifications if n.title in TITLES]
        await submit(pilot, "/clear")
        await wait_until(
            pilot,
            lambda: not [n for n in app._notifications if n.title in TITLES],
            timeout=3,
            what="the warning withdrawn, long before its 10 s are over",
        )


def test_a_warning_held_by_the_ask_question_is_not_shown_again_once_a_summary_answers_it(terminal):
    """Trial F #14, in a real terminal (Pilot's timing never showed it): the question held the "nearly full"
    toast; it timed out, the summary brought the context to 78%, and the toast the closed question let go
    came back after it had been withdrawn."""
    import time

    term = terminal(
        "--set",
        "auto_compact.token_threshold=3000",
        "--set",
        "auto_compact.mode=ask",
        "--set",
        "auto_compact.ask_timeout=3",
    )
    term.wait_for(lambda s: "Ask the agent" in s and "ready" in s.splitlines()[0], what="the app")
    for turns in range(1, 4):
        term.type("write 800 tokens")
        term.keys("Enter")
        term.wait_for(
            lambda s: f"{2 * turns} messages in the context" in s and "ready" in s.splitlines()[0], what=f"turn {turns}"
        )
    term.wait_for(lambda s: "nearly full" in s, what="the warning")
    term.type("write 800 tokens")
    term.keys("Enter")
    time.sleep(0.25)
    term.type("now i keep typing")  # as the question opens: it goes on into the prompt once it closes
    term.wait_for(lambda s: "summarise the conversation?" in s, what="the question")
    screen = term.wait_for(lambda s: "summary" in s and "ready" in s.splitlines()[0], what="the summary and the turn")
    assert "(78%)" in screen, screen
    time.sleep(1.0)
    assert "nearly full" not in term.screen(), term.screen()
    assert "│ now i keep typing" in term.screen()
