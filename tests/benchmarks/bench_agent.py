"""The cost of the before-call compaction check, which runs before every model call.

    python3 tests/benchmarks/bench_agent.py [MESSAGES ...]     default: 20000

Prints JSON lines per size: the mean seconds of `AutoCompactor.auto_compact(agent)`, and of the whole
preflight before a model call (the policy, the window check, the estimate of the exact request), when the
conversation is under the threshold (the common case), after messages were appended since the last call.
Target: under 1 ms at 20,000 messages. Then the cancel latency: seconds from cancelling a turn that is
streaming from the offline server to the turn having stopped (target: under 200 ms).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from xun.agent.loop import Agent
from xun.agent.config import XunConfig
from xun.context.conversation import Conversation


def conversation_of(size: int) -> Conversation:
    c = Conversation()
    c.set_system_message_content("You are a helpful assistant.")
    c.add_user_message("start")
    i = 0
    while len(c.messages) < size:
        c.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}"})},
                    }
                ],
            }
        )
        c.add_tool_result(f"c{i}", "x" * 500)
        i += 1
    c.record_usage(100_000)
    return c


async def measure(size: int, repeats: int = 200) -> list[dict]:
    """The policy's check alone, and the whole preflight: the policy, the window check (a known window of
    200k) and the estimate of the exact request (messages, tool definitions, the new prompt)."""
    config = XunConfig()
    config.model.context_window = 200_000
    agent = Agent(config, conversation=conversation_of(size))
    await agent._compact_before_call()  # the first one starts (and here ends) the window's discovery
    check = preflight = 0.0
    for n in range(repeats):
        agent.conversation.add_user_message(f"q{n}")  # something new since the last check, as in a real loop
        start = time.perf_counter()
        await agent.compactor.auto_compact(agent)
        middle = time.perf_counter()
        await agent._compact_before_call()
        preflight += time.perf_counter() - middle
        check += middle - start
    assert not agent.conversation.compaction_log, "the check compacted: it must stay under the threshold"
    messages = len(agent.conversation.messages)
    return [
        {"op": "before_call_check_under_threshold", "messages": messages, "seconds": round(check / repeats, 9)},
        {"op": "preflight_under_threshold", "messages": messages, "seconds": round(preflight / repeats, 9)},
    ]


async def cancel_latency(repeats: int = 5) -> dict:
    from xun.offline import OfflineServer

    worst = 0.0
    with OfflineServer(tokens_per_second=200) as server:
        for _ in range(repeats):
            config = XunConfig()
            config.provider.base_url = server.base_url
            streaming = asyncio.Event()
            agent = Agent(config, on_event=lambda e: streaming.set() if e.type == "text_delta" else None, environ={})
            task = asyncio.create_task(agent.run("write 5000 tokens"))
            await asyncio.wait_for(streaming.wait(), 10)
            start = time.perf_counter()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            worst = max(worst, time.perf_counter() - start)
    return {"op": "cancel_while_streaming_worst", "repeats": repeats, "seconds": round(worst, 6)}


def main() -> None:
    for size in [int(a) for a in sys.argv[1:]] or [20000]:
        for row in asyncio.run(measure(size)):
            print(json.dumps(row), flush=True)
    print(json.dumps(asyncio.run(cancel_latency())), flush=True)


if __name__ == "__main__":
    main()
