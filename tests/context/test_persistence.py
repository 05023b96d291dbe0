"""Sessions on disk: the format, atomic saves, legacy files, and clear errors for bad ones."""

import json
import os
import stat
import time
from pathlib import Path

import pytest

from xun.base import atomic
from xun.context.conversation import FORMAT_VERSION, Conversation, SessionFormatError
from xun.context.messages import RawOpenAIMessage, SystemPrompt, UserMessage
from xun.context.sessions import LATEST, STALE_TEMP_SECONDS, SessionStore, check_session_id

from .builders import long_conversation, tool_round


def compacted_session():
    c = long_conversation(rounds=20)
    c.set_persistent_section("AGENTS.md", "rules")
    c.reclaim_tool_results(keep_max=3)
    c.compact(lambda msgs: "the summary", keep_recent=5)
    for i in range(8):
        tool_round(c, 200 + i)
    c.reclaim_tool_results(keep_max=3)
    c.restore_tool_result("call_201")
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
    assert list(back.reclaimed_results) == list(c.reclaimed_results)
    for call_id in c.reclaimed_results:
        assert back.reclaimed_original(call_id) == c.reclaimed_original(call_id)
        assert back.reclaimed_results[call_id] == c.reclaimed_results[call_id]
    assert back.summarizations[0].summary_message == "the summary"
    assert back.compaction_log == [{"kind": "reclaim", "count": 3}]
    assert back.reclaim_tool_results(keep_max=3).reclaimed_count == 0  # the restored one stays pinned
    assert back.estimated_message_length() == c.estimated_message_length()
    # saved again without reading the archive, then read: still equal
    back.dump(path)
    again = Conversation().load(path)
    assert {k: again.reclaimed_original(k) for k in again.reclaimed_results} == {
        k: c.reclaimed_original(k) for k in c.reclaimed_results
    }


def test_file_format_fields_and_owner_only_mode(tmp_path):
    c = compacted_session()
    path = tmp_path / "s.json"
    c.dump(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = json.loads(path.read_text())  # one JSON document
    for key in (
        "format_version",
        "conversation_id",
        "tokens_used",
        "messages",
        "compacted_toolcalls",
        "compaction",
        "summarizations",
        "compaction_log",
    ):
        assert key in data
    assert data["format_version"] == FORMAT_VERSION
    assert data["compaction"] == {"tool_rounds": 1, "summary_rounds": 1}
    assert data["summarizations"][0]["summary_message"] == "the summary"
    archive = data["compacted_toolcalls"]
    assert list(archive) == list(c.reclaimed_results) and data["compacted_count"] == len(archive)
    assert list(data)[-1] == "compacted_toolcalls"  # last, so a loader can leave it unparsed
    first = archive[next(iter(archive))]
    assert set(first) == {"tool", "arguments", "chars", "reclaimed_at", "original"}


def test_unicode_line_separators_in_originals_survive(tmp_path):
    c = Conversation()
    c.add_user_message("go")
    c.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "u", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        }
    )
    text = "a\u2028b\x85c\u2029d" * 100
    c.add_tool_result("u", text)
    c.add_user_message("next")
    c.reclaim_tool_results(keep_max=0)
    c.dump(tmp_path / "s.json")
    assert Conversation().load(tmp_path / "s.json").reclaimed_original("u") == text


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
        {
            "kind": "raw",
            "raw": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
            },
        },
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
    assert c.messages[3] == RawOpenAIMessage(
        {"role": "tool", "tool_call_id": "t1", "content": "[Compacted, ID: t1. ...]"}
    )
    assert c.reclaimed_original("t1") == "the original text"
    assert c.compaction_counter.tool_rounds == 1


def test_pre_typed_files_of_plain_openai_dicts_are_migrated(tmp_path):
    legacy = {
        "conversation_id": "old",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
        ],
    }
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


