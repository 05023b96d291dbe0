"""Sessions on disk: the format, atomic saves, legacy files, and clear errors for bad ones."""

import json
import os
import stat
import time

import pytest

from xun import atomic
from xun.conversation import FORMAT_VERSION, Conversation, SessionFormatError
from xun.conversation_message import RawOpenAIMessage, SystemPrompt, UserMessage
from xun.sessions import STALE_TEMP_SECONDS, SessionStore, check_session_id

from .builders import long_conversation, tool_round


def compacted_session():
    c = long_conversation(rounds=20)
    c.set_persistent_section("AGENTS.md", "rules")
    c.compact_toolcall(keep_max=3)
    c.compact(lambda msgs: "the summary", keep_recent=5)
    for i in range(8):
        tool_round(c, 200 + i)
    c.compact_toolcall(keep_max=3)
    c.restore_toolcall("call_201")
    c.total_tokens = 4321
    c.compaction_log.append({"kind": "reclaim", "count": 3})
    return c


def test_dump_load_round_trip_keeps_everything(tmp_path):
    c = compacted_session()
    path = tmp_path / "s.json"
    c.dump(path)
    back = Conversation().load(path)
    assert back.completion_params() == c.completion_params()
    assert back.conversation_id == c.conversation_id and back.total_tokens == 4321
    assert back.compaction_counter == c.compaction_counter
    assert list(back.compacted_toolcalls) == list(c.compacted_toolcalls)
    for call_id in c.compacted_toolcalls:
        assert back.compacted_toolcall_result(call_id) == c.compacted_toolcall_result(call_id)
        assert back.compacted_toolcalls[call_id] == c.compacted_toolcalls[call_id]
    assert back.summarizations[0].summary_message == "the summary"
    assert back.compaction_log == [{"kind": "reclaim", "count": 3}]
    assert back.compact_toolcall(keep_max=3).reclaimed_count == 0  # the restored one stays pinned
    assert back.estimated_message_length() == c.estimated_message_length()
    # saved again without reading the archive, then read: still equal
    back.dump(path)
    again = Conversation().load(path)
    assert {k: again.compacted_toolcall_result(k) for k in again.compacted_toolcalls} == {
        k: c.compacted_toolcall_result(k) for k in c.compacted_toolcalls
    }


def test_file_format_fields_and_owner_only_mode(tmp_path):
    c = compacted_session()
    path = tmp_path / "s.json"
    c.dump(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = json.loads(path.read_text())  # one JSON document
    for key in ("format_version", "conversation_id", "tokens_used", "messages", "compacted_toolcalls",
                "compaction", "summarizations", "compaction_log"):
        assert key in data
    assert data["format_version"] == FORMAT_VERSION
    assert data["compaction"] == {"tool_rounds": 1, "summary_rounds": 1}
    assert data["summarizations"][0]["summary_message"] == "the summary"
    archive = data["compacted_toolcalls"]
    assert list(archive) == list(c.compacted_toolcalls) and data["compacted_count"] == len(archive)
    assert list(data)[-1] == "compacted_toolcalls"  # last, so a loader can leave it unparsed
    first = archive[next(iter(archive))]
    assert set(first) == {"tool", "arguments", "chars", "reclaimed_at", "original"}


def test_unicode_line_separators_in_originals_survive(tmp_path):
    c = Conversation()
    c.add_user_message("go")
    c.add_agent_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "u", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]})
    text = "a\u2028b\x85c\u2029d" * 100
    c.add_tool_result("u", text)
    c.add_user_message("next")
    c.compact_toolcall(keep_max=0)
    c.dump(tmp_path / "s.json")
    assert Conversation().load(tmp_path / "s.json").compacted_toolcall_result("u") == text


