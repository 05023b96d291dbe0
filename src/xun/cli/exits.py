"""Exit codes and the one error type every command raises: shared by `xun.cli.main`, which reports them,
and the commands, which raise them (so the commands never import the parser)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

LATEST = ""
"""`--resume` with no id: the newest session (the same value as `xun.context.sessions.LATEST`)."""


class CommandError(Exception):
    """A problem the user can fix, reported as one line: `xun: <message>`, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code
