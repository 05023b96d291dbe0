"""The terminal's keys and pastes, read as a person means them (Textual's parser, three things changed).

A paste that holds escape codes stays one paste, in order, as text. Copied terminal output is full of
colour codes. Textual's input parser reads an escape inside a bracketed paste as the start of a key
sequence: it sends the sequence's characters as keys, so the paste came apart (its start moved to its
end, an ESC turned into "^[") and every pasted line break became an Enter: one paste of a coloured test
log sent each of its lines as a prompt. Here the terminal's bytes are read ahead of that parser: a
bracketed paste is held whole until its end marker, its escape sequences and other control characters
are taken out (what the terminal showed is the text), and it goes on to the parser as a paste with no
escape in it.

Nothing that comes with a paste is a key. Copied text may hold an end-of-paste marker of its own, which
the terminal passes on as it is: what follows it would be read as typed keys, an "s" answering the
confirmation in view, an arrow, a keypad Enter or a carriage return sending a prompt nobody sent. So
everything after a paste's end marker, in the same read and in every read that follows before
`PASTE_QUIET_SECONDS` pass without input, is held and goes on as one more paste. A terminal sends a
paste's bytes back to back (the reads of a 300 kB paste came at most 0.06 s after the one before was
handled, on two busy cores); a person's next key comes later.

Esc, then a letter typed at once, is Esc and the letter (and ESC CR is Alt+Enter, a new line, not Enter).
Textual read ESC and a character within 0.1 s as Alt and that character: a person who closed a dialog
with Esc and went on typing at once lost the Esc, and their next letters ran the dialog's keys. xun binds
no Alt+letter key, and a terminal sends the same bytes for both."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

from textual import events

from xun.tui.textual_private import XTermParser

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
PASTE_QUIET_SECONDS = 0.2
"""Input after a paste's end marker is the paste's until this long passes with no input (see the module)."""
SEQUENCE_STARTS = frozenset("[O]P_^XN\\")
"""After ESC, the characters that begin a longer sequence (CSI, SS3, OSC, DCS, APC, PM, SOS, SS2, ST)."""

CONTROL_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, links, the clipboard; ended by BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC
    r"|\x1b[NO][ -~]"  # SS2, SS3 and their character: the keypad's keys, F1 to F4
    r"|\x1b[ -~]?"  # any other escape, and a lone ESC
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]"  # the other controls (tab and line ends stay)
)


def pasted_text(raw: str) -> str:
    """What a paste means as text: its escape sequences and control characters taken out."""
    return CONTROL_SEQUENCE.sub("", raw)


class TerminalInputParser(XTermParser):
    """Textual's parser, fed each bracketed paste whole and without escapes, never reading what comes with a
    paste as keys, and reading ESC and a character as Esc and the character (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pasting: str | None = None
        """The paste so far (its end marker not yet read), or None outside a paste."""
        self._tail = ""
        """Outside a paste: the end of the last chunk, where a start marker may have begun."""
        self._after_paste: str | None = None
        """What came after a paste's end marker, not yet followed by a quiet gap: the paste's, never keys."""
        self._input_at = 0.0
        """When the last input was read and handled (`time.monotonic`)."""

    def feed(self, data: str) -> Iterable[Any]:
        if not data:  # the end of input: what a paste cut short holds goes as it is
            yield from self._paste_after()
            if self._pasting is not None:
                held, self._pasting = self._pasting, None
                yield from super().feed(pasted_text(held))
            yield from super().feed(data)
            return
        if self._quiet():
            yield from self._paste_after()
        self._input_at = time.monotonic()
        passed = self._through(data)
        if passed:  # (an empty feed would tell the parser the input ended)
            yield from super().feed(passed)
        self._input_at = time.monotonic()  # the gap is counted from here: handling a long read takes time

    def tick(self) -> Iterable[Any]:
        if self._quiet():
            yield from self._paste_after()
        yield from super().tick()

    def _quiet(self) -> bool:
        return self._after_paste is not None and time.monotonic() - self._input_at >= PASTE_QUIET_SECONDS

    def _paste_after(self) -> Iterable[Any]:
        """What came after a paste's end marker, as one more paste (nothing when it is no text)."""
        if self._after_paste is None:
            return
        held, self._after_paste = self._after_paste, None
        start, end = held.rfind(PASTE_START), held.rfind(PASTE_END)
        if start > end:  # a paste began there and has not ended: it is held on until its end marker
            held, self._pasting = held[:start], held[start + len(PASTE_START) :]
        text = pasted_text(held)
        if text:
            yield from super().feed(PASTE_START + text + PASTE_END)
        if self._pasting is not None:
            yield from super().feed(PASTE_START)

    def _sequence_to_key_events(self, sequence: str, alt: bool = False) -> Iterable[events.Key]:
        if sequence == "\x1b\r":  # Alt+Enter, what terminals that cannot send Shift+Enter are set to send:
            yield events.Key("alt+enter", None)  # a new line, not Enter (it sent half-written prompts)
            return
        if (
            len(sequence) == 2
            and sequence[0] == "\x1b"
            and sequence[1] not in SEQUENCE_STARTS
            and sequence[1].isprintable()
        ):
            yield events.Key("escape", "\x1b")
            yield from super()._sequence_to_key_events(sequence[1])
            return
        yield from super()._sequence_to_key_events(sequence, alt)

    def _through(self, data: str) -> str:
        """`data` as the parser should see it; a paste not yet ended, and what follows one, are kept back."""
        out: list[str] = []
        while data:
            if self._after_paste is not None:  # markers included: all of it is text
                self._after_paste += data
                break
            if self._pasting is None:
                seen = self._tail + data
                start = seen.find(PASTE_START)
                if start < 0:
                    out.append(data)
                    self._tail = seen[-(len(PASTE_START) - 1) :]
                    break
                begins = start + len(PASTE_START) - len(self._tail)  # where the paste's text starts in data
                out.append(data[:begins])
                data, self._pasting, self._tail = data[begins:], "", ""
            else:
                held = self._pasting + data
                end = held.find(PASTE_END)
                if end < 0:
                    self._pasting = held
                    break
                out.append(pasted_text(held[:end]) + PASTE_END)
                data, self._pasting, self._after_paste = held[end + len(PASTE_END) :], None, ""
        return "".join(out)


def install() -> None:
    """Make the drivers read input with `TerminalInputParser` (before the app runs): the terminal's, and the
    browser's under `xun serve` (a page's terminal passes a paste's bytes on just as a terminal does)."""
    from textual import constants
    from textual.drivers import linux_driver

    linux_driver.XTermParser = TerminalInputParser  # type: ignore[misc]  # each driver makes one per run
    if constants.DRIVER and "web_driver" in constants.DRIVER:  # (imported only then: it costs the first frame)
        from textual.drivers import web_driver

        web_driver.XTermParser = TerminalInputParser  # type: ignore[misc]
