"""xun: a terminal app for long LLM agent sessions, with visible, recoverable context compaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public names are imported lazily so `xun --version` does not pay for the SDK or Textual.
_LAZY = {
    "Conversation": "xun.context.conversation",
    "Agent": "xun.agent.loop",
    "AutoCompactor": "xun.compact.policy",
    "CompactorAbstract": "xun.compact.policy",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover
    from xun.agent.loop import Agent
    from xun.compact.policy import AutoCompactor, CompactorAbstract
    from xun.context.conversation import Conversation


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'xun' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
