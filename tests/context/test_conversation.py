import pytest
from openai.types.chat import ChatCompletionMessage
from pydantic import BaseModel

from xun.context.conversation import Conversation
from xun.context.messages import RawOpenAIMessage, SystemPrompt, UserMessage

from .builders import assistant_call, fresh_length, long_conversation, tool_round


def test_system_message_is_inserted_then_replaced_keeping_sections():
    c = Conversation()
    c.add_user_message("hi")
    c.set_system_message_content("role one")
    c.set_persistent_section("AGENTS.md", "rules")
    c.set_system_message_content("role two")
    assert isinstance(c.messages[0], SystemPrompt) and len(c.messages) == 2
    assert c.completion_params()[0] == {"role": "system", "content": "role two\n\nrules"}
    c.set_persistent_section("AGENTS.md", "")
    assert c.completion_params()[0]["content"] == "role two"


def test_persistent_section_without_system_message_creates_one():
    c = Conversation()
    c.set_persistent_section("gone", "")
    assert c.messages == []
    c.set_persistent_section("AGENTS.md", "rules")
    assert c.completion_params() == [{"role": "system", "content": "rules"}]


def test_add_agent_message_accepts_sdk_objects_and_drops_empty_tool_calls():
    c = Conversation()
    c.add_agent_message(ChatCompletionMessage(role="assistant", content="hello", tool_calls=[]))
    c.add_agent_message({"role": "assistant", "content": "x", "tool_calls": []})
    assert c.completion_params() == [
        {"role": "assistant", "content": "hello"},
        {"role": "assistant", "content": "x"},
    ]


def test_add_agent_message_keeps_reasoning_extras():
    message = ChatCompletionMessage.model_validate({"role": "assistant", "content": "a", "reasoning_content": "why"})
    c = Conversation()
    c.add_agent_message(message)
    assert c.messages[0].raw["reasoning_content"] == "why"


class Valued:
    def value_str(self):
        return "valued"


class Broken:
    def value_str(self):
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "content, expected",
    [
        ("plain", "plain"),
        (Valued(), "valued"),
        ({"a": [1, 2]}, '{"a": [1, 2]}'),
        (Broken(), "[Error] Failed to serialize tool result: boom"),
        (object(), None),
    ],
)
def test_add_tool_result_content_forms(content, expected):
    c = Conversation()
    c.add_tool_result("c1", content)
    stored = c.messages[0].raw
    assert stored["role"] == "tool" and stored["tool_call_id"] == "c1"
    if expected is None:
        assert stored["content"].startswith("[Error] Failed to serialize tool result:")
    else:
        assert stored["content"] == expected


class Answer(BaseModel):
    verdict: str


def test_response_schema_attaches_to_last_user_message_only():
    c = Conversation()
    with pytest.raises(ValueError):
        c.set_response_schema(Answer)
    c.add_user_message("judge")
    c.set_response_schema(Answer)
    assert '"verdict"' in c.completion_params()[-1]["content"]
    c.add_agent_message({"role": "assistant", "content": "{}"})
    with pytest.raises(ValueError):
        c.set_response_schema(Answer)


def test_images_are_normalised(tmp_path):
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG\r\n")

    class FakePil:
        def save(self, buffer, format):
            buffer.write(b"img-" + format.encode())

    c = Conversation()
    c.add_user_message("look", images=["https://example.invalid/x.png", png, FakePil()])
    urls = c.messages[0].images
    assert urls[0] == "https://example.invalid/x.png"
    assert urls[1].startswith("data:image/png;base64,")
    assert urls[2] == "data:image/png;base64,aW1nLVBORw=="
    with pytest.raises(ValueError):
        c.add_user_message("bad", images=[tmp_path / "missing.png"])


def test_pop_helpers_for_cancel_retry_and_revise():
    c = long_conversation(rounds=3)
    assert c.pop_last_message_if_user() is None
    c.add_user_message("last question")
    assistant_call(c, ("k1", "list_directory", {"path": "."}))
    c.add_tool_result("k1", "a\nb")
    retry = c.pop_from_last_user_message(inclusive=False)
    assert [m.role for m in retry] == ["assistant", "tool"]
    assert c.messages[-1] == UserMessage("last question")
    revise = c.pop_from_last_user_message()
    assert revise == [UserMessage("last question")]
    assert Conversation().pop_from_last_user_message() == []
    c.add_user_message("again")
    assert c.pop_last_message_if_user() == UserMessage("again")


def test_clear_keeps_role_prompt_and_rules_only():
    c = long_conversation(rounds=20)
    c.set_persistent_section("AGENTS.md", "rules")
    c.total_tokens = 999
    c.reclaim_tool_results(keep_max=2)
    c.compact(lambda msgs: "summary", keep_recent=4)
    c.clear()
    assert c.completion_params() == [{"role": "system", "content": "You are a careful assistant.\n\nrules"}]
    assert c.total_tokens is None and c.compaction_counter.tool_rounds == 0 and c.compaction_counter.summary_rounds == 0
    assert len(c.reclaimed_results) == 0


def test_to_history_and_truncation():
    c = Conversation()
    c.add_user_message("u" * 1500)
    c.add_tool_result("t", {"k": "v"})
    history = c.to_history(truncate=True)
    assert (
        history[0]["role"] == "user"
        and len(history[0]["content"]) < 1100
        and history[0]["content"].endswith("(truncated)")
    )
    assert history[1] == {"role": "tool", "content": '{"k": "v"}'}
    assert c.to_history()[0]["content"] == "u" * 1500


def test_estimate_stays_right_under_direct_list_edits():
    c = long_conversation(rounds=10)
    assert c.estimated_message_length() == fresh_length(c)
    c.messages.append(UserMessage("appended directly"))
    c.messages.insert(1, UserMessage("inserted"))
    del c.messages[3]
    c.messages[2] = RawOpenAIMessage({"role": "assistant", "content": "replaced"})
    c.messages[4:6] = [UserMessage("sliced in")]
    c.messages.pop(5)
    c.messages.extend([UserMessage("e1"), UserMessage("e2")])
    c.messages += [UserMessage("iadd")]
    c.messages.remove(c.messages[-1])
    c.messages.reverse()
    c.messages.reverse()
    assert c.estimated_message_length() == fresh_length(c)
    c.messages = list(c.messages)[:5]
    assert c.estimated_message_length() == fresh_length(c)
    c.messages.clear()
    assert c.estimated_message_length() == 0


def test_messages_is_a_real_list():
    c = long_conversation(rounds=2)
    assert isinstance(c.messages, list)
    assert isinstance(c.messages[1:3], list)
    tool_round(c, 99)
    assert c.messages[-1].raw["tool_call_id"] == "call_99"


def test_the_seeds_names_still_work_beside_xuns_own():
    """Code written for the seed's API calls tier 1 and reads the summary flag by the seed's names."""
    from xun.conversation import Conversation as SeedConversation

    assert SeedConversation is Conversation
    c = long_conversation(rounds=4)
    result = c.compact_toolcall(keep_max=1)
    assert result.reclaimed_count == 3 and list(c.compacted_toolcalls) == ["call_0", "call_1", "call_2"]
    assert c.compacted_toolcall_result("call_0") == c.reclaimed_original("call_0")
    assert c.compacted_toolcall_result("call_0").startswith("contents of file 0")
    assert c.compact_toolcall(keep_max=1).reclaimed_count == 0  # the same method under both names
    c.set_system_message_content("the summary", is_compressed=True)
    assert c.messages[0].is_compressed and c.messages[0].is_summary
