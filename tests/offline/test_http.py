"""The HTTP surface: models, bad requests as OpenAI-shaped 400s, loopback only, lifecycle."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket

import openai
import pytest

from xun.offline import OfflineServer


def raw(
    server, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, dict, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
        return response.status, dict(response.getheaders()), json.loads(payload)
    finally:
        connection.close()


def assert_openai_error(body: dict, param=None, code=None) -> str:
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    return error["message"]


def test_models_lists_the_scripted_model_honestly(offline_server):
    client = openai.OpenAI(base_url=offline_server.base_url, api_key="k", max_retries=0)
    models = client.models.list().data
    assert [model.id for model in models] == ["xun-offline"]
    assert "not an LLM" in models[0].owned_by and "scripted" in models[0].owned_by
    assert client.models.retrieve("xun-offline").id == "xun-offline"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_any_model_name_and_no_api_key_are_accepted(offline_server):
    status, _, body = raw(
        offline_server,
        "POST",
        "/v1/chat/completions",
        json.dumps({"model": "gpt-5-pro", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    )
    assert status == 200 and body["model"] == "xun-offline"
    status, _, body = raw(
        offline_server,
        "POST",
        "/v1/chat/completions",
        json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
    )
    assert status == 200 and body["object"] == "chat.completion"


@pytest.mark.parametrize(
    ("body", "param", "code", "words"),
    [
        (b"{not json", None, None, "could not parse the JSON body"),
        (b"", None, None, "empty"),
        (b"\xff\xfe", None, None, "could not parse"),
        (b"[1, 2]", None, "invalid_type", "JSON object"),
        (b'{"model": "m"}', "messages", "missing_required_parameter", "'messages'"),
        (b'{"messages": "hi"}', "messages", "invalid_type", "expected an array"),
        (b'{"messages": []}', "messages", "empty_array", "empty array"),
        (b'{"messages": [42]}', "messages[0]", "invalid_type", "an object"),
        (b'{"messages": [{"content": "hi"}]}', "messages[0].role", "missing_required_parameter", "role"),
        (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "messages[0].role", "invalid_value", "wizard"),
        (b'{"messages": [{"role": "user", "content": 5}]}', "messages[0].content", "invalid_type", "got number"),
        (b'{"messages": [{"role": "user"}]}', "messages[0].content", "missing_required_parameter", "content"),
        (
            b'{"messages": [{"role": "user", "content": [{"text": "x"}]}]}',
            "messages[0].content[0].type",
            "missing_required_parameter",
            "type",
        ),
        (
            b'{"messages": [{"role": "tool", "content": "x"}]}',
            "messages[0].tool_call_id",
            "missing_required_parameter",
            "tool_call_id",
        ),
        (
            b'{"messages": [{"role": "assistant", "content": null, "tool_calls": {}}]}',
            "messages[0].tool_calls",
            "invalid_type",
            "array",
        ),
        (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream", "invalid_type", "boolean"),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}',
            "max_tokens",
            "integer_below_min_value",
            ">= 1",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "9"}',
            "max_tokens",
            "invalid_type",
            "integer",
        ),
        (b'{"messages": [{"role": "user", "content": "x"}], "tools": {}}', "tools", "invalid_type", "array"),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}',
            "tools[0].function",
            "invalid_type",
            "object",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]}',
            "tools[0].function.name",
            "missing_required_parameter",
            "name",
        ),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": 1}}',
            "stream_options.include_usage",
            "invalid_type",
            "boolean",
        ),
        (b'{"messages": [{"role": "user", "content": "x"}], "n": 3}', "n", "invalid_value", "n must be 1"),
        (b'{"messages": [{"role": "user", "content": "x"}], "model": 7}', "model", "invalid_type", "string"),
    ],
)
def test_malformed_requests_get_a_400_in_openai_shape(offline_server, body, param, code, words):
    status, headers, payload = raw(offline_server, "POST", "/v1/chat/completions", body)
    assert status == 400
    assert headers["Content-Type"] == "application/json"
    message = assert_openai_error(payload, param, code)
    assert words in message
    # The server is still fine afterwards.
    status, _, _ = raw(
        offline_server, "POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}]}'
    )
    assert status == 200


def test_the_sdk_sees_a_bad_request_error(offline_server):
    client = openai.OpenAI(base_url=offline_server.base_url, api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": 12}])
    assert caught.value.body["param"] == "messages[0].content"


def test_unknown_urls_and_methods_are_json_errors(offline_server):
    status, _, body = raw(offline_server, "POST", "/v1/completions", b"{}")
    assert status == 404 and body["error"]["code"] == "unknown_url"
    status, _, body = raw(offline_server, "GET", "/nowhere")
    assert status == 404 and body["error"]["code"] == "unknown_url"
    status, _, body = raw(offline_server, "DELETE", "/v1/models")
    assert status == 405 and "error" in body
    status, _, body = raw(offline_server, "BREW", "/v1/models")
    assert status == 501 and "error" in body


def test_garbage_on_the_socket_gets_a_json_400_and_the_server_survives(offline_server):
    with socket.create_connection(("127.0.0.1", offline_server.port), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01 this is not http\r\n\r\n")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert "error" in json.loads(body)
    assert raw(offline_server, "GET", "/v1/models")[0] == 200


def test_bad_content_length_and_chunked_bodies(offline_server):
    with socket.create_connection(("127.0.0.1", offline_server.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n")
        data = sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 400") and b"Content-Length" in data
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    status, _, payload = raw(
        offline_server,
        "POST",
        "/v1/chat/completions",
        chunked,
        {"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
    )
    assert status == 200 and payload["choices"][0]["finish_reason"] == "stop"


def test_keep_alive_serves_many_requests_on_one_connection(offline_server):
    connection = http.client.HTTPConnection("127.0.0.1", offline_server.port, timeout=5)
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
    for _ in range(3):
        connection.request("POST", "/v1/chat/completions", body=body)
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type").startswith("text/event-stream")
        text = response.read().decode()
        assert text.endswith("data: [DONE]\n\n")
        events = [line[len("data: ") :] for line in text.split("\n\n") if line.startswith("data: ")]
        assert all(json.loads(event)["object"] == "chat.completion.chunk" for event in events[:-1])
    connection.close()
    assert offline_server.request_count == 3


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.com"])
def test_non_loopback_hosts_are_refused(host):
    with pytest.raises(ValueError, match="loopback|resolve"):
        OfflineServer(host=host)


def test_loopback_names_are_accepted():
    with OfflineServer(host="localhost") as server:
        assert server.base_url == f"http://localhost:{server.port}/v1"
        assert raw(server, "GET", "/v1/models")[0] == 200


@pytest.mark.parametrize(
    "options",
    [
        {"port": -1},
        {"port": 70000},
        {"context_window": 0},
        {"reasoning": "thoughts"},
        {"tokens_per_second": 0},
        {"tokens_per_second": "fast"},
    ],
)
def test_bad_options_are_value_errors(options):
    with pytest.raises(ValueError):
        OfflineServer(**options)


def test_lifecycle_start_stop_and_properties():
    server = OfflineServer()
    with pytest.raises(RuntimeError, match="start"):
        server.port  # noqa: B018 - the property is the test
    server.start()
    assert server.start() is server, "start() twice is harmless"
    port = server.port
    assert server.base_url == f"http://127.0.0.1:{port}/v1"
    assert server.request_count == 0
    server.stop()
    server.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


async def test_start_inside_a_running_event_loop():
    async with OfflineServer() as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        replies = await asyncio.gather(
            *(
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"say {n}"}])
                for n in range(8)
            )
        )
        assert len({reply.choices[0].message.content for reply in replies}) == 8
        assert server.request_count == 8


def test_an_http_1_0_client_gets_the_stream_unchunked_then_close(offline_server):
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", offline_server.port), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, events = data.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding" not in head and b"Connection: close" in head
    assert events.startswith(b"data: {") and events.endswith(b"data: [DONE]\n\n")
