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


class SessionLocked(RuntimeError):
    """The session is open in another xun process, which alone may write it (see `xun.context.sessions`)."""

    def __init__(self, conversation_id: str, holder: str) -> None:
        self.conversation_id = conversation_id
        self.holder = holder
        super().__init__(
            f"session {conversation_id} is open in another xun process ({holder or 'unknown'}), which alone "
            "may save it; wait until it ends, or add --fork to continue a copy as a new session, or "
            "--read-only to open it without saving"
        )
