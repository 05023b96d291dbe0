"""Crash run: SIGKILL a real xun session at every kill point the crash worker knows, then check the files.

    python3 tests/benchmarks/bench_crashes.py [WORKERS]      default: 2

The points are every n of every (target, mode) of `tests/reliability/crash_worker.py` (events of a turn,
model calls, saves, the atomic write's text, fsync and rename, reclaims, summaries, offload appends,
history-index writes): several hundred, each call a dry run of the session counts, once per mode. The
checks are those of `tests/reliability/crashes.py`, plus one more turn on each resumed session (whose
save must remove the kill's old temporary files). Prints one JSON line per problem found, then a summary
line. The suite's `test_crashes.py` runs a sample of the same points: at most its `PER_TARGET` evenly
spaced n per (target, mode).
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

from reliability.crashes import check_point, count_points, plan, resume_point, run_plan, summarize  # noqa: E402

from xun.base.arguments import positive_int  # noqa: E402
from xun.offline import OfflineServer  # noqa: E402


async def resume_all(outcomes) -> None:
    with OfflineServer() as server:
        for outcome in outcomes:
            await resume_point(outcome, server)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "workers",
        nargs="?",
        type=positive_int,
        default=2,
        metavar="WORKERS",
        help="worker processes running kill points at once (default: 2)",
    )
    workers = parser.parse_args(argv).workers
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="xun-crashes-") as tmp:
        root = Path(tmp)
        counts = count_points(root)
        points = plan(counts, root, per_target=None)
        outcomes = [check_point(o) for o in run_plan(points, root, workers=workers)]
        asyncio.run(resume_all(outcomes))
        for outcome in outcomes:
            if outcome.problems:
                print(json.dumps({"point": outcome.point, "problems": outcome.problems}), flush=True)
        report = summarize(outcomes)
    print(json.dumps({**report, "counts": counts, "workers": workers, "seconds": round(time.monotonic() - started, 1)}))
    return 1 if report["with_problems"] or report["killed"] != report["kill_points"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
