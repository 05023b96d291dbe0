"""History index benchmark: prints one JSON line per figure (not part of the test run).

    python3 tests/benchmarks/bench_recall.py [MESSAGES] [ROUNDS]      default: 100000 10000

Builds an index of MESSAGES offloaded messages in a temporary folder, the way the engine does: sessions
of summaries (`index_offload`, one section of about 200 messages each) and reclaimed tool results
(`index_reclaimed`). The text is generated to look like agent work: requests and replies in prose,
reasoning, tool calls with JSON arguments, and long tool results (code listings, test and command
output, tracebacks) over a Zipf-distributed vocabulary with identifiers and paths.

Then: the build time; each query's median time over several runs and its match count; p50/p95 over
all query runs, over word queries and over prefix (type-ahead) queries (target: p95 under 50 ms at
100,000 messages); the same offload logs reindexed from disk
(`rebuild`); and the engine with an index attached: the first reclaim and a summary of a conversation
of ROUNDS tool rounds (compare `reclaim_first` and `summary_with_offload` of bench_conversation.py);
and the same two through the async paths the agent and the app use (`Agent.reclaim_tool_results`,
`Conversation.acompact`), with a 1 ms ticker task on the event loop: `max_stall_ms` is the longest gap
between two ticks, how long the app's UI would have been frozen (the index writes run in a worker
thread, so what remains is the conversation's own change and the offload log's append).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from xun.agent.loop import Agent
from xun.agent.config import XunConfig
from xun.context.conversation import Conversation
from xun.context.messages import Message, RawOpenAIMessage, UserMessage
from xun.context.offload import append_offload
from xun.context.recall import RecallIndex
from xun.context.reclaimed import ReclaimedToolResult

SECTION = 200
RUNS = 7


class Corpus:
    """Deterministic text that looks like an agent session."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        syllables = [
            "ka",
            "ro",
            "mi",
            "tan",
            "sel",
            "vo",
            "dre",
            "lin",
            "qu",
            "ex",
            "por",
            "za",
            "ni",
            "ble",
            "tor",
            "ash",
            "un",
            "fi",
            "gra",
            "mo",
            "set",
            "ul",
            "pe",
            "chi",
            "dan",
            "or",
            "ve",
            "li",
            "stru",
            "ber",
        ]
        words: set[str] = set()
        while len(words) < 30_000:
            words.add("".join(self.rng.choice(syllables) for _ in range(self.rng.randint(1, 4))))
        common = (
            "the a to of and in is it for that on with as this file error line test value return if not "
            "be by we now run use add fix check so all new one when then"
        ).split()
        self.words = common + sorted(words)
        weights = [1 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        self.cumulative = list(self._accumulate(weights))
        names = self.words[60:]
        self.identifiers = [f"{self.rng.choice(names)}_{self.rng.choice(names)}" for _ in range(3000)]
        self.paths = [f"src/{self.rng.choice(names)}/{self.rng.choice(names)}.py" for _ in range(1500)]

    @staticmethod
    def _accumulate(weights):
        total = 0.0
        for weight in weights:
            total += weight
            yield total

    def word(self) -> str:
        return self.rng.choices(self.words, cum_weights=self.cumulative)[0]

    def prose(self, low: int, high: int) -> str:
        out = []
        for _ in range(self.rng.randint(low, high)):
            roll = self.rng.random()
            out.append(
                self.rng.choice(self.identifiers)
                if roll < 0.04
                else self.rng.choice(self.paths)
                if roll < 0.06
                else self.word()
            )
        return " ".join(out).capitalize() + "."

    def code(self, lines: int) -> str:
        body = []
        for number in range(1, lines + 1):
            kind = self.rng.random()
            if kind < 0.15:
                text = f"def {self.rng.choice(self.identifiers)}({self.word()}, {self.word()}=None):"
            elif kind < 0.25:
                text = f"    return {self.rng.choice(self.identifiers)}({self.word()})"
            elif kind < 0.35:
                text = f"    # {self.prose(3, 10)}"
            else:
                text = (
                    f"    {self.word()} = {self.rng.choice(self.identifiers)}.{self.word()}({self.rng.randint(0, 999)})"
                )
            body.append(f"{number:>6}\t{text}")
        return f"[{self.rng.choice(self.paths)}: lines 1-{lines} of {lines}, the whole file]\n" + "\n".join(body)

    def command_output(self) -> str:
        roll = self.rng.random()
        if roll < 0.3:
            failed = self.rng.randint(0, 3)
            tests = [
                f"{self.rng.choice(self.paths).replace('src/', 'tests/test_')}"
                f"::test_{self.rng.choice(self.identifiers)} "
                f"{'FAILED' if i < failed else 'PASSED'}"
                for i in range(self.rng.randint(5, 30))
            ]
            return (
                "\n".join(tests)
                + f"\n{failed} failed, {len(tests) - failed} passed in {self.rng.random() * 9:.2f}s\n[exit code "
                f"{1 if failed else 0}]"
            )
        if roll < 0.5:
            frames = [
                f'  File "{self.rng.choice(self.paths)}", line {self.rng.randint(1, 900)}, in '
                f"{self.rng.choice(self.identifiers)}"
                for _ in range(self.rng.randint(2, 8))
            ]
            error = self.rng.choice(["ValueError", "KeyError", "TypeError", "RuntimeError", "FileNotFoundError"])
            return (
                "Traceback (most recent call last):\n"
                + "\n".join(frames)
                + f"\n{error}: {self.prose(4, 12)}\n[exit code 1]"
            )
        return "\n".join(
            f"{self.rng.choice(self.paths)}:{self.rng.randint(1, 500)}: {self.prose(4, 14)}"
            for _ in range(self.rng.randint(3, 25))
        )

    def messages(self, count: int, start: int) -> tuple[list[Message], list[tuple[ReclaimedToolResult, str]]]:
        """About `count` messages (user, assistant with reasoning, tool calls and results), and a tenth of
        the tool results as reclaimed originals."""
        out: list[Message] = []
        reclaimed: list[tuple[ReclaimedToolResult, str]] = []
        i = start
        while len(out) < count:
            i += 1
            roll = self.rng.random()
            if roll < 0.12:
                out.append(UserMessage(text=self.prose(5, 40)))
            elif roll < 0.35:
                raw = {"role": "assistant", "content": self.prose(20, 150)}
                if self.rng.random() < 0.4:
                    raw["reasoning_content"] = self.prose(10, 60)
                out.append(RawOpenAIMessage(raw=raw))
            else:
                call_id = f"call_{i}"
                if self.rng.random() < 0.5:
                    name, arguments, result = (
                        "read_file",
                        {"path": self.rng.choice(self.paths)},
                        self.code(self.rng.randint(10, 60)),
                    )
                else:
                    name, arguments = (
                        "run_command",
                        {"command": f"pytest -q {self.rng.choice(self.paths).replace('src/', 'tests/')}"},
                    )
                    result = self.command_output()
                out.append(
                    RawOpenAIMessage(
                        raw={
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(arguments)},
                                }
                            ],
                        }
                    )
                )
                out.append(RawOpenAIMessage(raw={"role": "tool", "tool_call_id": call_id, "content": result}))
                if self.rng.random() < 0.1:
                    reclaimed.append(
                        (ReclaimedToolResult(call_id, name, json.dumps(arguments), len(result), time.time()), result)
                    )
        return out, reclaimed


