"""The archive of reclaimed originals lives in the session file: memory holds records and where each entry
lies, originals are read from the file when asked for, a save moves them to the new file, and a file
changed under an open session is named, never read as another entry's text."""

import gc
import os
import tracemalloc
from pathlib import Path

import pytest

from xun.context.archive_store import SessionFile
from xun.context.conversation import Conversation, SessionFormatError
from xun.context.reclaimed import ARCHIVE_KEY
from xun.context.sessions import SessionStore

from .builders import assistant_call, long_conversation

ODD = 'quote " back \\ sep\u2028 e\u0301t\u00e9 \u4e2d \U0001f600 nul\u0000 tab\t'


def result_text(i: int, size: int) -> str:
    """A distinct original, non-ASCII in every third one (byte and character offsets then differ)."""
    body = f"original {i}\n" + ("y" * size)
    return body + ODD * (i % 3 == 0)


def add_rounds(c: Conversation, first: int, count: int, size: int = 300) -> dict[str, str]:
    originals = {}
    for i in range(first, first + count):
        assistant_call(c, (f"call_{i}", "read_file", {"path": f"src/f{i}.py"}))
        originals[f"call_{i}"] = result_text(i, size)
        c.add_tool_result(f"call_{i}", originals[f"call_{i}"])
    c.add_user_message(f"next after {first + count}")
    c.reclaim_tool_results(keep_max=0)
    return originals


def saved_session(path, rounds: int = 40, size: int = 300) -> dict[str, str]:
    c = long_conversation(rounds=0)
    originals = add_rounds(c, 0, rounds, size)
    assert set(c.reclaimed_results) == set(originals)
    c.dump(path)
    return originals


def in_memory(c: Conversation) -> list[str]:
    """The ids whose originals the archive holds in memory."""
    return [key for key, where in c.reclaimed_results._entries.items() if isinstance(where, str)]


def read_all(c: Conversation) -> dict[str, str]:
    return {key: c.reclaimed_original(key) for key in c.reclaimed_results}


def test_a_loaded_archive_holds_records_and_offsets_not_its_originals(tmp_path):
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=600, size=16_000)  # 9.6 MB of originals
    total = sum(map(len, originals.values()))
    Conversation().load(path).reclaimed_original("call_1")  # everything imported before the count
    gc.collect()
    tracemalloc.start()
    try:
        c = Conversation().load(path)
        gc.collect()
        unread = tracemalloc.get_traced_memory()[0]
        records = list(c.reclaimed_results.values())
        assert c.reclaimed_original("call_599") == originals["call_599"]
        gc.collect()
        read = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(records) == 600 and not in_memory(c)
    assert unread < total / 4, f"{unread:,} bytes traced after the load for {total:,} of originals"
    assert read < total / 4, f"{read:,} bytes traced after the archive was read for {total:,} of originals"


def test_originals_read_back_after_load_after_saves_and_after_a_fresh_load(tmp_path):
    path = tmp_path / "s.json"
    originals = saved_session(path)
    c = Conversation().load(path)
    assert read_all(c) == originals and not in_memory(c)
    c.restore_tool_result("call_3")
    assert "call_3" not in c.reclaimed_results
    assert originals["call_3"] in [m.raw.get("content") for m in c.messages if getattr(m, "role", "") == "tool"]
    assert c.reclaimed_results.pop("call_4") == originals.pop("call_4")
    del originals["call_3"]
    for _ in range(2):  # after a save, and after a second one: read from the file each save wrote
        c.dump(path)
        assert read_all(c) == originals and not in_memory(c)
    assert c.reclaimed_results.pop("call_5") == originals.pop("call_5")
    fresh = Conversation().load(path)
    assert read_all(fresh) == {**originals, "call_5": fresh.reclaimed_original("call_5")}
    fresh.dump(path)  # saved unread from a fresh load: the block copied as it is
    again = Conversation().load(path)
    assert list(again.reclaimed_results) == list(fresh.reclaimed_results)
    assert (
        read_all(again) == read_all(fresh)
        and fresh.reclaimed_results.originals() == again.reclaimed_results.originals()
    )


def test_entries_added_after_a_load_are_kept_in_memory_until_saved_then_read_from_the_file(tmp_path):
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=10)
    c = Conversation().load(path)  # not read: new entries go after the unparsed block
    added = add_rounds(c, 100, 5)
    assert set(in_memory(c)) == set(added)
    c.dump(path)
    assert not in_memory(c)
    assert read_all(c) == {**originals, **added}
    more = add_rounds(c, 200, 3)  # the archive parsed now: added after entries on disk
    c.dump(path)
    assert not in_memory(c) and read_all(c) == {**originals, **added, **more}
    assert read_all(Conversation().load(path)) == {**originals, **added, **more}


