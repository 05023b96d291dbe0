"""The soak run shared by `test_soak.py` (short) and `tests/benchmarks/bench_soak.py` (300 turns).

Automated turns against the offline server with a small threshold, so tool results are reclaimed and
summaries run all along. Every event is checked as it arrives and every turn ends with a save:

- the Usage event after each model call carries the figure the trigger compares (`total_tokens`), and an
  automatic reclaim starts from exactly that figure, only when it is above the threshold;
- every logged compaction event is one record of the compaction log, no more, no less;
- no two summaries run at once, counted both by events and at the server (concurrent summary requests);
- summary requests at the server equal the summaries started (no hidden loops or retries);
- the session file's bytes per kept character (the text of the messages, the reclaimed originals, the
  summaries and the compaction log) and per kept item, and the process's RSS, are sampled, to show the
  file holds what is kept and nothing more, and memory stays bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xun.offline.server as offline_server_module
from xun.base.events import CompactionEvent, Event
from xun.offline import OfflineServer
from xun.offline.summary import is_summary_request

from .helpers import configure, make_agent, write_files

PROMPTS = (
    "please read f{n}.py",
    "read f{n}.py and f{m}.py",
    "search for `file {n}` in .",
    "list the files",
    "what did we learn so far?",
)


@dataclass
class SoakReport:
    turns: int = 0
    model_calls: int = 0
    seconds: float = 0.0
    reclaims: int = 0
    summaries_started: int = 0
    summaries_compacted: int = 0
    compaction_failures: int = 0
    summary_requests: int = 0
    max_concurrent_summary_requests: int = 0
    max_concurrent_summaries: int = 0
    logged_events: int = 0
    compaction_log_records: int = 0
    usage_checks: int = 0
    usage_mismatches: list[tuple[int, int | None, int | None]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    peak_rss_kb: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    """Every `sample_every` turns: turn, session bytes, kept items, bytes per kept item, RSS, seconds."""

    def problems(self) -> list[str]:
        found = []
        if self.usage_mismatches:
            found.append(
                f"{len(self.usage_mismatches)} Usage events disagree with the trigger's figure: "
                f"{self.usage_mismatches[:3]}"
            )
        if self.logged_events != self.compaction_log_records:
            found.append(f"{self.logged_events} logged compaction events but {self.compaction_log_records} log records")
        if self.max_concurrent_summaries > 1 or self.max_concurrent_summary_requests > 1:
            found.append(
                f"summaries overlapped ({self.max_concurrent_summaries} by events, "
                f"{self.max_concurrent_summary_requests} at the server)"
            )
        if self.summary_requests != self.summaries_started:
            found.append(f"{self.summary_requests} summary requests for {self.summaries_started} summaries")
        if self.errors:
            found.append(f"turn errors: {self.errors[:3]}")
        return found


class _SummaryWatch:
    """Counts summary requests at the offline server, and how many are in flight at once.

    It wraps the server's `decide_reply` (the scripted model's entry point) for the duration of a run;
    the reply is only decided, the stream is written after, so in-flight is measured from decision to
    the end of `_stream` by wrapping that too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.count = 0
        self._local = threading.local()

    def install(self) -> Callable[[], None]:
        handler = offline_server_module._ChatHandler
        real_decide, real_post = offline_server_module.decide_reply, handler._post
        watch = self

        def decide(request, *args, **kwargs):
            if request.messages and is_summary_request(str(request.messages[-1].get("content", ""))):
                with watch.lock:
                    watch.count += 1
                    watch.in_flight += 1
                    watch.max_in_flight = max(watch.max_in_flight, watch.in_flight)
                watch._local.summary = True
            return real_decide(request, *args, **kwargs)

        def post(self):
            watch._local.summary = False
            try:
                real_post(self)
            finally:
                if watch._local.summary:
                    with watch.lock:
                        watch.in_flight -= 1

        offline_server_module.decide_reply = decide
        handler._post = post

        def uninstall() -> None:
            offline_server_module.decide_reply = real_decide
            handler._post = real_post

        return uninstall


def _session_parts(path: Path) -> dict[str, int]:
    """Bytes of the saved session by part: its fields (messages, summaries, log...) and the archive of
    reclaimed originals."""
    data = json.loads(path.read_text(encoding="utf-8"))
    parts = {
        key: len(json.dumps(data.get(key), ensure_ascii=False, separators=(",", ":")))
        for key in ("messages", "summarizations", "compaction_log", "kept_originals")
    }
    parts["archive"] = len(
        json.dumps(data.get("compacted_toolcalls"), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    )
    return parts


def _rss_kb() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError):
        return 0


