"""The messages and tools skip the openai SDK's request transform, and the server still receives the
same JSON body, byte for byte, as the SDK's ordinary path sends (issue 23, item 7)."""

from __future__ import annotations

import asyncio
import json

import openai

from tests.agent.helpers import make_agent
from tests.agent.scripted_server import ScriptedServer, Stream
from xun.agent.sdk_request import untransformed


def _server() -> ScriptedServer:
    return ScriptedServer(lambda method, path, body: Stream(["done"], usage={"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51})).start()


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
        conversation.add_agent_message({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": "ünïcode.txt"})}}]})
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
    request = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True, "tools": [{"type": "function"}],
               "max_tokens": 5}
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
