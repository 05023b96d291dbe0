"""Compaction: the automatic policies (the seed's escalation and the cache-aware one), the tier 2 summary
(`compact_conversation`), fitting a request into the model's window, the extractive summary, and the
breakdown of what the context holds.

May import: `xun.base`, `xun.context`. The agent reaches it through `CompactionHost`, the protocol the
policies need; the compaction layer never imports the agent.

The seed's names live here: `xun.compact.compact_conversation`, `xun.compact.ESCALATION_RATIO`, the
policies and the result types (imported on first use).
"""

from __future__ import annotations

from xun.base.lazy import lazy_names

_SEED_NAMES = {
    "ESCALATION_RATIO": "xun.compact.policy",
    "AutoCompactor": "xun.compact.policy",
    "CacheAwareCompactor": "xun.compact.policy",
    "CompactorAbstract": "xun.compact.policy",
    "compact_conversation": "xun.compact.summary",
    "SummaryCompactResult": "xun.context.compaction_results",
    "ToolCallCompactResult": "xun.context.compaction_results",
    "CompactionCounter": "xun.context.compaction_results",
}

__all__ = list(_SEED_NAMES)

__getattr__ = lazy_names(__name__, _SEED_NAMES)