def emit(op: str, **fields) -> None:
    print(json.dumps({"op": op, **fields}), flush=True)


def build(index: RecallIndex, corpus: Corpus, total: int, logs: Path) -> tuple[int, int, float, list[str]]:
    """Index `total` messages section by section as the engine does, and write the same offload logs."""
    messages_indexed = results_indexed = 0
    seconds = 0.0
    sessions = []
    while messages_indexed < total:
        session = f"session{len(sessions):04d}"
        sessions.append(session)
        for section in range(5):
            messages, reclaimed = corpus.messages(min(SECTION, total - messages_indexed), messages_indexed)
            when = f"2026-01-{1 + len(sessions) % 28:02d}T{section:02d}:00:00Z"
            append_offload(logs / f"{session}.md", messages, conversation_id=session, when=when)
            start = time.perf_counter()
            warning = index.index_offload(session, messages, reclaimed={}, when=when)
            if reclaimed:
                warning = warning or index.index_reclaimed(session, reclaimed)
            seconds += time.perf_counter() - start
            assert warning is None, warning
            messages_indexed += len(messages)
            results_indexed += len(reclaimed)
            if messages_indexed >= total:
                break
    return messages_indexed, results_indexed, seconds, sessions


def queries(corpus: Corpus, sessions: list[str]) -> list[tuple[str, str, dict]]:
    rng = random.Random(11)
    rare = [w for w in corpus.words[2000:] if len(w) > 6]
    cases: list[tuple[str, str, dict]] = []
    for identifier in rng.sample(corpus.identifiers, 6):
        cases.append(("identifier", identifier, {}))
    for path in rng.sample(corpus.paths, 4):
        cases.append(("path", path, {}))
    for word in rng.sample(rare, 4):
        cases.append(("rare_word", word, {}))
    for pair in range(4):
        cases.append(("two_words", f"{rng.choice(corpus.words[40:400])} {rng.choice(corpus.words[40:400])}", {}))
    cases += [
        ("error_phrase", '"ValueError"', {}),
        ("error_words", "Traceback KeyError", {}),
        ("common_word", "the", {}),
        ("common_word", "error", {}),
        ("common_words", "test file error", {}),
        ("phrase", '"passed in"', {}),
        ("prefix", rng.choice(corpus.identifiers)[:5], {"prefix": True}),
        ("prefix", rng.choice(rare)[:4], {"prefix": True}),
        ("in_session", "error", {"session": rng.choice(sessions)}),
        ("in_session", rng.choice(corpus.identifiers), {"session": rng.choice(sessions)}),
        ("no_match", "zzzzqqqq", {}),
        ("fts_syntax", "foo-bar AND( NEAR(", {}),
        ("fts_syntax", '"unbalanced * -minus', {}),
    ]
    return cases


