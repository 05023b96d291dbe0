"""Below 100 columns the side panel (and its gauge) is hidden: the "nearly full" warning then names the
key that shows the gauge, instead of pointing at a gauge that is not on screen (trial 2, finding 12)."""

from __future__ import annotations

import pytest

from xun.tui.app import XunApp

from .helpers import submit, turn, wait_until

TITLES = ("the context is nearly full", "the context is past the threshold")


async def two_long_replies(pilot) -> None:
    """The context at about 94% of a threshold of 3,400 when the work is over: the warning is due."""
    for _ in range(2):
        await turn(pilot, "write 1000 tokens")


@pytest.mark.parametrize(("size", "says"), [((80, 24), "F4 shows the gauge"), ((140, 44), "the gauge shows where it is")])
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
        assert app.gauge.now < 0.9 * 6000, app.gauge.figures_text()
        await turn(pilot, "here is my text: " + "many words of pasted text " * 500)
        assert [e for e in app.log_pane.entries if e.kind == "summary"], "the paste was summarised"
        assert app.gauge.now < 0.9 * 6000, app.gauge.figures_text()
        assert not [m for m in seen if isinstance(m, Notify) and m.notification.title in TITLES]


async def test_a_warning_that_no_longer_holds_is_withdrawn(offline_server, session_factory):
    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=3400"))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await two_long_replies(pilot)
        assert [n for n in app._notifications if n.title in TITLES]
        await submit(pilot, "/clear")
        await wait_until(pilot, lambda: not [n for n in app._notifications if n.title in TITLES], timeout=3,
                         what="the warning withdrawn, long before its 10 s are over")
