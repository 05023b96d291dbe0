"""Small helpers that build conversations the way an agent would (shared by the engine tests)."""

from __future__ import annotations

import json

from xun.context.conversation import Conversation


def assistant_call(c: Conversation, *calls: tuple[str, str, dict], content: str | None = None) -> None:
    """Append an assistant message that calls tools: each call is (id, name, arguments)."""
    c.add_agent_message(
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, name, args in calls
            ],
        }
    )


def tool_round(c: Conversation, i: int, size: int = 400) -> str:
    """One assistant call to read_file and its result; returns the result text."""
    assistant_call(c, (f"call_{i}", "read_file", {"path": f"src/f{i}.py"}))
    text = f"contents of file {i}\n" + "x" * size
    c.add_tool_result(f"call_{i}", text)
    return text


def long_conversation(rounds: int = 30, system: str = "You are a careful assistant.") -> Conversation:
    c = Conversation()
    c.set_system_message_content(system)
    c.add_user_message("please analyse the repository")
    for i in range(rounds):
        tool_round(c, i)
        if i % 5 == 4:
            c.add_user_message(f"now part {i}")
    return c


def fresh_length(c: Conversation) -> int:
    """The estimate computed from scratch, to check the incremental figure against."""
    from xun.context.messages import message_length

    return sum(message_length(m) for m in c.messages)
