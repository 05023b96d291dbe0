"""The index wired into the engine: summaries and reclaims are indexed in the same step, failures warn."""

from __future__ import annotations

import os

import pytest

from xun.context import recall
from xun.context.conversation import Conversation
from xun.context.offload import read_offload_log
from xun.context.recall import RecallIndex

from .conftest import TRICKY_TEXTS, all_rows, busy_session


def offload_log(store, conversation):
    return store.offload_dir / f"{conversation.conversation_id}.md"


def test_sessions_attach_the_index_and_bare_conversations_touch_no_disk(store, workdir, tmp_path, monkeypatch):
    fresh = store.new()
    assert fresh.recall_index is store.recall_index
    store.save(fresh)
    assert store.load(fresh.conversation_id).recall_index is store.recall_index
    assert not store.recall_index.path.exists()  # nothing is written before there is something to index

    monkeypatch.chdir(tmp_path)
    bare = busy_session(Conversation(), "bare")
    assert bare.recall_index is None
    bare.reclaim_tool_results(keep_max=1)
    bare.compact(lambda messages: "SUMMARY", keep_recent=4)
    assert not (tmp_path / ".xun").exists() and not (workdir / ".xun" / "history.db").exists()


def test_every_offloaded_entry_is_in_the_index_with_its_exact_text(store):
    c = busy_session(store.new(), "a")
    c.reclaim_tool_results(keep_max=3)
    first = c.compact(lambda messages: "SUMMARY ONE", keep_recent=10)
    busy_session(c, "b", rounds=5)
    second = c.compact(lambda messages: "SUMMARY TWO", keep_recent=4)
    assert first.compacted and second.compacted and first.warning is None and second.warning is None
    index = store.recall_index
    sections = read_offload_log(offload_log(store, c))
    assert len(sections) == 2
    logged = [(c.conversation_id, e.speaker, e.detail, e.text) for s in sections for e in s.entries]
    assert len(logged) > 60
    rows = all_rows(index)
    offloaded = [(r[2], r[5], r[9], r[11]) for r in rows if r[1] == "offload"]
    assert sorted(offloaded) == sorted(logged)  # the index and the log hold the same entries
    for session, speaker, detail, text in logged:
        words = [w for w in text.split() if w.isalnum()][:3]
        if not words:
            continue
        hits = index.search(" ".join(words), limit=200, session=session)
        assert any(index.entry(h.id).text == text and index.entry(h.id).speaker == speaker for h in hits), text


def test_roles_tools_and_reclaimed_originals_in_offloaded_rows(store):
    c = busy_session(store.new(), "r", rounds=6)
    c.reclaim_tool_results(keep_max=1)
    c.compact(lambda messages: "S", keep_recent=2)
    by_role = {}
    for row in all_rows(store.recall_index):
        if row[1] == "offload":
            by_role.setdefault(row[4], []).append(row)
    assert set(by_role) == {"user", "assistant", "reasoning", "tool_call", "tool"}
    call = next(r for r in by_role["tool_call"] if r[7] == "call_r_0")
    assert call[6] == "read_file" and '"src/r_0.py"' in call[11]
    result = next(r for r in by_role["tool"] if r[7] == "call_r_0")
    assert "reclaimed earlier" in result[9] and result[11].startswith(
        "r result 0 markerr0"
    )  # the original, not the placeholder


def test_reclaimed_results_are_findable_at_once(store):
    c = busy_session(store.new(), "t", rounds=8)
    result = c.reclaim_tool_results(keep_max=2)
    assert result.reclaimed_count == 6 and c.recall_warnings == []
    hits = store.recall_index.search("markert3")
    assert [(h.source, h.tool_call_id, h.tool, h.session) for h in hits] == [
        ("reclaimed", "call_t_3", "read_file", c.conversation_id)
    ]
    assert store.recall_index.entry(hits[0].id).text == c.reclaimed_original("call_t_3")
    assert '"src/t_3.py"' in store.recall_index.entry(hits[0].id).arguments


def test_restore_and_clear_keep_the_index_mirroring_the_session(store):
    c = busy_session(store.new(), "m", rounds=6)
    c.reclaim_tool_results(keep_max=1)
    assert store.recall_index.stats().reclaimed == 5
    c.restore_tool_result("call_m_2")
    assert store.recall_index.search("markerm2") == []  # back in the context, so not history any more
    assert store.recall_index.stats().reclaimed == 4
    c.clear()
    assert store.recall_index.stats().reclaimed == 0
    assert c.recall_warnings == []


def test_tricky_texts_survive_the_round_trip(store):
    c = store.new()
    for i, text in enumerate(TRICKY_TEXTS):
        c.add_user_message(text)
        c.add_agent_message({"role": "assistant", "content": f"ok {i}"})
    c.add_user_message("last")
    c.compact(lambda messages: "S", keep_recent=1)
    texts = {row[11] for row in all_rows(store.recall_index)}
    assert set(TRICKY_TEXTS) <= texts


