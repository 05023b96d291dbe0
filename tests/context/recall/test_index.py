"""The index on its own: search, entries, tricky queries, the file on disk, threads."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xun.base import paths

from xun.context import recall
from xun.context.offload import OffloadEntry
from xun.context.recall import RecallIndex, fts_query
from xun.context.reclaimed import ReclaimedToolResult


def reclaim(
    index: RecallIndex, session: str, call_id: str, text: str, tool: str = "read_file", at: float = 1_700_000_000.0
):
    warning = index.index_reclaimed(
        session, [(ReclaimedToolResult(call_id, tool, '{"path": "a.py"}', len(text), at), text)]
    )
    assert warning is None


@pytest.fixture
def index(workdir) -> RecallIndex:
    return RecallIndex(workdir)


def test_the_database_lives_under_xun_home(workdir, tmp_path, monkeypatch):
    assert paths.history_db_path(workdir) == workdir / ".xun" / "history.db"
    assert RecallIndex(workdir).path == workdir / ".xun" / "history.db"
    monkeypatch.setenv("XUN_HOME", str(tmp_path / "elsewhere"))
    assert paths.history_db_path(workdir) == tmp_path / "elsewhere" / "history.db"


def test_search_finds_words_and_entry_gives_the_exact_text(index):
    text = 'Traceback (most recent call last):\n  File "app.py", line 3\nValueError: bad threshold 0.85\r\n'
    reclaim(index, "s1", "call_1", text)
    reclaim(index, "s1", "call_2", "nothing relevant here")
    hits = index.search("threshold")
    assert [h.tool_call_id for h in hits] == ["call_1"]
    hit = hits[0]
    assert (hit.session, hit.role, hit.source, hit.tool) == ("s1", "tool", "reclaimed", "read_file")
    assert "«threshold»" in hit.snippet and "\n" not in hit.snippet
    assert hit.when == "2023-11-14T22:13:20Z"
    entry = index.entry(hit.id)
    assert entry.text == text and entry.arguments == '{"path": "a.py"}' and entry.tool_call_id == "call_1"
    assert index.entry(hit.id + 100) is None
    assert index.entry("not a number") is None and index.entry(2**70) is None


def test_every_word_must_match_and_the_best_comes_first(index):
    reclaim(index, "s", "a", "alpha beta gamma")
    reclaim(index, "s", "b", "alpha only")
    reclaim(index, "s", "c", "beta " * 3 + "alpha " * 3)
    assert {h.tool_call_id for h in index.search("alpha beta")} == {"a", "c"}
    assert index.search("alpha beta")[0].tool_call_id == "c"  # more occurrences rank higher
    assert [h.tool_call_id for h in index.search('"gamma alpha"')] == []  # a quoted phrase keeps its order
    assert [h.tool_call_id for h in index.search('"beta gamma"')] == ["a"]


def test_limit_session_and_prefix(index):
    for i in range(30):
        reclaim(index, f"s{i % 3}", f"c{i}", f"compaction report number {i}")
    assert len(index.search("compaction")) == 10
    assert len(index.search("compaction", limit=25)) == 25
    assert {h.session for h in index.search("compaction", limit=50, session="s1")} == {"s1"}
    assert len(index.search("compaction", limit=50, session="s1")) == 10
    assert index.search("compac") == []
    assert len(index.search("compac", prefix=True)) == 10
    assert index.search("co", prefix=True) == []  # too short to be a prefix
    assert index.search("compac ", prefix=True) == []  # a finished word is a whole word
    for odd in ('s"1', "___", "\ud800", "s1 OR s2", ""):
        assert index.search("compaction", session=odd) == []


def test_diacritics_and_case_fold(index):
    reclaim(index, "s", "c", "Café NAÏVE")
    assert len(index.search("cafe naive")) == 1


TRICKY_QUERIES = [
    "foo-bar",
    '"',
    '""',
    '"""',
    "*",
    "**",
    "AND(",
    "AND",
    "OR",
    "NOT",
    "NEAR(a b",
    "NEAR(",
    "col:foo",
    "text:foo",
    "^foo",
    "foo^",
    "-",
    "--x",
    "(",
    ")",
    "()",
    "{}",
    "[x]",
    "a AND OR b",
    "'",
    "\\",
    "\x00",
    "foo\x00bar",
    "\ud800",
    "💥",
    "   ",
    "",
    "a" * 5000,
    " ".join(["w"] * 500),
    "+",
    "foo*bar",
    "'; DROP TABLE entries; --",
    "%",
    "_",
]


