"""The toast hold on its own, without Textual: which toasts wait for a dialog, which show when it closes,
and which a withdrawal keeps off the screen (the app only carries out what it decides)."""

from __future__ import annotations

from xun.tui.toasts import ToastHold


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def toast(title: str, message: str = "text", timeout: float | None = None) -> dict[str, object]:
    return {"message": message, "title": title, "severity": "information", "timeout": timeout}


def make() -> tuple[ToastHold, Clock, Clock]:
    clock, wall = Clock(), Clock()
    return ToastHold(5.0, clock=clock, wall_clock=wall), clock, wall


def test_with_no_dialog_every_toast_shows() -> None:
    hold, _, _ = make()
    assert hold.admit(toast("a")) and hold.admit(toast("b"))
    assert not hold.holding and hold.release() == []


def test_a_dialog_holds_the_toasts_still_on_screen_and_gives_them_back_when_it_closes() -> None:
    hold, clock, _ = make()
    old, recent, long = toast("old"), toast("recent"), toast("long", timeout=60)
    hold.admit(old)
    clock.now += 4
    hold.admit(recent)
    clock.now += 3  # `old` (5 s) has gone from the screen, `recent` has not
    hold.admit(long)
    assert hold.hold(new_ones_too=False), "the first dialog clears the screen's toasts"
    assert hold.holding
    assert hold.admit(toast("raised on the dialog")), "a dialog to read shows its own toasts"
    released = hold.release()
    assert released == [recent, long]
    assert all(hold.due(t) for t in released) and not hold.due(recent), "each is shown once"


def test_a_question_holds_the_toasts_raised_while_it_is_open_but_not_quit() -> None:
    hold, _, _ = make()
    assert hold.hold(new_ones_too=True)
    later, quit_asked = toast("later"), toast("Quit?")
    assert not hold.admit(later), "it would cover the question's keys"
    assert hold.admit(quit_asked), "Ctrl+C always says it counts"
    assert hold.release() == [later]
    assert hold.admit(toast("after")), "the question closed: toasts show again"


def test_a_second_dialog_keeps_the_hold_and_a_question_over_it_holds_new_ones() -> None:
    hold, _, _ = make()
    assert hold.hold(new_ones_too=False)
    assert not hold.hold(new_ones_too=True), "already held: nothing more to clear"
    assert not hold.admit(toast("new"))


def test_a_withdrawn_toast_never_comes_back_from_a_dialog() -> None:
    hold, _, _ = make()
    full, other = toast("the context is nearly full"), toast("other")
    hold.admit(full)
    hold.admit(other)
    hold.hold(new_ones_too=True)
    hold.withdraw("the context is nearly full")
    assert hold.release() == [other]


def test_a_toast_withdrawn_after_its_dialog_let_it_go_is_not_shown() -> None:
    hold, _, _ = make()
    full = toast("full")
    hold.hold(new_ones_too=True)
    hold.admit(full)
    assert hold.release() == [full]
    hold.withdraw("full")
    assert not hold.due(full)


def test_a_toast_raised_before_its_withdrawal_and_handled_after_is_dropped() -> None:
    hold, _, wall = make()
    raised = wall.now
    wall.now += 1
    hold.withdraw("full")
    assert hold.withdrawn("full", raised)
    assert not hold.withdrawn("full", wall.now + 1), "a new one of that title shows"
    assert not hold.withdrawn("other", raised)


def test_a_withdrawn_toast_is_not_held_by_the_next_dialog() -> None:
    hold, _, _ = make()
    hold.admit(toast("full"))
    hold.withdraw("full")
    hold.hold(new_ones_too=False)
    assert hold.release() == []
