"""Long sessions built directly as files, as weeks of use leave them: rounds of a prompt, a read_file call,
its result and an answer, with summaries whose originals went to the offload log."""

from __future__ import annotations

import json
from pathlib import Path

from xun.base.events import SummaryFinished
from xun.context.sessions import SessionStore


def add_round(conversation, i: int) -> None:
    conversation.add_user_message(f"question {i}: read src/file{i}.py")
    conversation.add_agent_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/file{i}.py"})},
                }
            ],
        }
    )
    conversation.add_tool_result(f"call_{i}", f"[src/file{i}.py]\n" + "print('hello')\n" * 30)
    conversation.add_agent_message({"role": "assistant", "content": f"Answer **{i}**: the file prints hello."})


def long_session(
    root: Path, rounds: int, *, summaries: int = 0, conversation_id: str = "long-session", logged: bool = False
) -> str:
    """A session of `rounds` rounds (4 messages each); with `summaries`, that many summaries, evenly spread,
    each keeping the last round before it (its originals in the offload log), and with `logged` each in the
    compaction log as the engine records it. Returns its id."""
    store = SessionStore(root)
    conversation = store.new()
    conversation.conversation_id = conversation_id
    stretch = rounds // (summaries + 1)
    for i in range(rounds):
        add_round(conversation, i)
        if summaries and (i + 1) % stretch == 0 and (i + 1) // stretch <= summaries:
            conversation.compact(lambda messages, i=i: f"summary up to question {i}", keep_recent=4)
            if logged:
                event = conversation.summarizations[-1]
                conversation.compaction_log.append(
                    SummaryFinished(
                        condensed=event.condensed_count,
                        kept=event.kept_count,
                        offload_path=event.file_path,
                        tokens_before=60_000,
                        tokens_after=20_000,
                        time=event.time,
                    ).to_json()
                )
    conversation.record_usage(60_000)
    store.save(conversation)
    return conversation.conversation_id
