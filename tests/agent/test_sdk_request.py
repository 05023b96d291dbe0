"""The messages and tools skip the openai SDK's request transform, and the server still receives the
same JSON body, byte for byte, as the SDK's ordinary path sends (issue 23, item 7)."""

from __future__ import annotations

import asyncio
import json

import openai

from tests.agent.helpers import make_agent
from tests.agent.scripted_server import Json, ScriptedServer, Stream
from xun.agent.sdk_request import untransformed


def _server() -> ScriptedServer:
    return ScriptedServer(
        lambda method, path, body: Stream(
            ["done"], usage={"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}
        )
    ).start()


def _send_the_old_way(server: ScriptedServer, request: dict) -> bytes:
    """The body the SDK sends when every parameter goes through its transform (xun's path before)."""

    async def go() -> None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        stream = await client.chat.completions.create(**request)
        async for _ in stream:
            pass
        await client.close()

    before = len(server.raw_bodies)
    asyncio.run(go())
    return server.raw_bodies[before]


def test_a_turns_request_body_is_byte_for_byte_the_sdks_ordinary_body(tmp_path):
    server = _server()
    try:
        agent, _ = make_agent(server, tmp_path, model__temperature=0.3)
        conversation = agent.conversation
        conversation.add_user_message("read ünïcode.txt and fix “it”")
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": "ünïcode.txt"})},
                    }
                ],
            }
        )
        conversation.add_tool_result("c1", "line 1\n\ttabbed \u2028 \x00 text")
        asyncio.run(agent.run("go on"))
        [new_body] = [raw for raw in server.raw_bodies if b'"messages"' in raw][-1:]
        request = json.loads(new_body)
        assert request["tools"] and request["stream"] is True and request["temperature"] == 0.3
        assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "tool", "user"]
        assert _send_the_old_way(server, request) == new_body
    finally:
        server.stop()


def test_untransformed_keeps_every_key_in_its_place():
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "tools": [{"type": "function"}],
        "max_tokens": 5,
    }
    kwargs = untransformed(request)
    assert kwargs["messages"] == [] and kwargs["tools"] == []
    assert kwargs["extra_body"] == {"messages": request["messages"], "tools": request["tools"]}
    assert untransformed({"model": "m", "messages": []})["extra_body"] == {"messages": []}
    assert "tools" not in untransformed({"model": "m", "messages": []})


def test_the_sdks_transform_never_walks_the_messages(tmp_path, monkeypatch):
    """The walk cost 0.7 ms a message a call on the event loop: it must not grow with the context."""
    from openai._utils import _transform

    walked: list[int] = []
    real = _transform._async_transform_recursive

    async def counting(data, *args, **kwargs):
        walked.append(1)
        return await real(data, *args, **kwargs)

    monkeypatch.setattr(_transform, "_async_transform_recursive", counting)
    server = _server()
    try:
        agent, _ = make_agent(server, tmp_path)
        for i in range(300):
            agent.conversation.add_user_message(f"note {i}")
            agent.conversation.add_agent_message({"role": "assistant", "content": f"ok {i}"})
        asyncio.run(agent.run("go on"))
        body = json.loads(server.raw_bodies[-1])
        assert len(body["messages"]) == 602
        assert len(walked) < 100, f"the SDK's transform ran {len(walked)} times for one call"
    finally:
        server.stop()


def test_the_replys_chunks_are_read_as_plain_json_not_built_into_sdk_models(tmp_path, monkeypatch):
    """Building the SDK's typed model of every chunk was the largest part of xun's own time per round of a
    long turn (about 0.07 ms a chunk); the reply must come through whole all the same: reasoning, text,
    a tool call in pieces, the finish reason and the usage with its cache figure."""
    from openai import _base_client

    built: list[str] = []
    real = _base_client.construct_type

    def counting(*, type_, value):
        built.append(getattr(type_, "__name__", str(type_)))
        return real(type_=type_, value=value)

    monkeypatch.setattr(_base_client, "construct_type", counting)
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"pa'}}
    rest = {"index": 0, "function": {"arguments": 'th": "a.txt"}'}}
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 9,
        "total_tokens": 59,
        "prompt_tokens_details": {"cached_tokens": 32},
    }
    replies = iter(
        [
            Stream(
                [{"reasoning_content": "think"}, "let me ", "look", {"tool_calls": [call]}, {"tool_calls": [rest]}],
                finish_reason="tool_calls",
                usage=usage,
            ),
            Stream(["done"], usage={"prompt_tokens": 70, "completion_tokens": 1, "total_tokens": 71}),
        ]
    )
    server = ScriptedServer(
        lambda method, path, body: (
            next(replies) if path.endswith("/chat/completions") else Json(404, {"error": {"message": "not found"}})
        )
    ).start()
    try:
        (tmp_path / "a.txt").write_text("hello\n")
        agent, recorder = make_agent(server, tmp_path)
        finished = asyncio.run(agent.run("read a.txt"))
        assert finished.status == "ok", finished.error
        assistant = [m.raw for m in agent.conversation.messages if getattr(m, "role", "") == "assistant"][0]
        assert assistant["content"] == "let me look"
        assert assistant["reasoning_content"] == "think"
        assert assistant["tool_calls"] == [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
        ]
        results = [m.raw["content"] for m in agent.conversation.messages if getattr(m, "role", "") == "tool"]
        assert "hello" in str(results)
        assert agent.conversation.prompt_cache.known_calls >= 1 and agent.conversation.usage_totals["calls"] == 2
        assert [e.text for e in recorder.events if e.type == "reasoning_delta"] == ["think"]
        assert not [name for name in built if "Chunk" in name], f"chunks built into SDK models: {built[:5]}"
    finally:
        server.stop()
