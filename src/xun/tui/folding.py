"""A text too long for a block in the chat is folded: its first and last lines are drawn, with a line that
says how much is between them. Every block the chat mounts is laid out again at each resize (its height
is measured by rendering it whole at the new width): a block holding a 50,000-line paste or an 800k-character
reply made each resize, and each layout after a scroll loaded older turns, cost hundreds of milliseconds
more. The whole text stays in the block, and the reader screen shows it, rendering only the rows in view."""

from __future__ import annotations

import re
from dataclasses import dataclass

FOLD_LINES = 1_000
"""A text of more lines than this is folded."""
FOLD_CHARS = 80_000
"""A text of more characters than this is folded (Rich lays out about 1.5 MB of Markdown a second)."""
HEAD_LINES, HEAD_CHARS = 40, 4_000
"""What a folded text shows above its fold line, at most."""
TAIL_LINES, TAIL_CHARS = 10, 1_000
"""What a folded text shows below its fold line, at most."""
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Folded:
    head: str
    tail: str
    hidden_lines: int
    """The lines between head and tail (a line cut by either counts)."""
    hidden_chars: int

    def fold_line(self, how: str = "click or o opens it whole") -> str:
        if self.hidden_lines > 1:
            return f"⋯ {self.hidden_lines:,} more lines ({self.hidden_chars:,} characters) folded · {how}"
        return f"⋯ {self.hidden_chars:,} more characters folded · {how}"


def needs_folding(text: str) -> bool:
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES


def _head_end(text: str) -> int:
    """Where the head ends: after its HEAD_LINES-th line, within HEAD_CHARS (at a line's end when one is)."""
    end = 0
    for _ in range(HEAD_LINES):
        newline = text.find("\n", end, HEAD_CHARS)
        if newline < 0:
            break
        end = newline + 1
    return end or min(len(text), HEAD_CHARS)


def _tail_start(text: str, head_end: int) -> int:
    """Where the tail starts: its TAIL_LINES last lines, within TAIL_CHARS, never before the head's end."""
    floor = max(head_end, len(text) - TAIL_CHARS)
    start = len(text.rstrip("\n"))
    found = False
    for _ in range(TAIL_LINES):
        newline = text.rfind("\n", floor, start)
        if newline < 0:
            break
        start, found = newline, True
    return start + 1 if found else floor


def fold(text: str) -> Folded | None:
    """The head and tail a block shows of `text`, or None when it is short enough to show whole."""
    if not needs_folding(text):
        return None
    head_end = _head_end(text)
    tail_start = _tail_start(text, head_end)
    hidden = text[head_end:tail_start]
    return Folded(text[:head_end], text[tail_start:], hidden.count("\n") + (not hidden.endswith("\n")), len(hidden))


def markdown_fold(text: str) -> Folded | None:
    """`fold` for Markdown: a head that stops inside a code fence closes it, a tail that starts inside one
    opens it, so each side renders as it does in the whole (the fold never turns code into prose)."""
    folded = fold(text)
    if folded is None:
        return None
    head, tail = folded.head, folded.tail
    fences = FENCE.findall(head)
    if len(fences) % 2:
        head = head.rstrip("\n") + "\n" + fences[-1] + "\n"
    before_tail = FENCE.findall(text, 0, len(text) - len(tail)) if tail else []
    if len(before_tail) % 2:
        tail = before_tail[-1] + "\n" + tail
    return Folded(head, tail, folded.hidden_lines, folded.hidden_chars)
