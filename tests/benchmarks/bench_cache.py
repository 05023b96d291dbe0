"""What compaction costs in the server's prompt cache: the seed's escalation policy against the cache-aware one.

    python3 tests/benchmarks/bench_cache.py [TURNS] [--threshold N] [--idle-every K]

The same 300-turn workload (default) for each policy, against the offline server with its prefix cache
simulated (time to live 300 s) and its clock shared with the agent's, so time is simulated, never slept:
20 s between turns, and every K turns (default 40) an idle gap of 10 minutes, longer than the cache's
time to live. Turns read one or two files, search, list, or ask for a recap (as `bench_soak.py`), in the
same order for both policies; the workspace holds 40 files of `--file-lines` lines (default 60); both
policies run with the same threshold (default 12,000 tokens), low-water mark and time to live. The other
workloads the README reports: `--file-lines 200` (larger tool results) and `--idle-every 0` (no idle gaps).

One JSON line per policy: requests and prompt tokens the server saw (summary requests included), how
many it served from its cache, billed input tokens (uncached + 0.1 x cached, in uncached-token units;
`cache.cached_discount` is the 0.1),
summaries, reclaims, and the peak context (the largest prompt the server received); then one line
comparing them, with `target_met`: the cache-aware policy bills at least 25% less input, with no more
summaries, and both peaks within the same bound (the threshold plus 1% for the estimate's error). Not collected by
pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.helpers import make_agent, write_files  # noqa: E402
from reliability.soak import PROMPTS  # noqa: E402  (the soak's workload)
from xun.base.arguments import positive_int  # noqa: E402
from xun.compact.policy import compactor_from_config  # noqa: E402
from xun.offline import OfflineServer  # noqa: E402
from xun.context.prompt_cache import billed_input  # noqa: E402

TTL = 300.0
BETWEEN_TURNS = 20.0
IDLE_GAP = 600.0
PEAK_SLACK = 0.01
"""The peak bound: the threshold, plus the estimate's error against the server's count (both policies)."""


class SimulatedClock:
    """The one clock of the server's cache and the agent's idle rule."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def run(policy: str, turns: int, threshold: int, idle_every: int, low_water: float, file_lines: int = 60) -> dict:
    clock = SimulatedClock()
    with tempfile.TemporaryDirectory() as folder, OfflineServer(cache_ttl=TTL, clock=clock) as server:
        workdir = Path(folder)
        write_files(workdir, 40, lines=file_lines)
        agent, recorder = make_agent(
            server,
            workdir,
            auto_compact__token_threshold=threshold,
            auto_compact__policy=policy,
            auto_compact__low_water=low_water,
            cache__ttl_seconds=TTL,
        )
        agent.compactor = compactor_from_config(agent.config)
        agent.clock = clock
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            clock.now += IDLE_GAP if idle_every and turn % idle_every == 0 else BETWEEN_TURNS
            n, m = (turn * 7) % 40 + 1, (turn * 13) % 40 + 1
            finished = await agent.run(PROMPTS[turn % len(PROMPTS)].format(n=n, m=m))
            if finished.status != "ok":
                raise SystemExit(f"{policy}: turn {turn} ended {finished.status}: {finished.error}")
        seconds = time.perf_counter() - started
        prompt, cached = sum(server.prompt_sizes), sum(server.cached_sizes)
        reclaims = [e for e in recorder.of("tool_results_reclaimed") if e.count]
        return {
            "policy": policy,
            "turns": turns,
            "threshold": threshold,
            "low_water": agent.config.auto_compact.low_water,
            "requests": len(server.prompt_sizes),
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "uncached_tokens": prompt - cached,
            "billed_input": round(billed_input(prompt - cached, cached, agent.config.cache.cached_discount)),
            "summaries": len(recorder.of("summary_finished")),
            "reclaims": len(reclaims),
            "idle_reclaims": sum(1 for e in reclaims if e.trigger == "idle"),
            "early_reclaims": sum(1 for e in reclaims if e.trigger == "early"),
            "idle_summaries": sum(1 for e in recorder.of("summary_finished") if e.trigger == "idle"),
            "peak_context": max(server.prompt_sizes),
            "seconds": round(seconds, 1),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("turns", nargs="?", type=positive_int, default=300, metavar="TURNS")
    parser.add_argument(
        "--threshold", type=positive_int, default=12000, help="auto_compact.token_threshold (default 12000)"
    )
    parser.add_argument(
        "--idle-every", type=int, default=40, metavar="K", help="an idle gap every K turns (0: never; default 40)"
    )
    parser.add_argument(
        "--file-lines", type=positive_int, default=60, help="lines of each file the turns read (default 60)"
    )
    parser.add_argument("--low-water", type=float, default=0.5, help="auto_compact.low_water (default 0.5)")
    args = parser.parse_args(argv)
    results = {}
    for policy in ("escalation", "cache-aware"):
        results[policy] = asyncio.run(
            run(policy, args.turns, args.threshold, args.idle_every, args.low_water, args.file_lines)
        )
        print(json.dumps(results[policy]), flush=True)
    seed, aware = results["escalation"], results["cache-aware"]
    saving = 1 - aware["billed_input"] / seed["billed_input"]
    bound = round(args.threshold * (1 + PEAK_SLACK))
    comparison = {
        "billed_input_saving": round(saving, 3),
        "summaries": [seed["summaries"], aware["summaries"]],
        "peak_context": [seed["peak_context"], aware["peak_context"]],
        "peak_bound": bound,
        "target_met": saving >= 0.25
        and aware["summaries"] <= seed["summaries"]
        and max(seed["peak_context"], aware["peak_context"]) <= bound,
    }
    print(json.dumps(comparison), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
