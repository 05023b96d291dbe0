"""`xun` with no command: the full-screen app (`xun.tui.run(session) -> int`)."""

from __future__ import annotations

import argparse
import sys

from xun.cli import EXIT_FAILED, CommandError
from xun.commands.common import announce_provider, open_model_session


def main(args: argparse.Namespace) -> int:
    try:
        from xun.tui import run as run_tui
    except ImportError as exc:
        missing = exc.name or ""
        if missing == "xun.tui" or missing.startswith("xun.tui."):
            raise CommandError("the full-screen app is not built yet; use `xun run PROMPT` (see `xun --help`)",
                               EXIT_FAILED) from None
        if missing.split(".")[0] == "textual":
            raise CommandError(f"the full-screen app needs Textual, which cannot be imported ({exc}); "
                               "`xun run PROMPT` works without it", EXIT_FAILED) from None
        raise
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CommandError("the full-screen app needs a terminal on standard input and output; "
                           "in scripts use `xun run PROMPT` (see `xun run --help`)")
    session = open_model_session(args, resume=args.resume)
    with session:  # the app saves the session itself (on quit, and after a crash)
        announce_provider(session, args, sys.stderr)
        return int(run_tui(session))