def test_resume_latest_reads_only_the_opening_of_each_session_file(tmp_path, monkeypatch):
    """`--resume` finds the newest session by the save time at the start of each file, without parsing
    every session's messages (a 50,000-message session took most of a second each); the order is the
    one `xun sessions` shows."""
    import xun.context.sessions as sessions

    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    ids = []
    for n in range(3):
        c = store.new()
        for i in range(50):
            c.add_user_message(f"session {n} prompt {i}")
        store.save(c)
        ids.append(c.conversation_id)
        time.sleep(0.01)
    assert [i.conversation_id for i in store.list()] == ids[::-1]
    read = []
    real_read_head = sessions._read_head
    monkeypatch.setattr(sessions, "_read_head", lambda path: read.append(path) or real_read_head(path))
    latest = SessionStore(tmp_path).open(LATEST, read_only=True)
    assert latest.conversation_id == ids[-1] and read == []


def test_resume_latest_passes_over_a_newest_session_whose_messages_cannot_be_read(tmp_path, monkeypatch):
    """As `xun sessions` does: a file whose session part is damaged is not the newest session; one whose
    archive alone is damaged is, and its error is raised (tests/reliability/test_bad_files.py)."""
    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    older = store.new()
    older.add_user_message("the older one")
    store.save(older)
    time.sleep(0.01)
    newer = store.new()
    newer.add_user_message("the newer one")
    path = store.save(newer)
    text = path.read_text()
    path.write_text(text.replace('"the newer one"', '"the newer one'))  # the messages are no longer JSON
    again = SessionStore(tmp_path)
    assert [i.conversation_id for i in again.list()] == [older.conversation_id]
    resumed = again.open(LATEST)
    assert resumed.conversation_id == older.conversation_id
    assert set(again._locks) == {older.conversation_id}  # the damaged one's lock was let go
    again.unlock()


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
    foreign = [
        store.root / name
        for name in (
            "s1.json.ab12cd_9.tmp",  # no leading dot
            ".s1.json.ab12cd.tmp",  # not the eight random characters
            ".s1.json.AB12CD_9.tmp",  # mkstemp draws lower case only
            ".s1.json.ab12cd_9.tmp.bak",
            ".s1.json.ab12cd_9.TMP",
            ".notes.txt.ab12cd_9.tmp",  # a temporary file, but not of a session
            "keep.txt",
        )
    ]
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


# ------------------------------------------------------------------ format 2: one JSON document


def test_dumps_is_one_json_document_that_any_json_reader_round_trips(tmp_path):
    c = compacted_session()
    c.reclaimed_original("call_0")  # text with quotes, newlines and separators in the originals
    text = c.dumps()
    data = json.loads(text)  # the whole file, as jq reads it
    assert {k: v["original"] for k, v in data["compacted_toolcalls"].items()} == c.reclaimed_results.originals()
    assert data["pinned_toolcalls"] == ["call_201"]
    # laid out anew by another tool (`jq . s.json > s2.json`): still a session, read the slow way
    path = tmp_path / "s2.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=True))
    back = Conversation().load(path)
    assert back.completion_params() == c.completion_params()
    assert back.reclaimed_results.originals() == c.reclaimed_results.originals()
    assert dict(back.reclaimed_results) == dict(c.reclaimed_results)
    assert json.loads(back.dumps())["compacted_toolcalls"] == data["compacted_toolcalls"]


def test_an_edited_document_whose_archive_lost_an_entry_is_refused(tmp_path):
    data = json.loads(compacted_session().dumps())
    data["compacted_toolcalls"].popitem()
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SessionFormatError, match="the file was edited") as info:
        Conversation().load(path)
    assert str(path) in str(info.value)


FIXTURES = Path(__file__).parent / "sessions"


