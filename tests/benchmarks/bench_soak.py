"""Soak: hundreds of automated turns against the offline server with a small compaction threshold.

    python3 tests/benchmarks/bench_soak.py [TURNS]        default: 300

Two regimes, each printed as JSON lines (one per sample of 25 turns, then one summary line):
"aggressive" (threshold 3,000 tokens, keep 3 tool results / 6 messages: a summary every few turns) and
"moderate" (threshold 12,000, keep 6 / 12: many turns pass between compactions; each one reclaims old
tool results, and every second one (`escalation_rounds`), or one where reclaiming is not enough, also
summarises). The summary line has the peak RSS, the counts of reclaims and summaries, summary requests
seen at the server, the most summaries in flight at once, logged compaction events against
compaction-log records, and `problems` (empty when every check held; see `tests/reliability/soak.py`).
The figures go into RELIABILITY.md. Not collected by pytest; `tests/reliability/test_soak.py` runs a
short version.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability.soak import run_soak_sync  # noqa: E402
from xun.base.arguments import positive_int  # noqa: E402

REGIMES = {
    "aggressive": {"threshold": 3000, "auto_compact__toolcall_keep_max": 3, "auto_compact__summary_keep_max": 6},
    "moderate": {"threshold": 12000, "auto_compact__toolcall_keep_max": 6, "auto_compact__summary_keep_max": 12},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "turns", nargs="?", type=positive_int, default=300, metavar="TURNS", help="turns in each regime (default: 300)"
    )
    turns = parser.parse_args(argv).turns
    failed = False
    for name, settings in REGIMES.items():

        def show(sample: dict, name: str = name) -> None:
            print(json.dumps({"regime": name, **sample}), flush=True)

        report = run_soak_sync(turns, sample_every=25, on_sample=show, **settings)
        first, last = report.samples[0], report.samples[-1]
        summary = {
            "regime": name,
            "turns": report.turns,
            "model_calls": report.model_calls,
            "seconds": report.seconds,
            "ms_per_turn": round(1000 * report.seconds / report.turns, 1),
            "peak_rss_mb": round(report.peak_rss_kb / 1024, 1),
            "rss_growth_mb": round((last["rss_kb"] - first["rss_kb"]) / 1024, 1),
            "reclaims": report.reclaims,
            "summaries": report.summaries_compacted,
            "compaction_failures": report.compaction_failures,
            "summary_requests": report.summary_requests,
            "max_concurrent_summaries": max(report.max_concurrent_summaries, report.max_concurrent_summary_requests),
            "logged_events": report.logged_events,
            "compaction_log_records": report.compaction_log_records,
            "usage_checks": report.usage_checks,
            "session_bytes": last["session_bytes"],
            "bytes_per_kept_item_first_last": [first["bytes_per_kept_item"], last["bytes_per_kept_item"]],
            "bytes_per_kept_char_min_max": [
                min(s["bytes_per_kept_char"] for s in report.samples),
                max(s["bytes_per_kept_char"] for s in report.samples),
            ],
            "problems": report.problems(),
        }
        print(json.dumps(summary), flush=True)
        failed = failed or bool(summary["problems"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
