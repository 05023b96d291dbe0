"""The turns a summary took out, read back from the offload log for the chat: one summary's section is read
as a stream (the sections before it skipped by their headings' bytes), it is the same section a whole parse
picks, and no log stays in memory after it (a session of weeks has a log of tens of megabytes)."""

from __future__ import annotations

import gc
import mmap
import tracemalloc
from pathlib import Path

import pytest

from xun.base import paths
from xun.context import offload
from xun.context.messages import RawOpenAIMessage, UserMessage
from xun.context.offload import append_offload, heading_offset, iter_offload_log, read_offload_log, read_section
from xun.tui.transcript import OffloadedItem, offloaded_items, whole_history


def turns(tag: str, rounds: int, result_chars: int = 40) -> list:
    messages: list = []
    for i in range(rounds):
        messages.append(
            UserMessage(f"{tag} question {i}\n## Offloaded at 2026-01-01T00:00:02Z (quoted, not a heading)")
        )
        call = {"id": f"{tag}_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages.append(RawOpenAIMessage({"role": "assistant", "content": None, "tool_calls": [call]}))
        messages.append(RawOpenAIMessage({"role": "tool", "tool_call_id": f"{tag}_{i}", "content": "x" * result_chars}))
        messages.append(RawOpenAIMessage({"role": "assistant", "content": f"{tag} answer {i}"}))
    return messages


SECTIONS = [  # (when, conversation, tag): a time written twice, and one of another conversation
    ("2026-01-01T00:00:01Z", "one", "a"),
    ("2026-01-01T00:00:02Z", "other", "b"),
    ("2026-01-01T00:00:02Z", "one", "c"),
    ("2026-01-01T00:00:02Z", "one", "d"),
    ("2026-01-01T00:00:03Z", "one", "e"),
]


def write_log(root: Path, rounds: int = 3, result_chars: int = 40) -> Path:
    log = paths.offload_dir(root) / "one.md"
    log.parent.mkdir(parents=True)
    for when, conversation, tag in SECTIONS:
        append_offload(log, turns(tag, rounds, result_chars), conversation_id=conversation, when=when)
    return log


def test_each_summary_reads_the_section_a_whole_parse_picks(tmp_path: Path):
    log = write_log(tmp_path)
    items = [
        OffloadedItem(str(log), "2026-01-01T00:00:01Z", 0, "one", 12),
        OffloadedItem(str(log), "2026-01-01T00:00:02Z", 1, "one", 12),  # the other conversation's is passed over
        OffloadedItem(str(log), "2026-01-01T00:00:02Z", 2, "one", 12, repeat=1),
        OffloadedItem(str(log), "2026-01-01T00:00:02Z", 2, "one", 12, repeat=5),  # fewer: the last of them
        OffloadedItem(str(log), "2026-01-01T00:00:03Z", 3, "one", 12),
        OffloadedItem(str(log), None, 3, "one", 12),  # no time recorded: the conversation's fourth
        OffloadedItem(str(log), "2026-01-01T00:00:09Z", 1, "one", 12),  # no such time: by its ordinal
    ]
    firsts = []
    for item in items:
        streamed, problems = whole_history([item])
        assert problems == [] and streamed == offloaded_items(item, parsed={})
        firsts.append(streamed[0].text.split()[0])
    assert firsts == ["a", "c", "d", "d", "e", "e", "c"]


def test_a_heading_is_found_by_its_bytes_and_read_from(tmp_path: Path):
    log = write_log(tmp_path)
    sections = read_offload_log(log)
    start = heading_offset(log, "2026-01-01T00:00:02Z")
    assert start is not None and log.read_bytes()[start:].startswith(b"## Offloaded at 2026-01-01T00:00:02Z\n")
    tail = [part for part in iter_offload_log(log, start=start) if not hasattr(part, "speaker")]
    assert [(s.when, s.conversation_id) for s in tail] == [(s.when, s.conversation_id) for s in sections[1:]]
    assert heading_offset(log, "2026-01-01T00:00:01Z") == 0
    assert heading_offset(log, "2026-01-01T00:00:0") is None  # a time is matched whole
    assert heading_offset(log, "2026-01-01T00:00:09Z") is None


def test_a_section_read_in_one_piece_is_the_one_the_stream_reads(tmp_path: Path):
    """Entries of several lines, blank and indented lines, a comment inside an entry, a line ending an entry,
    a carriage return and a line longer than the stream's pieces (both read as the stream reads them)."""
    log = write_log(tmp_path)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(
            "## Offloaded at 2026-01-01T00:00:04Z\n\n<!-- xun conversation one, 5 entries -->\n\n"
            "Human: first\n    second\n\n    after a blank\n<!-- xun conversation two -->\n    still\n"
            "stray line\n    not the entry's\nAI (detail): reply\n        indented twice\n    \nTool: cut\rhere\n"
        )
    offsets = [heading_offset(log, when) for when, _, _ in SECTIONS[:2]] + [heading_offset(log, "2026-01-01T00:00:04Z")]
    sections = read_offload_log(log)
    assert read_section(log, offsets[0]) == sections[0]
    assert read_section(log, offsets[1]) == sections[1]
    tampered = read_section(log, offsets[2])
    assert tampered == sections[-1] and tampered.conversation_id == "two"
    assert [e.text for e in tampered.entries] == [
        "first\nsecond\nafter a blank\nstill",
        "reply\n    indented twice\n",
        "cut\rhere",
    ]
    log.write_text(log.read_text().replace("Tool: cut\rhere", "Tool: " + "y" * 70_000))  # one long line
    assert read_section(log, offsets[2]) == read_offload_log(log)[-1]
    assert read_section(log, offsets[2] + 1) is None and read_section(log, log.stat().st_size) is None


def test_a_section_read_in_small_chunks_is_the_same(tmp_path: Path, monkeypatch):
    log = write_log(tmp_path, rounds=20)
    sections = read_offload_log(log)
    monkeypatch.setattr(offload, "READ_CHUNK", 200)  # every entry's lines cut across chunks
    for when, _, _ in SECTIONS[:2]:
        start = heading_offset(log, when)
        assert start is not None
        assert read_section(log, start) == next(s for s in sections if s.when == when)


def test_a_summarised_turn_is_read_without_holding_the_log(tmp_path: Path):
    log = paths.offload_dir(tmp_path) / "one.md"
    log.parent.mkdir(parents=True)
    for k in range(10):  # ten sections of about 1 MB
        append_offload(log, turns(f"s{k}", 50, 20_000), conversation_id="one", when=f"2026-01-01T00:01:{k:02d}Z")
    size = log.stat().st_size
    item = OffloadedItem(str(log), "2026-01-01T00:01:06Z", 6, "one", 200)
    gc.collect()
    tracemalloc.start()
    try:
        items, _ = whole_history([item])
        peak = tracemalloc.get_traced_memory()[1]
        assert len(items) == 150 and items[0].text.startswith("s6 question 0")
        del items
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert peak < size * 0.4, (peak, size)  # a few copies of one section, not the log (parsed whole: over `size`)
    assert kept < size * 0.05, (kept, size)  # and nothing of it afterwards (it was cached whole)


def resident_file_kb() -> int:
    """The file pages this process has mapped in memory (`RssFile`), in kB."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("RssFile:"))
    return int(line.split()[1])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_walking_a_large_log_keeps_none_of_it_resident(tmp_path: Path):
    """A log is read through a memory map, whose pages count in the app's resident memory until it is
    unmapped: a walk of a section of ten MB (counting a long session's turns at resume) lets each chunk go
    once read, so the resident memory grows with a chunk, not with the section."""
    log = paths.offload_dir(tmp_path) / "one.md"
    log.parent.mkdir(parents=True)
    append_offload(log, turns("big", 500, 20_000), conversation_id="one", when="2026-01-01T00:01:00Z")
    assert log.stat().st_size > 10_000_000
    log.read_bytes()  # in the page cache, as a log just written is
    item = OffloadedItem(str(log), "2026-01-01T00:01:00Z", 0, "one", 2000)
    before = peak = resident_file_kb()
    count = 0
    for count, _ in enumerate(offload.SectionReader(log, 0).entries(), 1):
        if count % 50 == 0:
            peak = max(peak, resident_file_kb())
    assert count == 2000 and len(offloaded_items(item)) == 1500
    assert peak - before < 3_000, (before, peak)  # kB: unreleased, the 10 MB of the section


def test_a_search_a_window_at_a_time_finds_what_one_search_finds(tmp_path: Path, monkeypatch):
    """The searches of the log's bytes go a window at a time (each let go once searched): a needle across a
    window's edge, at the first or last byte, or absent, is found where one search of the whole finds it."""
    monkeypatch.setattr(offload, "READ_CHUNK", 7)
    path = tmp_path / "bytes"
    path.write_bytes(b"abcdefghij" * 5 + b"XYZ" + b"klmnop" * 3 + b"\n## end")
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for needle in (b"a", b"XYZ", b"jab", b"ghijab", b"## end", b"d", b"nope", b"p\n#"):
            for start in range(0, len(data) + 2, 3):
                for end in (None, len(data), len(data) - 3, start + 5, start):
                    expected = data.find(needle, start, len(data) if end is None else end)
                    assert offload._find(data, needle, start, end) == expected, (needle, start, end)
