"""Conversation engine benchmark: prints one JSON line per figure (not part of the test run).

    python3 tests/benchmarks/bench_conversation.py [ROUNDS ...]      default: 1000 10000

Each round is an assistant tool call and a ~2 KB tool result, with a user message every ten rounds,
so 10000 rounds is about 21,000 messages. For the side-by-side ratio against the peer, run
`../shared/bench/compare.sh 1000 10000` from the project root.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import time
from pathlib import Path

from xun.context.conversation import Conversation


def add_round(c: Conversation, i: int) -> None:
    c.add_agent_message(
        {
            "role": "assistant",
            "content": f"Reading file {i}",
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/f{i}.py"})},
                }
            ],
        }
    )
    c.add_tool_result(f"call_{i}", f"line {i} of output\n" * 111)
    if i % 10 == 9:
        c.add_user_message("continue with the next part")


def build(rounds: int, offload_dir: Path | None = None) -> Conversation:
    c = Conversation(offload_dir=offload_dir)
    c.set_system_message_content("You are a helpful assistant.")
    c.add_user_message("please analyse the repository")
    for i in range(rounds):
        add_round(c, i)
    return c


def timed(fn):
    gc.collect()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10000]
    for rounds in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            seconds, c = timed(lambda: build(rounds, folder / "history"))
            n = len(c.messages)

            def emit(op: str, s: float, **extra) -> None:
                print(json.dumps({"op": op, "messages": n, "seconds": round(s, 6), **extra}), flush=True)

            emit("build", seconds)
            emit("estimate_first", timed(c.estimated_message_length)[0])
            appends = 1000
            start = time.perf_counter()
            for i in range(appends):
                c.add_user_message(f"question {i}")
                c.estimated_message_length()
            emit("append_then_estimate_each", (time.perf_counter() - start) / appends)
            emit("reclaim_first", timed(lambda: c.reclaim_tool_results(keep_max=12))[0])
            add_round(c, rounds)
            emit("reclaim_repeat", timed(lambda: c.reclaim_tool_results(keep_max=12))[0])
            path = folder / "session.json"
            emit("dump_to_disk", timed(lambda: c.dump(path))[0], bytes=path.stat().st_size)
            emit("load_from_disk", timed(lambda: Conversation().load(path))[0])
            loaded = Conversation().load(path)
            emit("first_original_after_load", timed(lambda: loaded.reclaimed_original("call_0"))[0])
            emit("plan_compaction", timed(lambda: c.plan_compaction(16))[0])
            emit(
                "summary_with_offload",
                timed(lambda: c.compact(lambda msgs: "SUMMARY", keep_recent=16))[0],
                log_bytes=(folder / "history" / f"{c.conversation_id}.md").stat().st_size,
            )


if __name__ == "__main__":
    main()
