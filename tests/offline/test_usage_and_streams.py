"""Usage from the documented tokenizer, the context window, long and paced streams, reasoning deltas."""

from __future__ import annotations

import json
import math
import time

import openai
import pytest

from .conftest import BUILTIN_TOOLS, StreamResult, only_tools, user


def ceil4(chars: int) -> int:
    """The documented rule, restated here: ceil(characters / 4)."""
    return math.ceil(chars / 4)


def test_usage_follows_the_documented_rule_for_a_text_reply(client):
    reply = client.chat.completions.create(model="m", messages=user("abcd" * 10))
    content = reply.choices[0].message.content
    assert reply.usage.prompt_tokens == 3 + 4 + 10
    assert reply.usage.completion_tokens == ceil4(len(content))
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_usage_counts_tools_tool_calls_reasoning_and_images(client):
    tools = only_tools("read_file")
    messages = [
        {"role": "system", "content": "s" * 8},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "t" * 6},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "ok",
            "reasoning_content": "r" * 10,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "y" * 17},
        {"role": "user", "content": "read a.py"},
    ]
    reply = client.chat.completions.create(model="m", messages=messages, tools=tools)
    tool_json = json.dumps(tools[0], ensure_ascii=False, separators=(",", ":"))
    expected_prompt = (
        3
        + (4 + 2)  # system: 8 characters
        + (4 + 2 + 85)  # user: 6 text characters and one image
        + (4 + ceil4(2 + 10 + len("read_file") + len('{"path":"x"}')))  # assistant: content, reasoning, call
        + (4 + 5)  # tool: 17 characters
        + (4 + 3)  # user: "read a.py"
        + ceil4(len(tool_json))
    )
    assert reply.usage.prompt_tokens == expected_prompt
    call = reply.choices[0].message.tool_calls[0]
    assert reply.usage.completion_tokens == ceil4(len(call.function.name) + len(call.function.arguments))


