"""The work queue on its own, without Textual: what runs, what waits, and what a turn's end does to the
prompts typed meanwhile (the app's handlers only carry it out)."""

from __future__ import annotations

import pytest

from xun.tui.work_queue import WorkQueue


def test_an_idle_queue_sends_a_prompt_at_once() -> None:
    work = WorkQueue()
    assert work.busy is None and not work.must_queue() and not work.cancellable()
    assert work.cancel() is None, "nothing to cancel"


def test_a_prompt_sent_while_a_turn_runs_waits_and_goes_out_after_it() -> None:
    work = WorkQueue()
    work.start_turn("first")
    assert work.must_queue()
    work.add("second", "notice 2")
    work.add("third", "notice 3")
    assert work.next_out() is None, "nothing goes out while the turn runs"
    assert work.finish() == "send"
    assert work.busy is None and work.finished == 1
    assert work.next_out() == ("second", "notice 2"), "the oldest first"
    assert work.must_queue(), "the third still waits behind the second"
    work.start_turn("second")
    assert work.finish() == "send"
    assert work.next_out() == ("third", "notice 3")
    assert work.next_out() is None and not work.must_queue()


def test_escape_takes_the_queue_back_and_names_the_work_it_cancels() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.add("second", None)
    assert work.cancel() == ("turn", False, "first"), "cancelled before the worker's first step"
    work.turn_ended("cancelled")
    assert work.finish() == "take_back"
    assert work.take_back() == [("second", None)]
    assert not work.queued and not work.must_queue()


def test_a_cancelled_turn_whose_prompt_is_back_puts_the_queue_after_it() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.began()
    work.add("second", None)
    assert work.cancel() == ("turn", True, "first")
    work.turn_ended("cancelled")
    work.give_back("cancelled")
    assert work.finish() == "take_back_after_input"
    assert work.given_back is None and not work.held, "each end decides once"


def test_a_failed_turn_keeps_the_queue_waiting_behind_its_prompt() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.add("second", None)
    work.turn_ended("error")
    work.fail_unanswered("the unanswered prompt")
    work.give_back("failed")
    assert work.finish() == "wait"
    assert work.waits and work.cancellable(), "Esc takes the waiting queue back"
    assert not work.must_queue(), "the failed prompt, sent again from the input, goes out first"
    assert work.queued == [("second", None)]


def test_the_waiting_queue_goes_out_after_the_failed_prompt_is_answered() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.add("second", None)
    work.turn_ended("error")
    work.give_back("failed")
    assert work.finish() == "wait"
    work.start_turn("first")  # the failed prompt sent again
    assert not work.waits
    work.turn_began()
    assert work.finish() == "send"
    assert work.next_out() == ("second", None)


def test_a_failed_turn_with_nothing_queued_leaves_nothing_waiting() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.turn_ended("error")
    work.give_back("failed")
    assert work.finish() == "take_back"
    assert not work.waits and not work.cancellable()


def test_a_failed_turn_whose_prompt_stayed_out_of_the_input_takes_the_queue_back() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.add("second", None)
    work.turn_ended("error")  # the input held new text: the prompt was not given back
    assert work.finish() == "take_back"


def test_a_turn_that_ended_well_does_not_hold_the_queue() -> None:
    work = WorkQueue()
    work.start_turn("first")
    work.add("second", None)
    work.turn_ended("done")
    work.turn_ended("max_iterations")
    assert work.finish() == "send"


def test_the_unanswered_prompt_is_taken_once_and_cleared_by_a_new_turn() -> None:
    work = WorkQueue()
    work.fail_unanswered("prompt")
    assert work.take_unanswered() == "prompt"
    assert work.take_unanswered() is None
    work.fail_unanswered("prompt")
    work.turn_began()
    assert work.unanswered is None


def test_compaction_work_counts_and_refuses_in_its_own_words() -> None:
    work = WorkQueue()
    for kind, said in (
        ("compact", "a summary is running"),
        ("reclaim", "a reclaim is running"),
        ("restore", "a restore is running"),
    ):
        work.start(kind)
        assert work.doing() == said and work.must_queue()
        assert work.finish() == "send"
    assert work.finished == 3
    with pytest.raises(ValueError):
        work.start("nap")


def test_the_worker_s_first_step_is_remembered_until_the_next_work() -> None:
    work = WorkQueue()
    work.start("compact")
    work.began()
    assert work.cancel() == ("compact", True, None)
    work.start("reclaim")
    assert not work.started


def test_taking_back_an_empty_queue_stops_the_wait() -> None:
    work = WorkQueue()
    work.waits = True
    assert work.take_back() == [] and not work.waits and not work.cancellable()
