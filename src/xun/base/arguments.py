"""Argument types shared by the command lines: `xun`, `xun offline-server` and the benchmark scripts."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (also for `xun offline-server` and the benchmarks)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value
