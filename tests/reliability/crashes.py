"""The crash harness: plan kill points, run them in `crash_worker.py` subprocesses, check what is left.

Used by `test_crashes.py` (a bounded sample of points) and `tests/benchmarks/bench_crashes.py` (every
point). A dry run of the worker counts how often each target is hit; a plan picks (target, n, mode)
points from those counts, deterministically; each point runs in a fresh workdir in a child the worker
forks (so the imports are paid once per worker process, not per kill). After the kill, `check_point`
looks at the files on disk as a restarted xun would:

- the session file loads (its archive of reclaimed originals included) and is byte for byte the last completed save, or
  the save that was in flight when the kill came (atomic saves: never a mix or a torn file);
- the offload log parses (`read_offload_log`), the history index answers a search;
- every message text that existed at the last completed save is in the session's messages, its
  reclaimed archive, its kept originals or the offload log;
- the user file written by `write_file` is absent or complete;
- and `resume_point` runs one more turn on the loaded session, saves it and loads it again; a
  temporary file the kill left in the sessions folder, once older than the store's safe age, is gone
  after that save.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xun.base.atomic import temp_target
from xun.context.offload import read_offload_log
from xun.context.recall import RecallIndex
from xun.context.sessions import STALE_TEMP_SECONDS, SessionStore

from .helpers import make_agent, missing_texts

WORKER = Path(__file__).resolve().parent / "crash_worker.py"
CONVERSATION_ID = "crash"
MODES = {
    "event": ("before",),
    "model_call": ("before",),
    "save": ("before", "after"),
    "reclaim_tool_results": ("after",),
    "apply_compaction": ("before", "after"),
    "append_offload": ("before", "after"),
    "index_offload": ("before", "after"),
    "index_reclaimed": ("before", "after"),
    "os.fsync": ("before", "after"),
    "os.replace": ("before", "after"),
    "os.write": ("before", "torn", "after"),
    "atomic.write": ("before", "torn", "after"),
}


def _notes_content() -> str:
    return " | ".join(f"note {i}: the crash test wrote this line" for i in range(40))


@dataclass
class Outcome:
    point: dict[str, Any]
    killed: bool = False
    exit: int | None = None
    problems: list[str] = field(default_factory=list)
    saves_completed: int = 0
    committed_texts: int = 0
    leftover_temp_files: int = 0
    session_was_in_flight: bool = False
    stale_temp_files_swept: int = 0
    """Temporary files the kill left in the sessions folder that the resumed store removed (aged first)."""


def count_points(root: Path) -> dict[str, int]:
    """Run the session once without killing it; how often each target was hit."""
    done = subprocess.run(
        [sys.executable, str(WORKER), "count", str(root / "dry")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def plan(counts: dict[str, int], root: Path, per_target: int | None = None) -> list[dict[str, Any]]:
    """Kill points: for each target and mode, every n (per_target=None) or `per_target` evenly spaced
    ones, always including the first and the last."""
    points = []
    for target, modes in MODES.items():
        total = counts.get(target, 0)
        if not total:
            continue
        if per_target is None or total <= per_target:
            picks = list(range(1, total + 1))
        else:
            picks = sorted({1 + round(i * (total - 1) / (per_target - 1)) for i in range(per_target)})
        for mode in modes:
            for n in picks:
                index = len(points)
                points.append(
                    {"id": index, "target": target, "n": n, "mode": mode, "workdir": str(root / f"p{index:04d}")}
                )
    return points


def run_plan(points: list[dict[str, Any]], root: Path, workers: int = 2, timeout: float = 3600) -> list[Outcome]:
    """Run the points in `workers` worker processes at once; one Outcome per point (not yet checked)."""
    shares = [points[i::workers] for i in range(workers)]
    procs = []
    for index, share in enumerate(shares):
        if not share:
            continue
        plan_file = root / f"plan{index}.json"
        plan_file.write_text(json.dumps(share))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), "kill", str(plan_file)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    by_id = {p["id"]: Outcome(p) for p in points}
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        for line in out.splitlines():
            record = json.loads(line)
            outcome = by_id[record["id"]]
            outcome.killed, outcome.exit = record["killed"], record["exit"]
        if proc.returncode:
            raise RuntimeError(f"crash worker failed ({proc.returncode}): {err[-2000:]}")
    return list(by_id.values())


def _journal(workdir: Path) -> list[dict[str, Any]]:
    records = []
    try:
        lines = (workdir / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return records
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:  # the kill tore the journal's own last line: what it describes did not finish
            break
    return records


def check_point(outcome: Outcome) -> Outcome:
    """Look at what the killed session left; record every broken promise in `outcome.problems`."""
    workdir = Path(outcome.point["workdir"])
    problems = outcome.problems
    if not outcome.killed:
        problems.append(f"the child was not killed (exit {outcome.exit}): the point was never reached")
    journal = _journal(workdir)
    saved = [r for r in journal if "saved" in r]
    saving = [r for r in journal if "saving" in r]
    outcome.saves_completed = len(saved)
    allowed = {saved[-1]["sha"]} if saved else set()
    in_flight = saving[-1]["sha"] if saving and (not saved or saving[-1]["saving"] > saved[-1]["saved"]) else None
    if in_flight:
        allowed.add(in_flight)
    committed = [text for record in saved for text in record["texts"]]
    outcome.committed_texts = len(committed)
    store = SessionStore(workdir)
    path = store.path_for(CONVERSATION_ID)
    outcome.leftover_temp_files = len(list(workdir.rglob("*.tmp")))
    if not path.exists():
        if saved:
            problems.append("the session file is gone although a save had completed")
        return outcome
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest not in allowed:
        problems.append("the session file is neither the last completed save nor the one in flight")
    outcome.session_was_in_flight = digest == in_flight and (not saved or digest != saved[-1]["sha"])
    try:
        conversation = store.load(CONVERSATION_ID)
        conversation.completion_params()
        for key in list(conversation.reclaimed_results):
            conversation.reclaimed_original(key)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
        problems.append(f"the session does not load: {type(exc).__name__}: {exc}")
        return outcome
    log = store.offload_dir / f"{CONVERSATION_ID}.md"
    if log.exists():
        try:
            sections = read_offload_log(log)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"the offload log does not parse: {type(exc).__name__}: {exc}")
        else:
            if any(s.conversation_id not in ("", CONVERSATION_ID) for s in sections):
                problems.append("an offload section names another conversation")
    try:
        RecallIndex(workdir).search("line")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"the history index fails after the kill: {type(exc).__name__}: {exc}")
    lost = missing_texts(committed, conversation)
    if lost:
        problems.append(f"{len(lost)} saved message texts are nowhere: {[t[:60] for t in lost[:3]]}")
    notes = workdir / "notes.txt"
    if notes.exists() and notes.read_text(encoding="utf-8") != _notes_content():
        problems.append("notes.txt (written by write_file) is incomplete")
    return outcome


async def resume_point(outcome: Outcome, server) -> None:
    """Restart on the killed session's files: one more turn, a save, a load. A temporary file the kill
    left in the sessions folder is first made older than `STALE_TEMP_SECONDS` (as if the restart came
    later): the restarted store's save must remove it."""
    workdir = Path(outcome.point["workdir"])
    store = SessionStore(workdir)
    if not store.path_for(CONVERSATION_ID).exists():
        return
    leftovers = [path for path in store.root.iterdir() if temp_target(path.name) is not None]
    then = time.time() - STALE_TEMP_SECONDS - 60
    for path in leftovers:
        os.utime(path, (then, then))
    agent, recorder, _ = make_agent(server, workdir, auto_confirm=True)
    agent.conversation = store.load(CONVERSATION_ID)
    finished = await agent.run("please read f1.py")
    if finished.status != "ok":
        outcome.problems.append(f"the resumed session's turn ended {finished.status}: {finished.error}")
    store.save(agent.conversation)
    if store.load(CONVERSATION_ID).completion_params() != agent.conversation.completion_params():
        outcome.problems.append("the resumed session did not save and load back the same")
    outcome.stale_temp_files_swept = len(leftovers)
    kept = [path.name for path in leftovers if os.path.lexists(path)]
    if kept:
        outcome.problems.append(f"the restarted store's save left old temporary files: {kept}")


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    by_target: dict[str, int] = {}
    for outcome in outcomes:
        key = f"{outcome.point['target']}:{outcome.point['mode']}"
        by_target[key] = by_target.get(key, 0) + 1
    return {
        "kill_points": len(outcomes),
        "killed": sum(o.killed for o in outcomes),
        "with_problems": sum(bool(o.problems) for o in outcomes),
        "sessions_from_the_save_in_flight": sum(o.session_was_in_flight for o in outcomes),
        "points_with_leftover_temp_files": sum(bool(o.leftover_temp_files) for o in outcomes),
        "stale_temp_files_swept_on_resume": sum(o.stale_temp_files_swept for o in outcomes),
        "committed_texts_checked": sum(o.committed_texts for o in outcomes),
        "by_target": by_target,
    }