def search_figures(index: RecallIndex, cases: list[tuple[str, str, dict]], label: str) -> None:
    every: list[float] = []
    by_kind: dict[str, list[float]] = {}
    for kind, query, options in cases:
        times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            hits = index.search(query, limit=10, **options)
            times.append(time.perf_counter() - start)
        every += times
        matches = len(index.search(query, limit=1000, **options))
        emit(
            f"search_{label}",
            kind=kind,
            query=query,
            ms=round(statistics.median(times) * 1000, 3),
            hits=len(hits),
            matches_up_to_1000=matches,
            **options,
        )
        by_kind.setdefault("prefix" if options.get("prefix") else "words", []).extend(times)
    for name, times in (("all", every), *by_kind.items()):
        ordered = sorted(times)
        p50 = ordered[len(ordered) // 2]
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        emit(
            f"search_{label}_summary",
            queries=name,
            runs=len(ordered),
            p50_ms=round(p50 * 1000, 3),
            p95_ms=round(p95 * 1000, 3),
            max_ms=round(ordered[-1] * 1000, 3),
            p95_under_50ms=p95 < 0.05,
        )


def busy_conversation(folder: Path, rounds: int) -> Conversation:
    """bench_conversation's workload (a ~2 KB tool result per round) with an index of its own attached."""
    folder.mkdir()
    index = RecallIndex(folder)  # a folder of its own: a new index is first filled from the folder's logs
    c = Conversation(offload_dir=folder / ".xun" / "conversation_history", recall_index=index)
    c.set_system_message_content("You are a helpful assistant.")
    c.add_user_message("please analyse the repository")
    for i in range(rounds):
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
    return c


def engine_figures(folder: Path, rounds: int) -> None:
    """bench_conversation's workload with an index attached, through the synchronous API."""
    c = busy_conversation(folder, rounds)
    n = len(c.messages)
    gc.collect()
    start = time.perf_counter()
    result = c.reclaim_tool_results(keep_max=12)
    emit(
        "engine_reclaim_first_indexed",
        messages=n,
        reclaimed=result.reclaimed_count,
        seconds=round(time.perf_counter() - start, 6),
    )
    gc.collect()
    start = time.perf_counter()
    summary = c.compact(lambda messages: "SUMMARY", keep_recent=16)
    emit(
        "engine_summary_with_offload_indexed",
        messages=n,
        condensed=summary.condensed_count,
        seconds=round(time.perf_counter() - start, 6),
        warning=summary.warning,
    )
    assert not c.recall_warnings and summary.warning is None


async def _stalls(work) -> tuple[float, float, int, object]:
    """Run `work()` while a ticker sleeps 1 ms at a time on the same loop: (seconds, longest gap between
    two ticks in seconds, ticks, result)."""
    done = False
    gaps = [0.0]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps[0] = max(gaps[0], now - last)
            last = now
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)  # the ticker is running
    gaps[0] = 0.0
    start = time.perf_counter()
    try:
        result = await work()
    finally:
        seconds = time.perf_counter() - start
        done = True
        await task
    return seconds, gaps[0], ticks, result


