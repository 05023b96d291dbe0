"""Engine events on a terminal or into a pipe: text for people (`TextPrinter`), JSON lines for programs
(`JsonPrinter`), and the y/s/N confirmation prompt of `xun run` on a terminal.

Text mode: the reply streams to standard output as it arrives; reasoning (dimmed on a terminal), tool
calls, retries, compaction and other notes go to standard error, one short line each. Output meant for a
terminal has control characters removed, so a model or a tool cannot send escape sequences to it. Every
string written passes through the redaction list (the API key), the last line of defence.

Standard library only at import time: a printer is built before the agent exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from collections.abc import Iterable
from typing import Any, TextIO

from xun.base.valid_text import escape_control, escape_control_json, valid_text
from xun.context.usage import usage_totals_line

_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_DIM, _YELLOW, _RED, _RESET = "\x1b[2m", "\x1b[33m", "\x1b[31m", "\x1b[0m"
MAX_ARGUMENT_CHARS = 60
MAX_LINE_CHARS = 300


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Visible:
    """A stream for text from outside xun (files, sessions, offload logs, config keys, servers) printed by a
    command: every control character is shown (`\\x1b`, or `\\u001b` in JSON lines), so an escape code in a
    file cannot set the terminal's title, write its clipboard or clear it."""

    def __init__(self, stream: TextIO, *, json_lines: bool = False) -> None:
        self.stream = stream
        self.escape = escape_control_json if json_lines else escape_control

    def write(self, text: str) -> int:
        return self.stream.write(self.escape(valid_text(text)))

    def flush(self) -> None:
        self.stream.flush()