@pytest.mark.parametrize("name", ["format1.json", "format1-first.json"])
def test_format_1_files_written_by_earlier_xun_load_and_are_saved_as_one_document(tmp_path, name):
    """format1.json: a head line, then one JSON line per original, as main wrote it at 1408d72;
    format1-first.json: the same, with no archive length in the head, as the first engine wrote it."""
    path = tmp_path / name
    path.write_bytes((FIXTURES / name).read_bytes())
    before = path.read_bytes()
    c = Conversation().load(path)
    assert path.read_bytes() == before  # loading never writes
    assert c.conversation_id == "format1-fixture" and c.total_tokens == 4321
    assert len(c.reclaimed_results) == 13
    assert list(c.reclaimed_results)[:2] == ["call_0", "call_1"] and "call_21" not in c.reclaimed_results
    assert c.reclaimed_original("call_0").endswith('\n"quoted" \\ back\u2028sep\u00e9\u4e2d\U0001f600 {}')
    assert c.reclaimed_original("call_24") == "second batch 24\n" + "y" * 300
    assert c.reclaimed_results["call_24"].tool_name == "read_file"
    assert c.messages[0].is_compressed and c.messages[0].persist_sections == {"AGENTS.md": "rules"}
    assert c.summarizations[0].summary_message == "the summary"
    assert c.reclaim_tool_results(keep_max=3).reclaimed_count == 0  # call_21 was restored: it stays pinned
    c.dump(path)
    data = json.loads(path.read_text())
    assert data["format_version"] == FORMAT_VERSION and len(data["compacted_toolcalls"]) == 13
    again = Conversation().load(path)
    assert again.completion_params() == c.completion_params()
    assert again.reclaimed_results.originals() == c.reclaimed_results.originals()


def test_format_1_with_a_torn_archive_line_is_named(tmp_path):
    path = tmp_path / "s.json"
    text = (FIXTURES / "format1.json").read_text()
    cut = text.index('"original"', text.index("\n"))
    path.write_text(text[:cut] + '"origXnal"' + text[cut + len('"original"') :])  # the same length
    c = Conversation().load(path)
    with pytest.raises(SessionFormatError, match="archive line 1 is unreadable") as info:
        c.reclaimed_original("call_0")
    assert str(path) in str(info.value)


class CountingDecoder(json.JSONDecoder):
    """Counts what the archive module decodes (the standard decoder, counted)."""

    calls = 0

    def raw_decode(self, s, idx=0):
        CountingDecoder.calls += 1
        return super().raw_decode(s, idx)


def test_loading_leaves_the_archive_unparsed_until_it_is_first_read(tmp_path, monkeypatch):
    import xun.context.reclaimed

    c = compacted_session()
    text = c.dumps()
    archive = text[text.rindex(',"compacted_toolcalls":') + len(',"compacted_toolcalls":') : -1]
    monkeypatch.setattr(xun.context.reclaimed, "_DECODER", CountingDecoder())
    monkeypatch.setattr(xun.context.reclaimed.json, "loads", lambda *a, **k: pytest.fail("an original was decoded"))
    back = Conversation().loads(text)
    assert len(back.reclaimed_results) == len(c.reclaimed_results)
    saved = back.dumps()  # saved again unread: the block is copied as it is, not re-encoded
    assert saved[saved.rindex(',"compacted_toolcalls":') + len(',"compacted_toolcalls":') : -1] == archive
    assert CountingDecoder.calls == 0
    assert back.reclaimed_results["call_0"].tool_name == "read_file"  # the first read parses the entries
    assert CountingDecoder.calls == 2 * len(c.reclaimed_results)  # an id and a record each, once
    monkeypatch.undo()
    assert back.reclaimed_results.originals() == c.reclaimed_results.originals()


def test_a_damaged_archive_of_the_right_length_is_named_when_first_read_and_the_file_kept(tmp_path):
    path = tmp_path / "s.json"
    compacted_session().dump(path)
    text = path.read_text()
    at = text.rindex('"original":')
    path.write_text(text[:at] + '"original"!' + text[at + len('"original":') :])
    before = path.read_bytes()
    back = Conversation().load(path)  # the archive is not read yet
    with pytest.raises(SessionFormatError, match="archive entry .* is unreadable") as info:
        back.reclaimed_original("call_0")
    assert str(path) in str(info.value) and path.read_bytes() == before


def test_new_reclaims_after_an_unread_load_and_a_repeated_id_save_as_valid_json(tmp_path):
    c = long_conversation(rounds=6)
    c.reclaim_tool_results(keep_max=1)
    back = Conversation().loads(c.dumps())
    tool_round(back, 0)  # a model that reuses an id already in the unread archive
    tool_round(back, 99)
    back.add_user_message("go on")
    back.reclaim_tool_results(keep_max=0)
    text = back.dumps()
    assert json.loads(text)["compacted_count"] == len(back.reclaimed_results)
    again = Conversation().loads(text)
    assert again.reclaimed_results.originals() == back.reclaimed_results.originals()
    assert set(again.reclaimed_results) == {f"call_{i}" for i in range(6)} | {"call_99"}


