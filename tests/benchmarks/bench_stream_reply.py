"""How long reading a streamed reply takes as it grows: text, reasoning and tool arguments each arrive in
4 kB pieces (a script: `python3 tests/benchmarks/bench_stream_reply.py`, one JSON line per size). Target:
linear in the reply's length (16 MB in well under a second; adding each piece to a string took 35 s)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from xun.agent.config import ModelSettings  # noqa: E402
from xun.agent.streaming import Reply, read_chunks  # noqa: E402

PIECE = 4096


async def _chunks(pieces: list[str]):  # type: ignore[no-untyped-def]
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
    yield {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}


async def _emit(event: object) -> None:
    return None


async def measure(megabytes: int) -> float:
    pieces = ["x" * PIECE] * (megabytes * 1024 * 1024 // PIECE)
    reply = Reply()
    start = time.perf_counter()
    await read_chunks(_chunks(pieces), reply, ModelSettings(), _emit)
    assert len(reply.content) == len(reply.reasoning) == len(reply.calls[0].arguments) == len(pieces) * PIECE
    return time.perf_counter() - start


def main() -> None:
    for megabytes in (1, 4, 16):
        seconds = asyncio.run(measure(megabytes))
        print(
            json.dumps(
                {
                    "figure": "stream_reply",
                    "megabytes_each": megabytes,
                    "pieces": PIECE,
                    "seconds": round(seconds, 3),
                    "per_megabyte": round(seconds / megabytes, 4),
                }
            )
        )


if __name__ == "__main__":
    main()
