"""`xun` with no command: the full-screen app (`xun.tui.run`)."""

from __future__ import annotations

import argparse
import sys

from xun.cli.exits import EXIT_FAILED, CommandError
from xun.cli.commands.common import session_opener


def main(args: argparse.Namespace) -> int:
    try:
        from xun.tui import run as run_tui
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "textual":
            raise CommandError(
                f"the full-screen app needs Textual, which cannot be imported ({exc}); "
                "`xun run PROMPT` works without it",
                EXIT_FAILED,
            ) from None
        raise
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CommandError(
            "the full-screen app needs a terminal on standard input and output; "
            "in scripts use `xun run PROMPT` (see `xun run --help`)"
        )
    # The app draws its first frame, then opens the session in a thread: a resumed conversation first (its
    # transcript is shown at once), then the settings, the model server and the agent; what fails there (bad
    # settings, an unknown session) is raised here once the screen is restored. The header's badge and the
    # welcome text say when the offline demo model answers.
    return int(run_tui(session_opener(args, resume=args.resume)))