class Broken(RecallIndex):
    """An index whose database is unusable until `fixed` is set."""

    fixed = False

    def _prepare(self):
        if not self.fixed:
            raise PermissionError(13, "Permission denied", str(self.path))
        return super()._prepare()


def test_a_failing_index_never_stops_a_summary_and_catches_up_later(store):
    broken = Broken(store.workdir)
    c = busy_session(Conversation(offload_dir=store.offload_dir, recall_index=broken), "f", rounds=6)
    result = c.compact(lambda messages: "SUMMARY", keep_recent=4)
    assert result.compacted and result.offload_path is not None
    assert "search index was not updated" in result.warning and "Permission denied" in result.warning
    assert "safe in the offload log" in result.warning and "--reindex" in result.warning
    assert c.summarizations[-1].warning == result.warning
    assert c.messages[0].content == "SUMMARY"  # the summary applied
    assert read_offload_log(result.offload_path)[0].entries  # and the originals are in the log

    reclaim = c.reclaim_tool_results(keep_max=0)
    assert reclaim.reclaimed_count >= 1  # the reclaim is done ...
    assert len(c.recall_warnings) == 1 and "safe in the session" in c.recall_warnings[0]  # ... with a warning
    assert c.take_recall_warnings() and c.recall_warnings == []

    broken.fixed = True
    busy_session(c, "g", rounds=3)
    c.reclaim_tool_results(keep_max=0)  # the next write also writes what failed before
    assert c.recall_warnings == []
    logged = sum(len(s.entries) for s in read_offload_log(result.offload_path))
    stats = broken.stats()
    assert stats.offloaded == logged
    assert stats.reclaimed == len(c.reclaimed_results)


def test_an_index_error_of_any_kind_is_a_warning(store, monkeypatch):
    c = busy_session(store.new(), "e", rounds=4)

    def explode(*args, **kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(recall, "transcript_entries", explode)
    result = c.compact(lambda messages: "S", keep_recent=2)
    assert result.compacted and "RuntimeError: surprise" in result.warning
    monkeypatch.setattr(RecallIndex, "_run", explode)
    assert c.reclaim_tool_results(keep_max=0).reclaimed_count >= 0
    busy_session(c, "x", rounds=3)
    c.reclaim_tool_results(keep_max=0)
    assert "RuntimeError: surprise" in c.recall_warnings[-1]


def test_too_much_waiting_asks_for_a_reindex(store, monkeypatch):
    monkeypatch.setattr(recall, "PENDING_LIMIT", 3)
    broken = Broken(store.workdir)
    c = busy_session(Conversation(offload_dir=store.offload_dir, recall_index=broken), "p", rounds=8)
    c.reclaim_tool_results(keep_max=0)
    assert "only a reindex recovers it" in c.recall_warnings[-1]
    broken.fixed = True
    busy_session(c, "q", rounds=2)
    c.reclaim_tool_results(keep_max=0)
    assert "run `xun history --reindex`" in c.recall_warnings[-1]
    assert broken.rebuild().entries == 0  # nothing saved yet: the live conversation is passed in below
    assert broken.rebuild([c]).entries == len(c.reclaimed_results)


def test_offload_failure_is_still_the_offload_warning(store, monkeypatch):
    c = busy_session(store.new(), "o", rounds=4)
    os.makedirs(store.offload_dir / f"{c.conversation_id}.md")  # the log's path is a folder: it cannot be written
    result = c.compact(lambda messages: "S", keep_recent=2)
    assert result.compacted and "could not write the offload log" in result.warning
    assert "search index" not in result.warning
    assert store.recall_index.stats().offloaded == 0  # what is not in a log is not indexed either


@pytest.mark.parametrize("keep", [0, 3])
def test_reclaim_without_an_index_stays_as_it_was(keep):
    with_index = busy_session(Conversation(), "n", rounds=6)
    result = with_index.reclaim_tool_results(keep_max=keep)
    assert with_index.recall_warnings == [] and result.reclaimed_count == 6 - keep


def test_a_result_reclaimed_then_summarised_is_one_match(store):
    c = busy_session(store.new(), "d", rounds=5)
    c.reclaim_tool_results(keep_max=0)
    c.compact(lambda messages: "S", keep_recent=1)
    rows = [r for r in all_rows(store.recall_index) if r[7] == "call_d_2" and r[4] == "tool"]
    assert sorted((r[1], r[9]) for r in rows) == [
        ("offload", "read_file, id call_d_2, reclaimed earlier"),
        ("reclaimed", ""),
    ]
    assert rows[0][11] == rows[1][11]
    hits = store.recall_index.search("markerd2")
    assert [(h.source, h.tool_call_id) for h in hits] == [("reclaimed", "call_d_2")]
    c.clear()  # the reclaimed original is gone: the log's copy is the match now
    assert [(h.source, h.tool_call_id) for h in store.recall_index.search("markerd2")] == [("offload", "call_d_2")]
