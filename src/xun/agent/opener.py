"""Opening a session in two steps, so the app can show a resumed transcript before the rest is ready.

Importing this module costs nothing (the command line builds an opener before the app's first frame);
both steps run in the thread the app opens the session in.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xun.agent.launch import Session
    from xun.context.conversation import Conversation
    from xun.context.sessions import SessionStore


class SessionOpener:
    """`open_session` in two steps, for the app: `conversation()` reads (and locks) the session to continue,
    which imports little, so its transcript can be shown while the settings, the model server and the agent
    load; calling the opener then opens the session around that conversation. Each call opens anew (the app
    calls it again after a trust answer). `resolve` turns the `resume` the user typed (an id's prefix) into
    the id, in the opener's thread, not before the app's first frame."""

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        resume: str | None = None,
        fork: bool = False,
        read_only: bool = False,
        resolve: Callable[[SessionStore, str], str] | None = None,
        **options: Any,
    ) -> None:
        self.workdir = Path(workdir) if workdir is not None else Path.cwd()
        self.resume, self.fork, self.read_only = resume, fork, read_only
        self._resolve = resolve
        self.options = options
        """The rest of `open_session`'s options."""
        self._opened: tuple[SessionStore, Conversation] | None = None

    def conversation(self, peek: Callable[[Path], object] | None = None) -> Conversation | None:
        """The conversation to continue, read now; None for a new session (there is nothing to show yet).
        `peek` is called with the session's file before it is read (`SessionStore.open`)."""
        if self.resume is None:
            return None
        if self._opened is None:
            from xun.context.sessions import LATEST, SessionStore

            store = SessionStore(self.workdir)
            resume = self.resume
            if resume != LATEST and self._resolve is not None:
                resume = self._resolve(store, resume)
            self._opened = (store, store.open(resume, fork=self.fork, read_only=self.read_only, peek=peek))
        return self._opened[1]

    def __call__(self) -> Session:
        from xun.agent.launch import open_session

        self.conversation()
        opened, self._opened = self._opened, None
        return open_session(
            self.workdir, resume=self.resume, fork=self.fork, read_only=self.read_only, opened=opened, **self.options
        )
