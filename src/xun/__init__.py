"""xun: a terminal app for long LLM agent sessions, with visible, recoverable context compaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xun.base.lazy import lazy_names

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
    from xun.agent.loop import Agent as Agent
    from xun.compact.policy import AutoCompactor as AutoCompactor
    from xun.compact.policy import CompactorAbstract as CompactorAbstract
    from xun.context.conversation import Conversation as Conversation


__getattr__ = lazy_names(__name__, _LAZY)