def test_listing_reads_the_session_part_only_and_still_lists_a_torn_archive(tmp_path, monkeypatch):
    monkeypatch.delenv("XUN_HOME", raising=False)
    store = SessionStore(tmp_path)
    c = store.new()
    c.add_user_message("big session")
    for i in range(40):
        tool_round(c, i, size=30_000)  # 1.2 MB of originals once reclaimed
    c.reclaim_tool_results(keep_max=1)
    path = store.save(c)
    data = path.read_bytes()
    archive_at = data.index(b',"compacted_toolcalls":')
    assert len(data) - archive_at > 1_000_000
    # a byte that is not UTF-8 deep in the archive: listing never reads it, loading names it
    spoiled = data[: len(data) - 1000] + b"\xff" + data[len(data) - 999 :]
    path.write_bytes(spoiled)
    [info] = store.list()
    assert (info.conversation_id, info.messages, info.reclaimed) == (c.conversation_id, len(c.messages), 39)
    with pytest.raises(SessionFormatError, match="not UTF-8"):
        store.load(c.conversation_id)
    path.write_bytes(data[:-100])  # torn inside the archive: still listed, and the load names the damage
    assert [i.conversation_id for i in store.list()] == [c.conversation_id]
    with pytest.raises(SessionFormatError, match="truncated"):
        store.load(c.conversation_id)
    assert path.read_bytes() == data[:-100]


def test_a_minimal_format_1_document_loads_and_a_stray_system_prompt_is_named():
    c = Conversation().loads(json.dumps({"format_version": 1, "messages": [{"kind": "user", "text": "a"}]}))
    assert c.messages == [UserMessage("a")] and len(c.reclaimed_results) == 0
    stray = {"format_version": 1, "messages": [{"kind": "user", "text": "a"}, {"kind": "system", "content": "s"}]}
    with pytest.raises(SessionFormatError, match="message 1: a system prompt may only be message 0"):
        Conversation().loads(json.dumps(stray))


def test_the_newest_messages_are_read_from_the_end_of_a_saved_session(tmp_path):
    """A resume shows its newest turns from the file before the whole is parsed: the messages are written
    last but the archive, their count before them, and are found from the end exactly."""
    from xun.context.conversation import newest_messages

    c = compacted_session()
    # a reply whose raw form nests dicts that open like a stored message: never taken for one
    c.add_agent_message({"role": "assistant", "content": [{"kind": "text", "text": "a"}, {"kind": "x", "y": [{}]}]})
    c.add_user_message('the newest, with "quotes", ],"kind": and {"kind":"raw"} in its text')
    path = tmp_path / "s.json"
    c.dump(path)
    text = path.read_text()
    total = len(c.messages)
    ident, count, newest = newest_messages(text, 5)
    assert (ident, count) == (c.conversation_id, total)
    assert [m.to_json() for m in newest] == [m.to_json() for m in c.messages[-5:]]
    ident, count, every = newest_messages(text, total + 10)
    assert [m.to_json() for m in every] == [m.to_json() for m in c.messages], "to the first message"
    assert Conversation().loads(text).completion_params() == c.completion_params(), "and any reader reads the whole"

    data = json.loads(text)  # the same session laid out otherwise (an older xun, another tool): the whole is read
    older = json.dumps({"messages": data.pop("messages"), **data})
    assert newest_messages(older, 5) is None
    torn = text.replace('"message_count":', '"message_count":"x","n":', 1)
    assert newest_messages(torn, 5) is None


def test_peek_is_given_the_session_file_before_it_is_read(tmp_path):
    store = SessionStore(tmp_path)
    c = store.new()
    c.add_user_message("hello")
    store.save(c)
    seen: list[str] = []
    loaded = store.open(c.conversation_id, read_only=True, peek=seen.append)
    assert seen == [store.path_for(c.conversation_id)]
    assert loaded.messages[-1].text == "hello"


