"""Tier 2, the summary: where to cut (`plan_summary`) and the records of a summary once applied.

Planning changes nothing: it reads the messages and returns a `CompactionPlan`, which the summarizer is
shown and `Conversation.apply_compaction` applies (or refuses, `StalePlanError`, when the conversation
changed other than by appending meanwhile). The turn at work, its prompt and its newest round are kept;
the calls of its older rounds go into the turn ledger beside the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xun.context.estimates import MESSAGE_TOKENS
from xun.context.ledger import TurnLedger, condensed_calls
from xun.context.message_list import MessageList
from xun.context.messages import TURN_LEDGER_PROMPT, Message, RawOpenAIMessage, SystemPrompt, UserMessage
from xun.context.reclaimed import ReclaimedArchive

DEFAULT_LEDGER_CHARS = 6000
"""The turn ledger's bound when nothing set it (about 1,500 tokens)."""


def _ledger_chars(ledger: TurnLedger | None) -> int:
    """What a ledger adds to the system message's estimated length."""
    return len(TURN_LEDGER_PROMPT) + len(ledger.render()) if ledger is not None and ledger.entries else 0


class StalePlanError(RuntimeError):
    """The conversation changed (other than by appending) after the compaction plan was made."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a summary would do now: messages[1:cut_index] condensed, `kept` the new tail.

    `condensed` is what the summarizer is shown (the system message first, when there is one);
    Lengths are in characters; `framing_chars` is what the leaving messages' framing (MESSAGE_TOKENS
    each) is worth in characters at the calibrated ratio, which the lengths leave out.
    `carried_user` is the turn's prompt (the last user message not written by the agent) when it lies
    before the cut and is carried to the head of the tail. `turn_rounds` counts the tool calls of that
    turn the cut condenses (they go into the turn ledger). Lengths are estimated characters;
    `estimated_length_after` leaves the summary out.
    """

    cut_index: int
    condensed: list[Message]
    kept: list[Message]
    carried_user: UserMessage | None
    estimated_length_before: int
    estimated_length_after: int
    message_count: int
    edits: int
    turn_start: int = -1
    """The index of the carried prompt when the cut lies inside its turn, else -1."""
    turn_rounds: int = 0
    ledger: TurnLedger | None = None
    """The turn ledger the new summary frame carries (its growth is in `estimated_length_after`)."""
    framing_chars: int = 0

    @property
    def nothing_to_condense(self) -> bool:
        return not any(m.role != "system" for m in self.condensed)

    @property
    def condensed_count(self) -> int:
        """Messages that leave the conversation (the system message stays, so it is not counted)."""
        return sum(1 for m in self.condensed if m.role != "system")


@dataclass(slots=True)
class SummarizationEvent:
    """One applied summary: where the cut was, the summary text, and where the originals went."""

    cutoff_index: int
    summary_message: str
    file_path: str | None
    time: float
    condensed_count: int
    kept_count: int
    warning: str | None = None
    offload_when: str | None = None
    """The heading time of the offload log's section holding the originals (how the chat finds them)."""
    carried: bool = False
    """The turn's prompt was carried word for word to the head of what is kept: the next summary's section
    opens with that copy, which a transcript does not show twice."""

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff_index": self.cutoff_index,
            "summary_message": self.summary_message,
            "file_path": self.file_path,
            "time": self.time,
            "condensed_count": self.condensed_count,
            "kept_count": self.kept_count,
            "warning": self.warning,
            "offload_when": self.offload_when,
            "carried": self.carried,
        }


def system_prompt(messages: Sequence[Message]) -> SystemPrompt | None:
    """Message 0 when it is the system message."""
    first = messages[0] if messages else None
    return first if isinstance(first, SystemPrompt) else None


def last_user_index(messages: Sequence[Message]) -> int:
    """The index of the last user message, -1 when there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], UserMessage):
            return i
    return -1


def turn_prompt_index(messages: Sequence[Message]) -> int:
    """The turn's prompt: the last user message the agent did not write itself (`is_synthetic`)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, UserMessage) and not message.is_synthetic:
            return i
    return last_user_index(messages)


def turn_in_progress(messages: Sequence[Message]) -> bool:
    """Whether the newest turn is unfinished: its last message is a prompt, a tool call or a tool result,
    not the model's final reply. Only such a turn gets a ledger: a finished one is summarised whole."""
    if not messages:
        return False
    last = messages[-1]
    if isinstance(last, UserMessage):
        return True
    return isinstance(last, RawOpenAIMessage) and (last.raw.get("role") == "tool" or bool(last.raw.get("tool_calls")))


def _newest_round(messages: Sequence[Message], anchor: int) -> int:
    """The index of the last assistant message after `anchor` that calls tools (the end: none)."""
    for i in range(len(messages) - 1, anchor, -1):
        message = messages[i]
        if isinstance(message, RawOpenAIMessage) and message.raw.get("tool_calls"):
            return i
    return len(messages)