async def run_soak(
    turns: int = 300,
    *,
    threshold: int = 3000,
    sample_every: int = 10,
    workdir: Path | None = None,
    on_sample: Callable[[dict[str, Any]], None] | None = None,
    **settings: Any,
) -> SoakReport:
    """Run `turns` turns and return the report (the caller asserts on `report.problems()`)."""
    report = SoakReport()
    watch = _SummaryWatch()
    uninstall = watch.install()
    temporary = None
    if workdir is None:
        temporary = tempfile.TemporaryDirectory(prefix="xun-soak-")
        workdir = Path(temporary.name)
    server = OfflineServer().start()
    try:
        write_files(workdir, 40)
        agent, _, store = make_agent(
            server,
            workdir,
            conversation_id="soak",
            auto_compact__token_threshold=threshold,
            auto_compact__toolcall_keep_max=3,
            auto_compact__summary_keep_max=6,
        )
        configure(agent.config, settings)
        active = 0
        last_estimate: int | None = None  # the gauge's figure: the estimate of the next request, as last shown

        def check(event: Event) -> None:
            nonlocal active, last_estimate
            kind = event.type
            if isinstance(event, CompactionEvent) and event.logged:
                report.logged_events += 1
            if kind == "usage":
                report.usage_checks += 1
                if event.total_tokens != agent.conversation.total_tokens:
                    report.usage_mismatches.append((report.turns, event.total_tokens, agent.conversation.total_tokens))
                if event.prompt_tokens is not None:
                    report.model_calls += 1
                last_estimate = event.estimated_tokens
            elif kind == "tool_results_reclaimed":
                report.reclaims += 1
                if event.trigger == "auto" and last_estimate is not None:  # the trigger fired on the gauge's figure
                    report.usage_checks += 1
                    if event.tokens_before != last_estimate or last_estimate <= agent.threshold:
                        report.usage_mismatches.append((report.turns, last_estimate, event.tokens_before))
                    last_estimate = None  # a retry round after a summary starts from a figure not yet shown
            elif kind == "summary_started":
                active += 1
                report.summaries_started += 1
                report.max_concurrent_summaries = max(report.max_concurrent_summaries, active)
            elif kind == "summary_finished":
                active -= 1
                report.summaries_compacted += 1
            elif kind == "compaction_failed":
                report.compaction_failures += 1
                if active:
                    active -= 1
            elif kind == "error":
                report.errors.append(event.message)

        agent.on_event = check
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            n, m = (turn * 7) % 40 + 1, (turn * 13) % 40 + 1
            await agent.run(PROMPTS[turn % len(PROMPTS)].format(n=n, m=m))
            path = store.save(agent.conversation)
            report.turns = turn
            if turn % sample_every == 0 or turn == turns:
                c = agent.conversation
                kept = len(c.messages) + len(c.reclaimed_results) + len(c.compaction_log) + len(c.summarizations)
                originals = sum(len(c.reclaimed_original(k) or "") for k in c.reclaimed_results)
                kept_chars = (
                    c.estimated_message_length()
                    + originals
                    + sum(len(e.summary_message) for e in c.summarizations)
                    + len(json.dumps(c.compaction_log))
                )
                size = path.stat().st_size
                sample = {
                    "turn": turn,
                    "session_bytes": size,
                    "messages": len(c.messages),
                    "archived": len(c.reclaimed_results),
                    "log_records": len(c.compaction_log),
                    "summaries": len(c.summarizations),
                    "kept_items": kept,
                    "bytes_per_kept_item": round(size / kept, 1),
                    "kept_chars": kept_chars,
                    "bytes_per_kept_char": round(size / kept_chars, 3),
                    "rss_kb": _rss_kb(),
                    "seconds": round(time.perf_counter() - started, 3),
                }
                sample["bytes_by_part"] = _session_parts(path)
                report.samples.append(sample)
                if on_sample is not None:
                    on_sample(sample)
        report.seconds = round(time.perf_counter() - started, 3)
        report.compaction_log_records = len(agent.conversation.compaction_log)
        report.summary_requests = watch.count
        report.max_concurrent_summary_requests = watch.max_in_flight
        report.peak_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return report
    finally:
        server.stop()
        uninstall()
        if temporary is not None:
            temporary.cleanup()


def run_soak_sync(turns: int, **kwargs: Any) -> SoakReport:
    return asyncio.run(run_soak(turns, **kwargs))
