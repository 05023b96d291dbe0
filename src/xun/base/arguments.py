"""Argument types shared by the command lines: `xun`, `xun offline-server` and the benchmark scripts."""

from __future__ import annotations

import argparse

DEFAULT_MAX_ITERATIONS = 500
"""Model calls in one turn before it stops: long turns (hundreds of tool rounds) are what compaction is for
(xun-agent 1.4.3 allows 512). Here, so that `xun run --help` names it without importing the agent."""


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (also for `xun offline-server` and the benchmarks)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value