def test_an_archive_read_from_text_or_an_old_format_goes_to_the_file_at_its_first_save(tmp_path):
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=6)
    c = Conversation().loads(path.read_text())
    assert read_all(c) == originals
    other = tmp_path / "t.json"
    c.dump(other)
    assert not in_memory(c) and isinstance(c.reclaimed_results._entries["call_0"].store, SessionFile)
    assert read_all(c) == originals
    fixture = tmp_path / "format1.json"
    fixture.write_bytes((Path(__file__).parent / "sessions" / "format1.json").read_bytes())
    old = Conversation().load(fixture)
    before = old.reclaimed_results.originals()
    assert in_memory(old)  # format 1 lines, re-encoded: in memory until saved
    old.dump(fixture)
    assert not in_memory(old) and old.reclaimed_results.originals() == before


def test_a_save_that_replaces_the_file_leaves_another_open_session_reading_its_own(tmp_path):
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=8)
    reader = Conversation().load(path)
    list(reader.reclaimed_results)  # parsed: offsets into the file as it was
    writer = Conversation().load(path)
    for key in list(writer.reclaimed_results)[:5]:
        writer.reclaimed_results.pop(key)
    add_rounds(writer, 300, 4, size=1000)
    writer.dump(path)  # a new file renamed over the path
    assert read_all(reader) == originals


def test_a_file_truncated_under_an_open_session_is_named_never_read(tmp_path):
    path = tmp_path / "s.json"
    saved_session(path)
    c = Conversation().load(path)
    assert c.reclaimed_original("call_1")
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) // 2)
    for key in ("call_1", "call_39"):
        with pytest.raises(SessionFormatError, match="changed on disk") as info:
            c.reclaimed_original(key)
        assert str(path) in str(info.value)
    with pytest.raises(SessionFormatError, match="changed on disk"):
        c.dump(tmp_path / "copy.json")  # a save cannot copy what is gone: it fails, nothing written
    assert not (tmp_path / "copy.json").exists()


def test_a_file_rewritten_in_place_is_named_even_with_its_size_and_time_put_back(tmp_path):
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=30)
    c = Conversation().load(path)
    list(c.reclaimed_results)
    data = path.read_bytes()
    first, second = data.index(b'"call_10":'), data.index(b'"call_11":')
    third = data.index(b'"call_12":')
    assert second - first == third - second  # two entries of one length: swapped, the size stays
    swapped = data[:first] + data[second:third] + data[first:second] + data[third:]
    held = os.stat(path)
    with open(path, "r+b") as handle:  # in place: the open session's descriptor sees it
        handle.write(swapped)
    os.utime(path, ns=(held.st_atime_ns, held.st_mtime_ns))
    with pytest.raises(SessionFormatError, match="call_10") as info:
        c.reclaimed_original("call_10")
    assert str(path) in str(info.value)
    with pytest.raises(SessionFormatError):
        c.reclaimed_original("call_11")
    assert c.reclaimed_original("call_9") == originals["call_9"]  # the entries that did not move still read


def test_a_touched_file_still_reads_and_saves(tmp_path):
    """Only the content counts: a new modification time (a touch, a backup tool) changes nothing."""
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=12)
    c = Conversation().load(path)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    assert c.reclaimed_original("call_3") == originals["call_3"]
    c.add_user_message("after the touch")
    c.dump(path)
    assert read_all(Conversation().load(path)) == originals


@pytest.mark.parametrize("failure", ["replace", "fsync"])
def test_a_failed_save_leaves_the_archive_readable_and_complete(tmp_path, monkeypatch, failure):
    monkeypatch.delenv("XUN_HOME", raising=False)
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=12)
    before = path.read_bytes()
    c = Conversation().load(path)
    assert c.reclaimed_results.pop("call_2") == originals.pop("call_2")
    added = add_rounds(c, 50, 3)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failure, fail)
    with pytest.raises(OSError):
        c.dump(path)
    with pytest.raises(OSError):
        SessionStore(tmp_path / "work").save(c)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert read_all(c) == {**originals, **added} and set(in_memory(c)) == set(added)
    c.dump(path)
    assert not in_memory(c) and read_all(Conversation().load(path)) == {**originals, **added}


def test_a_save_whose_file_cannot_be_opened_again_keeps_the_entries_where_they_were(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=5)
    c = Conversation().load(path)
    added = add_rounds(c, 60, 2)

    def refuse(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(SessionFile, "reopen", refuse)
    c.dump(tmp_path / "t.json")  # written; the archive still reads the old file and memory
    monkeypatch.undo()
    assert set(in_memory(c)) == set(added) and read_all(c) == {**originals, **added}


def test_the_store_saves_through_the_session_folder_and_reads_its_own_file(tmp_path, monkeypatch):
    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    c = store.new()
    originals = add_rounds(c, 0, 20)
    path = store.save(c)
    store.lock(c.conversation_id)
    loaded = store.load(c.conversation_id)
    added = add_rounds(loaded, 100, 2)
    assert store.save(loaded) == path
    store.unlock()
    assert not in_memory(loaded) and read_all(loaded) == {**originals, **added}
    data = path.read_bytes()
    archive = data[data.rindex(ARCHIVE_KEY) + len(ARCHIVE_KEY) : -1]
    where = loaded.reclaimed_results._entries["call_101"]
    assert where.store.path == path and data[where.offset : where.offset + where.size].startswith(b'"call_101":')
    assert archive.endswith(data[where.offset : where.offset + where.size] + b"}")


def test_reads_while_a_save_runs_in_another_thread_read_the_right_originals(tmp_path):
    """The app saves in a worker thread while the screen may read the archive (a listing, a preview)."""
    import threading

    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=60)
    c = Conversation().load(path)
    added = add_rounds(c, 500, 3)
    expected = {**originals, **added}
    failures: list[BaseException] = []

    def save_again() -> None:
        try:
            for _ in range(15):
                c.dump(path)
        except BaseException as exc:  # reported below
            failures.append(exc)

    saver = threading.Thread(target=save_again)
    saver.start()
    while saver.is_alive():
        assert c.reclaimed_results.originals() == expected
        assert c.reclaimed_original("call_501") == expected["call_501"]
    saver.join()
    assert not failures and not in_memory(c) and read_all(Conversation().load(path)) == expected


