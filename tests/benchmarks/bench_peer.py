"""The peer comparison (`../shared/bench/conversation_workload.py`, as `compare.sh` runs it), steadied: the
peer and the project run the whole workload in turn, `--runs` times, and each op keeps its best time, so
load on a shared machine falls on both alike. It also times `build` into a conversation that does nothing:
the workload's own code, a floor no implementation goes under (`peer / floor` bounds any build ratio).

Usage (from the project root, after `../shared/bench/compare.sh` made its two virtual environments):
    python3 tests/benchmarks/bench_peer.py [--rounds 10000] [--runs 9]
        [--workload ../shared/bench/conversation_workload.py]
        [--peer-python ~/.cache/xun-peer-venv/bin/python] [--project-python ~/.cache/xun-bench-venv/bin/python]
Prints one JSON line per op: the best seconds of each and `peer/project` (above 1: the project is faster).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "src"))

from xun.base.arguments import positive_int  # noqa: E402

ONE_BUILD = """
import gc, json, sys, time
sys.path.insert(0, {folder!r})
import conversation_workload as workload
if {nothing!r}:
    class Nothing:  # a conversation that does nothing
        def __init__(self): self.messages = []
        def set_system_message_content(self, content): pass
        def add_user_message(self, content): pass
        def add_tool_result(self, tool_call_id, content): pass
    workload.Conversation = Nothing
gc.collect()
started = time.perf_counter()
built = workload.build({rounds})
print(json.dumps(time.perf_counter() - started))
"""


def main() -> None:
    cache = Path.home() / ".cache"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=positive_int, default=10000)
    parser.add_argument("--runs", type=positive_int, default=9)
    parser.add_argument(
        "--workload", type=Path, default=HERE.parents[3] / "shared" / "bench" / "conversation_workload.py"
    )
    parser.add_argument("--peer-python", default=str(cache / "xun-peer-venv" / "bin" / "python"))
    parser.add_argument("--project-python", default=str(cache / "xun-bench-venv" / "bin" / "python"))
    args = parser.parse_args()
    if not args.workload.is_file():
        parser.error(f"no workload at {args.workload} (give --workload)")
    folder = str(args.workload.parent)
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.runs):
        for impl, python in (("peer", args.peer_python), ("project", args.project_python)):
            out = subprocess.run(
                [python, str(args.workload), impl, str(args.rounds)],
                capture_output=True,
                text=True,
                check=True,
                cwd="/",
            )
            for line in out.stdout.splitlines():
                row = json.loads(line)
                key = (row["op"], impl)
                best[key] = min(best.get(key, float("inf")), row["seconds"])
        code = ONE_BUILD.format(folder=folder, nothing=True, rounds=args.rounds)
        out = subprocess.run([args.project_python, "-c", code], capture_output=True, text=True, check=True, cwd="/")
        best[("build", "floor")] = min(best.get(("build", "floor"), float("inf")), json.loads(out.stdout))
    for op in dict.fromkeys(op for op, _ in best):
        peer, project = best[(op, "peer")], best[(op, "project")]
        row = {
            "op": op,
            "rounds": args.rounds,
            "peer": round(peer, 5),
            "project": round(project, 5),
            "peer_over_project": round(peer / project, 2) if project else None,
        }
        if op == "build":
            floor = best[("build", "floor")]
            row.update(floor=round(floor, 5), peer_over_floor=round(peer / floor, 2))
        print(json.dumps(row))


if __name__ == "__main__":
    main()
