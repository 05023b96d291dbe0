"""The recall index's SQLite schema: its tables, the migrations from one version to the next, and the
checks that tell a usable index from a damaged or foreign file.

`xun.context.recall` owns the connections; this module only says what the file must hold. The schema is
versioned by `PRAGMA user_version`: `MIGRATIONS[n]` takes version n-1 to n.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable

__all__ = [
    "COLUMNS",
    "Damaged",
    "INSERT",
    "MIGRATIONS",
    "ROW_COLUMNS",
    "SCHEMA_VERSION",
    "check_foreign",
    "check_schema",
    "drop_all",
    "is_damage",
    "migrate",
    "rollback",
    "user_version",
]

SCHEMA_VERSION = 3

COLUMNS = (
    "id",
    "key",
    "source",
    "session",
    "time",
    "role",
    "speaker",
    "tool",
    "tool_call_id",
    "arguments",
    "detail",
    "position",
    "text",
)
ROW_COLUMNS = COLUMNS[1:]
INSERT = f"INSERT OR IGNORE INTO entries ({', '.join(ROW_COLUMNS)}) VALUES ({', '.join('?' * len(ROW_COLUMNS))})"
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


class Damaged(Exception):
    """The file is not a usable xun recall index (checked on open); it is moved aside and rebuilt."""


def _create_v1(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE entries (
            id INTEGER PRIMARY KEY,
            key TEXT NOT NULL UNIQUE,
            source TEXT NOT NULL,
            session TEXT NOT NULL,
            time REAL NOT NULL,
            role TEXT NOT NULL,
            speaker TEXT NOT NULL,
            tool TEXT NOT NULL DEFAULT '',
            tool_call_id TEXT NOT NULL DEFAULT '',
            arguments TEXT NOT NULL DEFAULT '',
            detail TEXT NOT NULL DEFAULT '',
            position INTEGER NOT NULL DEFAULT 0,
            text TEXT NOT NULL
        )"""
    )
    db.execute("CREATE INDEX entries_session ON entries (session, source, tool_call_id)")
    db.execute(
        "CREATE VIRTUAL TABLE entries_fts USING fts5(text, tool, arguments, content='entries', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
    )
    db.execute(
        "CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN "
        "INSERT INTO entries_fts (rowid, text, tool, arguments) VALUES (new.id, new.text, new.tool, new.arguments); END"
    )
    db.execute(
        "CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN "
        "INSERT INTO entries_fts (entries_fts, rowid, text, tool, arguments) "
        "VALUES ('delete', old.id, old.text, old.tool, old.arguments); END"
    )


def _fts_with_session(db: sqlite3.Connection) -> None:
    """Version 2: the session is also a column of the full-text index, so a search in one session lets
    FTS5 intersect it with the words instead of checking every match against the table."""
    db.execute("DROP TRIGGER entries_ai")
    db.execute("DROP TRIGGER entries_ad")
    db.execute("DROP TABLE entries_fts")
    db.execute(
        "CREATE VIRTUAL TABLE entries_fts USING fts5(text, tool, arguments, session, content='entries', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
    )
    db.execute(
        "CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN INSERT INTO entries_fts (rowid, text, tool, "
        "arguments, "
        "session) VALUES (new.id, new.text, new.tool, new.arguments, new.session); END"
    )
    db.execute(
        "CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN INSERT INTO entries_fts (entries_fts, rowid, text, "
        "tool, arguments, session) VALUES ('delete', old.id, old.text, old.tool, old.arguments, old.session); END"
    )
    db.execute("INSERT INTO entries_fts (entries_fts) VALUES ('rebuild')")


def _counts_table(db: sqlite3.Connection) -> None:
    """Version 3: the rows of each source and session, kept by triggers, so the counts F9 opens with cost
    the same however large the index is (counting the entries read all of them)."""
    db.execute(
        "CREATE TABLE counts (source TEXT NOT NULL, session TEXT NOT NULL, n INTEGER NOT NULL, "
        "PRIMARY KEY (source, session)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TRIGGER counts_ai AFTER INSERT ON entries BEGIN INSERT INTO counts (source, session, n) "
        "VALUES (new.source, new.session, 1) ON CONFLICT (source, session) DO UPDATE SET n = n + 1; END"
    )
    db.execute(
        "CREATE TRIGGER counts_ad AFTER DELETE ON entries BEGIN UPDATE counts SET n = n - 1 "
        "WHERE source = old.source AND session = old.session; "
        "DELETE FROM counts WHERE source = old.source AND session = old.session AND n <= 0; END"
    )
    db.execute("INSERT INTO counts (source, session, n) SELECT source, session, count(*) FROM entries GROUP BY 1, 2")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _create_v1, 2: _fts_with_session, 3: _counts_table}
"""`MIGRATIONS[n]` takes a database at version n-1 to version n, inside the caller's transaction. A new
schema adds `MIGRATIONS[4]` (e.g. an ALTER TABLE) and raises SCHEMA_VERSION; nothing else changes."""
_FTS_COLUMNS = ("text", "tool", "arguments", "session")
_REQUIRED = {
    "entries": "table",
    "entries_fts": "table",
    "entries_ai": "trigger",
    "entries_ad": "trigger",
    "counts": "table",
    "counts_ai": "trigger",
    "counts_ad": "trigger",
}


def user_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def check_foreign(db: sqlite3.Connection, found: int) -> None:
    if found > SCHEMA_VERSION:
        raise Damaged(f"it was written by a newer xun (schema {found}; this one knows up to {SCHEMA_VERSION})")
    if found == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise Damaged("it holds tables that are not a xun history index")


def migrate(db: sqlite3.Connection) -> int:
    """Bring the schema up to SCHEMA_VERSION one step at a time, in the caller's transaction; return the
    version found. Raises Damaged for a foreign database, or one written by a newer xun."""
    found = user_version(db)
    check_foreign(db, found)
    for version in range(found + 1, SCHEMA_VERSION + 1):
        try:
            MIGRATIONS[version](db)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 1) != 1:  # SQLITE_ERROR: the schema is not the one expected
                raise
            raise Damaged(f"its schema {version - 1} could not be migrated to {version} ({exc})") from exc
        db.execute(f"PRAGMA user_version = {version:d}")
    return found


def check_schema(db: sqlite3.Connection) -> None:
    present = dict(db.execute("SELECT name, type FROM sqlite_master"))
    missing = sorted(name for name, kind in _REQUIRED.items() if present.get(name) != kind)
    if missing:
        raise Damaged(f"its schema lacks {', '.join(missing)}")
    columns = tuple(row[1] for row in db.execute("PRAGMA table_info(entries)"))
    if columns != COLUMNS:
        raise Damaged(f"its entries table has the columns {', '.join(columns)}")
    indexed = tuple(row[1] for row in db.execute("PRAGMA table_info(entries_fts)"))
    if indexed != _FTS_COLUMNS:
        raise Damaged(f"its full-text index has the columns {', '.join(indexed)}")


def drop_all(db: sqlite3.Connection) -> None:
    """Drop every table (virtual tables first, which takes their shadow tables with them)."""
    while True:
        rows = db.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        if not rows:
            return
        virtual = [name for name, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL")]
        name = virtual[0] if virtual else rows[0][0]
        db.execute(f'DROP TABLE "{name.replace(chr(34), chr(34) * 2)}"')


def is_damage(exc: BaseException) -> bool:
    if isinstance(exc, Damaged):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    message = str(exc)
    return "malformed" in message or "not a database" in message


def rollback(db: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        if db.in_transaction:
            db.execute("ROLLBACK")
