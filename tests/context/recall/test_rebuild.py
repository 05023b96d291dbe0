"""Rebuilding from the logs and sessions, damaged databases, and schema migration."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading

import pytest

from xun.context import recall, recall_rows, recall_schema
from xun.context.offload import read_offload_log
from xun.context.recall import RecallIndex, rebuild, reindex

from .conftest import all_rows, busy_session, without_ids

QUERIES = [
    "question",
    "markera3",
    "payload line",
    "reason",
    "foo-bar",
    "café",
    "東京",
    "threshold",
    "src",
    "read_file",
    "answer 2",
    '"quotes"',
    "AND(",
    "windows endings",
]


def two_sessions(store):
    a = busy_session(store.new(), "a", rounds=10)
    a.reclaim_tool_results(keep_max=2)
    a.compact(lambda messages: "SUMMARY A", keep_recent=6)
    busy_session(a, "a2", rounds=4)
    a.reclaim_tool_results(keep_max=1)
    a.restore_tool_result("call_a2_1")
    b = busy_session(store.new(), "b", rounds=6)
    b.compact(lambda messages: "SUMMARY B", keep_recent=3)
    b.compact(lambda messages: "SUMMARY B2", keep_recent=2)
    b.reclaim_tool_results(keep_max=0)
    store.save(a)
    store.save(b)
    return a, b


def results(index, **options):
    return {q: without_ids(index.search(q, limit=50, **options)) for q in QUERIES}


def test_rebuild_gives_what_the_incremental_index_gave(store):
    a, _ = two_sessions(store)
    incremental_rows = all_rows(store.recall_index)
    incremental = results(store.recall_index)
    per_session = results(store.recall_index, session=a.conversation_id)
    assert sum(map(len, incremental.values())) > 100
    report = store.recall_index.rebuild()
    assert report.problems == [] and report.logs == 2 and report.sessions == 2
    assert report.entries == len(incremental_rows)
    assert all_rows(store.recall_index) == incremental_rows
    assert results(store.recall_index) == incremental
    assert results(store.recall_index, session=a.conversation_id) == per_session


def test_an_entry_over_the_cap_is_indexed_cut_the_same_way_by_a_summary_and_a_rebuild(store):
    """The search index keeps the first INDEXED_CHARS characters of an entry (with a note), whether it was
    indexed as the summary offloaded it or read back from the log; the log keeps the whole."""
    conversation = busy_session(store.new(), "a", rounds=3)
    huge = "first " + "x" * recall.INDEXED_CHARS + " lastword"
    conversation.add_user_message(huge)
    busy_session(conversation, "b", rounds=3)
    conversation.compact(lambda messages: "SUMMARY", keep_recent=2)
    store.save(conversation)
    incremental_rows = all_rows(store.recall_index)
    texts = [row[-1] for row in incremental_rows]
    assert huge[: recall.INDEXED_CHARS] + recall_rows.CUT_NOTE in texts and huge not in texts
    report = store.recall_index.rebuild()
    assert all_rows(store.recall_index) == incremental_rows
    assert len(report.problems) == 1 and "1 entry is longer than 1,048,576 characters" in report.problems[0]
    assert store.recall_index.search("lastword") == [] and len(store.recall_index.search("first")) == 1
    log = store.offload_dir / f"{conversation.conversation_id}.md"
    assert any(entry.text == huge for section in read_offload_log(log) for entry in section.entries)


def test_module_level_rebuild_and_reindex(store, workdir):
    two_sessions(store)
    before = all_rows(store.recall_index)
    store.recall_index.path.unlink()
    assert rebuild(workdir).entries == len(before)
    assert reindex is rebuild
    assert all_rows(RecallIndex(workdir)) == before


def test_a_missing_index_is_built_from_the_logs_and_sessions_on_first_use(store, workdir):
    two_sessions(store)
    before = all_rows(store.recall_index)
    for path in store.recall_index._files():
        if path.exists():
            path.unlink()
    index = RecallIndex(workdir)
    assert index.search("markera3")
    assert all_rows(index) == before and index.take_warnings() == []


def test_rebuild_skips_unreadable_files_and_names_them(store, workdir):
    two_sessions(store)
    (store.root / "broken.json").write_text('{"format_version": 1, "messages": [', encoding="utf-8")
    report = store.recall_index.rebuild()
    assert report.sessions == 2 and len(report.problems) == 1 and "broken.json" in report.problems[0]


def test_rebuild_prefers_live_conversations_to_their_files(store):
    c = busy_session(store.new(), "live", rounds=5)
    store.save(c)
    c.reclaim_tool_results(keep_max=0)  # not saved yet
    assert store.recall_index.rebuild().entries == 0
    assert store.recall_index.rebuild([c]).entries == 5


DAMAGE = {
    "garbage": lambda path: path.write_bytes(os.urandom(8192)),
    "text": lambda path: path.write_text("this is not a database\n" * 100),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3]),
    "header_only": lambda path: path.write_bytes(path.read_bytes()[:100]),
    "foreign_schema": lambda path: _foreign(path),
    "wrong_columns": lambda path: _wrong_columns(path),
    "newer_version": lambda path: _set_version(path, recall_schema.SCHEMA_VERSION + 5),
    "missing_fts": lambda path: _drop(path, "DROP TABLE entries_fts"),
}


def _checkpointed(path):
    """Everything in the main file (the write-ahead log emptied), so damaging the file damages it all."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _foreign(path):
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()