@pytest.mark.parametrize("query", TRICKY_QUERIES)
def test_tricky_queries_never_raise(index, query):
    reclaim(index, "s", "c", "foo-bar AND( text:foo col foo bar w " + "a" * 50)
    assert isinstance(index.search(query), list)
    assert isinstance(index.search(query, prefix=True), list)
    assert index.entry(1) is not None  # nothing was dropped


def test_fts_syntax_is_searched_as_text(index):
    reclaim(index, "s", "dash", "run foo-bar now")
    reclaim(index, "s", "other", "foo then later bar")
    reclaim(index, "s", "alone", "foo alone")
    assert [h.tool_call_id for h in index.search("foo-bar")] == ["dash"]  # a phrase, not "foo NOT bar"
    assert {h.tool_call_id for h in index.search("foo bar")} == {"dash", "other"}
    assert index.search("foo NOT bar") == []  # as an operator it would find "foo alone"
    reclaim(index, "s", "not", "foo is not bar")
    assert [h.tool_call_id for h in index.search("foo NOT bar")] == ["not"]
    assert [h.tool_call_id for h in index.search("foo OR alone")] == []  # as an operator: three matches
    assert fts_query('say "hi there" AND( x*') == '"say" "hi there" "AND(" "x*"'
    assert fts_query('" * - ()') == ""


@given(st.text(max_size=80))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_is_a_valid_query(index, text):
    if not index.path.exists():
        reclaim(index, "s", "c", "some text to search")
    assert isinstance(index.search(text), list)
    assert isinstance(index.search(text, prefix=True), list)


def test_a_very_common_word_ranks_only_the_newest_matches(index, monkeypatch):
    for i in range(20):
        reclaim(index, "s", f"c{i:02d}", "common " + "common " * (20 - i), at=1_700_000_000 + i)
    best = index.search("common", limit=3)
    assert [h.tool_call_id for h in best] == ["c00", "c01", "c02"]  # the oldest have the most occurrences
    monkeypatch.setattr(recall, "RANK_CAP", 5)
    newest = index.search("common", limit=20)
    assert [h.tool_call_id for h in newest] == ["c15", "c16", "c17", "c18", "c19"]


def test_the_files_are_owner_only_and_in_wal_mode(index):
    reclaim(index, "s", "c", "text")
    assert stat.S_IMODE(os.stat(index.path).st_mode) == 0o600
    db = sqlite3.connect(index.path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.execute("SELECT count(*) FROM entries").fetchone()  # a reader holds the -wal and -shm open
        reclaim(index, "s", "d", "more text")
        for suffix in ("-wal", "-shm"):
            extra = index.path.with_name(index.path.name + suffix)
            if extra.exists():
                assert stat.S_IMODE(extra.stat().st_mode) == 0o600
    finally:
        db.close()


def test_an_existing_file_with_loose_permissions_is_tightened(index):
    reclaim(index, "s", "c", "text")
    os.chmod(index.path, 0o644)
    assert index.search("text")
    assert stat.S_IMODE(os.stat(index.path).st_mode) == 0o600


def test_the_same_rows_written_twice_are_kept_once(index):
    entries = [OffloadEntry("Human", "hello there"), OffloadEntry("Tool", "out", "read_file, id call_1")]
    rows = recall.offload_rows("s", "2024-01-01T00:00:00Z", entries)
    assert rows == recall.offload_rows("s", "2024-01-01T00:00:00Z", entries)
    reclaim(index, "s", "c", "x")
    reclaim(index, "s", "c", "x")
    assert index.stats().reclaimed == 1


def test_threads_share_one_index(index):
    """Connections are made per use, so any thread may write and search at the same time."""
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(15):
                reclaim(index, f"s{n}", f"c{i}", f"thread {n} wrote line {i} shared")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(30):
                index.search("shared", limit=5)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert index.stats().reclaimed == 60
    assert len(index.search("shared", limit=100)) == 60


def test_reading_where_there_is_no_history_makes_no_file(workdir):
    index = RecallIndex(workdir)
    assert index.search("anything") == [] and index.entry(1) is None and index.stats().offloaded == 0
    assert not (workdir / ".xun").exists()


def test_an_unusable_location_is_a_history_error_for_readers(workdir):
    paths.offload_dir(workdir).mkdir(parents=True)
    blocker = workdir / "file"
    blocker.write_text("not a folder")
    index = RecallIndex(workdir, path=blocker / "history.db")
    with pytest.raises(recall.RecallError, match="cannot be used"):
        index.search("anything")
