"""Compaction through the command line: automatic tiers over resumed turns, the offload log and
`xun history`, the emergency summary on a context overflow, and `xun compact`."""

from __future__ import annotations

import json
import shutil

import pytest

from .helpers import SMALL_THRESHOLD, Cli, sample_text

SMALL = SMALL_THRESHOLD

pytestmark = pytest.mark.xdist_group("three-reads")  # the module-scoped fixture is built once, on one worker


def _files(cli: Cli, count: int) -> None:
    for i in range(1, count + 1):
        cli.write(f"part{i}.txt", sample_text(f"part {i}"))


@pytest.fixture(scope="module")
def three_reads(tmp_path_factory) -> Cli:
    """A workspace whose one session read part1..part3.txt in three turns (built once per module)."""
    template = Cli(tmp_path_factory.mktemp("three-reads"))
    _files(template, 3)
    template("run", "read part1.txt").check(0)
    for name in ("part2.txt", "part3.txt"):
        template("run", "--resume", "--", f"read {name}").check(0)
    return template


def _copy(template: Cli, cli: Cli) -> None:
    shutil.rmtree(cli.workdir)
    shutil.copytree(template.workdir, cli.workdir)


def test_resumed_turns_reclaim_then_summarise_and_offload(cli: Cli):
    _files(cli, 6)
    seen: list[dict] = []
    for turn in range(1, 7):
        resume = ("--resume",) if turn > 1 else ()
        result = cli("run", "--json", *SMALL, *resume, "--", f"read part{turn}.txt").check(0)
        wanted = ("tool_results_reclaimed", "summary_started", "summary_finished", "compaction_failed")
        seen += [e for e in result.events if e["type"] in wanted]
        if any(e["type"] == "summary_finished" for e in seen):
            break
    kinds = [e["type"] for e in seen]
    assert "summary_finished" in kinds, kinds
    first_reclaim = next(i for i, e in enumerate(seen) if e["type"] == "tool_results_reclaimed" and e["count"] >= 1)
    summary_at = kinds.index("summary_finished")
    assert first_reclaim < kinds.index("summary_started") < summary_at  # tier 1 first, then tier 2
    reclaim, summary = seen[first_reclaim], seen[summary_at]
    assert reclaim["trigger"] == "auto" and reclaim["ids"] and reclaim["tokens_after"] < reclaim["tokens_before"]
    assert summary["trigger"] == "auto" and summary["status"] == "compacted" and summary["condensed"] > 0
    assert "compaction_failed" not in kinds

    saved = cli.only_session()
    ident = saved["conversation_id"]
    log = cli.state / "conversation_history" / f"{ident}.md"
    assert summary["offload_path"] == str(log)
    text = log.read_text(encoding="utf-8")
    assert text.startswith("## Offloaded at ")
    assert "line 0 of part 1" in text  # the original of a reclaimed result, not its placeholder
    assert "reclaimed earlier" in text
    logged = [record["type"] for record in saved["compaction_log"]]
    assert "tool_results_reclaimed" in logged and "summary_finished" in logged
    assert saved["compaction"]["summary_rounds"] == 1

    history = cli("history").check(0)
    assert history.stdout == text
    assert cli.inproc("history", ident[:6]).check(0).stdout == text
    sections = [json.loads(line) for line in cli.inproc("history", "--json", ident).check(0).stdout.splitlines()]
    assert len(sections) == 1 and sections[0]["conversation_id"] == ident
    assert sections[0]["offloaded_at"] == text.splitlines()[0].removeprefix("## Offloaded at ")
    speakers = {entry["speaker"] for entry in sections[0]["entries"]}
    assert {"Human", "AI tool call", "Tool"} <= speakers
    assert cli.inproc("history", "--path").check(0).stdout.strip() == str(log)

    listing = cli.inproc("sessions", "--json").check(0).stdout.splitlines()
    row = json.loads(listing[0])
    assert row["id"] == ident and row["summaries"] == 1 and row["reclaimed"] >= 1


def test_history_of_a_session_without_summaries_says_so(cli: Cli):
    cli("run", "hi").check(0)
    result = cli.inproc("history").check(0)
    assert result.stdout == "" and "has no offload log yet" in result.stderr
    assert cli.inproc("history", "nosuch").check(2).stderr.startswith("xun: no session 'nosuch'")


def test_context_overflow_gets_an_emergency_summary_and_the_call_is_retried(cli: Cli, offline_server_factory):
    _files(cli, 2)
    first = cli("run", "--json", "read part1.txt").check(0)
    total = first.of("usage")[-1]["total_tokens"]
    # A server whose window the first turn fits in but the second one's tool result does not, and which
    # does not say its window: xun cannot know it before the server's 400, which is what fires. The
    # threshold is the whole window, so the policy stays quiet once the window is learned.
    window = total + 500
    server = offline_server_factory(context_window=window)
    second = cli(
        "run",
        "--json",
        "--resume",
        "--base-url",
        server.base_url,
        "--set",
        "auto_compact.threshold_ratio=1",
        "--",
        "read part2.txt",
    ).check(0)
    types = second.types()
    warning = next(w["message"] for w in second.of("warning") if "too long" in w["message"])
    assert "context length" in warning or "context_length" in warning
    assert f"window {window:,} (learned from the server's error)" in warning
    assert max(server.prompt_sizes) > window and server.prompt_sizes[-1] <= window  # refused once, then fitted
    summary = second.of("summary_finished")
    assert summary and summary[0]["trigger"] == "emergency" and summary[0]["status"] == "compacted"
    assert types.index("summary_finished") < len(types) - 1
    assert second.events[-1]["status"] == "ok"
    assert "part2.txt" in second.of("assistant_message")[-1]["content"]  # the retried call answered
    log = cli.state / "conversation_history" / f"{cli.only_session()['conversation_id']}.md"
    assert "line 0 of part 1" in log.read_text()


