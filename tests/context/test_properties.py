"""Property tests over random conversations: the tail invariants, nothing lost, round trips."""

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xun.context.conversation import Conversation, SessionFormatError
from xun.context.messages import RawOpenAIMessage, UserMessage, message_length
from xun.context.offload import read_offload_log

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.builds(
    lambda n, ch: ch * n, st.integers(100, 600), st.sampled_from("abc\n\u2028é")
)

step = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("say"), text, st.booleans()),
    st.tuples(st.just("tools"), st.lists(text, min_size=1, max_size=3)),
    st.tuples(st.just("reclaim"), st.integers(0, 6)),
    st.tuples(st.just("summary"), st.integers(0, 10)),
)


class Recorder:
    """Builds a conversation from steps and remembers every text that went into it."""

    def __init__(self, offload_dir: Path | None):
        self.c = Conversation(offload_dir=offload_dir)
        self.c.set_system_message_content("You are the property-test agent.")
        self.texts: list[str] = []
        self.calls = 0

    def run(self, op):
        c = self.c
        kind = op[0]
        if kind == "user":
            c.add_user_message(op[1])
            self.texts.append(op[1])
        elif kind == "say":
            raw = {"role": "assistant", "content": op[1]}
            if op[2]:
                raw["reasoning_content"] = "thinking: " + op[1]
                self.texts.append(raw["reasoning_content"])
            c.add_agent_message(raw)
            self.texts.append(op[1])
        elif kind == "tools":
            ids = []
            for _ in op[1]:
                self.calls += 1
                ids.append(f"call_{self.calls}")
            c.add_agent_message(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": json.dumps({"path": i})},
                        }
                        for i in ids
                    ],
                }
            )
            for i, result in zip(ids, op[1]):
                c.add_tool_result(i, result)
                self.texts.append(result)
        elif kind == "reclaim":
            c.reclaim_tool_results(keep_max=op[1])
        elif kind == "summary":
            self.check_plan(op[1])
            c.compact(lambda msgs: f"summary of {len(msgs)} messages", keep_recent=op[1])

    def check_plan(self, keep):
        c = self.c
        plan = c.plan_compaction(keep)
        tail = plan.kept[1:] if plan.carried_user is not None else plan.kept
        assert tail == list(c.messages[plan.cut_index :])
        assert plan.condensed == list(c.messages[: plan.cut_index])
        if tail:
            assert tail[0].role != "tool", "the tail opens on an orphaned tool result"
        called = set()
        for m in tail:
            if isinstance(m, RawOpenAIMessage) and m.raw.get("tool_calls"):
                called.update(t["id"] for t in m.raw["tool_calls"])
            if m.role == "tool":
                assert m.raw["tool_call_id"] in called, "a kept tool result lost its assistant call"
        users = [i for i, m in enumerate(c.messages) if isinstance(m, UserMessage)]
        if plan.carried_user is not None:
            assert plan.carried_user is c.messages[users[-1]] and users[-1] < plan.cut_index
        elif users and not plan.nothing_to_condense:
            assert users[-1] >= plan.cut_index or len(c.messages) - users[-1] > keep

    def everything_kept_somewhere(self) -> str:
        c = self.c
        parts = [json.dumps(m.completion_param(), ensure_ascii=False) for m in c.messages]
        parts += [c.reclaimed_original(k) for k in c.reclaimed_results]
        for kept in c.kept_originals:
            parts += [json.dumps(m.to_json(), ensure_ascii=False) for m in kept["messages"]]
        if c.offload_dir is not None:
            log = c.offload_dir / f"{c.conversation_id}.md"
            if log.exists():
                parts += [e.text for section in read_offload_log(log) for e in section.entries]
        return parts


def assert_nothing_lost(rec: Recorder):
    parts = rec.everything_kept_somewhere()
    encoded = [json.dumps(t, ensure_ascii=False)[1:-1] for t in rec.texts]
    for original, escaped in zip(rec.texts, encoded):
        assert any(original == p or original in p or escaped in p for p in parts), f"lost: {original[:60]!r}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=40), st.booleans())
def test_random_sessions_keep_invariants_and_lose_nothing(steps, with_log):
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(Path(tmp) / "history" if with_log else None)
        for op in steps:
            rec.run(op)
            assert rec.c.estimated_message_length() == sum(message_length(m) for m in rec.c.messages)
        assert_nothing_lost(rec)
        path = Path(tmp) / "s.json"
        rec.c.dump(path)
        back = Conversation().load(path)
        assert back.completion_params() == rec.c.completion_params()
        assert {k: back.reclaimed_original(k) for k in back.reclaimed_results} == {
            k: rec.c.reclaimed_original(k) for k in rec.c.reclaimed_results
        }


@settings(max_examples=100, deadline=None)
@given(st.lists(step, min_size=1, max_size=25), st.data())
def test_corrupted_session_text_raises_the_clear_error_or_loads(steps, data):
    rec = Recorder(None)
    for op in steps:
        rec.run(op)
    text = rec.c.dumps()
    position = data.draw(st.integers(0, 10**9)) % len(text)  # the text's length varies with the clock
    mode = data.draw(st.sampled_from(["cut", "flip", "insert"]))
    if mode == "cut":
        bad = text[:position]
    elif mode == "flip":
        bad = text[:position] + data.draw(st.sampled_from(['"', "{", "]", "x", "\n", "\\"])) + text[position + 1 :]
    else:
        bad = text[:position] + data.draw(text_strategy_small) + text[position:]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.json"
        path.write_text(bad, encoding="utf-8")
        try:
            loaded = Conversation().load(path)
        except SessionFormatError as exc:
            assert str(path) in str(exc)
        else:  # a change that still loads gives a usable conversation, or names the file when read
            loaded.completion_params()
            try:
                for k in loaded.reclaimed_results:
                    loaded.reclaimed_original(k)
            except SessionFormatError as exc:
                assert str(path) in str(exc) and "archive" in str(exc)
        assert path.read_bytes() == bad.encode("utf-8")  # read_text would turn a "\r" into "\n"


text_strategy_small = st.text(max_size=5)
