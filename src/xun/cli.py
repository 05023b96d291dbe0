"""The `xun` command line (the full CLI lands with its own issue; this is the entry point)."""

from __future__ import annotations

import argparse
import sys

from xun import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="xun", description="xun: long LLM agent sessions, visible compaction.")
    parser.add_argument("--version", action="version", version=f"xun {__version__}")
    parser.parse_args(argv)
    print("xun: the full-screen app is not built yet; see the README.", file=sys.stderr)
    return 0
