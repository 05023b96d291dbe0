"""Tool selection by the scripted model, through the official openai client."""

from __future__ import annotations

import json

import pytest

from .conftest import BUILTIN_TOOLS, StreamResult, calls_of, only_tools, user


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Please read src/xun/cli/main.py", [("read_file", {"path": "src/xun/cli/main.py"})]),
        ("What is in `pyproject.toml`?", [("read_file", {"path": "pyproject.toml"})]),
        ("list the files in src", [("list_directory", {"path": "src"})]),
        ("ls", [("list_directory", {"path": "."})]),
        ("ls docs/", [("list_directory", {"path": "docs/"})]),
        ("search for TODO in src/xun", [("search_text", {"pattern": "TODO", "path": "src/xun"})]),
        ('grep "def main" tests', [("search_text", {"pattern": "def main", "path": "tests"})]),
        ("run `pytest -q tests/offline`", [("run_command", {"command": "pytest -q tests/offline"})]),
        ("run git status", [("run_command", {"command": "git status"})]),
        ("Please run: ls -la", [("run_command", {"command": "ls -la"})]),
        ("grep -n foo src", [("search_text", {"pattern": "foo", "path": "src"})]),
        ("Can you list what's in the src directory?", [("list_directory", {"path": "src"})]),
        (
            'write "hello there" to notes/hello.txt',
            [("write_file", {"path": "notes/hello.txt", "content": "hello there"})],
        ),
        ("recover the result with ID call_abc123", [("extract_compacted_tool_result", {"toolcall_id": "call_abc123"})]),
        (
            "I need this again: [Compacted, ID: call_9f8e. If this content is still needed, call it.]",
            [("extract_compacted_tool_result", {"toolcall_id": "call_9f8e"})],
        ),
    ],
)
def test_words_pick_the_tool_and_its_arguments(client, text, expected):
    reply = client.chat.completions.create(model="any-model-name", messages=user(text), tools=BUILTIN_TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert calls_of(choice.message) == expected


def test_several_requests_become_parallel_calls_in_one_message(client):
    text = "Read README.md and src/app.py, then list tests; also grep TODO in src and run `make lint`."
    reply = client.chat.completions.create(model="m", messages=user(text), tools=BUILTIN_TOOLS)
    assert calls_of(reply.choices[0].message) == [
        ("read_file", {"path": "README.md"}),
        ("read_file", {"path": "src/app.py"}),
        ("list_directory", {"path": "tests"}),
        ("search_text", {"pattern": "TODO", "path": "src"}),
        ("run_command", {"command": "make lint"}),
    ]
    ids = [call.id for call in reply.choices[0].message.tool_calls]
    assert len(set(ids)) == len(ids)
    assert all(call_id.startswith("call_") for call_id in ids)


def test_parallel_tool_calls_false_keeps_only_the_first(client):
    reply = client.chat.completions.create(
        model="m", messages=user("read a.py and b.py"), tools=BUILTIN_TOOLS, parallel_tool_calls=False
    )
    assert calls_of(reply.choices[0].message) == [("read_file", {"path": "a.py"})]


def test_only_offered_tools_are_called(client):
    text = "read a.py and list src"
    reply = client.chat.completions.create(model="m", messages=user(text), tools=only_tools("list_directory"))
    assert calls_of(reply.choices[0].message) == [("list_directory", {"path": "src"})]

    no_tools = client.chat.completions.create(model="m", messages=user(text))
    message = no_tools.choices[0].message
    assert message.tool_calls is None
    assert no_tools.choices[0].finish_reason == "stop"
    assert "read_file" in message.content and "no such tool" in message.content

    refused = client.chat.completions.create(model="m", messages=user(text), tools=BUILTIN_TOOLS, tool_choice="none")
    assert refused.choices[0].message.tool_calls is None


def test_a_request_without_trigger_words_gets_text_that_says_what_the_model_is(client):
    reply = client.chat.completions.create(model="m", messages=user("hello, who are you"), tools=BUILTIN_TOOLS)
    message = reply.choices[0].message
    assert message.tool_calls is None
    assert "scripted" in message.content and "not an LLM" in message.content
    assert "“hello, who are you”" in message.content


def test_required_parameters_are_filled_from_the_schema(client):
    strict = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "offset": {"type": "integer", "default": 1},
                        "limit": {"type": "integer"},
                    },
                    "required": ["path", "offset", "limit"],
                },
            },
        }
    ]
    reply = client.chat.completions.create(model="m", messages=user("read setup.cfg"), tools=strict)
    assert calls_of(reply.choices[0].message) == [("read_file", {"path": "setup.cfg", "offset": 1, "limit": 200})]


def test_tool_call_ids_are_deterministic_and_differ_between_turns(client):
    messages = user("read a.py")
    first = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    again = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    assert first.choices[0].message.tool_calls[0].id == again.choices[0].message.tool_calls[0].id
    assert first.model_dump(exclude={"created"}) == again.model_dump(exclude={"created"})

    call = first.choices[0].message.tool_calls[0]
    later = messages + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "print('a')\n"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "read a.py"},
    ]
    second = client.chat.completions.create(model="m", messages=later, tools=BUILTIN_TOOLS)
    assert second.choices[0].message.tool_calls[0].id != call.id


