"""SIGKILL at many points of a real session (a turn, a save, a summary and its offload append), then
restart on what is on disk: nothing saved is lost, nothing is torn. See `crashes.py` for the checks and
`crash_worker.py` for the kill points; `tests/benchmarks/bench_crashes.py` runs every point."""

from __future__ import annotations

import json
import time

import pytest

from .crashes import check_point, count_points, plan, resume_point, run_plan, summarize

pytestmark = pytest.mark.xdist_group("crash-run")  # the module-scoped fixture is built once, on one worker

PER_TARGET = 5
"""Evenly spaced n per (target, mode), or every n of a target called fewer times: the kill points are the
sum over (target, mode) of min(PER_TARGET, calls), which the test below requires to be at least 100."""


@pytest.fixture(scope="module")
def crash_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("crashes")
    started = time.monotonic()
    counts = count_points(root)
    points = plan(counts, root, per_target=PER_TARGET)
    outcomes = [check_point(o) for o in run_plan(points, root)]
    return counts, outcomes, time.monotonic() - started


def test_the_session_reaches_every_kind_of_point(crash_run):
    counts, _, _ = crash_run
    for target in (
        "event",
        "model_call",
        "save",
        "atomic.write",
        "os.replace",
        "os.fsync",
        "reclaim_tool_results",
        "index_reclaimed",
        "apply_compaction",
        "append_offload",
        "os.write",
        "index_offload",
    ):
        assert counts.get(target, 0) >= 1, (target, counts)
    assert counts["apply_compaction"] >= 2 and counts["save"] >= 10


def test_every_kill_leaves_a_loadable_session_and_loses_nothing_saved(crash_run):
    _, outcomes, seconds = crash_run
    report = summarize(outcomes)
    print(json.dumps({**report, "seconds": round(seconds, 1)}))
    assert report["kill_points"] >= 100 and report["killed"] == report["kill_points"]
    bad = {f"{o.point['target']}:{o.point['mode']}@{o.point['n']}": o.problems for o in outcomes if o.problems}
    assert not bad, bad
    assert report["committed_texts_checked"] > 1000
    # some kills landed between the rename and the end of the save: the new file is then the whole new one
    assert report["sessions_from_the_save_in_flight"] >= 1


async def test_every_killed_session_can_be_resumed(crash_run, offline_server):
    _, outcomes, _ = crash_run
    for outcome in outcomes:
        await resume_point(outcome, offline_server)
    bad = {f"{o.point['target']}:{o.point['mode']}@{o.point['n']}": o.problems for o in outcomes if o.problems}
    assert not bad, bad
    # some kills came between a save's temporary file and its rename; the resumed store removed those files
    assert sum(o.stale_temp_files_swept for o in outcomes) >= 1


def test_the_checks_catch_a_torn_session_and_a_lost_log(crash_run, tmp_path):
    """The harness would see a broken promise: damage copies of a killed session's files and check them."""
    import dataclasses
    import shutil
    from pathlib import Path

    _, outcomes, _ = crash_run
    source = next(
        o
        for o in outcomes
        if o.point["target"] == "save" and o.point["mode"] == "after" and o.point["n"] > 6 and not o.problems
    )

    def damaged(name, damage):
        workdir = tmp_path / name
        shutil.copytree(source.point["workdir"], workdir)
        damage(workdir)
        copy = dataclasses.replace(source, point={**source.point, "workdir": str(workdir)}, problems=[])
        return check_point(copy).problems

    session = Path(".xun/sessions/crash.json")
    log = Path(".xun/conversation_history/crash.md")
    torn = damaged("torn", lambda w: (w / session).write_bytes((w / session).read_bytes()[:-500]))
    assert any("neither the last completed save" in p for p in torn) and any("does not load" in p for p in torn)
    lost = damaged("lost", lambda w: (w / log).unlink())
    assert any("saved message texts are nowhere" in p for p in lost)
    gone = damaged("gone", lambda w: (w / session).unlink())
    assert gone == ["the session file is gone although a save had completed"]