def loop_stall_figures(folder: Path, rounds: int) -> None:
    """The first reclaim (as the agent runs it) and a summary (`acompact`) on the event loop."""
    c = busy_conversation(folder, rounds)
    n = len(c.messages)
    agent = Agent(XunConfig(), conversation=c, workdir=folder, environ={})

    async def run() -> None:
        gc.collect()
        seconds, stall, ticks, result = await _stalls(lambda: agent.reclaim_tool_results(keep_max=12))
        emit(
            "engine_reclaim_first_loop_stall",
            messages=n,
            reclaimed=result.reclaimed_count,
            seconds=round(seconds, 6),
            max_stall_ms=round(stall * 1000, 1),
            ticks=ticks,
        )

        async def summarize(messages):
            return "SUMMARY"

        gc.collect()
        seconds, stall, ticks, summary = await _stalls(lambda: c.acompact(summarize, keep_recent=16))
        emit(
            "engine_summary_with_offload_loop_stall",
            messages=n,
            condensed=summary.condensed_count,
            seconds=round(seconds, 6),
            max_stall_ms=round(stall * 1000, 1),
            ticks=ticks,
            warning=summary.warning,
        )
        assert not c.recall_warnings and summary.warning is None

    asyncio.run(run())


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    os.environ.pop("XUN_HOME", None)  # everything stays in the temporary folder
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        logs = folder / ".xun" / "conversation_history"
        index = RecallIndex(folder)
        corpus = Corpus()
        messages, results, seconds, sessions = build(index, corpus, total, logs)
        stats = index.stats()
        emit(
            "build_incremental",
            messages=messages,
            reclaimed=results,
            rows=stats.offloaded + stats.reclaimed,
            seconds=round(seconds, 3),
            db_bytes=stats.bytes,
            log_bytes=sum(p.stat().st_size for p in logs.iterdir()),
        )
        cases = queries(corpus, sessions)
        search_figures(index, cases, "incremental")
        start = time.perf_counter()
        report = index.rebuild()
        emit(
            "rebuild_from_logs",
            rows=report.entries,
            logs=report.logs,
            seconds=round(time.perf_counter() - start, 3),
            db_bytes=index.stats().bytes,
        )
        search_figures(index, cases, "rebuilt")
        engine_figures(folder / "engine", rounds)
        loop_stall_figures(folder / "loop", rounds)


if __name__ == "__main__":
    main()