def _wrong_columns(path):
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE entries_fts USING fts5(text)")
    db.execute("CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN SELECT 1; END")
    db.execute("CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN SELECT 1; END")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()


def _set_version(path, version):
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.close()


def _drop(path, statement):
    db = sqlite3.connect(path)
    db.execute(statement)
    db.commit()
    db.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_database_is_kept_aside_and_rebuilt_with_a_warning(store, damage):
    two_sessions(store)
    expected_rows = all_rows(store.recall_index)
    expected = results(store.recall_index)
    path = store.recall_index.path
    _checkpointed(path)
    DAMAGE[damage](path)
    damaged_bytes = path.read_bytes()

    index = RecallIndex(store.workdir)
    assert results(index) == expected  # the first search rebuilt it, and finds the same
    warnings = index.take_warnings()
    assert (
        len(warnings) == 1 and "could not be used" in warnings[0] and "was kept as history.db.corrupt-" in warnings[0]
    )
    assert f"({len(expected_rows)} entries)" in warnings[0]
    kept = sorted(path.parent.glob("history.db.corrupt-*"))
    assert [p.name for p in kept if not p.name.endswith(("-wal", "-shm"))] == [kept[0].name]
    assert kept[0].read_bytes() == damaged_bytes  # nothing deleted: the damaged file is kept as it was
    assert all_rows(index) == expected_rows
    assert index.take_warnings() == []  # said once


def test_damage_found_by_an_engine_write_is_the_summary_warning(store):
    c = busy_session(store.new(), "w", rounds=6)
    c.reclaim_tool_results(keep_max=3)
    store.save(c)
    _checkpointed(store.recall_index.path)
    store.recall_index.path.write_bytes(b"\x00garbage" * 1000)
    result = c.compact(lambda messages: "S", keep_recent=2)
    assert result.compacted and "was kept as history.db.corrupt-" in result.warning
    assert store.recall_index.stats().offloaded > 0 and store.recall_index.stats().reclaimed == 3
    assert store.recall_index.search("markerw1")


