"""Reading a stream into a reply (`xun.agent.streaming`): what arrives in pieces is kept whole. What it
costs is measured by `tests/benchmarks/bench_stream_reply.py` (a cost that grows with the reply's length,
not with its square)."""

import json

from xun.agent.config import ModelSettings
from xun.agent.streaming import Reply, check_complete, read_chunks
from xun.base.events import Event, ReasoningDelta, TextDelta

PIECE = 4096
PIECES = 4096  # 16 MB of each kind: adding every piece to a string took 35 s for the text alone


async def chunks_of(pieces: list[str]):
    """A streamed reply whose reasoning, text and one call's arguments each arrive as `pieces`."""
    for index, piece in enumerate(pieces):
        yield {"choices": [{"delta": {"reasoning_content": piece}}]}
        yield {"choices": [{"delta": {"content": piece}}]}
        yield {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1" if index == 0 else None,
                                "function": {"name": "write_file" if index == 0 else None, "arguments": piece},
                            }
                        ]
                    }
                }
            ]
        }
    yield {"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 9}}


async def test_a_long_reply_in_small_pieces_is_read_whole():
    pieces = [f"{index:08d}" + "x" * (PIECE - 8) for index in range(PIECES)]
    events: list[Event] = []
    reply, model = Reply(), ModelSettings()

    async def emit(event: Event) -> None:
        events.append(event)

    chunks = await read_chunks(chunks_of(pieces), reply, model, emit)
    check_complete(reply, chunks)
    whole = "".join(pieces)
    assert reply.content == whole and reply.reasoning == whole and reply.calls[0].arguments == whole
    assert model.reasoning_field == reply.reasoning_field == "reasoning_content"
    assert [e.text for e in events if isinstance(e, TextDelta)] == pieces
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == pieces
    assert reply.usage.prompt_tokens == 9 and reply.finish_reason == "tool_calls"
    call = reply.message()["tool_calls"][0]
    assert call["id"] == "call_1" and call["function"]["name"] == "write_file"
    assert json.dumps(reply.message())  # the message the conversation keeps is plain JSON
