"""Fixtures for the history index tests: a working folder of its own, sessions that compact, row dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xun.context.conversation import Conversation
from xun.context.recall import RecallIndex
from xun.context.sessions import SessionStore


@pytest.fixture(autouse=True)
def no_xun_home(monkeypatch):
    """Every test keeps its state under its own tmp folder, whatever the environment says."""
    monkeypatch.delenv("XUN_HOME", raising=False)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def store(workdir: Path) -> SessionStore:
    return SessionStore(workdir)


TRICKY_TEXTS = [
    "plain words about the compaction threshold",
    'quotes " and "" and a lone " here',
    "FTS5 syntax: foo-bar AND( NEAR(a b) col:text * ^start -minus +plus",
    "line one\n## Offloaded at 2020-01-01T00:00:00Z\nHuman: not an entry\n    indented",
    "windows\r\nline endings\r\n",
    "unicode: café naïve 東京 emoji 🎉 and a \u2028 separator",
    "",
    "trailing newline\n",
]


def tool_call(
    c: Conversation, call_id: str, name: str, arguments: dict, result: str, content: str | None = None
) -> None:
    c.add_agent_message(
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            ],
        }
    )
    c.add_tool_result(call_id, result)


def busy_session(c: Conversation, tag: str, rounds: int = 12) -> Conversation:
    """A conversation with every kind of message: user turns, replies with reasoning, tool calls and long
    results, and the tricky texts above in all of them."""
    c.set_system_message_content("You are the test agent.")
    for i in range(rounds):
        tricky = TRICKY_TEXTS[i % len(TRICKY_TEXTS)]
        c.add_user_message(f"{tag} question {i}: {tricky}")
        c.add_agent_message(
            {"role": "assistant", "content": f"{tag} thinking about {i}", "reasoning_content": f"{tag} reason {i}"}
        )
        result = f"{tag} result {i} marker{tag}{i}\n" + ("payload line\n" * 40) + tricky
        tool_call(
            c, f"call_{tag}_{i}", "read_file", {"path": f"src/{tag}_{i}.py"}, result, content=f"{tag} reading {i}"
        )
        c.add_agent_message({"role": "assistant", "content": f"{tag} answer {i}: {tricky}"})
    return c


def all_rows(index: RecallIndex) -> list[tuple]:
    """Every row without its id (ids depend on the order rows were written), sorted."""
    import sqlite3

    with sqlite3.connect(index.path) as db:
        rows = db.execute(
            "SELECT key, source, session, time, role, speaker, tool, tool_call_id, arguments, detail, position, text "
            "FROM entries"
        ).fetchall()
    db.close()
    return sorted(rows)


def without_ids(hits) -> list[tuple]:
    return [(h.session, h.time, h.role, h.source, h.tool, h.tool_call_id, h.snippet, round(h.rank, 9)) for h in hits]