def strip_controls(text: str) -> str:
    """Text without terminal escape sequences and control characters (newlines and tabs stay)."""
    return _CONTROL.sub("", text)


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """Collapse whitespace (newlines included) and cut to `limit` characters."""
    flat = " ".join(strip_controls(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_arguments(arguments: str) -> str:
    """Tool-call arguments as `key=value` pairs, each value cut short: `path="notes.txt" limit=200`."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return one_line(arguments, MAX_ARGUMENT_CHARS * 2)
    if not isinstance(parsed, dict):
        return one_line(arguments, MAX_ARGUMENT_CHARS * 2)
    parts = []
    for key, value in parsed.items():
        text = one_line(value, 10_000) if isinstance(value, str) else value
        shown = json.dumps(text, ensure_ascii=False)
        if len(shown) > MAX_ARGUMENT_CHARS:
            shown = (
                shown[: MAX_ARGUMENT_CHARS - 2] + "…" + shown[-1:]
                if shown.startswith('"')
                else shown[: MAX_ARGUMENT_CHARS - 1] + "…"
            )
        parts.append(f"{key}={shown}")
    return " ".join(parts)


def _cache_cost(event: Any) -> str:
    """What a change of the prompt costs in the server's prompt cache ("" when nothing changed)."""
    if event.cache_miss_tokens is None or event.saved_per_call is None:
        return ""
    return (
        f" (prompt cache: the next call pays ~{event.cache_miss_tokens:,} uncached, each later one "
        f"~{event.saved_per_call:,} fewer)"
    )


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


class _Output:
    """Writes that survive a closed pipe (the reader went away: stop writing, keep working) and redact."""

    def __init__(self, redact: Iterable[str] = ()) -> None:
        self.redact = [value for value in redact if isinstance(value, str) and len(value) >= 8]
        self._broken: set[int] = set()

    def add_secret(self, value: str | None) -> None:
        if isinstance(value, str) and len(value) >= 8 and value not in self.redact:
            self.redact.append(value)

    def scrub(self, text: str) -> str:
        for secret in self.redact:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text

    def write(self, stream: TextIO, text: str) -> None:
        if not text or id(stream) in self._broken:
            return
        try:
            stream.write(valid_text(self.scrub(text)))
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._broken.add(id(stream))


class JsonPrinter(_Output):
    """`--json`: exactly one JSON object per engine event on stdout (`event.to_json()`), nothing else.

    Notes of the command line itself go to stderr as `xun: ...` lines."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, redact: Iterable[str] = ()) -> None:
        super().__init__(redact)
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr

    def __call__(self, event: Any) -> None:
        line = escape_control_json(json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"), default=str))
        self.write(self.out, line + "\n")

    def note(self, text: str) -> None:
        self.write(self.err, f"xun: {one_line(text, 2000)}\n")

    def finish(self) -> None:
        pass


class TextPrinter(_Output):
    """Text mode: the reply on stdout, everything else as short lines on stderr.

    `compaction_out` is where compaction events go (stderr for `xun run`, stdout for `xun compact`,
    whose whole point they are)."""

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        redact: Iterable[str] = (),
        color: bool | None = None,
        compaction_out: TextIO | None = None,
    ) -> None:
        super().__init__(redact)
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.compaction_out = compaction_out if compaction_out is not None else self.err
        self.out_tty = _isatty(self.out)
        self.err_tty = _isatty(self.err)
        if color is None:
            color = self.err_tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        self.color = color
        self.last_usage: Any = None
        self.replied = False
        self._out_open = False  # stdout holds a started line
        self._err_open = False  # stderr holds started reasoning

    # -------------------------------------------------------------- low level

    def _style(self, text: str, style: str) -> str:
        return f"{style}{text}{_RESET}" if self.color and style else text

    def _end_lines(self, target: TextIO) -> None:
        """Close partial lines so a line written to `target` starts on its own line (stdout is touched
        for a stderr line only when it is a terminal, which stderr then most likely shares)."""
        if self._err_open:
            self.write(self.err, "\n")
            self._err_open = False
        if self._out_open and (target is self.out or self.out_tty):
            self.write(self.out, "\n")
            self._out_open = False

    def line(self, text: str, style: str = "", stream: TextIO | None = None) -> None:
        """One line on stderr (or `stream`), starting on a fresh line."""
        target = stream if stream is not None else self.err
        self._end_lines(target)
        self.write(target, self._style(one_line(text, 2000), style) + "\n")

    def note(self, text: str) -> None:
        """A message of the command line itself."""
        self.line(f"xun: {text}")

    def text(self, text: str) -> None:
        if self._err_open:
            self.write(self.err, "\n")
            self._err_open = False
        shown = strip_controls(text) if self.out_tty else text
        self.write(self.out, shown)
        if shown:
            self._out_open = not shown.endswith("\n")
            self.replied = True

    def reasoning(self, text: str) -> None:
        if self._out_open and self.out_tty:
            self.write(self.out, "\n")
            self._out_open = False
        shown = strip_controls(text) if self.err_tty else text
        self.write(self.err, self._style(shown, _DIM))
        if shown:
            self._err_open = not shown.endswith("\n")

    def finish(self) -> None:
        """End any partial line (stdout always ends with a newline after a reply)."""
        if self._err_open:
            self.write(self.err, "\n")
            self._err_open = False
        if self._out_open:
            self.write(self.out, "\n")
            self._out_open = False

    # ----------------------------------------------------------------- events

    def __call__(self, event: Any) -> None:
        handler = getattr(self, "_on_" + event.type, None)
        if handler is None:
            data = {k: v for k, v in event.to_json().items() if k != "type"}
            self.line(f"[{event.type}] {json.dumps(data, ensure_ascii=False, default=str)}", _DIM)
            return
        handler(event)

    def _on_turn_started(self, event: Any) -> None:
        pass

    def _on_text_delta(self, event: Any) -> None:
        self.text(event.text)

    def _on_reasoning_delta(self, event: Any) -> None:
        self.reasoning(event.text)

    def _on_assistant_message(self, event: Any) -> None:
        self.finish()

    def _on_tool_call_started(self, event: Any) -> None:
        arguments = short_arguments(event.arguments)
        self.line(f"[tool] {one_line(event.name, 80)} {arguments}".rstrip(), _DIM)

    def _on_tool_call_finished(self, event: Any) -> None:
        name = one_line(event.name, 80)
        if event.denied:
            self.line(f"[tool] {name} refused: {one_line(event.error or '', 240)}", _YELLOW)
        elif event.is_error:
            self.line(f"[tool] {name} failed: {one_line(event.error or '', 240)}", _YELLOW)
        else:
            cut = f", {event.truncated_chars:,} characters cut" if event.truncated_chars else ""
            self.line(
                f"[tool] {name} -> {_plural(event.result_chars, 'character')} in {event.duration:.2f} s{cut}", _DIM
            )

    def _on_usage(self, event: Any) -> None:
        self.last_usage = event

    def _on_info(self, event: Any) -> None:
        self.line(f"[info] {event.message}", _DIM)

    def _on_mcp_server(self, event: Any) -> None:
        if event.state == "ready":
            self.line(f"[mcp] {event.name}: ready with {event.tools} tool{'s' if event.tools != 1 else ''}", _DIM)
        elif event.state == "failed":
            self.line(f"[mcp] {event.name} failed: {one_line(event.reason, 400)}", _YELLOW)

    def _on_warning(self, event: Any) -> None:
        self.line(f"[warning] {event.message}", _YELLOW)

    def _on_error(self, event: Any) -> None:
        self.line(f"[error] {event.message}", _RED)

    def _on_retry(self, event: Any) -> None:
        self.line(
            f"[retry] {event.reason}; try {event.attempt + 1} of {event.attempts} in {event.delay:.1f} s", _YELLOW
        )

    def _compaction(self, event: Any, text: str, style: str = "") -> None:
        self.line(f"[compaction] {event.trigger}: {text}", style, self.compaction_out)

    def _on_tool_results_reclaimed(self, event: Any) -> None:
        if not event.count:
            self._compaction(event, "no old tool results to reclaim")
            return
        results, arguments = event.count - event.arguments, event.arguments
        what = " and ".join(
            filter(
                None,
                (
                    _plural(results, "old tool result") if results else "",
                    f"the arguments of {_plural(arguments, 'old call')}" if arguments else "",
                ),
            )
        )
        self._compaction(
            event,
            f"reclaimed {what} "
            f"({event.fraction:.0%} of the estimated length): ~{event.tokens_before:,} -> "
            f"~{event.tokens_after:,} tokens{_cache_cost(event)}; recoverable with extract_compacted_tool_result",
        )

    def _on_summary_started(self, event: Any) -> None:
        focus = f" (focus: {event.focus})" if event.focus else ""
        self._compaction(event, f"summarising {_plural(event.condensed, 'message')}, keeping {event.kept:,}{focus}")

    def _on_summary_finished(self, event: Any) -> None:
        where = f"; originals in {event.offload_path}" if event.offload_path else ""
        because = event.own_because or "the model gave no usable summary"
        how = f" (xun's own extractive summary: {because})" if event.method == "extractive" else ""
        pieces = f" in {event.pieces} pieces" if event.pieces > 1 else ""
        self._compaction(
            event,
            f"{event.message}{how}{pieces} ~{event.tokens_before:,} -> ~{event.tokens_after:,} tokens"
            f"{_cache_cost(event)}{where}",
        )

    def _on_summary_rejected(self, event: Any) -> None:
        then = {"retry": "asking once more", "extractive": "writing an extractive summary instead"}.get(
            event.next, event.next
        )
        self._compaction(event, f"summary rejected: {event.reason}; {then}", _YELLOW)

    def _on_tool_result_restored(self, event: Any) -> None:
        self._compaction(
            event, f"restored tool result {event.id}: ~{event.tokens_before:,} -> ~{event.tokens_after:,} tokens"
        )

    def _on_compaction_skipped(self, event: Any) -> None:
        self._compaction(event, f"skipped: {event.reason}")

    def _on_compaction_failed(self, event: Any) -> None:
        self._compaction(event, f"failed: {event.reason}", _YELLOW)

    def _on_turn_finished(self, event: Any) -> None:
        self.finish()
        usage = self.last_usage
        if usage is not None:
            reported = f"{usage.total_tokens:,}" if usage.total_tokens is not None else "none for the context as it is"
            window = (
                f" (window {usage.context_window:,}, {usage.window_source})"
                if usage.context_window
                else " (window unknown)"
            )
            self.line(
                f"[context] ~{usage.estimated_tokens:,} tokens, estimated (last reported by the server: {reported}); "
                f"compaction above {usage.threshold:,}{window}",
                _DIM,
            )
            if usage.session_totals and usage.session_totals.get("calls"):
                self.line(f"[usage] {usage_totals_line(usage.session_totals, usage.session_cost)}", _DIM)


# ------------------------------------------------------------------------------------ confirmations


async def read_line(stream: TextIO) -> str | None:
    """One line typed on `stream` (a terminal) without blocking the event loop; None at end of input.

    Cancelling the waiting task (Ctrl+C) leaves nothing behind: the reader is removed, or the helper
    thread is a daemon."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[bytes] = loop.create_future()
    fd = stream.fileno()

    def ready() -> None:
        if future.done():
            return
        try:
            future.set_result(os.read(fd, 4096))
        except OSError as exc:
            future.set_exception(exc)

    try:
        loop.add_reader(fd, ready)
    except (NotImplementedError, ValueError, OSError):

        def in_thread() -> None:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            loop.call_soon_threadsafe(lambda: None if future.done() else future.set_result(data))

        threading.Thread(target=in_thread, name="xun-confirm", daemon=True).start()
        data = await future
    else:
        try:
            data = await future
        finally:
            loop.remove_reader(fd)
    return data.decode("utf-8", "replace") if data else None


class TerminalConfirm:
    """Asks on stderr whether a tool with side effects may run, with the keys of the app
    (`xun.agent.tools.CONFIRM_KEYS`): y once, s for the session, n or anything else (Enter) no.

    The whole preview is printed (the terminal's scrollback scrolls it; the tools refuse what is too
    large to review), and input typed before the question was shown is discarded, so it cannot answer."""

    def __init__(self, printer: TextPrinter, stdin: TextIO | None = None) -> None:
        self.printer = printer
        self.stdin = stdin if stdin is not None else sys.stdin

    async def __call__(self, request: Any) -> Any:
        from xun.agent.tools import CONFIRM_KEYS, Decision

        printer = self.printer
        _discard_typed_ahead(self.stdin)  # before the question shows: what was typed until now is not an answer
        printer.line(f"[confirm] {request.title}", _YELLOW)
        for text in strip_controls(request.preview or "").splitlines():
            printer.write(printer.err, "    " + text + "\n")
        printer.write(printer.err, f"Allow? [y] once, [s] every {request.tool} call this session, [N]o: ")
        printer._err_open = True  # until the answer's newline: a Ctrl+C here leaves the line open
        answer = await read_line(self.stdin)
        printer._err_open = False
        if answer is None:
            printer.write(printer.err, "\n")
            return Decision.DENY
        word = answer.strip().lower()
        return (
            CONFIRM_KEYS.get(word[:1], Decision.DENY)
            if word in {"y", "yes", "s", "session", "n", "no"}
            else Decision.DENY
        )


def _discard_typed_ahead(stream: TextIO) -> None:
    """Drop what was typed on the terminal before the question (a no-op when it is not a terminal)."""
    try:
        import termios

        if os.isatty(stream.fileno()):
            termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError, AttributeError):
        pass
