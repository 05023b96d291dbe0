"""A short soak (the long one is `tests/benchmarks/bench_soak.py`): 40 turns with many compactions."""

from __future__ import annotations

from .soak import run_soak


async def test_forty_turns_with_many_compactions_keep_every_invariant(tmp_path):
    report = await run_soak(
        40,
        threshold=3000,
        sample_every=10,
        workdir=tmp_path,
        auto_compact__toolcall_keep_max=3,
        auto_compact__summary_keep_max=6,
    )
    assert report.problems() == []
    assert report.turns == 40 and report.reclaims >= 10 and report.summaries_compacted >= 5
    assert report.summary_requests == report.summaries_started == report.summaries_compacted
    assert report.logged_events == report.compaction_log_records > 0
    assert report.usage_checks >= report.model_calls >= 40
    # the file grows with what it keeps (messages, originals, summaries, log), not faster
    per_char = [s["bytes_per_kept_char"] for s in report.samples]
    assert max(per_char) <= 1.25 * min(per_char) and max(per_char) < 2, per_char
    # memory: the last sample is within 20 MB of the first
    assert report.samples[-1]["rss_kb"] - report.samples[0]["rss_kb"] < 20 * 1024


async def test_a_moderate_threshold_archives_originals_and_stays_consistent(tmp_path):
    report = await run_soak(
        40,
        threshold=8000,
        sample_every=20,
        workdir=tmp_path,
        auto_compact__toolcall_keep_max=4,
        auto_compact__summary_keep_max=10,
    )
    assert report.problems() == []
    assert report.reclaims >= 1 and report.samples[-1]["archived"] >= 1
