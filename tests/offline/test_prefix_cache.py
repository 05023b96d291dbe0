"""The offline server's simulated prompt cache (`--cache-ttl`): prefixes, time to live, and each profile's
shape of the figures, over real HTTP; time is injected, never slept."""

from __future__ import annotations

import openai
import pytest

from xun.offline import OfflineServer
from xun.offline.prefix_cache import PrefixCache
from xun.offline.tokenizer import count_message_tokens, count_tool_tokens

from .test_cli import LISTENING, first_line, interrupt, start

SYSTEM = {"role": "system", "content": "You are terse. " * 20}
FIRST = {"role": "user", "content": "first question " * 30}
ANSWER = {"role": "assistant", "content": "first answer " * 30}
SECOND = {"role": "user", "content": "second question"}
TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_longest_live_prefix_is_served_message_by_message():
    clock = Clock()
    cache = PrefixCache(ttl=300, clock=clock)
    assert cache.serve([SYSTEM, FIRST], [TOOL]) == 0  # nothing cached yet
    head = 3 + count_tool_tokens(TOOL)  # priming and tools come first
    clock.now += 10
    assert cache.serve([SYSTEM, FIRST, ANSWER, SECOND], [TOOL]) == head + count_message_tokens(
        SYSTEM
    ) + count_message_tokens(FIRST)
    changed = {**FIRST, "content": "first question, edited"}
    assert cache.serve([SYSTEM, changed, ANSWER, SECOND], [TOOL]) == head + count_message_tokens(SYSTEM)
    assert cache.serve([SYSTEM, FIRST], []) == 0  # other tools: another prefix from the start


def test_a_prefix_lives_ttl_seconds_after_its_last_use():
    clock = Clock()
    cache = PrefixCache(ttl=300, clock=clock)
    full = 3 + count_message_tokens(SYSTEM) + count_message_tokens(FIRST)
    cache.serve([SYSTEM, FIRST])
    clock.now += 300
    assert cache.serve([SYSTEM, FIRST]) == full  # exactly the time to live: still there, and renewed
    clock.now += 299
    assert cache.serve([SYSTEM, FIRST]) == full
    clock.now += 301
    assert cache.serve([SYSTEM, FIRST]) == 0


@pytest.mark.parametrize("ttl", [0, -1, True, "300"])
def test_a_bad_ttl_is_refused(ttl):
    with pytest.raises(ValueError, match="ttl"):
        OfflineServer(cache_ttl=ttl)


def ask(server, stream: bool, messages):
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=10)
    if not stream:
        return client.chat.completions.create(model="m", messages=messages)
    chunks = list(
        client.chat.completions.create(
            model="m", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    return chunks


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("profile", ["openai", "vllm", "deepseek", "llamacpp-server", "llamacpp"])
def test_each_profile_reports_the_cache_in_its_own_shape(profile, stream):
    clock = Clock()
    with OfflineServer(profile=profile, cache_ttl=300, clock=clock) as server:
        ask(server, stream, [SYSTEM, FIRST])
        answer = ask(server, stream, [SYSTEM, FIRST, ANSWER, SECOND])
    cached = 3 + count_message_tokens(SYSTEM) + count_message_tokens(FIRST)
    assert server.cached_sizes == [0, cached]
    if stream:
        usage = next((c.usage for c in answer if c.usage is not None), None)
        timings = next(
            ((c.model_extra or {}).get("timings") for c in answer if (c.model_extra or {}).get("timings")), None
        )
    else:
        usage, timings = answer.usage, (answer.model_extra or {}).get("timings")
    if profile in ("openai", "vllm"):
        assert usage.prompt_tokens_details.cached_tokens == cached
    elif profile == "deepseek":
        assert usage.model_extra["prompt_cache_hit_tokens"] == cached
        assert usage.model_extra["prompt_cache_miss_tokens"] == usage.prompt_tokens - cached
    elif profile == "llamacpp-server":
        assert timings == {"cache_n": cached, "prompt_n": server.prompt_sizes[-1] - cached}
    else:  # llama-cpp-python says nothing of its cache (and sends no usage in streams)
        assert timings is None
        assert usage is None if stream else usage.prompt_tokens_details is None


def test_without_cache_ttl_no_cache_figure_is_sent():
    with OfflineServer() as server:
        ask(server, False, [SYSTEM, FIRST])
        usage = ask(server, False, [SYSTEM, FIRST, ANSWER, SECOND]).usage
    assert usage.prompt_tokens_details is None and server.cached_sizes == []


def test_the_command_line_option():
    process = start("-m", "xun", "offline-server", "--cache-ttl", "300", "--profile", "deepseek")
    try:
        port = LISTENING.match(first_line(process)).group(1)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0, timeout=5)
        client.chat.completions.create(model="m", messages=[SYSTEM, FIRST])
        usage = client.chat.completions.create(model="m", messages=[SYSTEM, FIRST, ANSWER, SECOND]).usage
        assert usage.model_extra["prompt_cache_hit_tokens"] == 3 + count_message_tokens(SYSTEM) + count_message_tokens(
            FIRST
        )
    finally:
        interrupt(process)
    bad = start("-m", "xun", "offline-server", "--cache-ttl", "0")
    _, stderr = bad.communicate(timeout=20)
    assert bad.returncode == 2 and "--cache-ttl" in stderr
