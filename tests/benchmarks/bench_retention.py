"""What compaction keeps (issue 23): a 200-turn session with 60 planted facts, compacted by the real policy.

    python3 tests/benchmarks/bench_retention.py [--turns 200] [--window 16384]

The session: 200 turns of a prompt, a `read_file` call, its result and an answer, saved with a history
index (as a real session is). 60 facts are planted at turns spread over its age, 12 of each kind: a file
path (in a call's arguments), an error line (in a tool result), a decision (in an answer), a user
constraint (in a prompt: "never …") and an id (in a tool result). Then one more prompt goes to the offline
server over real HTTP, and the agent's own policy compacts before the model call (window `--window`,
threshold at 60% of it), twice: with the offline server's summarizer (`offline`) and with a server whose
summaries have none of the sections, so xun writes its extractive summary (`extractive`, src/xun/compact/extractive.py).

For each fact: `context` (its text is in the request the model gets: summary, kept tail), `recall` (one
`search_history` call with its words finds it), or `lost`. One JSON line per fact and per summarizer's
totals, then a table. Target: none lost, and every user constraint in the context.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from xun.agent.config import XunConfig
from xun.agent.loop import Agent
from xun.agent.tools import ToolContext
from xun.context.conversation import Conversation
from xun.context.sessions import SessionStore
from xun.offline import server as offline_server
from xun.offline.model import FixedText, Reply
from xun.offline.quoting import message_text
from xun.offline.server import OfflineServer
from xun.offline.summary import is_summary_request

KINDS = ("path", "error", "decision", "constraint", "id")


def fact(kind: str, n: int) -> tuple[str, str]:
    """(the planted text, the words search_history is asked for)."""
    if kind == "path":
        return f"src/pkg{n}/handler_q{n}x.py", f"handler_q{n}x"
    if kind == "error":
        return f"ChecksumError: block q{n}e of archive failed verification", f"q{n}e"
    if kind == "decision":
        return f"We decided to keep the q{n}d cache in sqlite instead of redis.", f"q{n}d"
    if kind == "constraint":
        return f"never edit the folder vendor_q{n}c (it is generated)", f"vendor_q{n}c"
    return f"ticket id Q{n}ID-{7000 + n}", f"Q{n}ID"


def plant(conversation: Conversation, turns: int) -> list[dict]:
    facts = []
    spots = {round(i * (turns - 1) / 59): i for i in range(60)}
    for turn in range(turns):
        i = spots.get(turn)
        kind = KINDS[i % 5] if i is not None else None
        text, words = fact(kind, i) if kind else ("", "")
        if kind:
            facts.append({"fact": i, "kind": kind, "turn": turn, "text": text, "query": words})
        prompt = f"turn {turn}: look at module_{turn}.py" + (f"; {text}" if kind == "constraint" else "")
        conversation.add_user_message(prompt)
        path = text if kind == "path" else f"lib/module_{turn}.py"
        conversation.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{turn:04d}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
                    }
                ],
            }
        )
        result = "".join(f"{n:4d}\tvalue_{turn}_{n} = compute({n})\n" for n in range(1, 30))
        if kind in ("error", "id"):
            result += text + "\n"
        conversation.add_tool_result(f"call_{turn:04d}", result)
        answer = f"module_{turn}.py computes 29 values." + (f" {text}" if kind == "decision" else "")
        conversation.add_agent_message({"role": "assistant", "content": answer})
    return facts


async def compact_and_check(summarizer: str, turns: int, window: int) -> list[dict]:
    real_decide = offline_server.decide_reply

    def empty_summaries(request, *args, **kwargs):
        users = [m for m in request.messages if m.get("role") == "user"]
        if users and is_summary_request(message_text(users[-1])):
            return Reply(FixedText("I have nothing to add."))  # no sections: unusable, twice
        return real_decide(request, *args, **kwargs)

    if summarizer == "extractive":
        offline_server.decide_reply = empty_summaries
    server = OfflineServer(context_window=window).start()
    requests: list[list[dict]] = []
    recorder = offline_server.decide_reply

    def recording(request, *args, **kwargs):
        requests.append(request.messages)
        return recorder(request, *args, **kwargs)

    offline_server.decide_reply = recording
    try:
        with tempfile.TemporaryDirectory(prefix="xun-retention-") as folder:
            store = SessionStore(Path(folder))
            conversation = store.new()
            facts = plant(conversation, turns)
            store.save(conversation)
            config = XunConfig()
            config.provider.base_url = server.base_url
            config.model.name = "xun-offline"
            config.model.context_window = window
            config.auto_compact.token_threshold = int(window * 0.6)
            agent = Agent(config, conversation=conversation, workdir=Path(folder), environ={"OPENAI_API_KEY": "k"})
            events: list = []
            agent.on_event = events.append
            await agent.run("what is left to do?")
            store.save(conversation)
            final = conversation.completion_params()  # what the model gets now (the turn may have failed)
            turn = next((e for e in events if getattr(e, "type", "") == "turn_finished"), None)
            failures = [getattr(e, "reason", "") for e in events if getattr(e, "type", "") == "compaction_failed"]
            context = "\n".join(
                message_text(m) + "".join(c["function"]["arguments"] for c in m.get("tool_calls") or ()) for m in final
            )
            tool_context = ToolContext.from_config(
                config, workdir=Path(folder), conversation=conversation, confirm=None, environ={}
            )
            for item in facts:
                if item["text"] in context or item["query"] in context:
                    item["where"] = "context" if item["text"] in context else "context (words only)"
                    continue
                outcome = await agent.toolbox.call("search_history", {"query": item["query"]}, tool_context)
                item["where"] = (
                    "recall" if not outcome.is_error and item["query"].lower() in outcome.text.lower() else "lost"
                )
            summaries = [e for e in events if getattr(e, "type", "") == "summary_finished"]
            for item in facts:
                item["summarizer"] = summarizer
            facts.append(
                {
                    "summarizer": summarizer,
                    "totals": True,
                    "requests": len(requests),
                    "final_messages": len(final),
                    "turn": getattr(turn, "status", None),
                    "turn_error": getattr(turn, "error", None),
                    "compaction_failures": [f[:300] for f in failures],
                    "summaries": [
                        {
                            "method": getattr(e, "method", None),
                            "condensed": getattr(e, "condensed", None),
                            "kept": getattr(e, "kept", None),
                        }
                        for e in summaries
                    ],
                }
            )
            agent.close() if hasattr(agent, "close") else None
            return facts
    finally:
        server.stop()
        offline_server.decide_reply = real_decide


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=16384)
    args = parser.parse_args()
    table: dict[str, dict[str, dict[str, int]]] = {}
    for summarizer in ("offline", "extractive"):
        rows = asyncio.run(compact_and_check(summarizer, args.turns, args.window))
        for row in rows:
            if row.get("totals"):
                continue
            where = row["where"].split(" ")[0]
            table.setdefault(summarizer, {}).setdefault(row["kind"], {"context": 0, "recall": 0, "lost": 0})[where] += 1
            print(json.dumps({k: row[k] for k in ("summarizer", "fact", "kind", "turn", "where", "text")}), flush=True)
        totals = [row for row in rows if row.get("totals")][0]
        lost = sum(1 for row in rows if row.get("where") == "lost")
        constraints_out = sum(
            1 for row in rows if row.get("kind") == "constraint" and not row.get("where", "").startswith("context")
        )
        print(
            json.dumps(
                {
                    **totals,
                    "lost": lost,
                    "constraints_not_in_context": constraints_out,
                    "target_met": lost == 0 and constraints_out == 0 and totals["turn"] != "error",
                }
            ),
            flush=True,
        )
    print()
    print("| summarizer | kind       | context | recall | lost |")
    print("|------------|------------|---------|--------|------|")
    for summarizer, kinds in table.items():
        for kind in KINDS:
            c = kinds.get(kind, {"context": 0, "recall": 0, "lost": 0})
            print(f"| {summarizer:<10} | {kind:<10} | {c['context']:>7} | {c['recall']:>6} | {c['lost']:>4} |")


if __name__ == "__main__":
    main()
