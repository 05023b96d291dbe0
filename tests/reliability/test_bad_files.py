"""Bad files and a hostile `.xun` folder: the app still starts or the turn goes on, and says what is wrong.

Corrupt, truncated and foreign session files; a directory, a FIFO or a device where a file should be;
a file where a folder should be; a full disk (`/dev/full` symlinks, a tiny tmpfs when it can be mounted,
and RLIMIT_FSIZE in a subprocess); an invalid config; a `compression.prompt_files` entry that does not
exist; a model that calls a tool it was not offered or sends arguments that are not JSON. The tests run
as root, so permission bits prove nothing here: every "unreadable" case uses one of the means above.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from xun.compact.summary import compact_conversation
from xun.agent.config import ConfigError, load_config
from xun.context.conversation import FORMAT_VERSION, Conversation
from xun.base.errors import SessionFormatError
from xun.agent.launch import LATEST, open_session
from xun.context.offload import append_offload, read_offload_log
from xun.context.messages import UserMessage
from xun.context.sessions import SessionStore

from .helpers import make_agent, write_files

HANG_SECONDS = 5


def returns_promptly(call, *args):
    """Run `call` in a daemon thread: (its result, or the exception it raised); fails if it blocks."""
    box: dict = {}

    def run():
        try:
            box["value"] = call(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    assert not thread.is_alive(), f"{getattr(call, '__qualname__', call)} blocked for {HANG_SECONDS}s"
    return box.get("value"), box.get("error")


def saved_session(workdir: Path, conversation_id: str = "good", turns: int = 3) -> Path:
    store = SessionStore(workdir)
    conversation = store.new()
    conversation.conversation_id = conversation_id
    conversation.set_system_message_content("You are a test.")
    for i in range(turns):
        conversation.add_user_message(f"question {i}")
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                ],
            }
        )
        conversation.add_tool_result(f"c{i}", f"the long output of call {i} " * 20)
        conversation.add_agent_message({"role": "assistant", "content": f"answer {i}"})
    conversation.reclaim_tool_results(keep_max=1)  # an archive of reclaimed originals at the end
    return store.save(conversation)


# ------------------------------------------------------------------------------------------ session files


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("truncated", lambda good: good[: len(good) // 2], "not valid JSON"),
        ("empty", lambda good: b"", "not valid JSON"),
        ("binary", lambda good: bytes(range(256)), "not UTF-8"),
        ("foreign_json", lambda good: b'{"name": "some-package", "version": "1.0.0"}', "not a xun session"),
        (
            "newer",
            lambda good: good.replace(b'"format_version":%d' % FORMAT_VERSION, b'"format_version":99', 1),
            "newer xun",
        ),
        ("torn_archive", lambda good: good[:-40], "truncated"),
    ],
)
def test_a_corrupt_or_foreign_session_is_named_and_the_app_still_starts(tmp_path, name, content, reason):
    good = saved_session(tmp_path).read_bytes()
    bad = SessionStore(tmp_path).root / f"{name}.json"
    bad.write_bytes(content(good))
    os.utime(bad, (2e9, 2e9))  # the newest file: what --resume would pick by time
    store = SessionStore(tmp_path)
    with pytest.raises(SessionFormatError) as caught:
        store.load(name)
    assert str(bad) in str(caught.value) and reason in str(caught.value)
    assert bad.read_bytes() == content(good)  # never modified
    listed = [info.conversation_id for info in store.list()]
    assert "good" in listed
    if name not in ("newer", "torn_archive"):  # their head line reads: listed, and the load names the damage
        assert name not in listed and any(path == bad for path, _ in store.unreadable())
    with open_session(tmp_path, environ={}) as session:  # a new session starts beside the damage
        assert session.conversation.messages == []
    with open_session(tmp_path, resume="good", environ={}) as session:
        assert session.conversation.messages[-1].raw["content"] == "answer 2"
        assert session.conversation.reclaimed_original("c0").startswith("the long output of call 0")


def test_resume_latest_names_a_damaged_newest_session(tmp_path):
    path = saved_session(tmp_path)
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(SessionFormatError, match=str(path)):
        open_session(tmp_path, resume=LATEST, environ={})


def test_a_directory_where_the_session_file_should_be(tmp_path):
    saved_session(tmp_path)
    store = SessionStore(tmp_path)
    (store.root / "folder.json").mkdir()
    with pytest.raises(SessionFormatError, match="cannot read the file"):
        store.load("folder")
    assert [i.conversation_id for i in store.list()] == ["good"]
    assert [p.name for p, _ in store.unreadable()] == ["folder.json"]


def test_a_symlink_loop_where_the_session_file_should_be(tmp_path):
    saved_session(tmp_path)
    store = SessionStore(tmp_path)
    os.symlink("loop.json", store.root / "loop.json")
    with pytest.raises((FileNotFoundError, SessionFormatError)):
        store.load("loop")
    assert [i.conversation_id for i in store.list()] == ["good"]
    [(path, reason)] = store.unreadable()
    assert path.name == "loop.json" and "Too many levels of symbolic links" in reason


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_where_the_session_file_should_be_neither_blocks_nor_loads(tmp_path, kind):
    saved_session(tmp_path)
    store = SessionStore(tmp_path)
    odd = store.root / "odd.json"
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        os.symlink("/dev/zero", odd)  # endless zeros: reading it whole would never finish
    _, error = returns_promptly(store.load, "odd")
    assert isinstance(error, SessionFormatError) and "not a regular file" in str(error)
    infos, error = returns_promptly(store.list)
    assert error is None and [i.conversation_id for i in infos] == ["good"]
    bad, _ = returns_promptly(store.unreadable)
    assert [p.name for p in (path for path, _ in bad)] == ["odd.json"]
    latest, error = returns_promptly(store.latest)
    assert error is None and latest.conversation_id == "good"


# ------------------------------------------------------------------------------------- the .xun folder


def test_a_file_where_the_xun_folder_should_be_is_a_clear_startup_error(tmp_path):
    (tmp_path / ".xun").write_text("not a folder")
    with pytest.raises(ConfigError, match=r"\.xun/config\.toml: cannot read the file: Not a directory"):
        open_session(tmp_path, environ={})


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_as_the_project_config_is_a_clear_error(tmp_path, kind):
    (tmp_path / ".xun").mkdir()
    config = tmp_path / ".xun" / "config.toml"
    os.mkfifo(config) if kind == "fifo" else os.symlink("/dev/zero", config)
    _, error = returns_promptly(load_config, tmp_path, [], {})
    assert isinstance(error, ConfigError) and str(error).startswith(str(config)) and "not a regular file" in str(error)


async def test_files_where_the_state_folders_should_be(offline_server, tmp_path):
    """sessions/, conversation_history/ and history.db are not what they should be: the turns and the
    summaries go on, every problem is a warning or a clear save error, and nothing is lost."""
    state = tmp_path / ".xun"
    state.mkdir()
    (state / "conversation_history").write_text("a file, not a folder")
    (state / "history.db").mkdir()
    write_files(tmp_path, 8)
    agent, rec, store = make_agent(
        offline_server,
        tmp_path,
        auto_compact__token_threshold=3000,
        auto_compact__toolcall_keep_max=2,
        auto_compact__summary_keep_max=4,
        auto_compact__policy="escalation",
    )  # summaries early (cache-aware reclaims first)
    for i in range(1, 9):
        assert (await agent.run(f"please read f{i}.py")).status == "ok"
    assert rec.of("summary_finished")
    warnings = [w.message for w in rec.of("warning")]
    assert any("could not write the offload log" in w and "conversation_history" in w for w in warnings)
    assert agent.conversation.kept_originals  # the summarised originals stay in the session
    assert any("history" in w for w in warnings)  # the search index's problem is said too
    (state / "sessions").write_text("a file, not a folder")
    with pytest.raises(OSError) as caught:
        store.save(agent.conversation)
    assert "sessions" in str(caught.value)
    (state / "sessions").unlink()
    path = store.save(agent.conversation)  # once the folder can be made, the session saves whole
    loaded = Conversation().load(path)
    texts = [m.text for kept in loaded.kept_originals for m in kept["messages"] if isinstance(m, UserMessage)]
    assert "please read f1.py" in texts


async def test_an_unwritable_offload_log_keeps_the_originals_in_the_session(offline_server, tmp_path):
    """The log's name links to /dev/full: a link, which xun no longer follows in its folder (issue 13,
    item 5), so the log cannot be written; a really full disk is `test_a_tiny_tmpfs_as_the_state_folder` below."""
    write_files(tmp_path, 6)
    agent, rec, store = make_agent(offline_server, tmp_path, conversation_id="full")
    folder = tmp_path / ".xun" / "conversation_history"
    folder.mkdir(parents=True)
    os.symlink("/dev/full", folder / "full.md")
    for i in range(1, 7):
        await agent.run(f"please read f{i}.py")
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted and "symbolic link" in result.warning
    assert any("symbolic link" in w.message for w in rec.of("warning"))
    assert len(agent.conversation.kept_originals[0]["messages"]) == result.condensed_count
    loaded = Conversation().load(store.save(agent.conversation))
    assert loaded.kept_originals and loaded.compaction_log[-1]["warning"]


async def test_an_unusable_history_index_is_a_warning(offline_server, tmp_path):
    """history.db links to /dev/full: refused (a link in xun's folder), a warning, the turn goes on."""
    write_files(tmp_path, 6)
    (tmp_path / ".xun").mkdir()
    os.symlink("/dev/full", tmp_path / ".xun" / "history.db")
    agent, rec, _ = make_agent(offline_server, tmp_path)
    for i in range(1, 7):
        await agent.run(f"please read f{i}.py")
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted and result.offload_path  # the log is fine; only the index failed
    assert result.warning and "history" in result.warning
    assert (await agent.run("still fine?")).status == "ok"


SMALL_DISK_SCRIPT = textwrap.dedent("""
    import asyncio, json, resource, signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from reliability.helpers import make_agent, write_files
    from xun.offline import OfflineServer

    async def main(workdir, limit):
        write_files(workdir, 10)
        with OfflineServer() as server:
            agent, rec, store = make_agent(server, workdir, conversation_id="small", auto_compact__token_threshold=3000,
                                           auto_compact__toolcall_keep_max=2, auto_compact__summary_keep_max=4)
            saved, failures, statuses = None, [], []
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            for i in range(1, 11):
                statuses.append((await agent.run(f"please read f{i}.py")).status)
                try:
                    store.save(agent.conversation)
                    saved = len(agent.conversation.messages)
                except OSError as exc:
                    failures.append(str(exc))
            print(json.dumps({"statuses": statuses, "failures": failures, "saved_messages": saved,
                              "warnings": [e.message for e in rec.of("warning")]}))

    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[3])))
""")


def test_a_disk_that_fills_up_never_tears_a_saved_session(tmp_path):
    """RLIMIT_FSIZE in a subprocess: once the session outgrows the limit its saves fail cleanly (the
    last good file stays, no temporary file is left) and the turns go on."""
    tests = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", SMALL_DISK_SCRIPT, str(tmp_path), str(tests), "12000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["statuses"] == ["ok"] * 10
    assert report["failures"] and all("File too large" in f for f in report["failures"])
    assert report["saved_messages"]  # some saves fit before the limit
    store = SessionStore(tmp_path)
    loaded = store.load("small")
    assert len(loaded.messages) == report["saved_messages"] or loaded.messages
    assert not list(store.root.glob("*.tmp"))


def test_a_tiny_tmpfs_as_the_state_folder(tmp_path):
    """A real ENOSPC: XUN_HOME on a 48 KiB tmpfs (skipped where mounting is not allowed)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        script = SMALL_DISK_SCRIPT.replace("resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))", "pass")
        env = {**os.environ, "XUN_HOME": str(mount / "state")}
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), str(Path(__file__).resolve().parents[1]), "0"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["statuses"] == ["ok"] * 10
        assert report["failures"] and all("No space left on device" in f for f in report["failures"])
        assert any("No space left on device" in w or "history" in w for w in report["warnings"])
        store = SessionStore(tmp_path)
        store.root = mount / "state" / "sessions"
        assert store.load("small").messages
        assert not list(store.root.glob("*.tmp"))
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


# --------------------------------------------------------------------- project files and the summary prompt


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_an_odd_agents_md_is_skipped_without_blocking(offline_server, tmp_path, kind):
    target = tmp_path / "AGENTS.md"
    {"fifo": os.mkfifo, "device": lambda p: os.symlink("/dev/zero", p), "directory": os.mkdir}[kind](target)
    agent, _, _ = make_agent(offline_server, tmp_path)
    _, error = returns_promptly(agent.sync_project_instructions)
    assert error is None and "AGENTS.md" not in agent.conversation.messages[0].persist_sections


@pytest.mark.parametrize("kind", ["missing", "fifo", "directory"])
async def test_a_bad_prompt_file_is_named_and_the_summary_still_runs(offline_server, tmp_path, kind):
    write_files(tmp_path, 4)
    name = "prompts/extra.md"
    if kind != "missing":
        (tmp_path / "prompts").mkdir()
        os.mkfifo(tmp_path / name) if kind == "fifo" else (tmp_path / name).mkdir()
    agent, rec, _ = make_agent(offline_server, tmp_path, compression__prompt_files=[name, "also-missing.md"])
    for i in range(1, 5):
        await agent.run(f"please read f{i}.py")
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted
    warnings = [w.message for w in rec.of("warning")]
    assert any(w.startswith("compression.prompt_files: cannot read") and "extra.md" in w for w in warnings), warnings
    assert any("also-missing.md" in w for w in warnings)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_odd_offload_log_fails_the_append_and_reads_as_nothing(tmp_path, kind):
    log = tmp_path / "x.md"
    os.mkfifo(log) if kind == "fifo" else os.symlink("/dev/zero", log)
    _, error = returns_promptly(lambda: append_offload(log, [UserMessage("hi")], conversation_id="x"))
    assert isinstance(error, OSError)
    _, error = returns_promptly(read_offload_log, log)
    assert isinstance(error, OSError) and "not a regular file" in str(error)


async def test_a_fifo_as_a_write_target_is_refused_before_asking(offline_server, tmp_path):
    os.mkfifo(tmp_path / "notes.txt")
    asked = []

    async def confirm(request):
        asked.append(request)
        from xun.agent.tools import Decision

        return Decision.ALLOW_ONCE

    agent, rec, _ = make_agent(offline_server, tmp_path)
    agent.confirm = confirm
    finished = await agent.run("write `hello` to notes.txt")
    assert finished.status == "ok" and not asked
    [done] = rec.of("tool_call_finished")
    assert done.is_error and "not a regular file" in done.error


# ---------------------------------------------------------------------------------- config and the model


def test_an_invalid_project_config_names_the_file_and_the_key(tmp_path):
    (tmp_path / ".xun").mkdir()
    (tmp_path / ".xun" / "config.toml").write_text('[auto_compact]\ntoken_threshold = "lots"\n')
    with pytest.raises(ConfigError) as caught:
        open_session(tmp_path, environ={})
    message = str(caught.value)
    assert str(tmp_path / ".xun" / "config.toml") in message and "auto_compact.token_threshold" in message


async def test_a_model_calling_a_tool_it_was_not_offered(offline_server, tmp_path):
    agent, rec, store = make_agent(offline_server, tmp_path)
    finished = await agent.run("call the missing tool delete_everything")
    assert finished.status == "ok" and finished.iterations == 2  # the loop went on to an answer
    [done] = rec.of("tool_call_finished")
    assert done.name == "delete_everything" and done.is_error
    assert "unknown tool 'delete_everything'" in done.error and "read_file" in done.error
    assert "unknown tool" in agent.last_reply()  # the model was told, and said so
    store.load(store.save(agent.conversation).stem)


async def test_a_model_sending_arguments_that_are_not_json(offline_server, tmp_path):
    write_files(tmp_path, 1)
    agent, rec, _ = make_agent(offline_server, tmp_path)
    finished = await agent.run("please read f1.py with broken arguments")
    assert finished.status == "ok"
    [started] = rec.of("tool_call_started")
    with pytest.raises(ValueError):
        json.loads(started.arguments)
    [done] = rec.of("tool_call_finished")
    assert done.is_error and "the arguments for read_file are not valid JSON" in done.error
    assert "read_file(path, offset=0, limit=None)" in done.error  # it says what a good call looks like
    tool_message = agent.conversation.messages[-2].raw
    assert tool_message["role"] == "tool" and tool_message["content"].startswith("[Error]")


async def test_a_prompt_file_that_is_not_utf8_is_named_and_the_summary_still_runs(offline_server, tmp_path):
    write_files(tmp_path, 4)
    (tmp_path / "latin1.md").write_bytes("Résumé des règles\n".encode("latin-1"))
    agent, rec, _ = make_agent(offline_server, tmp_path, compression__prompt_files=["latin1.md"])
    for i in range(1, 5):
        await agent.run(f"please read f{i}.py")
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted
    assert any("latin1.md" in w.message and "UTF-8" in w.message for w in rec.of("warning"))
