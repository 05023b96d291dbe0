"""How numbers, times and sizes read on screen, text from outside xun as text, and the knobs that make a
screenshot repeatable."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.content import Content

from xun.base.valid_text import escape_control


def literal(text: str, *, flat: bool = False) -> Content:
    """Text xun did not write (a file, a server's error, a model's reply, a config key, MCP stderr) for any
    widget, toast, title, tooltip or table cell: never read as markup (`[@click=…]` is not a link, `[/]`
    is not an error), and its control characters shown as `\\x1b`, so no escape code reaches the terminal.
    Textual reads a plain `str` as markup almost everywhere; this is the one way such text goes on screen."""
    return Content(escape_control(text, keep_newlines=not flat))


def tokens(count: float | None) -> str:
    """`886`, `12.4k`, `192k`, `1.2M`; an em dash for an unknown count."""
    if count is None:
        return "—"
    value = round(float(count))
    if abs(value) < 1000:
        return str(value)
    if abs(value) < 1_000_000:
        text = f"{value / 1000:.1f}"
        suffix = "k"
    else:
        text = f"{value / 1_000_000:.1f}"
        suffix = "M"
    if text.endswith(".0") and value % 1000 == 0:
        text = text[:-2]
    return text + suffix


NO_SERVER_COUNT = "no count from the server for the context as it is (no call since it changed, or none sent)"
"""Why only an estimate stands (/tokens, the breakdown): the context changed after the last call (a summary,
/clear, another session), no call was made yet, or the server sends no usage."""

TOKENS_PER_CHAR = 0.25
"""The usual rule of thumb (four characters a token) for the size of one text, such as a tool result.
The conversation's calibrated ratio includes fixed overheads (tool schemas) and is far off for one text."""


def counted(number: int, noun: str, plural: str = "") -> str:
    """`1 message`, `0 messages`, `2,000 messages` (`plural` where an s is wrong: summary, summaries)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def percent(part: float, whole: float) -> int:
    return round(100 * part / whole) if whole > 0 else 0


def local_clock(timestamp: float) -> str:
    """Wall-clock time of day (local), to the second."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def local_moment(timestamp: float, now: float | None = None) -> str:
    """Date and time (local) for things that may be days old, such as saved sessions, no longer than it
    needs to be: "11:29" today, "Dec 04 11:29" this year, "2025-12-04" before (a narrow list cut
    "2026-12-05 11:29" to "2026-12-05 11")."""
    moment, today = time.localtime(timestamp), time.localtime(now)
    if moment.tm_year != today.tm_year:
        return time.strftime("%Y-%m-%d", moment)
    if moment.tm_yday != today.tm_yday:
        return time.strftime("%b %d %H:%M", moment)
    return time.strftime("%H:%M", moment)


def short_duration(seconds: float) -> str:
    """`3 ms`, `1.4 s`, `2 m 05 s`."""
    if seconds < 1:
        return f"{max(seconds * 1000, 0):.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} m {rest:02d} s"


def chars(count: int) -> str:
    return f"{count:,} chars"


def shown_path(path: str | None, workdir: Path) -> str:
    """A path relative to the working directory when it is inside it."""
    if not path:
        return ""
    try:
        return str(Path(path).resolve().relative_to(workdir.resolve()))
    except (ValueError, OSError):
        return str(path)


def one_line(text: str, limit: int = 80) -> str:
    """Whitespace collapsed, control characters shown (`\\x1b`), cut with an ellipsis."""
    flat = " ".join(escape_control(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


@dataclass(frozen=True)
class Presentation:
    """Everything on screen that depends on the moment: how times and durations are written, and
    whether cursors blink. `Presentation.fixed()` makes screenshots the same on every run."""

    clock: Callable[[float], str] = local_clock
    moment: Callable[[float], str] = local_moment
    duration: Callable[[float], str] = short_duration
    cursor_blink: bool = True
    countdown: bool = True
    """Whether a question's "runs in N s" counts down (a screenshot's stays at its start)."""

    @classmethod
    def fixed(cls) -> Presentation:
        return cls(
            clock=lambda _t: "12:00:00",
            moment=lambda _t: "Jan 01 12:00",
            duration=lambda _s: "5 ms",
            cursor_blink=False,
            countdown=False,
        )