def test_the_newest_messages_are_read_from_the_end_of_the_file_alone(tmp_path, monkeypatch):
    """A resume reads the opening of the file and the end of its messages (the archive's length in bytes says
    where they end), in pieces that grow until the newest messages are whole; text in any script, the archive
    too, and pieces that begin inside a character."""
    from xun.context import session_format as module
    from xun.context.conversation import read_newest_messages

    c = compacted_session()
    c.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        }
    )
    c.add_tool_result("call_x", "résultat 🙂 " * 200)
    c.reclaim_tool_results(keep_max=0)  # into the archive, which is not ASCII now
    for i in range(40):
        c.add_user_message(f"question {i}: é, ü, 漢字 and 🙂 " + "€" * (i * 37))
        c.add_agent_message({"role": "assistant", "content": f"réponse {i} 🙂"})
    path = tmp_path / "s.json"
    c.dump(path)
    opening = json.loads(path.read_text()[:200].split(',"conversation_id"')[0] + "}")
    assert opening["compacted_bytes"] > opening["compacted_chars"], "the archive's length in bytes comes first"
    total = len(c.messages)
    expected = [m.to_json() for m in c.messages[-9:]]
    for piece in (1 << 16, 7, 64, 333):  # small pieces start inside characters and grow
        monkeypatch.setattr(module, "NEWEST_TAIL_READ", piece)
        monkeypatch.setattr(module, "NEWEST_READ", piece * 3)  # the opening too (the head is about 10 kB)
        ident, count, newest = read_newest_messages(path, 9)
        assert (ident, count) == (c.conversation_id, total)
        assert [m.to_json() for m in newest] == expected
    ident, count, every = read_newest_messages(path, total + 5)
    assert [m.to_json() for m in every] == [m.to_json() for m in c.messages], "to the first message"
    data = json.loads(path.read_text())  # laid out otherwise (no length in bytes first): the whole is read
    path.write_text(json.dumps({"messages": data.pop("messages"), **data}))
    assert read_newest_messages(path, 5) is None
    assert read_newest_messages(tmp_path / "missing.json", 5) is None


def test_a_call_saved_without_its_result_gets_one_at_load(tmp_path):
    """Trial D #23: a session saved while a call waited for its confirmation had the call and no result; the
    app showed it "running…" for ever and the next request carried a call without its result, which servers
    refuse (HTTP 400). Loaded, each such call has a result saying it did not run, right after its reply's."""
    from xun.context.conversation import UNANSWERED_AT_LOAD

    c = Conversation()
    c.add_user_message("write two files")
    c.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "write_file", "arguments": "{}"}},
                {"id": "call_b", "type": "function", "function": {"name": "write_file", "arguments": "{}"}},
            ],
        }
    )
    c.add_tool_result("call_a", "wrote 3 characters")
    c.add_user_message("and now?")  # the next prompt, sent from the resumed app
    store = SessionStore(tmp_path)
    store.save(c)
    loaded = store.load(c.conversation_id)
    roles = [(m.role, m.raw.get("tool_call_id") if hasattr(m, "raw") else None) for m in loaded.messages]
    assert roles == [("user", None), ("assistant", None), ("tool", "call_a"), ("tool", "call_b"), ("user", None)]
    assert loaded.messages[3].raw["content"] == UNANSWERED_AT_LOAD
    assert loaded.estimated_message_length() == Conversation().loads(loaded.dumps()).estimated_message_length()


def test_the_draft_is_kept_with_the_session_and_older_files_have_none():
    """What the app's prompt held at quit goes with the session (trial G #12); it is never in the context."""
    conversation = Conversation()
    conversation.add_user_message("hello")
    conversation.draft = "not sent yet\n[bold]as typed[/]"
    data = json.loads(conversation.dumps())
    assert data["draft"] == "not sent yet\n[bold]as typed[/]"
    loaded = Conversation().loads(conversation.dumps())
    assert loaded.draft == conversation.draft and [m.to_json() for m in loaded.messages] == [
        m.to_json() for m in conversation.messages
    ]
    del data["draft"]
    assert Conversation().loads(json.dumps(data)).draft == ""
    data["draft"] = 42
    assert Conversation().loads(json.dumps(data)).draft == ""
