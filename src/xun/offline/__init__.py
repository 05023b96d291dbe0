"""The embedded default model: an offline OpenAI-compatible server with a deterministic scripted model.

It is not an LLM. It exists so xun works with no account and no network, and so every test talks to a
real HTTP server. Standard library only; never imports Textual.

May import: `xun.base`, `xun.context` (the offload log's format, which the scripted summaries quote).
It sits beside compaction: `xun.agent.launch` starts it, and nothing of the agent is imported here.
"""

from __future__ import annotations

from xun.offline.command import main
from xun.offline.faults import FAULT_KINDS, Fault, FaultSchedule
from xun.offline.protocol import MODEL_ID
from xun.offline.server import OfflineServer
from xun.offline.tokenizer import count_prompt_tokens, count_text_tokens

__all__ = [
    "FAULT_KINDS",
    "MODEL_ID",
    "Fault",
    "FaultSchedule",
    "OfflineServer",
    "count_prompt_tokens",
    "count_text_tokens",
    "main",
]
