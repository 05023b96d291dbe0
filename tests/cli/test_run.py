"""`xun run`: text and --json output, confirmations, prompts, resuming, exit codes."""

from __future__ import annotations

import json
import os
import pty
import shlex
import signal
import subprocess

import pytest

from .helpers import Cli, read_lines_until

OFFLINE_NOTICE = "offline demo model (scripted, not an LLM)"


def test_text_mode_streams_the_reply_to_stdout_and_notes_to_stderr(cli: Cli):
    cli.write("notes.txt", "the launch code is 4711\n")
    result = cli("run", "read notes.txt").check(0)
    assert "read_file" in result.stdout and "4711" in result.stdout  # the reply quotes the tool output
    assert result.stdout.endswith("\n")
    assert "[tool] read_file" not in result.stdout
    assert '[tool] read_file path="notes.txt"' in result.stderr
    assert "[tool] read_file -> " in result.stderr
    assert OFFLINE_NOTICE in result.stderr and "no API key is set ($OPENAI_API_KEY)" in result.stderr
    assert "http://127.0.0.1:" in result.stderr
    assert "Traceback" not in result.stderr
    saved = cli.only_session()
    roles = [m.get("raw", {}).get("role", m["kind"]) for m in saved["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert f"xun run --resume {saved['conversation_id']}" in result.stderr


def test_json_mode_prints_exactly_one_event_object_per_line(cli: Cli):
    cli.write("a.txt", "alpha\n")
    result = cli("run", "--json", "read a.txt").check(0)
    events = result.events  # every line parses (fails otherwise)
    types = result.types()
    assert types[0] == "turn_started" and types[-1] == "turn_finished"
    for kind in ("tool_call_started", "tool_call_finished", "assistant_message", "usage", "text_delta"):
        assert kind in types
    assert types.index("tool_call_started") < types.index("tool_call_finished") < types.index("text_delta")
    assert events[0]["prompt"] == "read a.txt"
    finished = result.of("tool_call_finished")[0]
    assert finished["name"] == "read_file" and json.loads(finished["arguments"])["path"] == "a.txt"
    assert finished["is_error"] is False and finished["result_chars"] > 0
    usage = result.of("usage")[-1]
    assert usage["total_tokens"] > 0 and usage["threshold"] == 192000
    assert events[-1] == {
        "type": "turn_finished",
        "status": "ok",
        "iterations": 2,
        "error": None,
        "restored_prompt": None,
    }
    lines = result.stdout.splitlines()
    repeats = [a for a, b in zip(lines, lines[1:]) if a == b and json.loads(a)["type"] == "usage"]
    assert not repeats, "a usage event is not sent twice in a row"
    text = "".join(e["text"] for e in result.of("text_delta"))
    assert text == result.of("assistant_message")[-1]["content"]
    assert OFFLINE_NOTICE in result.stderr  # notes go to stderr, never into the JSON stream


def test_headless_write_is_refused_with_an_error_result_and_a_warning_event(cli: Cli):
    result = cli("run", "--json", "write hello to out.txt").check(0)
    finished = result.of("tool_call_finished")[0]
    assert finished["name"] == "write_file" and finished["denied"] and finished["is_error"]
    assert finished["error"].startswith("[Error]") and "confirmation" in finished["error"]
    warnings = [w["message"] for w in result.of("warning")]
    assert any("write_file was refused" in w and "--yes" in w for w in warnings), warnings
    assert result.types().index("tool_call_finished") < result.types().index("warning")
    assert not (cli.workdir / "out.txt").exists()
    # the model saw the [Error] result
    saved = cli.only_session()
    tool_results = [m["raw"]["content"] for m in saved["messages"] if m.get("raw", {}).get("role") == "tool"]
    assert tool_results and tool_results[0].startswith("[Error]")


def test_yes_and_auto_confirm_allow_write_file_headless(cli: Cli):
    cli("run", "--yes", "write hello to out.txt").check(0)
    assert (cli.workdir / "out.txt").read_text() == "hello"
    cli.inproc("run", "--set", "auto_confirm=true", "write again to two.txt").check(0)
    assert (cli.workdir / "two.txt").read_text() == "again"


def _run_on_a_terminal(cli: Cli, answer: bytes | int, *args: str) -> tuple[int, str, str]:
    """`xun run` with a pseudo-terminal as stdin; `answer` is typed when the prompt appears (or, as a
    number, sent as that signal)."""
    master, slave = pty.openpty()
    try:
        process = cli.popen(*args, stdin=slave)
        os.close(slave)
        import selectors
        import time

        selector = selectors.DefaultSelector()
        selector.register(process.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + 20
        buffer = ""
        while time.monotonic() < deadline and "Allow?" not in buffer:
            if selector.select(deadline - time.monotonic()):
                chunk = os.read(process.stderr.fileno(), 4096).decode()
                if not chunk:
                    break
                buffer += chunk
        assert "Allow? [y] once, [s] every " in buffer, buffer
        if isinstance(answer, int):
            process.send_signal(answer)
        else:
            os.write(master, answer)
        stdout, rest = process.communicate(timeout=20)
        return process.returncode, stdout, buffer + rest
    finally:
        os.close(master)


def test_on_a_terminal_the_user_is_asked_and_yes_runs_the_tool(cli: Cli):
    code, stdout, stderr = _run_on_a_terminal(cli, b"y\n", "run", "write hello to asked.txt")
    assert code == 0, stderr
    assert "[confirm] " in stderr and "asked.txt" in stderr
    assert (cli.workdir / "asked.txt").read_text() == "hello"


def test_on_a_terminal_no_refuses_the_tool(cli: Cli):
    code, stdout, stderr = _run_on_a_terminal(cli, b"n\n", "run", "write hello to asked.txt")
    assert code == 0, stderr
    assert not (cli.workdir / "asked.txt").exists()
    assert "[tool] write_file refused: [Error] the user declined" in stderr
    assert "--yes" not in stderr.split("[tool] write_file refused")[1].splitlines()[0]  # no headless hint


def test_ctrl_c_at_the_confirmation_prompt_stops_and_saves(cli: Cli):
    code, stdout, stderr = _run_on_a_terminal(cli, signal.SIGINT, "run", "write hello to asked.txt")
    assert code == 130, stderr
    after = stderr.split("call this session, [N]o: ", 1)[1]
    assert after.startswith("\n")  # the next note starts on a line of its own
    assert "interrupted; session" in after and "Traceback" not in stderr
    assert not (cli.workdir / "asked.txt").exists()
    roles = [m.get("raw", {}).get("role", m["kind"]) for m in cli.only_session()["messages"]]
    assert roles == ["user", "assistant", "tool"]  # the call is answered ([Cancelled]): a valid history


def test_prompt_from_standard_input(cli: Cli):
    cli.write("src/main.py", "print(1)\n")
    result = cli("run", "--json", input="list src\n").check(0)
    assert result.events[0]["prompt"] == "list src"
    assert result.of("tool_call_started")[0]["name"] == "list_directory"
    assert cli.inproc("run", "--json", "-", input="hi").check(0).events[0]["prompt"] == "hi"


def test_missing_or_empty_prompt_is_a_usage_error(cli: Cli):
    empty = cli.inproc("run", "   ").check(2)
    assert empty.stderr.strip() == "xun run: the prompt is empty"
    assert cli.inproc("run", input="").check(2).stderr.startswith("xun run: the prompt is empty")
    assert cli.session_files() == []


def test_max_iterations_reached_is_exit_1(cli: Cli):
    cli.write("a.txt", "alpha\n")
    result = cli("run", "--json", "--max-iterations", "1", "read a.txt").check(1)
    assert result.events[-1]["status"] == "max_iterations"
    assert any("max_iterations" in e["message"] for e in result.of("info"))
    assert cli.session_files()  # saved all the same


def test_resume_continues_the_newest_session_or_a_named_one(cli: Cli):
    cli("run", "--json", "hi").check(0)
    ident = cli.only_session()["conversation_id"]
    cli("run", "--resume", "--json", "hi again").check(0)  # not an id (a space): the prompt, newest session
    assert len(cli.session_files()) == 1 and len(cli.only_session()["messages"]) == 4
    cli("run", "--resume", ident[:8], "and once more").check(0)  # a unique prefix names it
    cli("--resume", "run", "-c", "--json", "top-level resume").check(0)
    saved = cli.only_session()
    assert saved["conversation_id"] == ident
    texts = [m["text"] for m in saved["messages"] if m["kind"] == "user"]
    assert texts == ["hi", "hi again", "and once more", "top-level resume"]
    cli("run", "--json", "a new one").check(0)  # without --resume: a new session
    assert len(cli.session_files()) == 2


def test_resume_errors_are_usage_errors(cli: Cli):
    none_yet = cli.inproc("run", "--resume", "--", "hi").check(2)
    assert "there is no saved session to resume" in none_yet.stderr
    cli("run", "hi").check(0)
    unknown = cli.inproc("run", "--resume", "nosuchsession", "hi").check(2)
    assert unknown.stderr.strip().startswith("xun: no session 'nosuchsession' in ")
    invalid = cli.inproc("run", "--resume", "../etc", "hi").check(2)
    assert "not a valid session id" in invalid.stderr
    forgot = cli.inproc("run", "--resume", "abc").check(2)  # an id-shaped word and no prompt: say what happened
    assert "--resume took 'abc' as a session id" in forgot.stderr
    for result in (none_yet, unknown, invalid, forgot):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_resume_hint_works_from_where_it_was_printed_with_another_workdir(cli: Cli):
    """Trial D #22: `xun --workdir DIR run` said "continue it with: xun run --resume ID PROMPT", which, run
    from the same directory, found no session (it looked in the current folder's `.xun`)."""
    project = cli.root / "a project with spaces"
    project.mkdir()
    result = cli("--workdir", str(project), "run", "hi").check(0)
    hint = result.stderr.split("continue it with: ", 1)[1].strip()
    assert f"--workdir '{project}'" in hint, hint
    args = shlex.split(hint)
    assert args[:2] == ["xun", "run"] and args[-1] == "PROMPT", args
    cli(*args[1:-1], "and again").check(0)  # from the same directory, as printed
    texts = [
        m["text"]
        for m in json.loads(next((project / ".xun" / "sessions").glob("*.json")).read_text())["messages"]
        if m["kind"] == "user"
    ]
    assert texts == ["hi", "and again"]
    here = cli("run", "in the workspace").check(0)  # no --workdir where the session's folder is the current one
    assert "--workdir" not in here.stderr


def test_a_call_nobody_can_confirm_ends_the_turn_when_the_model_tries_again(cli: Cli):
    """Trial D #10: without a terminal (and without --yes) every write is refused; the offline planner
    tried again and again, 500 model calls and 48 M prompt tokens. The model is told once; the next round
    that asks for a confirmation ends the turn, with exit 1, and every call keeps its result."""
    result = cli("run", "write files step1 to step2").check(1)
    assert result.stderr.count("[tool] write_file refused") == 2, result.stderr
    assert (
        "[error] the turn stopped: write_file needed the user's confirmation again, and nobody can be asked"
        in result.stderr
    )
    messages = [m.get("raw", {}) for m in cli.only_session()["messages"]]
    calls = [call["id"] for m in messages for call in m.get("tool_calls") or ()]
    answered = [m["tool_call_id"] for m in messages if m.get("role") == "tool"]
    assert len(calls) == 2 and answered == calls
    assert not (cli.workdir / "step1.txt").exists()


def test_final_model_failure_is_exit_1_and_the_prompt_is_kept(cli: Cli):
    result = cli("run", "--json", "--set", "retry.attempts=1", "hi", env={"XUN_OFFLINE_FAULTS": "500@1"}).check(1)
    assert result.of("error") and result.events[-1]["status"] == "error"
    assert [m["text"] for m in cli.only_session()["messages"] if m["kind"] == "user"] == ["hi"]
    text = cli.inproc(
        "run", "--set", "retry.attempts=1", "--resume", "--", "again", env={"XUN_OFFLINE_FAULTS": "500@1"}
    ).check(1)
    assert "[error] the model call failed after 1 attempts" in text.stderr


def test_a_closed_stdout_pipe_does_not_break_the_turn(cli: Cli):
    process = cli.popen("run", "--json", "count to 3000")
    read_lines_until(process, lambda line: '"text_delta"' in line)
    process.stdout.close()
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    assert cli.session_files()


def test_base_url_and_model_options_reach_the_session(cli: Cli, offline_server):
    result = cli("run", "--json", "--base-url", offline_server.base_url, "--model", "my-model", "hi").check(0)
    assert OFFLINE_NOTICE not in result.stderr  # an explicit server: no in-process demo model
    assert offline_server.request_count == 1
    result = cli.inproc("run", "--base-url", "ftp://nowhere", "hi").check(2)
    assert "provider.base_url" in result.stderr and "command line" in result.stderr


def test_workdir_option(cli: Cli, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "x.txt").write_text("in elsewhere\n")
    cli("run", "--workdir", str(other), "read x.txt").check(0)
    assert list((other / ".xun" / "sessions").glob("*.json"))
    assert not cli.state.exists()
    missing = cli.inproc("run", "--workdir", str(tmp_path / "missing"), "hi").check(2)
    assert "not a directory" in missing.stderr


def test_the_offline_subcommand_still_passes_its_options_through(cli: Cli):
    done = subprocess.run(
        cli.command("offline-server", "--port", "not-a-port"), env=cli.env, capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 2 and "port" in done.stderr


def test_json_usage_events_carry_the_session_cost_billed_from_the_servers_cache_figures(cli: Cli):
    """`xun run --json` on the offline server with its prefix cache: each server usage event's
    `session_cost` is uncached input x input + cached x cached_input + completion x output over the
    server's reports so far, and it goes on across a resume."""
    cli.write("a.txt", "alpha\n" * 200)
    cli.write("b.txt", "beta\n" * 200)
    config = cli.home / ".config" / "xun" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[pricing."xun-offline"]\ninput = 3.0\ncached_input = 0.3\noutput = 12.0\n', encoding="utf-8")
    env = {"XUN_OFFLINE_CACHE_TTL": "300"}
    reports: list[dict] = []
    for args in (("run", "--json", "read a.txt"), ("run", "--resume", "--json", "read b.txt")):
        result = cli(*args, env=env).check(0)
        for event in result.of("usage"):
            if event["source"] != "server":
                continue
            reports.append(event)
            prompt = sum(r["prompt_tokens"] for r in reports)
            cached = sum(r["cached_tokens"] for r in reports)
            completion = sum(r["completion_tokens"] for r in reports)
            assert event["session_totals"] == {
                "calls": len(reports),
                "prompt": prompt,
                "completion": completion,
                "cached_input": cached,
            }
            assert event["session_cost"] == pytest.approx(
                ((prompt - cached) * 3 + cached * 0.3 + completion * 12) / 1e6
            )
    assert len(reports) >= 4 and reports[-1]["cached_tokens"] > 0
    assert "[usage] session:" not in result.stdout  # --json: only the events on stdout
