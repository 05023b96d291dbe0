"""Errors that front ends show to the user as they are: each names what is wrong and where."""

from __future__ import annotations

import os


class SessionFormatError(ValueError):
    """A session file (or text) that cannot be loaded: corrupt, truncated, foreign or too new.

    The message names the file and what is wrong. Loading never modifies the file.
    """

    def __init__(self, source: str | os.PathLike[str] | None, reason: str) -> None:
        self.source = str(source) if source is not None else "<session text>"
        self.reason = reason
        super().__init__(f"{self.source}: {reason}")