def _turn_ledger(
    messages: Sequence[Message],
    anchor: int,
    turn_start: int,
    cut: int,
    archive: ReclaimedArchive,
    ledger_where: str | None,
    ledger_max_chars: int,
) -> TurnLedger | None:
    """The ledger the new summary frame carries: the current one extended by the calls of the
    running turn that the cut condenses (`turn_start` is its prompt's index, -1 when the cut is not
    inside it); kept as it is while its turn is still in the context; dropped once that turn's prompt
    is condensed (the summarizer is shown it)."""
    system = system_prompt(messages)
    current = system.ledger if system is not None else None
    prompt = messages[anchor] if anchor >= 0 else None
    if not isinstance(prompt, UserMessage):
        return None
    if current is not None and current.prompt != prompt.text:
        current = None  # an earlier turn's ledger: that turn is summarised now
    leaving = messages[turn_start + 1 : cut] if turn_start >= 0 else []
    if not any(isinstance(m, RawOpenAIMessage) and m.raw.get("tool_calls") for m in leaving):
        return current
    params = []
    for message in leaving:
        param = message.completion_param()
        content = param.get("content")
        if param.get("role") == "tool" and isinstance(content, str) and content.startswith("[Compacted"):
            original = archive.original(str(param.get("tool_call_id")))
            if original is not None:
                param = {**param, "content": original}
        params.append(param)
    ledger = (
        TurnLedger(prompt.text, current.calls, list(current.entries), current.where)
        if current
        else TurnLedger(prompt.text)
    )
    if ledger_where is not None:
        ledger.where = ledger_where
    ledger.add_calls(condensed_calls(params), ledger_max_chars)
    return ledger


def plan_summary(
    messages: MessageList,
    keep_recent: int,
    *,
    tokens_per_char: float,
    archive: ReclaimedArchive,
    ledger_where: str | None,
    ledger_max_chars: int,
) -> CompactionPlan:
    """Choose the cut for a summary keeping about `keep_recent` recent messages, changing nothing.

    The anchor is the turn's prompt: the last user message the agent did not write itself.
    1. If the tail from the anchor has at most `keep_recent` messages, cut there.
    2. Otherwise cut at `len - keep_recent` and move forward past tool results, so the tail never
       opens on a tool result whose call was condensed (parallel results stay together). This also
       cuts inside a turn still running (one prompt, hundreds of tool rounds): its older rounds are
       summarised like anything else, and xun writes their calls into the turn ledger
       (`xun.context.ledger`) beside the summary, so that the model, whatever the summary says,
       knows every call that already ran and repeats none.
    3. A prompt before the cut is carried word for word to the head of the tail.
    4. The newest round of a running turn (the last tool call and its results) is always kept: the model
       has not answered it yet, and without it a model that needs the result calls the tool again (a
       file larger than what a summary may keep was read, summarised away and read again, forever).
    """
    if keep_recent < 0:
        raise ValueError("keep_recent must be >= 0")
    n = len(messages)
    has_system = system_prompt(messages) is not None
    first = 1 if has_system else 0
    anchor = turn_prompt_index(messages)
    if anchor >= 0 and n - anchor <= keep_recent:
        cut = anchor  # rule 1
    else:
        cut = max(n - keep_recent, first)
        while cut < n and messages[cut].role == "tool":
            cut += 1
    if anchor >= 0 and turn_in_progress(messages):
        cut = min(cut, _newest_round(messages, anchor))  # rule 4
    cut = max(cut, first)
    carried = messages[anchor] if first <= anchor < cut else None
    assert carried is None or isinstance(carried, UserMessage), "the turn's prompt is a user message"
    condensed = list(messages[:cut])
    kept = ([carried] if carried is not None else []) + list(messages[cut:])
    before = messages.estimated_length()
    after = before - messages.counted_length(first, cut)
    if carried is not None:
        after += messages.counted_length(anchor, anchor + 1)
    # each message also costs its framing (MESSAGE_TOKENS), which a long turn's small rounds are mostly made of
    framing = round(MESSAGE_TOKENS / max(tokens_per_char, 0.05)) * max(cut - first - (carried is not None), 0)
    turn_start = anchor if carried is not None and turn_in_progress(messages) else -1
    turn_rounds = 0
    if turn_start >= 0:
        turn_rounds = sum(
            len(m.raw.get("tool_calls") or ()) for m in messages[anchor + 1 : cut] if isinstance(m, RawOpenAIMessage)
        )
    ledger = (
        _turn_ledger(messages, anchor, turn_start, cut, archive, ledger_where, ledger_max_chars)
        if first <= cut
        else None
    )
    system = system_prompt(messages)
    old_ledger = system.ledger if system is not None else None
    after += _ledger_chars(ledger) - _ledger_chars(old_ledger)
    return CompactionPlan(
        cut_index=cut,
        condensed=condensed,
        kept=kept,
        carried_user=carried,
        estimated_length_before=before,
        estimated_length_after=after,
        message_count=n,
        edits=messages.edits,
        turn_start=turn_start,
        turn_rounds=turn_rounds,
        ledger=ledger,
        framing_chars=framing,
    )