def test_dump_is_atomic_old_file_survives_a_failed_write(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    c = long_conversation(rounds=3)
    c.dump(path)
    before = path.read_bytes()
    c.add_user_message("more")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        c.dump(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]  # no temporary file left behind


PEER_FILE = {  # the shape xun-agent 1.4 writes: kind "tool" with a Result payload, originals inline
    "conversation_id": "peer1",
    "time": "2026-01-01 10:00:00",
    "tokens_used": 900,
    "messages": [
        {"kind": "system", "content": "role", "is_compressed": False, "persist_sections": {}},
        {"kind": "user", "text": "hi", "images": [], "response_schema": None, "is_synthetic": False},
        {"kind": "raw", "raw": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}},
        {"kind": "tool", "tool_call_id": "t1", "content": {"value": "[Compacted, ID: t1. ...]", "is_ok": True}},
    ],
    "compacted_toolcalls": {"t1": "the original text"},
    "compaction": {"tool_rounds": 1, "summary_rounds": 0},
}


def test_peer_session_files_are_migrated(tmp_path):
    path = tmp_path / "peer.json"
    path.write_text(json.dumps(PEER_FILE, indent=2))
    c = Conversation().load(path)
    assert c.conversation_id == "peer1" and c.total_tokens == 900
    assert c.messages[3] == RawOpenAIMessage({"role": "tool", "tool_call_id": "t1", "content": "[Compacted, ID: t1. ...]"})
    assert c.compacted_toolcall_result("t1") == "the original text"
    assert c.compaction_counter.tool_rounds == 1