def test_compact_toolcall_reclaims_and_the_model_can_recover_the_original(cli: Cli, three_reads: Cli):
    _copy(three_reads, cli)
    result = cli("compact", "--toolcall", "--keep", "1").check(0)
    assert "[compaction] manual: reclaimed 2 old tool results" in result.stdout
    assert "saved in" in result.stderr
    saved = cli.only_session()
    placeholders = [m["raw"]["content"] for m in saved["messages"] if m.get("raw", {}).get("role") == "tool"]
    assert sum(p.startswith("[Compacted, ID: ") for p in placeholders) == 2
    assert json.loads(cli.inproc("sessions", "--json").check(0).stdout)["reclaimed"] == 2
    again = cli("compact", "--toolcall", "--keep", "1").check(0)
    assert "no old tool results to reclaim" in again.stdout

    recovered = cli("run", "--json", "--resume", "--", "recover the compacted result").check(0)
    call = recovered.of("tool_call_finished")[0]
    assert call["name"] == "extract_compacted_tool_result" and not call["is_error"]
    assert call["result_chars"] > 3000  # the whole original came back


def test_compact_with_focus_writes_a_summary_and_reports_it(cli: Cli, three_reads: Cli):
    _copy(three_reads, cli)
    before = cli.only_session()
    result = cli("compact", "--focus", "part2.txt", "--keep", "2").check(0)
    assert "[compaction] manual: summarising" in result.stdout and "(focus: part2.txt)" in result.stdout
    assert "[compaction] manual: Summarised" in result.stdout and "originals in " in result.stdout
    assert "offline demo model (scripted, not an LLM)" in result.stderr
    after = cli.only_session()
    assert len(after["messages"]) < len(before["messages"])
    system = after["messages"][0]
    assert system["kind"] == "system" and system["is_compressed"]
    assert "part2.txt" in system["content"]
    log = cli.state / "conversation_history" / f"{after['conversation_id']}.md"
    assert log.read_text().count("## Offloaded at ") == 1
    # Compacting again has too little to condense: the summary would not be shorter, so it fails, exit 1.
    failed = cli("compact", "--json", "--keep", "1").check(1)
    assert failed.types() == ["summary_started", "compaction_failed"]
    assert failed.of("compaction_failed")[0]["trigger"] == "manual"
    assert "shorter" in failed.of("compaction_failed")[0]["reason"]
    assert cli.only_session()["messages"] == after["messages"]


def test_compact_errors(cli: Cli):
    assert "no saved session" in cli.inproc("compact").check(2).stderr
    both = cli.inproc("compact", "--toolcall", "--focus", "x").check(2)
    assert "--focus is for summaries" in both.stderr
    cli("run", "hi").check(0)
    short = cli.inproc("compact").check(0)
    assert "skipped: Nothing to condense" in short.stdout
    assert cli.inproc("compact", "nosuch").check(2).stderr.startswith("xun: no session 'nosuch'")


def test_compact_toolcall_reclaims_large_call_arguments_and_says_how_many(cli: Cli):
    texts = [" ".join(f"note{n}-word-{i}" for i in range(70)) for n in range(3)]
    cli("run", "--yes", "--", f"write `{texts[0]}` to n0.txt").check(0)
    for n in (1, 2):
        cli("run", "--yes", "--resume", "--", f"write `{texts[n]}` to n{n}.txt").check(0)
    result = cli("compact", "--toolcall", "--keep", "2", "--json").check(0)
    event = result.of("tool_results_reclaimed")[0]
    assert event["arguments"] == 1 and event["count"] == 1 and event["ids"][0].endswith(":arguments")
    text = cli("compact", "--toolcall", "--keep", "1").check(0)
    assert "[compaction] manual: reclaimed the arguments of 1 old call (" in text.stdout
    saved = cli.only_session()
    calls = [c for m in saved["messages"] for c in m.get("raw", {}).get("tool_calls") or ()]
    assert [json.loads(c["function"]["arguments"])["path"] for c in calls] == ["n0.txt", "n1.txt", "n2.txt"]
    assert ["[Compacted, ID: " in c["function"]["arguments"] for c in calls] == [True, True, False]
    archive = saved["compacted_toolcalls"]
    assert [archive[f"{c['id']}:arguments"]["kind"] for c in calls[:2]] == ["arguments", "arguments"]
    assert [json.loads(archive[f"{c['id']}:arguments"]["original"])["content"] for c in calls[:2]] == texts[:2]
    hits = cli.inproc("history", "search", "note1-word-42", "--json").check(0).events
    assert [(h["source"], h["role"], h["tool_call_id"]) for h in hits] == [
        ("reclaimed", "tool_call", f"{calls[1]['id']}:arguments")
    ]
