"""The `xun` command line (the full CLI lands with its own issue; this is the entry point)."""

from __future__ import annotations

import argparse
import sys

from xun import __version__


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="xun", description="xun: long LLM agent sessions, visible compaction.")
    parser.add_argument("--version", action="version", version=f"xun {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    # The offline server parses its own options (`xun offline-server --help`), so they pass through.
    commands.add_parser(
        "offline-server",
        add_help=False,
        help="serve the offline demo model (deterministic, scripted, not an LLM) on loopback",
    )
    args, rest = parser.parse_known_args(argv)
    if args.command == "offline-server":
        from xun.offline import main as offline_server_main  # imported here so `xun --version` stays light

        return offline_server_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    print("xun: the full-screen app is not built yet; see the README.", file=sys.stderr)
    return 0
