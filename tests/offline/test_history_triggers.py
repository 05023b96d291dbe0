"""The scripted model's words for the history tools: "search the history for X", "read history entry N"."""

from __future__ import annotations

import pytest

from .conftest import BUILTIN_TOOLS, STRING, calls_of, tool_schema, user

HISTORY_TOOLS = [
    tool_schema("search_history", {"query": STRING, "limit": {"type": "integer", "default": 10}}, ["query"]),
    tool_schema("read_history_entry", {"id": {"type": "integer"}}, ["id"]),
]
ALL_TOOLS = BUILTIN_TOOLS + HISTORY_TOOLS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("search the history for compaction threshold", [("search_history", {"query": "compaction threshold"})]),
        ("Please search history for `foo-bar`.", [("search_history", {"query": "foo-bar"})]),
        ('search the conversation history for "exact phrase" please', [("search_history", {"query": "exact phrase"})]),
        ("look up the history about src/app.py", [("search_history", {"query": "src/app.py"})]),
        ("read history entry 42", [("read_history_entry", {"id": 42})]),
        ("Show the full history entry #7.", [("read_history_entry", {"id": 7})]),
    ],
)
def test_history_words_pick_the_history_tools(client, text, expected):
    reply = client.chat.completions.create(model="m", messages=user(text), tools=ALL_TOOLS)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert calls_of(reply.choices[0].message) == expected


def test_history_request_combines_with_other_requests(client):
    text = "search the history for TODO, then read history entry 3 and read README.md"
    reply = client.chat.completions.create(model="m", messages=user(text), tools=ALL_TOOLS)
    assert calls_of(reply.choices[0].message) == [
        ("search_history", {"query": "TODO"}),
        ("read_history_entry", {"id": 3}),
        ("read_file", {"path": "README.md"}),
    ]


def test_plain_search_still_searches_files(client):
    reply = client.chat.completions.create(model="m", messages=user("search for history in src"), tools=ALL_TOOLS)
    assert calls_of(reply.choices[0].message) == [("search_text", {"pattern": "history", "path": "src"})]


def test_history_words_without_the_tools_get_a_text_answer(client):
    reply = client.chat.completions.create(model="m", messages=user("search the history for foo"), tools=BUILTIN_TOOLS)
    message = reply.choices[0].message
    assert not message.tool_calls
    assert "search_history" in message.content and "no such tool" in message.content


def test_read_history_entry_needs_a_number(client):
    reply = client.chat.completions.create(model="m", messages=user("read history entry"), tools=ALL_TOOLS)
    assert not reply.choices[0].message.tool_calls
