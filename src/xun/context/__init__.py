"""The context and its history: the typed messages, the `Conversation` (estimates, tier 1 reclaim, tier 2
plan and apply, the session format), and everything kept on disk: session files, the offload log of
summarised originals, the searchable recall index, prompt-cache and usage records.

May import: `xun.base`.
"""
