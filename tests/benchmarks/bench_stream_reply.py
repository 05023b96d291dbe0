"""How long reading a streamed reply takes as it grows: text, reasoning and tool arguments each arrive in
4 kB pieces (a script: `python3 tests/benchmarks/bench_stream_reply.py`, one JSON line per size). Target:
linear in the reply's length (16 MB in well under a second; adding each piece to a string took 35 s)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.agent.test_streaming import chunks_of  # noqa: E402  (the stream the test reads)
from xun.agent.config import ModelSettings  # noqa: E402
from xun.agent.streaming import Reply, read_chunks  # noqa: E402

PIECE = 4096


async def _emit(event: object) -> None:
    return None


async def measure(megabytes: int) -> float:
    pieces = ["x" * PIECE] * (megabytes * 1024 * 1024 // PIECE)
    reply = Reply()
    start = time.perf_counter()
    await read_chunks(chunks_of(pieces), reply, ModelSettings(), _emit)
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