def test_pre_typed_files_of_plain_openai_dicts_are_migrated(tmp_path):
    legacy = {"conversation_id": "old", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"}]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(legacy))
    c = Conversation().load(path)
    assert c.messages == [SystemPrompt("s"), UserMessage("u"), RawOpenAIMessage({"role": "assistant", "content": "a"})]


def valid_text():
    return compacted_session().dumps()


CORRUPTIONS = {
    "empty": lambda t: "",
    "truncated head": lambda t: t[: len(t.partition("\n")[0]) // 2],
    "truncated archive": lambda t: t[: len(t) - 40],
    "archive entry dropped": lambda t: t[: t.rindex(',"call_')] + "}}",
    "not json": lambda t: "hello there",
    "foreign json": lambda t: json.dumps({"name": "package.json"}),
    "messages not a list": lambda t: json.dumps({"format_version": 1, "messages": {}}),
    "bad message": lambda t: json.dumps({"format_version": 1, "messages": [{"kind": "user", "text": 5}]}),
    "newer format": lambda t: json.dumps({"format_version": 99, "messages": []}),
    "bad tokens": lambda t: json.dumps({"format_version": 1, "messages": [], "tokens_used": "many"}),
    "binary": lambda t: "\udcff",
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupt_files_raise_a_clear_error_and_stay_unchanged(tmp_path, name):
    path = tmp_path / "bad.json"
    text = CORRUPTIONS[name](valid_text())
    data = text.encode("utf-8", "surrogateescape")
    path.write_bytes(data)
    c = long_conversation(rounds=2)
    before = c.completion_params()
    with pytest.raises(SessionFormatError) as info:
        c.load(path)
    assert str(path) in str(info.value)
    assert info.value.reason
    assert path.read_bytes() == data
    assert c.completion_params() == before  # a failed load changes nothing


def test_missing_file_is_a_session_error(tmp_path):
    with pytest.raises(SessionFormatError, match="cannot read"):
        Conversation().load(tmp_path / "absent.json")


def test_store_lists_newest_first_and_loads_latest(tmp_path, monkeypatch):
    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    ids = []
    for n in range(3):
        c = store.new()
        c.add_user_message(f"session {n}")
        path = store.save(c)
        ids.append(c.conversation_id)
    assert path.parent == tmp_path / ".xun" / "sessions"
    infos = store.list()
    assert [i.conversation_id for i in infos] == ids[::-1]
    latest = store.latest()
    assert latest.conversation_id == ids[-1]
    assert latest.offload_dir == tmp_path / ".xun" / "conversation_history"
    (store.root / "junk.json").write_text("{not json")
    assert len(store.list()) == 3
    assert store.unreadable()[0][0].name == "junk.json"


def test_xun_home_replaces_dot_xun(tmp_path, monkeypatch):
    monkeypatch.setenv("XUN_HOME", str(tmp_path / "elsewhere"))
    store = SessionStore(tmp_path)
    c = store.new()
    assert store.save(c).parent == tmp_path / "elsewhere" / "sessions"


def test_the_sweeper_knows_the_real_temporary_name_of_an_atomic_write(tmp_path, monkeypatch):
    """The writer and the sweeper share one pattern: the name `write_text_atomic` really gives its
    temporary file (seen at the rename) is recognised, with the target's name."""
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        seen.append(os.path.basename(src))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    for name in ("s.json", "a.b-c_d.json", "notes"):
        atomic.write_text_atomic(tmp_path / name, "text")
    assert [atomic.temp_target(name) for name in seen] == ["s.json", "a.b-c_d.json", "notes"]
    assert all(name.startswith(".") and name.endswith(".tmp") for name in seen)


def _age(path, seconds=STALE_TEMP_SECONDS + 60):
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def test_the_store_removes_old_temporary_files_of_killed_saves_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    store.root.mkdir(parents=True)
    old = store.root / ".s1.json.ab12cd_9.tmp"  # a save killed before its rename, long ago
    fresh = store.root / ".s2.json.zz99yy00.tmp"  # maybe another xun process's save in progress
    foreign = [store.root / name for name in (
        "s1.json.ab12cd_9.tmp",  # no leading dot
        ".s1.json.ab12cd.tmp",  # not the eight random characters
        ".s1.json.AB12CD_9.tmp",  # mkstemp draws lower case only
        ".s1.json.ab12cd_9.tmp.bak",
        ".s1.json.ab12cd_9.TMP",
        ".notes.txt.ab12cd_9.tmp",  # a temporary file, but not of a session
        "keep.txt",
    )]
    for path in (old, fresh, *foreign):
        path.write_text("a private copy of a session")
    outside = tmp_path / "outside.json.ab12cd_9.tmp"
    outside.write_text("not the store's")
    link = store.root / ".s3.json.ab12cd_9.tmp"
    link.symlink_to(outside)
    folder = store.root / ".s4.json.ab12cd_9.tmp"
    folder.mkdir()
    for path in (old, *foreign, outside, link, folder):
        _age(path)

    c = store.new()
    store.save(c)
    assert not old.exists()
    assert fresh.exists() and all(path.exists() for path in foreign)
    assert link.is_symlink() and outside.read_text() == "not the store's"  # neither the link nor its target
    assert folder.is_dir()
    assert store.load(c.conversation_id).conversation_id == c.conversation_id

    # once per store: its later saves do not list the folder again; the next store (process) does
    again = store.root / ".s5.json.ab12cd_9.tmp"
    again.write_text("x")
    _age(again)
    store.save(c)
    assert again.exists()
    SessionStore(tmp_path).save(c)
    assert not again.exists() and fresh.exists()


def test_a_temporary_file_that_cannot_be_removed_stops_nothing(tmp_path, monkeypatch):
    """A read-only folder (simulated: the tests run as root) keeps its files, and the save goes on."""
    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    store.root.mkdir(parents=True)
    old = store.root / ".s1.json.ab12cd_9.tmp"
    old.write_text("x")
    _age(old)

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    real_unlink = os.unlink
    monkeypatch.setattr(os, "unlink", refuse)
    assert store.remove_stale_temp_files() == 0
    c = store.new()
    path = store.save(c)
    assert path.exists() and old.exists()
    monkeypatch.setattr(os, "unlink", real_unlink)
    assert store.remove_stale_temp_files() == 1 and not old.exists()
    assert SessionStore(tmp_path / "nothing here").remove_stale_temp_files() == 0  # no folder: nothing to do


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".hidden", "x" * 200])
def test_session_ids_cannot_escape_the_store(bad):
    with pytest.raises(ValueError):
        check_session_id(bad)
