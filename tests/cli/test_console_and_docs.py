"""The printers (in process) and the README's event table, which must match `xun.base.events`."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from xun.base import events
from xun.cli.console import JsonPrinter, TextPrinter, _discard_typed_ahead, short_arguments, strip_controls

README = Path(__file__).resolve().parents[2] / "README.md"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def event_classes() -> list[type]:
    found = []
    for value in vars(events).values():
        if isinstance(value, type) and issubclass(value, events.Event) and dataclasses.is_dataclass(value):
            if value.type not in ("event",) and value is not events.CompactionEvent:
                found.append(value)
    return found


def test_the_readme_documents_every_event_and_every_field():
    text = README.read_text(encoding="utf-8")
    section = text.split("## Command line", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"^\| `([a-z_]+)`( \*c\*)? \| (.*) \|$", line)
        if match and match.group(1) != "type":  # not the header row
            rows[match.group(1)] = (bool(match.group(2)), match.group(3))
    classes = event_classes()
    assert {cls.type for cls in classes} == set(rows)
    for cls in classes:
        compaction, fields_text = rows[cls.type]
        assert compaction == issubclass(cls, events.CompactionEvent), cls.type
        documented = set(re.findall(r"`([a-z_]+)`", fields_text))
        expected = {f.name for f in dataclasses.fields(cls)} - ({"trigger", "time"} if compaction else set())
        assert expected <= documented, (cls.type, expected - documented)


def test_json_printer_writes_one_object_per_event_and_redacts():
    out, err = io.StringIO(), io.StringIO()
    printer = JsonPrinter(out, err, redact=["sk-secret-123456"])
    printer(events.TextDelta(text="line one\nline two"))
    printer(events.Error(message="bad key sk-secret-123456 rejected"))
    printer(events.ToolResultsReclaimed(ids=("a", "b"), count=2, trigger="auto"))
    printer.note("a note")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[0]) == {"type": "text_delta", "text": "line one\nline two"}
    assert json.loads(lines[1])["message"] == "bad key [redacted] rejected"
    assert json.loads(lines[2])["ids"] == ["a", "b"]
    assert err.getvalue() == "xun: a note\n"


def test_text_printer_puts_the_reply_on_stdout_and_the_rest_on_stderr():
    out, err = io.StringIO(), io.StringIO()
    printer = TextPrinter(out, err, color=False)
    printer(events.TurnStarted(prompt="p"))
    printer(events.ReasoningDelta(text="thinking"))
    printer(events.TextDelta(text="Hello"))
    printer(events.TextDelta(text=" world"))
    printer(events.AssistantMessage(content="Hello world"))
    printer(events.ToolCallStarted(id="1", name="read_file", arguments='{"path": "a.txt", "limit": 20}'))
    printer(events.ToolCallFinished(id="1", name="read_file", result_chars=1234, duration=0.5))
    printer(events.Retry(attempt=1, attempts=3, delay=0.5, reason="HTTP 500"))
    printer(
        events.SummaryFinished(
            message="Summarised 4 messages, kept 2.",
            tokens_before=1000,
            tokens_after=300,
            offload_path="/x.md",
            trigger="emergency",
        )
    )
    printer(events.Usage(total_tokens=900, estimated_tokens=950, threshold=2000))
    printer(events.TurnFinished())
    assert out.getvalue() == "Hello world\n"
    assert err.getvalue().splitlines() == [
        "thinking",
        '[tool] read_file path="a.txt" limit=20',
        "[tool] read_file -> 1,234 characters in 0.50 s",
        "[retry] HTTP 500; try 2 of 3 in 0.5 s",
        "[compaction] emergency: Summarised 4 messages, kept 2. ~1,000 -> ~300 tokens; originals in /x.md",
        "[context] ~950 tokens, estimated (last reported by the server: 900); compaction above 2,000 (window unknown)",
    ]
    printer(events.Usage(total_tokens=None, estimated_tokens=50, threshold=2000))
    printer(events.TurnFinished())
    assert (
        err.getvalue()
        .splitlines()[-1]
        .startswith("[context] ~50 tokens, estimated (last reported by the server: none for the context as it is)")
    ), "no summary to blame when the server simply sent no count"


def test_text_printer_on_a_terminal_removes_escape_sequences_and_ends_lines():
    out, err = Terminal(), Terminal()
    printer = TextPrinter(out, err, color=False)
    printer(events.TextDelta(text="safe \x1b]0;pwned\x07text \x1b[2Jhere"))
    printer(events.Warning(message="careful\x1b[31m!"))
    assert out.getvalue() == "safe text here\n"  # the partial line was closed before the stderr line
    assert err.getvalue() == "[warning] careful!\n"
    piped = io.StringIO()
    TextPrinter(piped, io.StringIO())(events.TextDelta(text="raw \x1b[1m"))
    assert piped.getvalue() == "raw \x1b[1m"  # into a pipe the text is passed on as the model wrote it


def test_a_closed_pipe_stops_output_without_raising():
    printer = TextPrinter(Broken(), io.StringIO())
    printer(events.TextDelta(text="x"))
    printer(events.TextDelta(text="y"))
    JsonPrinter(Broken(), io.StringIO())(events.Info(message="x"))


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ('{"path": "a.txt"}', 'path="a.txt"'),
        ('{"command": "' + "x" * 200 + '"}', 'command="' + "x" * 57 + '…"'),
        ("not json", "not json"),
        ('{"content": "two\\nlines"}', 'content="two lines"'),
    ],
)
def test_short_arguments(raw, shown):
    assert short_arguments(raw) == shown


def test_strip_controls_keeps_newlines_and_tabs():
    assert strip_controls("a\tb\nc\x00d\x1b[0me") == "a\tb\ncde"


@pytest.mark.parametrize("stream", [io.StringIO("y\n"), None], ids=["no file descriptor", "no stream"])
def test_discarding_typed_ahead_keys_is_quiet_when_there_is_no_terminal(stream):
    """Before a confirmation the keys typed ahead are dropped; a stream with no descriptor has none to drop
    (it once fell through to code of another function and raised NameError)."""
    assert _discard_typed_ahead(stream) is None


def test_run_help_and_the_readme_name_the_real_turn_limit(cli):
    """Trial D #21: `xun run --help` said "default 50" while a turn stopped at 500, as the README says."""
    from xun.base.arguments import DEFAULT_MAX_ITERATIONS

    shown = " ".join(cli.inproc("run", "--help").check(0).stdout.split())
    assert f"stop after N model calls (default {DEFAULT_MAX_ITERATIONS})" in shown, shown
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"`--max-iterations` model calls, {DEFAULT_MAX_ITERATIONS} by default" in readme
