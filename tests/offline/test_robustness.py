"""Property tests: no input crashes the scripted model or the request parser, and replies are deterministic."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xun.offline.model import decide_reply
from xun.offline.protocol import RequestError, parse_chat_request
from xun.offline.responses import ReplyMeta, build_completion
from xun.offline.summary import write_summary
from xun.offline.tokenizer import count_text_tokens

from .conftest import BUILTIN_TOOLS

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
roles = st.sampled_from(["system", "user", "assistant", "tool", "developer"])
words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200) | st.lists(
    st.sampled_from(
        [
            "read",
            "a.py",
            "src/",
            "list",
            "ls",
            "run",
            "`make`",
            "grep",
            "TODO",
            "in",
            "and",
            "then",
            ",",
            ".",
            "write",
            "to",
            "x.txt",
            '"hi"',
            "recover",
            "compacted",
            "[Compacted, ID: call_1.",
            "ID",
            "call_2",
            "count",
            "tokens",
            "5",
            "Focus:",
        ]
    ),
    max_size=25,
).map(" ".join)


@st.composite
def messages(draw):
    result = []
    for _ in range(draw(st.integers(1, 8))):
        role = draw(roles)
        message = {"role": role, "content": draw(words)}
        if role == "assistant" and draw(st.booleans()):
            message["tool_calls"] = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {
                        "name": draw(st.sampled_from(["read_file", "run_command", "other"])),
                        "arguments": draw(st.sampled_from(['{"path": "a"}', "not json", "[]", '{"command": 5}'])),
                    },
                }
                for n in range(draw(st.integers(0, 3)))
            ]
        if role == "tool":
            message["tool_call_id"] = f"call_{draw(st.integers(0, 3))}"
        result.append(message)
    return result


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values)
def test_any_json_body_is_either_a_request_or_a_request_error(value):
    try:
        request = parse_chat_request(json.dumps(value).encode())
    except RequestError as error:
        assert error.status == 400 and error.body()["error"]["message"]
    else:
        assert request.messages


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=messages(), with_tools=st.booleans(), with_reasoning=st.booleans())
def test_any_conversation_gets_a_deterministic_reply(conversation, with_tools, with_reasoning):
    body = {"messages": conversation}
    if with_tools:
        body["tools"] = BUILTIN_TOOLS
    request = parse_chat_request(json.dumps(body).encode())
    meta = ReplyMeta(
        "chatcmpl-x",
        prompt_tokens=1,
        budget_tokens=None,
        reasoning_field="reasoning_content" if with_reasoning else None,
        created=0,
    )
    first = build_completion(decide_reply(request, with_reasoning), meta)
    second = build_completion(decide_reply(request, with_reasoning), meta)
    assert first == second
    message = first["choices"][0]["message"]
    offered = {tool["function"]["name"] for tool in BUILTIN_TOOLS} if with_tools else set()
    for call in message.get("tool_calls", []):
        assert call["function"]["name"] in offered
        assert isinstance(json.loads(call["function"]["arguments"]), dict)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=messages(), focus=words)
def test_any_transcript_gets_eight_sections_under_the_cap(conversation, focus):
    summary = write_summary(conversation, "system_context pending_tasks\nFocus: " + focus)
    headings = [line for line in summary.splitlines() if line.startswith("## ")]
    assert headings == [
        f"## {name}"
        for name in (
            "system_context",
            "overview",
            "key_facts",
            "user_preferences",
            "decisions",
            "pending_tasks",
            "open_questions",
            "tone_context",
        )
    ]
    assert count_text_tokens(summary) < 1024
