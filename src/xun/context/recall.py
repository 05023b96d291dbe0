"""Recall: a full-text index of everything compaction took out of the context.

Every entry of every offload section (`xun.context.offload`) and every reclaimed tool result
(`xun.context.reclaimed`) is a row of a SQLite database with an FTS5 index, `.xun/history.db`
(`$XUN_HOME/history.db`). The Markdown logs and the session files stay the record: the index is derived
from them, written in the same step as the offload or the reclaim (`Conversation.recall_index`; the
agent's async paths run that write in a worker thread, off the event loop), and can always be built
again from them (`rebuild`).

What front ends call::

    index = RecallIndex(workdir)                   # one per working directory; any thread may use it
    index.search("foo-bar", limit=10, session=None, prefix=False) -> list[RecallHit]  # best first
    index.entry(hit.id) -> RecallEntry | None      # the exact text
    index.rebuild() -> RebuildReport               # `xun history --reindex`; also rebuild(workdir)
    index.stats() -> IndexStats                    # row counts, schema version, bytes on disk
    index.take_warnings() -> list[str]             # e.g. a damaged file that was moved aside and rebuilt

An id stays the same until a rebuild numbers the rows again. A search needs every word; a query
matching more than RANK_CAP rows ranks the newest RANK_CAP of them.

No query text can make `search` raise: words are searched as words, whatever FTS5 syntax they hold. A
damaged database (not SQLite, truncated, a foreign or newer schema) is never deleted: it is renamed to
`history.db.corrupt-<UTC time>` and a new index is built from the logs and sessions, with a warning.
`RecallError` is raised only when the database cannot be used at all (no permission, a full disk, a
lock held too long). The engine's own calls (`index_offload`, `index_reclaimed`, `forget_reclaimed`)
never raise: they return a warning, and rows they could not write are retried at the next write.

The schema, and its migrations by `PRAGMA user_version`, are `xun.context.recall_schema`. Connections are
opened per use, so no sqlite3 object ever crosses a thread; the database is in WAL mode and owner-readable
only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from xun.base import paths
from xun.base.confined import LinkRefused, state_dir_fd
from xun.base.errors import SessionFormatError
from xun.context import recall_schema as schema
from xun.context.offload import OffloadSection, iter_offload_log, transcript_entries
from xun.context.recall_rows import (
    INDEXED_CHARS,
    Row,
    as_logged,
    clean,
    iso_time,
    offload_row,
    offload_rows,
    reclaimed_key,
    reclaimed_row,
    reclaimed_rows,
)
from xun.context.reclaimed import ARGUMENTS_SUFFIX, ReclaimedToolResult

_T = TypeVar("_T")

if TYPE_CHECKING:
    from xun.context.conversation import Conversation
    from xun.context.messages import Message

__all__ = [
    "RecallEntry",
    "RecallError",
    "RecallHit",
    "RecallIndex",
    "IndexStats",
    "RebuildReport",
    "fts_query",
    "rebuild",
    "reindex",
]

BUSY_TIMEOUT = 10.0
"""Seconds a connection waits for another writer (another xun in the same folder) before giving up."""
RANK_CAP = 2_000
"""A query matching more rows than this ranks only the newest RANK_CAP of them: words that common say
little about relevance, recent history is the likelier target, and ranking every one of 100,000 matches
would cost far more than the 50 ms a search may take (see tests/benchmarks/bench_recall.py)."""
PENDING_LIMIT = 20_000
"""Rows kept in memory for a retry when writing fails; beyond this only a reindex recovers them."""
MAX_QUERY_TERMS = 32
SNIPPET_TOKENS = 16
HIGHLIGHT = ("«", "»")

_NOT_TWICE = (
    " AND NOT (e.source = 'offload' AND e.role IN ('tool', 'tool_call') AND e.detail LIKE '%, reclaimed earlier' AND "
    "EXISTS ("
    "SELECT 1 FROM entries r WHERE r.session = e.session AND r.source = 'reclaimed' AND r.tool_call_id = "
    f"CASE e.role WHEN 'tool' THEN e.tool_call_id ELSE e.tool_call_id || '{ARGUMENTS_SUFFIX}' END))"
)
"""A tool result (or a call's arguments) reclaimed and later summarised is in the index twice with the same
text (its reclaimed original, and the log's "reclaimed earlier" entry); a search shows it once, as the
reclaimed original (restorable while its placeholder is in the context)."""
_TERM = re.compile(r'"([^"]*)"|(\S+)')
_TOKEN_CHAR = re.compile(r"[^\W_]")  # what FTS5's unicode61 tokenizer keeps: letters and digits


class RecallError(RuntimeError):
    """The recall index cannot be used at all (permissions, a full disk, a lock held too long)."""


# ----------------------------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One search result. `rank` is FTS5's bm25 score: lower is better; `snippet` is one line with the
    matched words between the highlight marks."""

    id: int
    session: str
    time: float
    role: str  # user, assistant, reasoning, tool_call, tool
    source: str  # "offload" (a summarised message) or "reclaimed" (a tool result replaced by a placeholder)
    tool: str
    tool_call_id: str
    snippet: str
    rank: float

    @property
    def when(self) -> str:
        return iso_time(self.time)


@dataclass(frozen=True, slots=True)
class RecallEntry:
    """One indexed message or tool result, with its exact text."""

    id: int
    session: str
    time: float
    role: str
    source: str
    speaker: str  # as the offload log writes it: Human, AI, AI reasoning, AI tool call, Tool
    tool: str
    tool_call_id: str
    arguments: str  # a reclaimed result's call arguments (a preview, as the archive keeps them)
    detail: str  # the offload log's detail, e.g. "read_file, id call_1, reclaimed earlier"
    text: str

    @property
    def when(self) -> str:
        return iso_time(self.time)


@dataclass(slots=True)
class RebuildReport:
    entries: int = 0
    logs: int = 0
    sessions: int = 0
    problems: list[str] = field(default_factory=list)
    """Logs or sessions that could not be read (skipped, named with the reason)."""
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class IndexStats:
    path: Path
    schema_version: int
    offloaded: int
    reclaimed: int
    sessions: int
    bytes: int


# ------------------------------------------------------------------------------------------------ query


def fts_query(text: str, prefix: bool = False) -> str:
    """An FTS5 MATCH expression that finds `text`'s words as words: every word must occur.

    Each word becomes a quoted string (a `"..."` span of the text stays one phrase), so FTS5 syntax in
    the text (`-`, `*`, `"`, `AND`, `NEAR(`, `col:`) is searched for, never obeyed. Words without a
    letter or digit are left out, and "" means there is nothing to search for. With `prefix`, a last
    word of three characters or more also matches longer words (for results as they are typed).
    """
    text = clean(text).replace("\x00", " ")
    terms: list[str] = []
    for match in _TERM.finditer(text):
        term = match.group(1) if match.group(1) is not None else match.group(2)
        if _TOKEN_CHAR.search(term):
            terms.append(term)
    terms = terms[:MAX_QUERY_TERMS]
    if not terms:
        return ""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
    if prefix and not text.endswith((" ", '"')) and len(terms[-1]) >= 3:
        quoted[-1] += "*"
    return " ".join(quoted)


# ------------------------------------------------------------------------------------------------ index

_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.RLock:
    """One lock per database file in this process: writes and recovery of the same file take turns."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(path.absolute()), threading.RLock())


class RecallIndex:
    """The index of one working directory's history (`paths.history_db_path`), safe to share between
    threads: it holds no connection, only the path, the writes waiting for a retry and the warnings."""

    def __init__(
        self, workdir: str | os.PathLike[str] | None = None, *, path: str | os.PathLike[str] | None = None
    ) -> None:
        self.workdir = Path(workdir) if workdir is not None else Path.cwd()
        self.path = Path(path) if path is not None else paths.history_db_path(self.workdir)
        self._lock = _lock_for(self.path)
        self._warnings: list[str] = []
        self._pending: list[tuple[int, Callable[[sqlite3.Connection], object]]] = []
        self._pending_rows = 0
        self._dropped = False

    def __repr__(self) -> str:
        return f"RecallIndex({str(self.path)!r})"

    # ----------------------------------------------------------------- reading

    def search(
        self,
        query: str,
        limit: int = 10,
        session: str | None = None,
        *,
        prefix: bool = False,
        highlight: tuple[str, str] = HIGHLIGHT,
    ) -> list[RecallHit]:
        """The best matches for `query`'s words (all must occur), best first; [] when nothing matches or
        the query has no words. `session` keeps to one conversation. Never raises on the query's text.
        A tool result that was reclaimed and then summarised is shown once (as the reclaimed result)."""
        expression = fts_query(query, prefix=prefix)
        limit = max(1, min(int(limit), 1000))
        if not expression:
            return []
        expression = f"{{text tool arguments}} : ({expression})"  # the session column is for filtering only
        if session is not None:
            session = clean(session)
            if _TOKEN_CHAR.search(session):
                expression = f'session : "{session.replace(chr(34), chr(34) * 2)}" AND {expression}'
        where = "entries_fts MATCH ?" + (" AND e.session = ?" if session is not None else "") + _NOT_TWICE
        params: list[Any] = [expression] + ([session] if session is not None else [])
        start, end = (clean(mark) for mark in highlight)

        def run(db: sqlite3.Connection) -> list[RecallHit]:
            floor = db.execute(
                f"SELECT entries_fts.rowid FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid WHERE {where} "
                "ORDER BY entries_fts.rowid DESC LIMIT 1 OFFSET ?",
                (*params, RANK_CAP),
            ).fetchone()
            rows = db.execute(
                "SELECT e.id, e.session, e.time, e.role, e.source, e.tool, e.tool_call_id, "
                f"snippet(entries_fts, -1, ?, ?, '…', {SNIPPET_TOKENS:d}), bm25(entries_fts, 1.0, 0.5, 0.5, 0.0) AS "
                "score "
                f"FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid WHERE {where} AND entries_fts.rowid > ? "
                "ORDER BY score, e.time DESC, e.key LIMIT ?",
                (start, end, *params, floor[0] if floor else 0, limit),
            ).fetchall()
            return [RecallHit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], " ".join(r[7].split()), r[8]) for r in rows]

        return self._read(run, [])

    def entry(self, entry_id: int) -> RecallEntry | None:
        """The full entry with this id (as `search` returned it), or None."""
        try:
            wanted = int(entry_id)
        except (TypeError, ValueError):
            return None
        if not -(2**63) <= wanted < 2**63:
            return None

        def run(db: sqlite3.Connection) -> RecallEntry | None:
            row = db.execute(
                "SELECT id, session, time, role, source, speaker, tool, tool_call_id, arguments, detail, text "
                "FROM entries WHERE id = ?",
                (wanted,),
            ).fetchone()
            return RecallEntry(*row) if row else None

        return self._read(run, None)

    def stats(self) -> IndexStats:
        """Row counts (kept by triggers: no entry is read) and the size on disk (database and write-ahead log)."""

        def run(db: sqlite3.Connection) -> IndexStats:
            counts = dict(db.execute("SELECT source, sum(n) FROM counts GROUP BY source").fetchall())
            sessions = db.execute("SELECT count(DISTINCT session) FROM counts WHERE n > 0").fetchone()[0]
            size = sum(p.stat().st_size for p in self._files() if p.exists())
            return IndexStats(
                self.path, schema.user_version(db), counts.get("offload", 0), counts.get("reclaimed", 0), sessions, size
            )

        return self._read(run, IndexStats(self.path, 0, 0, 0, 0, 0))

    def take_warnings(self) -> list[str]:
        """Warnings met by searches, reads and rebuilds since the last call (for the front end to show)."""
        with self._lock:
            taken, self._warnings = self._warnings, []
        return taken

    # ----------------------------------------------------------------- rebuilding

    def rebuild(self, conversations: Iterable[Conversation] = ()) -> RebuildReport:
        """Replace the whole index, in one transaction, with what the offload logs and the saved sessions
        hold. `conversations` are live ones whose state is newer than their session files (they are read
        instead of their files). Unreadable logs and sessions are skipped and named in the report."""
        report = RebuildReport()
        started = time.perf_counter()
        live = list(conversations)

        def run(db: sqlite3.Connection) -> None:
            report.entries = report.logs = report.sessions = 0
            report.problems.clear()
            schema.drop_all(db)
            db.execute("PRAGMA user_version = 0")
            schema.migrate(db)  # every step from nothing, as a new file gets them
            self._fill(db, report, live)

        with self._lock:
            notes: list[str] = []
            self._run(run, notes, write=True)
            self._pending.clear()
            self._pending_rows, self._dropped = 0, False
            self._warnings.extend(notes)
        report.seconds = time.perf_counter() - started
        return report

    def _fill(self, db: sqlite3.Connection, report: RebuildReport, live: Sequence[Conversation] = ()) -> None:
        """Insert the rows of every log and session (inside the caller's transaction), oldest first. The rows
        go through a temporary table that SQLite sorts on disk: memory holds one entry at a time, never
        every row of every log."""
        columns = ", ".join(schema.ROW_COLUMNS)
        db.execute(f"CREATE TEMP TABLE staged ({columns})")
        try:
            marks = ", ".join("?" * len(schema.ROW_COLUMNS))
            db.executemany(f"INSERT INTO staged VALUES ({marks})", self._source_rows(report, live))
            db.execute(
                f"INSERT OR IGNORE INTO entries ({columns}) SELECT {columns} "
                "FROM staged ORDER BY time, session, source, position, key"
            )
        finally:
            db.execute("DROP TABLE temp.staged")
        report.entries = db.execute("SELECT count(*) FROM entries").fetchone()[0]
        if report.entries:
            db.execute("INSERT INTO entries_fts (entries_fts) VALUES ('optimize')")

    def _source_rows(self, report: RebuildReport, live: Sequence[Conversation]) -> Iterator[Row]:
        """The rows of every offload log, read as a stream, and of every session's reclaimed results."""
        from xun.context.conversation import Conversation

        logs = paths.offload_dir(self.workdir)
        for log in sorted(logs.glob("*.md")) if logs.is_dir() else ():
            cut = 0
            try:
                section, position = None, 0
                for item in iter_offload_log(log, cap=INDEXED_CHARS):
                    if isinstance(item, OffloadSection):
                        section, position = item, 0
                        continue
                    assert section is not None
                    cut += item.cut
                    yield offload_row(section.conversation_id or log.stem, section.when, position, item)
                    position += 1
            except OSError as exc:
                report.problems.append(f"{log}: cannot read the offload log ({exc.strerror or exc})")
                continue
            report.logs += 1
            if cut:
                report.problems.append(
                    f"{log}: {cut:,} {'entry is' if cut == 1 else 'entries are'} longer than "
                    f"{INDEXED_CHARS:,} characters: only that much of each is searchable (the log "
                    "keeps the whole)"
                )
        newer = {c.conversation_id: c for c in live}
        folder = paths.sessions_dir(self.workdir)
        for session_file in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            if session_file.stem in newer:
                continue
            try:
                conversation = Conversation().load(session_file)
                if conversation.conversation_id in newer:
                    continue
                rows = reclaimed_rows(conversation)
            except SessionFormatError as exc:
                report.problems.append(str(exc))
                continue
            report.sessions += 1
            yield from rows
        for conversation in newer.values():
            try:
                rows = reclaimed_rows(conversation)
            except SessionFormatError as exc:
                report.problems.append(str(exc))
                continue
            report.sessions += 1
            yield from rows

    # ----------------------------------------------------------------- the engine's writes (never raise)

    def index_offload(
        self, session: str, messages: Iterable[Message], *, reclaimed: Mapping[str, str] | None = None, when: str
    ) -> str | None:
        """Index one offload section just appended to the log (the same messages, reclaimed originals and
        time as `append_offload` got). Returns a warning when the index could not take it."""
        try:
            rows = offload_rows(session, when, as_logged(transcript_entries(messages, reclaimed)))
        except Exception as exc:  # noqa: BLE001 - the summary must go on whatever happens here
            return (
                f"the offloaded messages were not added to the search index ({type(exc).__name__}: {exc}); "
                "they are safe in the offload log, and `xun history --reindex` adds them"
            )
        return self._write(
            len(rows), lambda db: db.executemany(schema.INSERT, rows), "the offloaded messages", "the offload log"
        )

    def index_reclaimed(self, session: str, results: Iterable[tuple[ReclaimedToolResult, str]]) -> str | None:
        """Index tool results just reclaimed (each record with its original)."""
        rows = [reclaimed_row(session, record, original) for record, original in results]
        if not rows:
            return None
        return self._write(
            len(rows), lambda db: db.executemany(schema.INSERT, rows), "the reclaimed tool results", "the session"
        )

    def forget_reclaimed(self, session: str, tool_call_ids: Iterable[str] | None = None) -> str | None:
        """Drop reclaimed results that went back into the context (restored), or all of a session's
        (None: the conversation was cleared), so the index keeps mirroring the session."""
        if tool_call_ids is None:

            def forget(db: sqlite3.Connection) -> None:
                db.execute("DELETE FROM entries WHERE session = ? AND source = 'reclaimed'", (session,))
        else:
            keys = [(reclaimed_key(session, call_id),) for call_id in tool_call_ids]

            def forget(db: sqlite3.Connection) -> None:
                db.executemany("DELETE FROM entries WHERE key = ?", keys)

        return self._write(1, forget, "the change to the reclaimed tool results", "the session")

    def _write(self, size: int, op: Callable[[sqlite3.Connection], object], what: str, where: str) -> str | None:
        notes: list[str] = []
        with self._lock:
            ops = [*self._pending, (size, op)]

            def run(db: sqlite3.Connection) -> None:
                for _, pending_op in ops:
                    pending_op(db)

            try:
                self._run(run, notes, write=True)
            except Exception as exc:  # noqa: BLE001 - index trouble must never stop a compaction
                reason = str(exc) if isinstance(exc, RecallError) else f"{type(exc).__name__}: {exc}"
                self._pending.append((size, op))
                self._pending_rows += size
                retry = "they will be indexed at the next write"
                if self._pending_rows > PENDING_LIMIT:
                    self._pending.clear()
                    self._pending_rows, self._dropped = 0, True
                if self._dropped:
                    retry = "too much is waiting to be retried, so only a reindex recovers it"
                notes.append(
                    f"the search index was not updated ({reason}); {what} are safe in {where}; {retry}, "
                    "or run `xun history --reindex`"
                )
            else:
                self._pending.clear()
                self._pending_rows = 0
                if self._dropped:
                    notes.append("some history could not be indexed earlier; run `xun history --reindex` to add it")
        return "; ".join(notes) or None

    # ----------------------------------------------------------------- connections and recovery

    def _files(self) -> list[Path]:
        return [self.path, self.path.with_name(self.path.name + "-wal"), self.path.with_name(self.path.name + "-shm")]

    def _read(self, fn: Callable[[sqlite3.Connection], _T], nothing: _T) -> _T:
        """Run a query; with no database and nothing to build one from, `nothing` (and no file is made)."""
        if not self.path.exists() and not any(
            folder.is_dir() for folder in (paths.offload_dir(self.workdir), paths.sessions_dir(self.workdir))
        ):
            return nothing
        notes: list[str] = []
        try:
            return self._run(fn, notes, write=False)
        finally:
            if notes:
                with self._lock:
                    self._warnings.extend(notes)

    def _run(self, fn: Callable[[sqlite3.Connection], _T], notes: list[str], *, write: bool) -> _T:
        """Run `fn` on a fresh connection (in a write transaction when `write`). A damaged file is moved
        aside and rebuilt once, then `fn` runs again; any other failure is a RecallError. The damage is said
        in `notes` whatever happens next: the new index may be built by this call or by another thread or
        process that finds the file gone."""
        moved: str | None = None
        for attempt in (1, 2):
            inode = None
            try:
                try:
                    inode = self._prepare()
                except OSError as exc:
                    if write or exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM) or not self.path.is_file():
                        raise
                    db = self._open_read_only()  # a read-only disk or folder: read the index as it is
                    try:
                        return fn(db)
                    finally:
                        db.close()
                db = self._open(notes)
                try:
                    if moved is not None:
                        entries = db.execute("SELECT count(*) FROM entries").fetchone()[0]
                        built = f"a new one was built from the offload logs and sessions ({entries} entries)"
                        notes.append(f"{moved} and {built}")
                        moved = None
                    if not write:
                        return fn(db)
                    db.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(db)
                        db.execute("COMMIT")
                    except BaseException:
                        schema.rollback(db)
                        raise
                    return result
                finally:
                    db.close()
            except Exception as exc:
                if attempt == 1 and schema.is_damage(exc):
                    moved = self._move_aside(exc, inode)
                    continue
                if moved is not None:
                    notes.append(f"{moved}; a new one could not be built yet")
                if isinstance(exc, (sqlite3.Error, OSError, schema.Damaged)):
                    raise RecallError(f"the history index {self.path} cannot be used: {exc}") from exc
                raise
        raise AssertionError("unreachable")

    def _open_read_only(self) -> sqlite3.Connection:
        """The index opened for reading only, changing nothing on disk (`immutable`: no -wal or -shm is
        made), for a folder or file system that cannot be written."""
        self._refuse_links()
        uri = f"{self.path.resolve().as_uri()}?mode=ro&immutable=1"
        db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            if schema.user_version(db) != schema.SCHEMA_VERSION:
                raise RecallError(
                    f"the history index {self.path} is from another version of xun and cannot "
                    "be upgraded here (the folder is read-only)"
                )
            schema.check_schema(db)
        except BaseException:
            db.close()
            raise
        return db

    def _refuse_links(self, create: bool = False) -> None:
        """The index and its -wal and -shm are xun's own files: a symbolic link planted in their place (to a
        file elsewhere, or to a missing one SQLite would create), or in place of `.xun`, is refused, never
        followed. `create` makes the folder when it is missing."""
        try:
            with state_dir_fd(self.path.parent, create=create):
                pass
        except LinkRefused as exc:
            if not Path(exc.filename).is_symlink():
                raise  # not a folder: the index cannot be used there
            raise RecallError(
                f"{exc.filename} is a symbolic link; xun does not follow links in its own folder (remove it)"
            ) from None
        except FileNotFoundError:
            pass
        for name in self._files():
            if name.is_symlink():
                raise RecallError(
                    f"{name} is a symbolic link; xun does not follow links in its own folder "
                    "(remove it and xun makes a new index)"
                )

    def _prepare(self) -> int:
        """Create the file owner-only if it is missing (and make it owner-only if it is not); its inode,
        which recovery checks before moving the file aside. Links in its place are refused."""
        self._refuse_links(create=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            info = os.fstat(fd)
            if info.st_mode & 0o077:
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        return info.st_ino

    def _open(self, notes: list[str]) -> sqlite3.Connection:
        """Connect and check the schema, migrating it when it is older; a new index is filled from the
        offload logs and sessions in the same transaction that creates it."""
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous = FULL")
            version = schema.user_version(db)  # a file that is not SQLite fails here, before anything is written
            if version != schema.SCHEMA_VERSION:
                schema.check_foreign(db, version)
                db.execute("BEGIN IMMEDIATE")
                try:
                    if schema.migrate(db) == 0:
                        report = RebuildReport()
                        self._fill(db, report)
                        notes.extend(report.problems)
                    db.execute("COMMIT")
                except BaseException:
                    schema.rollback(db)
                    raise
            schema.check_schema(db)  # checked before the switch to WAL, so a damaged file is kept as it was
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                _use_wal(db)
            # NORMAL, once in WAL: a crash of xun loses nothing, and a power cut at most the newest writes of an
            # index made from the offload logs and sessions (`xun history --reindex`); FULL's fsync on every
            # commit cost a long turn about 1 ms a round (each summary waited 20+ ms for the disk)
            db.execute("PRAGMA synchronous = NORMAL")
            for extra in self._files()[1:]:
                with contextlib.suppress(OSError):
                    if extra.stat().st_mode & 0o077:
                        extra.chmod(0o600)
        except BaseException:
            db.close()
            raise
        return db

    def _move_aside(self, exc: BaseException, inode: int | None) -> str | None:
        """Move the damaged file (and its -wal/-shm) aside, keeping it; what to say of it, or None when
        another thread or process has already replaced the file (and says so itself). The next open builds
        the new index."""
        with self._lock:
            try:
                current = self.path.stat().st_ino
            except OSError:
                current = None
            reason = str(exc) or type(exc).__name__
            if inode is not None and current != inode:
                return None
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            try:
                for source in self._files():
                    if source.exists():
                        os.replace(source, aside.with_name(aside.name + source.name[len(self.path.name) :]))
            except OSError as error:
                raise RecallError(
                    f"the history index {self.path} is damaged ({reason}) and could not be moved aside: {error}"
                ) from error
            return f"the history index {self.path} could not be used ({reason}); it was kept as {aside.name}"


def _use_wal(db: sqlite3.Connection) -> None:
    """Switch the index to write-ahead logging (kept in the file: done once). SQLite refuses the switch at
    once, without waiting, while another connection is writing (two threads or processes building a new
    index together), so it is tried again until BUSY_TIMEOUT has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def rebuild(workdir: str | os.PathLike[str] | None = None, conversations: Iterable[Conversation] = ()) -> RebuildReport:
    """Rebuild the index of `workdir` from its offload logs and sessions (`xun history --reindex`)."""
    return RecallIndex(workdir).rebuild(conversations)


reindex = rebuild