def test_a_damaged_database_that_cannot_be_moved_is_a_history_error(store, monkeypatch):
    two_sessions(store)
    _checkpointed(store.recall_index.path)
    store.recall_index.path.write_bytes(b"garbage" * 1000)

    def refuse(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(recall.os, "replace", refuse)
    with pytest.raises(recall.RecallError, match="could not be moved aside"):
        store.recall_index.search("question")
    assert store.recall_index.path.read_bytes() == b"garbage" * 1000


def test_an_empty_file_is_migrated_from_version_0(store):
    two_sessions(store)
    expected = all_rows(store.recall_index)
    for path in store.recall_index._files():
        if path.exists():
            path.unlink()
    store.recall_index.path.write_bytes(b"")
    assert store.recall_index.stats().schema_version == recall_schema.SCHEMA_VERSION
    assert all_rows(store.recall_index) == expected  # and filled from the logs and sessions
    assert list(store.recall_index.path.parent.glob("*.corrupt-*")) == []


def test_an_empty_version_0_database_is_migrated(workdir):
    index = RecallIndex(workdir)
    index.path.parent.mkdir(parents=True)
    db = sqlite3.connect(index.path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    db.close()
    assert index.search("anything") == []
    assert index.stats().schema_version == recall_schema.SCHEMA_VERSION == 3


def test_a_version_1_database_is_migrated_to_2_with_its_rows(workdir):
    """Version 1 had no session column in the full-text index; the migration rebuilds it from the rows."""
    index = RecallIndex(workdir)
    index.path.parent.mkdir(parents=True)
    db = sqlite3.connect(index.path, isolation_level=None)
    recall_schema.MIGRATIONS[1](db)
    db.execute("PRAGMA user_version = 1")
    rows = [
        ("r:a", "reclaimed", "one", 1.0, "tool", "Tool", "read_file", "c1", "{}", "", 0, "alpha beta"),
        ("r:b", "reclaimed", "two", 2.0, "tool", "Tool", "read_file", "c2", "{}", "", 0, "alpha gamma"),
    ]
    db.executemany(recall_schema.INSERT, rows)
    db.close()
    assert {h.session for h in index.search("alpha")} == {"one", "two"}
    assert [h.tool_call_id for h in index.search("alpha", session="two")] == ["c2"]
    assert index.stats().schema_version == recall_schema.SCHEMA_VERSION and index.take_warnings() == []


def test_a_future_migration_slots_in(store, monkeypatch):
    two_sessions(store)
    rows = all_rows(store.recall_index)
    current = recall_schema.SCHEMA_VERSION
    calls = []

    def step(db):
        calls.append(db.execute("PRAGMA user_version").fetchone()[0])
        db.execute("CREATE TABLE notes (entry_id INTEGER, note TEXT)")

    monkeypatch.setattr(recall_schema, "SCHEMA_VERSION", current + 1)
    monkeypatch.setitem(recall_schema.MIGRATIONS, current + 1, step)
    index = RecallIndex(store.workdir)
    assert index.stats().schema_version == current + 1 and calls == [current]  # ran once, on the current file
    assert all_rows(index) == rows  # and kept every row
    assert index.take_warnings() == []
    assert index.search("markera3") and calls == [current]
    assert index.rebuild().entries == len(rows) and calls == [
        current,
        current,
    ]  # a rebuild runs every step from nothing


def test_the_switch_to_wal_waits_for_another_writer(store):
    """SQLite refuses a change of journal mode at once while another connection writes, without waiting
    for it: two threads or processes building a new index together (the recall screen counts and searches
    in two threads as it opens) must both get their answer, not "database is locked"."""
    two_sessions(store)
    path = store.recall_index.path
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = DELETE")
    db.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, lambda: db.execute("COMMIT"))
    release.start()
    try:
        assert RecallIndex(store.workdir).search("question")
    finally:
        release.join()
        db.close()
    with contextlib.closing(sqlite3.connect(path)) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_damage_is_said_even_when_the_new_index_cannot_be_built(store, monkeypatch):
    two_sessions(store)
    _checkpointed(store.recall_index.path)
    store.recall_index.path.write_bytes(b"this is not a database" * 100)
    index = RecallIndex(store.workdir)

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(index, "_fill", full)
    with pytest.raises(recall.RecallError, match="disk is full"):
        index.search("question")
    [warning] = index.take_warnings()
    assert "was kept as history.db.corrupt-" in warning and "a new one could not be built yet" in warning
    monkeypatch.undo()
    assert index.search("question") and index.take_warnings() == []
