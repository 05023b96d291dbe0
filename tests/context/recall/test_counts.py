"""The counts F9 opens with: kept by triggers in schema 3, so reading them costs the same for any index size,
and a version 2 index is migrated with its rows counted."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from xun.context import recall, recall_schema
from xun.context.recall import RecallIndex
from xun.context.reclaimed import ReclaimedToolResult


def reclaimed(index: RecallIndex, session: str, count: int, start: int = 0) -> None:
    results = [
        (ReclaimedToolResult(f"call_{i}", "read_file", f'{{"path": "f{i}.py"}}', 40), f"result {i} of {session}")
        for i in range(start, start + count)
    ]
    assert index.index_reclaimed(session, results) is None


def truth(index: RecallIndex) -> tuple[int, int, int]:
    """The counts read from every row: offloaded, reclaimed, sessions."""
    db = sqlite3.connect(index.path)
    try:
        by_source = dict(db.execute("SELECT source, count(*) FROM entries GROUP BY source").fetchall())
        sessions = db.execute("SELECT count(DISTINCT session) FROM entries").fetchone()[0]
    finally:
        db.close()
    return by_source.get("offload", 0), by_source.get("reclaimed", 0), sessions


def counted(index: RecallIndex) -> tuple[int, int, int]:
    stats = index.stats()
    return stats.offloaded, stats.reclaimed, stats.sessions


@contextmanager
def steps_counted(monkeypatch) -> Iterator[list[int]]:
    """The SQLite virtual-machine steps every connection opened meanwhile executes (its work, row by row)."""
    steps = [0]
    connect = sqlite3.connect

    def counting(*args, **kwargs):
        db = connect(*args, **kwargs)

        def step() -> int:
            steps[0] += 1
            return 0

        db.set_progress_handler(step, 1)
        return db

    with monkeypatch.context() as patch:
        patch.setattr(recall.sqlite3, "connect", counting)
        yield steps


def test_counts_follow_every_write_and_delete(workdir):
    index = RecallIndex(workdir)
    reclaimed(index, "one", 30)
    reclaimed(index, "two", 5)
    assert counted(index) == truth(index) == (0, 35, 2)
    assert index.forget_reclaimed("one", ["call_3", "call_4", "call_missing"]) is None
    assert counted(index) == truth(index) == (0, 33, 2)
    assert index.forget_reclaimed("two") is None  # the session's last rows: it is no longer counted
    assert counted(index) == truth(index) == (0, 28, 1)
    reclaimed(index, "one", 2)  # rows already there are ignored, and not counted twice
    assert counted(index) == (0, 28, 1)


def test_counts_survive_a_rebuild_from_the_sessions(store):
    c = store.new()
    c.conversation_id = "rebuilt"
    for i in range(6):
        c.add_user_message(f"question {i}")
        c.add_agent_message({"role": "assistant", "content": f"answer {i}"})
    c.compact(lambda messages: "S", keep_recent=2)
    store.save(c)
    before = counted(store.recall_index)
    assert before == truth(store.recall_index) and before[0] > 0
    assert store.recall_index.rebuild([c]).entries == before[0] + before[1]
    assert counted(store.recall_index) == truth(store.recall_index) == before


def test_reading_the_counts_costs_the_same_for_a_hundred_times_the_rows(workdir, tmp_path, monkeypatch):
    small, large = RecallIndex(workdir), RecallIndex(path=tmp_path / "large.db")
    reclaimed(small, "s", 50)
    for start in range(0, 5_000, 1_000):
        reclaimed(large, "s", 1_000, start)
    costs = []
    for index in (small, large):
        index.stats()  # opened once: WAL mode and permissions are settled on the first open
        with steps_counted(monkeypatch) as steps:
            assert index.stats().reclaimed in (50, 5_000)
        costs.append(steps[0])
    assert costs[1] <= costs[0] * 1.2, costs  # counting the rows themselves took ~100x the steps


def test_a_version_2_index_is_migrated_to_3_with_its_rows_counted(workdir):
    index = RecallIndex(workdir)
    index.path.parent.mkdir(parents=True)
    db = sqlite3.connect(index.path, isolation_level=None)
    recall_schema.MIGRATIONS[1](db)
    recall_schema.MIGRATIONS[2](db)
    db.execute("PRAGMA user_version = 2")
    rows = [
        (f"r:{i}", "reclaimed" if i % 3 else "offload", f"s{i % 2}", float(i), "tool", "Tool", "read_file", f"c{i}")
        + ("{}", "", 0, f"alpha {i}")
        for i in range(12)
    ]
    db.executemany(recall_schema.INSERT, rows)
    ids = db.execute("SELECT id, key FROM entries ORDER BY id").fetchall()
    db.close()

    assert counted(index) == (4, 8, 2)
    assert index.stats().schema_version == 3 and index.take_warnings() == []
    db = sqlite3.connect(index.path)
    try:
        assert db.execute("SELECT id, key FROM entries ORDER BY id").fetchall() == ids  # migrated, not rebuilt
    finally:
        db.close()
    assert len(index.search("alpha")) == 10
    reclaimed(index, "s0", 1, 100)
    assert counted(index) == truth(index) == (4, 9, 2)
