"""The foundations every layer uses: atomic private writes, where files live, confined file opening,
valid text, the error types, and the engine's typed events.

May import: nothing of xun (only the standard library).
"""