def test_stream_usage_arrives_last_with_empty_choices_only_when_asked(client):
    chunks = list(
        client.chat.completions.create(
            model="m", messages=user("hello"), stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert all(chunk.usage is None for chunk in chunks[:-1])
    result = StreamResult(chunks)
    assert result.usage.completion_tokens == ceil4(len(result.content))
    assert result.usage.prompt_tokens == 3 + 4 + 2

    plain = list(client.chat.completions.create(model="m", messages=user("hello"), stream=True))
    assert all(chunk.usage is None for chunk in plain)
    assert plain[-1].choices[0].finish_reason == "stop"


def test_prompt_over_the_context_window_is_a_400_context_length_exceeded(offline_server_factory):
    server = offline_server_factory(context_window=100)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    fits = "x" * (4 * (100 - 7))  # 3 + 4 + 93 = exactly the window
    assert client.chat.completions.create(model="m", messages=user(fits)).usage.prompt_tokens == 100
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=user(fits + "x"))
    error = caught.value
    assert error.status_code == 400
    assert error.body == {
        "message": error.body["message"],
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert "101" in error.body["message"] and "100" in error.body["message"]
    with pytest.raises(openai.BadRequestError):
        list(client.chat.completions.create(model="m", messages=user(fits + "x"), stream=True))


def test_a_reply_stops_with_length_at_the_context_window(offline_server_factory):
    server = offline_server_factory(context_window=60)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    reply = client.chat.completions.create(model="m", messages=user("write 500 tokens"))
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.total_tokens == 60


@pytest.mark.parametrize("limit_name", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_stops_with_finish_reason_length(client, limit_name):
    reply = client.chat.completions.create(model="m", messages=user("write 100 tokens"), **{limit_name: 10})
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 10
    assert len(reply.choices[0].message.content) == 40
    streamed = StreamResult(
        list(
            client.chat.completions.create(
                model="m",
                messages=user("write 100 tokens"),
                stream=True,
                stream_options={"include_usage": True},
                **{limit_name: 10},
            )
        )
    )
    assert streamed.finish_reason == "length"
    assert streamed.content == reply.choices[0].message.content
    assert streamed.usage.completion_tokens == 10


def test_max_tokens_can_cut_a_tool_call(client):
    reply = client.chat.completions.create(
        model="m", messages=user("read some/long/path/file.py"), tools=BUILTIN_TOOLS, max_tokens=5
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 5


def test_a_long_reply_streams_in_many_chunks_with_exact_token_count(client):
    stream = client.chat.completions.create(
        model="m", messages=user("write 10000 tokens"), stream=True, stream_options={"include_usage": True}
    )
    result = StreamResult(list(stream))
    assert result.finish_reason == "stop"
    assert result.usage.completion_tokens == 10000
    assert ceil4(len(result.content)) == 10000
    content_chunks = [chunk for chunk in result.chunks if chunk.choices and chunk.choices[0].delta.content]
    assert len(content_chunks) >= 1000
    assert max(len(chunk.choices[0].delta.content) for chunk in content_chunks) <= 40


def test_a_huge_reply_starts_at_once_so_it_is_generated_lazily(client):
    started = time.monotonic()
    with client.chat.completions.create(model="m", messages=user("write 1000000 tokens"), stream=True) as stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
    assert time.monotonic() - started < 0.5, "building a million tokens first would take far longer"


def test_count_to_n(client):
    reply = client.chat.completions.create(model="m", messages=user("Please count to 25."))
    assert reply.choices[0].message.content == " ".join(str(n) for n in range(1, 26))


def test_tokens_per_second_paces_the_stream(offline_server_factory):
    server = offline_server_factory(tokens_per_second=200)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    started = time.monotonic()
    result = StreamResult(
        list(client.chat.completions.create(model="m", messages=user("write 60 tokens"), stream=True))
    )
    elapsed = time.monotonic() - started
    assert ceil4(len(result.content)) == 60
    assert elapsed >= 0.25, f"60 tokens at 200/s take 0.3 s, not {elapsed:.3f} s"
    deltas = [
        chunk.choices[0].delta.content for chunk in result.chunks if chunk.choices and chunk.choices[0].delta.content
    ]
    assert all(len(delta) <= 4 for delta in deltas), "paced streams send one token per chunk"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_deltas_come_first_in_the_chosen_field(offline_server_factory, field):
    server = offline_server_factory(reasoning=field)
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="m", messages=user("hello"), stream=True, stream_options={"include_usage": True}
        )
    )
    kinds = []
    for chunk in chunks:
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            if extra.get(field):
                kinds.append("reasoning")
            if choice.delta.content:
                kinds.append("content")
            other = "reasoning" if field == "reasoning_content" else "reasoning_content"
            assert other not in extra
    assert "reasoning" in kinds and "content" in kinds
    assert kinds.index("content") > max(i for i, kind in enumerate(kinds) if kind == "reasoning")
    result = StreamResult(chunks)
    assert "not an LLM" in result.reasoning
    assert result.usage.completion_tokens == ceil4(len(result.reasoning) + len(result.content))

    whole = client.chat.completions.create(model="m", messages=user("hello"))
    message = whole.choices[0].message
    assert message.model_extra[field] == result.reasoning
    assert message.content == result.content


def test_reasoning_also_precedes_tool_calls_and_round_trips(offline_server_factory):
    server = offline_server_factory(reasoning="reasoning_content")
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    result = StreamResult(
        list(client.chat.completions.create(model="m", messages=user("read a.py"), stream=True, tools=BUILTIN_TOOLS))
    )
    assert result.reasoning and result.calls() == [("read_file", {"path": "a.py"})]
    slot = result.tool_calls[0]
    for field in ("reasoning_content", "reasoning"):
        messages = user("read a.py") + [
            {
                "role": "assistant",
                "content": None,
                field: result.reasoning,
                "tool_calls": [
                    {
                        "id": slot["id"],
                        "type": "function",
                        "function": {"name": slot["name"], "arguments": slot["arguments"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": slot["id"], "content": "print('hi')"},
        ]
        answer = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS)
        assert answer.choices[0].finish_reason == "stop"
        without = [dict(m) for m in messages]
        without[1].pop(field)
        plain = client.chat.completions.create(model="m", messages=without, tools=BUILTIN_TOOLS)
        assert answer.usage.prompt_tokens > plain.usage.prompt_tokens, "sent-back reasoning is counted"


async def test_async_streaming_usage(async_client):
    stream = await async_client.chat.completions.create(
        model="m", messages=user("write 300 tokens"), stream=True, stream_options={"include_usage": True}
    )
    result = StreamResult([chunk async for chunk in stream])
    assert result.usage.completion_tokens == 300
    assert result.finish_reason == "stop"
