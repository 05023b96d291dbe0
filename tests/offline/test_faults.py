"""Fault injection: each kind misbehaves on its request, and only on it."""

from __future__ import annotations

import json
import time

import openai
import pytest

from xun.offline import FAULT_KINDS, FaultSchedule

from .conftest import StreamResult, user


def client_for(server, **options) -> openai.OpenAI:
    options.setdefault("timeout", 10)
    return openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, **options)


def ask(client, stream=False):
    if stream:
        return StreamResult(list(client.chat.completions.create(model="m", messages=user("hello"), stream=True)))
    return client.chat.completions.create(model="m", messages=user("hello"))


def test_spec_parsing_and_ranges():
    schedule = FaultSchedule.parse(" 500@2, disconnect@4,slow:0.25@6-8 ")
    assert schedule.fault_for(1) is None
    assert schedule.fault_for(2).kind == "500"
    assert schedule.fault_for(4).kind == "disconnect"
    assert [schedule.fault_for(n).seconds for n in (6, 7, 8)] == [0.25, 0.25, 0.25]
    assert schedule.fault_for(9) is None
    assert not FaultSchedule.parse("") and not FaultSchedule.parse(None)
    assert set(FAULT_KINDS) >= {
        "500",
        "429",
        "disconnect",
        "slow",
        "stall",
        "timeout",
        "malformed",
        "truncate",
        "empty",
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("boom@1", "unknown kind 'boom'"),
        ("500", "expected KIND@N"),
        ("500@0", "start at 1"),
        ("500@5-3", "before its start"),
        ("500@2,429@2", "already has a fault"),
        ("slow@1-5,500@3-4", "overlaps"),
        ("500:3@1", "takes no seconds"),
        ("500@1,,429@2", "empty entry"),
        ("500@x", "expected KIND@N"),
    ],
)
def test_bad_specs_are_clear_value_errors(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        FaultSchedule.parse(spec)


def test_a_bad_spec_is_refused_by_the_server_constructor():
    from xun.offline import OfflineServer

    with pytest.raises(ValueError, match="unknown kind"):
        OfflineServer(faults="explode@1")


def test_500_hits_only_its_request(offline_server_factory):
    server = offline_server_factory(faults="500@2")
    client = client_for(server)
    assert ask(client).choices[0].finish_reason == "stop"
    with pytest.raises(openai.InternalServerError) as caught:
        ask(client)
    assert caught.value.status_code == 500
    assert caught.value.body["type"] == "server_error" and "500@2" in caught.value.body["message"]
    assert ask(client).choices[0].finish_reason == "stop"
    assert server.request_count == 3


def test_the_sdk_retries_a_500_by_itself(offline_server_factory):
    server = offline_server_factory(faults="500@1")
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=1)
    assert ask(client).choices[0].finish_reason == "stop"
    assert server.request_count == 2


def test_429_carries_retry_after(offline_server_factory):
    server = offline_server_factory(faults="429:2@1,429:0.05@2")
    client = client_for(server)
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.response.headers["retry-after-ms"] == "2000"
    assert caught.value.body["code"] == "rate_limit_exceeded"
    retrying = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=1)
    started = time.monotonic()
    assert ask(retrying).choices[0].finish_reason == "stop"
    assert time.monotonic() - started < 1.5, "the client should wait about retry-after-ms (50 ms), not long"


def test_disconnect_drops_the_stream_mid_way_and_a_plain_request_before_replying(offline_server_factory):
    server = offline_server_factory(faults="disconnect@1,disconnect@2")
    client = client_for(server)
    received = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(model="m", messages=user("hello"), stream=True):
            received.append(chunk)
    assert 1 <= len(received) <= 3
    with pytest.raises(openai.APIConnectionError):
        ask(client)
    assert ask(client).choices[0].finish_reason == "stop"


def test_slow_spaces_the_chunks_out(offline_server_factory):
    server = offline_server_factory(faults="slow:0.1@1")
    client = client_for(server)
    arrivals = []
    for _ in client.chat.completions.create(model="m", messages=user("hello"), stream=True):
        arrivals.append(time.monotonic())
    gaps = len(arrivals) - 1
    assert gaps >= 3
    # the chunks' spacing, over the whole stream: one chunk read late by a busy client shortens the gap after it
    spacing = (arrivals[-1] - arrivals[0]) / gaps
    assert spacing >= 0.08
    fast = []
    for _ in client.chat.completions.create(model="m", messages=user("hello"), stream=True):
        fast.append(time.monotonic())
    assert fast[-1] - fast[0] < spacing * gaps / 2


def test_stall_sends_a_couple_of_chunks_then_hangs_until_the_client_gives_up(offline_server_factory):
    server = offline_server_factory(faults="stall@1")
    client = client_for(server, timeout=openai.Timeout(5, read=0.4))
    received = []
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        for chunk in client.chat.completions.create(model="m", messages=user("hello"), stream=True):
            received.append(chunk)
    assert len(received) == 2
    assert time.monotonic() - started < 3


def test_timeout_never_answers(offline_server_factory):
    server = offline_server_factory(faults="timeout@1")
    client = client_for(server, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        ask(client)
    assert ask(client_for(server)).choices[0].finish_reason == "stop"


def test_timeout_cap_bounds_the_hang(offline_server_factory):
    server = offline_server_factory(faults="timeout:0.2@1")
    client = client_for(server, timeout=5)
    started = time.monotonic()
    with pytest.raises(openai.APIConnectionError):
        ask(client)
    assert time.monotonic() - started < 2


def test_malformed_sends_a_chunk_that_is_not_json(offline_server_factory):
    server = offline_server_factory(faults="malformed@1,malformed@2")
    client = client_for(server)
    received = []
    with pytest.raises(json.JSONDecodeError):
        for chunk in client.chat.completions.create(model="m", messages=user("hello"), stream=True):
            received.append(chunk)
    assert len(received) == 2
    with pytest.raises(json.JSONDecodeError):
        ask(client)


def test_truncate_ends_the_stream_without_finish_reason_or_done(offline_server_factory):
    server = offline_server_factory(faults="truncate@1,truncate@2")
    result = ask(client_for(server), stream=True)
    assert result.chunks, "some chunks arrive"
    assert result.finish_reason is None
    with pytest.raises(openai.APIConnectionError):
        ask(client_for(server))


@pytest.mark.parametrize("stream", [False, True])
def test_empty_is_a_reply_with_no_content_and_no_tool_calls(offline_server_factory, stream):
    server = offline_server_factory(faults="empty@1")
    client = client_for(server)
    if stream:
        result = ask(client, stream=True)
        assert result.content == "" and not result.tool_calls and result.finish_reason == "stop"
    else:
        reply = ask(client)
        assert reply.choices[0].message.content == ""
        assert reply.choices[0].message.tool_calls is None
        assert reply.usage.completion_tokens == 0


def test_stop_returns_promptly_while_a_client_is_stalled(offline_server_factory):
    server = offline_server_factory(faults="stall:60@1")
    client = client_for(server, timeout=30)
    import threading

    errors = []

    def consume():
        try:
            for _ in client.chat.completions.create(model="m", messages=user("hello"), stream=True):
                pass
        except Exception as exc:  # noqa: BLE001 - any end is fine; the test is about stop()
            errors.append(exc)

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    deadline = time.monotonic() + 5
    while server.request_count < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.5
    worker.join(5)
    assert not worker.is_alive()