@pytest.mark.parametrize("piece", [7, 97, 4096])
def test_the_archive_is_parsed_a_piece_at_a_time_across_any_cut(tmp_path, monkeypatch, piece):
    """Entries cut anywhere by the pieces read (inside an id, a multi-byte character, an entry longer than a
    piece, the separator) are parsed as the whole block would be; a damaged entry is still named."""
    import xun.context.archive_store

    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=30, size=150)
    monkeypatch.setattr(xun.context.archive_store, "PIECE", piece)
    assert read_all(Conversation().load(path)) == originals
    assert read_all(Conversation().loads(path.read_text())) == originals  # from text: offsets in characters
    text = path.read_text()
    at = text.rindex('"original":')
    path.write_text(text[:at] + '"original"!' + text[at + len('"original":') :])
    with pytest.raises(SessionFormatError, match="archive entry .* is unreadable"):
        list(Conversation().load(path).reclaimed_results)


def test_the_first_read_of_a_large_archive_never_holds_its_block_whole(tmp_path, monkeypatch):
    """The archive's first read goes through the block a piece at a time: its peak follows the piece, not the
    block (read whole, the block's bytes and its text were both held: 68 MB for this 9.6 MB block)."""
    import xun.context.archive_store

    monkeypatch.setattr(xun.context.archive_store, "PIECE", 1 << 16)
    path = tmp_path / "s.json"
    originals = saved_session(path, rounds=600, size=16_000)
    total = sum(map(len, originals.values()))
    c = Conversation().load(path)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        list(c.reclaimed_results)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < total / 4, (peak, total)


@pytest.mark.parametrize("prompt", ["ascii", "\u4e2d\u6587 and \u2026"])
def test_a_load_reads_the_file_up_to_its_archive_only(tmp_path, prompt):
    """The archive is most of a long session's file: a load reads what comes before it, and checks the
    archive's text a piece at a time (read whole, the file's bytes and its text were both held). Also when
    the session before the archive is not ASCII: its characters are fewer than its bytes, and the archive
    was looked for at the character count, not found there, and the whole file read."""
    path = tmp_path / "s.json"
    c = long_conversation(rounds=0)
    c.add_user_message(prompt)
    originals = add_rounds(c, 0, 600, 16_000)  # 9.6 MB of originals
    c.dump(path)
    total = sum(map(len, originals.values()))
    Conversation().load(path)  # everything imported before the count
    gc.collect()
    tracemalloc.start()
    try:
        c = Conversation().load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < total / 4, f"a load peaked at {peak:,} bytes for {total:,} of originals"
    assert c.reclaimed_original("call_300") == originals["call_300"]


def test_an_archive_whose_recorded_length_is_wrong_is_read_from_the_whole_file(tmp_path):
    """What the opening records of the archive is checked against the file's text before a load reads up
    to the archive only: with a wrong character count (the bytes right), the file is read whole, as one
    laid out anew by another tool (valid JSON), and every original reads back."""
    import re

    path = tmp_path / "s.json"
    originals = saved_session(path)
    data = path.read_bytes()
    opening = re.match(rb'\{"format_version":2,"compacted_count":\d+,"compacted_chars":(\d+),', data)
    assert opening is not None
    wrong = b"%d" % (int(opening[1]) - 1)
    path.write_bytes(data[: opening.start(1)] + wrong + data[opening.end(1) :])
    c = Conversation().load(path)
    assert read_all(c) == originals


@pytest.mark.parametrize("shift", [1, -1, 3])
def test_an_opening_whose_byte_count_is_wrong_is_read_from_the_whole_file(tmp_path, shift):
    """A byte count that points before or after the archive's opening brace: the file is read whole (it is
    valid JSON) and every original reads back, never a part of the head read as the archive."""
    import re

    path = tmp_path / "s.json"
    originals = saved_session(path)
    data = path.read_bytes()
    opening = re.match(
        rb'\{"format_version":2,"compacted_count":\d+,"compacted_chars":\d+,"compacted_bytes":(\d+),', data
    )
    assert opening is not None
    wrong = b"%d" % (int(opening[1]) + shift)
    assert len(wrong) == len(opening[1])
    path.write_bytes(data[: opening.start(1)] + wrong + data[opening.end(1) :])
    c = Conversation().load(path)
    assert read_all(c) == originals
