"""The app's work and its queue of prompts, without Textual: what runs now (a turn, a summary, a reclaim,
a restore), the prompts typed meanwhile, and what happens to them when the work ends.

The app owns one `WorkQueue` (`app.work`); the handlers ask it what to do and do it on the screen (the
chat's "queued:" notices, the prompt's text). Nothing else writes this state.

A turn's end decides the queue's fate: after work that ended well the oldest queued prompt goes out;
after a cancel (Esc) the queued prompts go back into the input; after a failed turn whose prompt is back
in the input, they wait behind it and go out once it is sent again and answered (Esc takes them back).
"""

from __future__ import annotations

from typing import Any, Literal

Outcome = Literal["send", "take_back", "take_back_after_input", "wait", "keep"]
"""What the end of the work means for the queued prompts (`WorkQueue.finish`)."""

KINDS = ("turn", "compact", "reclaim", "restore")

DOING = {
    "turn": "a turn is running",
    "compact": "a summary is running",
    "reclaim": "a reclaim is running",
    "restore": "a restore is running",
}
"""What the work in `busy` is, as a refusal says it."""


class WorkQueue:
    """The work running now and the prompts waiting for it. A queued prompt is `(text, notice)`: the notice
    is whatever the chat shows for it (the queue only carries it, to be removed when the prompt leaves)."""

    def __init__(self) -> None:
        self.busy: str | None = None
        """What runs now: "turn", "compact", "reclaim", "restore" (None when idle)."""
        self.started = False
        """Whether the worker doing `busy` has taken its first step (one cancelled before never will)."""
        self.turn_prompt: str | None = None
        """The prompt of the turn now running (None for /retry), given back if it is cancelled unsent."""
        self.queued: list[tuple[str, Any]] = []
        """Prompts sent while something ran, oldest first, each with its notice in the chat."""
        self.held = False
        """The work now ending was cancelled or failed: the queued prompts go back to the input, not out."""
        self.given_back: str | None = None
        """"cancelled" or "failed": the input holds the prompt of the turn now ending, older than the queued ones."""
        self.waits = False
        """A failed turn's prompt is back in the input: the queued prompts wait, and go out after it."""
        self.unanswered: Any | None = None
        """The prompt (a `UserMessage`) of a failed turn that got no answer: kept in the session and put back
        in the input; sending from the input replaces it rather than leaving two prompts in a row."""
        self.finished = 0
        """How many turns, compactions and restores have finished."""

    # ------------------------------------------------------------------------------- the work

    def start(self, kind: str | None) -> None:
        """`kind` starts (None: the work is over); its worker has not taken its first step yet."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown kind of work: {kind!r}")
        self.busy = kind
        self.started = False

    def start_turn(self, prompt: str | None) -> None:
        """A turn for `prompt` (None: /retry sends the last prompt again); a waiting queue goes out after it."""
        self.waits = False
        self.start("turn")
        self.turn_prompt = prompt

    def began(self) -> None:
        """The worker took its first step: a cancel now reaches it, and it says itself that it is over."""
        self.started = True

    def doing(self) -> str:
        """What runs, as a refusal to start something else says it."""
        return DOING.get(self.busy or "", "something is running")

    def cancel(self) -> tuple[str, bool, str | None] | None:
        """Esc: the queued prompts come back instead of going out. Returns what was running, whether its worker
        had started and the turn's prompt (None when idle: nothing to cancel)."""
        if self.busy is None:
            return None
        self.held = True
        return self.busy, self.started, self.turn_prompt

    def cancellable(self) -> bool:
        """Whether Esc has something to cancel: running work, or a queue waiting behind a failed prompt."""
        return self.busy is not None or self.waits

    # ------------------------------------------------------------------------------- the turn's end

    def turn_began(self) -> None:
        """A turn's first event: the unanswered prompt it replaces is answered now."""
        self.unanswered = None

    def turn_ended(self, status: str) -> None:
        """A cancelled or failed turn holds the queue back."""
        if status in ("cancelled", "error"):
            self.held = True

    def give_back(self, how: Literal["cancelled", "failed"]) -> None:
        """The ending turn's prompt is back in the input (its turn was cancelled, or failed)."""
        self.given_back = how

    def fail_unanswered(self, prompt: Any) -> None:
        """A prompt the model never answered: sending again from the input replaces it."""
        self.unanswered = prompt

    def take_unanswered(self) -> Any | None:
        """The unanswered prompt, once: a prompt sent now replaces it."""
        unanswered, self.unanswered = self.unanswered, None
        return unanswered

    def finish(self) -> Outcome:
        """The work is over: idle again, and what now becomes of the queued prompts."""
        self.busy = None
        self.started = False
        self.finished += 1
        held, self.held = self.held, False
        given, self.given_back = self.given_back, None
        if held and given == "failed" and self.queued:
            self.waits = True  # in the order typed: the failed prompt (in the input) first
            return "wait"
        if held:
            return "take_back_after_input" if given == "cancelled" else "take_back"
        return "keep" if self.waits else "send"

    # ------------------------------------------------------------------------------- the queue

    def must_queue(self) -> bool:
        """Whether a prompt sent now waits its turn: something runs, or older prompts wait to go out."""
        return self.busy is not None or bool(self.queued and not self.waits)

    def add(self, text: str, notice: Any) -> None:
        self.queued.append((text, notice))

    def next_out(self) -> tuple[str, Any] | None:
        """The oldest queued prompt, taken off the queue, when it may go out now (idle)."""
        if not self.queued or self.busy is not None:
            return None
        return self.queued.pop(0)

    def take_back(self) -> list[tuple[str, Any]]:
        """Every queued prompt, taken off the queue (back into the input); nothing waits any more."""
        self.waits = False
        queued, self.queued = self.queued, []
        return queued
