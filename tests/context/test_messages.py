import json

import pytest

from xun.context.messages import (
    COMPACTED_SYSTEM_PROMPT,
    MessageFormatError,
    RawOpenAIMessage,
    SystemPrompt,
    UserMessage,
    message_from_json,
    message_length,
)


def test_json_forms_are_the_seed_ones():
    assert SystemPrompt("be brief", persist_sections={"AGENTS.md": "rules"}).to_json() == {
        "kind": "system",
        "content": "be brief",
        "is_compressed": False,
        "persist_sections": {"AGENTS.md": "rules"},
    }
    assert UserMessage("hi", images=["data:image/png;base64,AA"]).to_json() == {
        "kind": "user",
        "text": "hi",
        "images": ["data:image/png;base64,AA"],
        "response_schema": None,
    }
    raw = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert RawOpenAIMessage(raw).to_json() == {"kind": "raw", "raw": raw}


@pytest.mark.parametrize(
    "message",
    [
        SystemPrompt("role", is_compressed=True, persist_sections={"a": "b"}, base_prompt="base"),
        UserMessage("look", images=["https://example.invalid/a.png"], response_schema='{"type":"object"}'),
        RawOpenAIMessage({"role": "assistant", "content": "x", "reasoning_content": "think"}),
    ],
)
def test_round_trip_through_json(message):
    back = message_from_json(json.loads(json.dumps(message.to_json())))
    assert back == message
    assert back.completion_param() == message.completion_param()
    assert back.role == message.role


def test_compressed_system_prompt_wraps_summary_then_sections_after_role_prompt():
    prompt = SystemPrompt(
        "the summary", is_compressed=True, persist_sections={"AGENTS.md": "never push"}, base_prompt="You are xun."
    )
    content = prompt.completion_param()["content"]
    assert content.startswith("You are xun.\n\n")
    assert COMPACTED_SYSTEM_PROMPT.format(summary="the summary") in content
    assert content.endswith("never push")
    assert prompt.role_prompt == "You are xun."


def test_user_message_with_images_becomes_parts_and_schema_is_appended():
    param = UserMessage("see", images=["data:image/png;base64,AA"], response_schema='{"x":1}').completion_param()
    assert param["content"][0]["type"] == "text" and '{"x":1}' in param["content"][0]["text"]
    assert param["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}


def test_length_counts_seed_fields_and_tool_call_arguments():
    msg = RawOpenAIMessage(
        {
            "role": "assistant",
            "content": "abc",
            "reasoning_content": "de",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"p":1}'}}],
        }
    )
    assert message_length(msg) == 3 + 2 + len('{"p":1}')
    assert message_length(UserMessage("hello")) == 5


def test_legacy_openai_dicts_are_migrated():
    assert message_from_json({"role": "system", "content": "s"}) == SystemPrompt("s")
    assert message_from_json({"role": "user", "content": "u"}) == UserMessage("u")
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "t"}, {"type": "image_url", "image_url": {"url": "data:x"}}],
    }
    assert message_from_json(parts) == UserMessage("t", images=["data:x"])
    tool = {"role": "tool", "tool_call_id": "c", "content": "r"}
    assert message_from_json(tool) == RawOpenAIMessage(tool)


def test_peer_tool_kind_is_migrated_to_a_raw_tool_message():
    migrated = message_from_json({"kind": "tool", "tool_call_id": "c9", "content": {"value": "out", "is_ok": True}})
    assert migrated == RawOpenAIMessage({"role": "tool", "tool_call_id": "c9", "content": "out"})
    failed = message_from_json(
        {"kind": "tool", "tool_call_id": "c9", "content": {"value": {"error": "x"}, "is_ok": False}}
    )
    assert failed.raw["content"].startswith("[Error] ")


@pytest.mark.parametrize(
    "data, words",
    [
        ([], "JSON object"),
        ({"kind": "martian"}, "unknown message kind"),
        ({"kind": "user"}, "'text'"),
        ({"kind": "user", "text": 3}, "should be str"),
        ({"kind": "raw", "raw": "x"}, "'role'"),
        ({"kind": "system", "content": "s", "persist_sections": {"a": 1}}, "persist_sections"),
        ({"content": "no role"}, "role"),
    ],
)
def test_malformed_messages_raise_a_clear_error(data, words):
    with pytest.raises(MessageFormatError, match=words):
        message_from_json(data)