def test_results_are_answered_in_text_and_the_loop_ends(client):
    """A miniature agent loop: call, run the tools, answer; the model must stop calling tools."""
    messages = user("read notes.txt and run `make test`")
    reply = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    message = reply.choices[0].message
    assert [name for name, _ in calls_of(message)] == ["read_file", "run_command"]
    messages.append(message.model_dump(exclude_none=True))
    outputs = {
        "read_file": "first line of notes\nsecond line\nthird",
        "run_command": "[Error] make: *** No rule to make target 'test'.",
    }
    for call in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": outputs[call.function.name]})

    answer = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    assert answer.choices[0].finish_reason == "stop"
    text = answer.choices[0].message.content
    assert answer.choices[0].message.tool_calls is None
    assert "`read_file` `notes.txt` returned 37 characters in 3 lines" in text
    assert "`first line of notes second line third`" in text
    assert "`run_command` `make test` failed" in text
    assert "`[Error] make: *** No rule to make target 'test'.`" in text


def test_a_compacted_result_in_the_answer_is_named_by_id(client):
    messages = user("read big.log") + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "big.log"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_7",
            "content": "[Compacted, ID: call_7. If this content is still needed, call extract_compacted_tool_result "
            "with this ID or re-run the tool.]",
        },
    ]
    answer = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    assert "compacted earlier (ID `call_7`)" in answer.choices[0].message.content


def test_asking_to_recover_a_compacted_result_uses_the_latest_placeholder(client):
    messages = [
        {"role": "user", "content": "read big.log"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_old",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "big.log"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_old",
            "content": "[Compacted, ID: call_old. If this content is still needed, call extract_compacted_tool_result "
            "with this ID or re-run the tool.]",
        },
        {"role": "assistant", "content": "It was compacted."},
        {"role": "user", "content": "Please recover the compacted result."},
    ]
    reply = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    assert calls_of(reply.choices[0].message) == [("extract_compacted_tool_result", {"toolcall_id": "call_old"})]


def test_streamed_tool_calls_arrive_as_indexed_deltas_with_argument_fragments(client):
    stream = client.chat.completions.create(
        model="m", messages=user("read src/xun/offline/server.py and list src"), tools=BUILTIN_TOOLS, stream=True
    )
    result = StreamResult(list(stream))
    assert result.finish_reason == "tool_calls"
    assert result.calls() == [("read_file", {"path": "src/xun/offline/server.py"}), ("list_directory", {"path": "src"})]
    openings = [
        call
        for chunk in result.chunks
        for choice in chunk.choices
        for call in (choice.delta.tool_calls or [])
        if call.id
    ]
    assert [(call.index, call.type, call.function.name) for call in openings] == [
        (0, "function", "read_file"),
        (1, "function", "list_directory"),
    ]
    fragments = [
        call.function.arguments
        for chunk in result.chunks
        for choice in chunk.choices
        for call in (choice.delta.tool_calls or [])
        if call.index == 0 and not call.id
    ]
    assert len(fragments) >= 3, "arguments must be spread over several chunks"
    assert json.loads("".join(fragments)) == {"path": "src/xun/offline/server.py"}


def test_streamed_and_whole_replies_agree(client):
    messages = user("list src and run `ls -la`")
    whole = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
    streamed = StreamResult(
        list(client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS, stream=True))
    )
    assert streamed.calls() == calls_of(whole.choices[0].message)
    assert [slot["id"] for _, slot in sorted(streamed.tool_calls.items())] == [
        c.id for c in whole.choices[0].message.tool_calls
    ]


async def test_async_client_streaming_and_not(async_client):
    reply = await async_client.chat.completions.create(model="m", messages=user("grep TODO"), tools=BUILTIN_TOOLS)
    assert calls_of(reply.choices[0].message) == [("search_text", {"pattern": "TODO", "path": "."})]
    stream = await async_client.chat.completions.create(model="m", messages=user("hello"), stream=True)
    chunks = [chunk async for chunk in stream]
    result = StreamResult(chunks)
    assert result.finish_reason == "stop"
    assert "not an LLM" in result.content


MCP_STYLE_TOOL = {
    "type": "function",
    "function": {
        "name": "time__get_current_time",
        "description": "Get the time (an MCP server's tool).",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "default": "UTC"}, "verbose": {"type": "boolean"}},
            "required": ["timezone", "verbose"],
        },
    },
}


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        (
            'use the tool time__get_current_time with {"timezone": "Asia/Tokyo", "verbose": true}',
            {"timezone": "Asia/Tokyo", "verbose": True},
        ),
        (
            'Please use the tool `time__get_current_time` with {"timezone": "Europe/Paris"} and tell me',
            {"timezone": "Europe/Paris", "verbose": False},
        ),  # a required parameter not given: from its type
        ("use the tool time__get_current_time", {"timezone": "UTC", "verbose": False}),  # the schema's default
    ],
)
def test_use_the_tool_calls_any_offered_tool_with_that_json(client, text, arguments):
    reply = client.chat.completions.create(model="m", messages=user(text), tools=[*BUILTIN_TOOLS, MCP_STYLE_TOOL])
    assert calls_of(reply.choices[0].message) == [("time__get_current_time", arguments)]


def test_use_the_tool_says_why_it_calls_nothing(client):
    absent = client.chat.completions.create(
        model="m", messages=user('use the tool git__git_log with {"a": 1}'), tools=BUILTIN_TOOLS
    )
    assert not absent.choices[0].message.tool_calls
    assert "no tool named `git__git_log`" in absent.choices[0].message.content
    broken = client.chat.completions.create(
        model="m", messages=user("use the tool time__get_current_time with {oops"), tools=[MCP_STYLE_TOOL]
    )
    assert not broken.choices[0].message.tool_calls and "is not valid" in broken.choices[0].message.content
