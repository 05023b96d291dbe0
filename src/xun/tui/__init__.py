"""The full-screen app. `run(session)` is what plain `xun` calls.

Importing this package is cheap: Textual is imported only when the app is built. The only layer that
imports Textual: it turns the engine's events into Textual messages.

May import: `xun.base`, `xun.context`, `xun.compact`, `xun.agent` (never the command line).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from xun.base.errors import SessionFormatError

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from xun.agent.launch import Session
    from xun.tui.app import XunApp

__all__ = ["XunApp", "run"]


def run(
    session: Session | Callable[[], Session],
    *,
    headless: bool = False,
    size: tuple[int, int] | None = None,
    auto_pilot: Callable[[Pilot[Any]], Awaitable[None]] | None = None,
) -> int:
    """Run the app until the user quits; the session is saved on the way out.

    `session` is an open session (closing it is left to the caller, who opened it), or a function that
    opens one: the app then draws its first frame at once and opens the session in a thread; it closes
    what that function opened, and raises what it raised. Returns the exit code (0 after a normal quit).
    `headless`, `size` and `auto_pilot` are Textual's `App.run` options (for tests and demos: the pilot
    drives the app).

    The cyclic garbage collector is paused from here until the session shows: what is made meanwhile
    (Textual, the app, the SDK, the loaded session) lives as long as the app, and the app then collects
    once, freezes it and resumes the collector (`_freeze_heap`); walking it over and over while it is built
    cost the first frame 10 ms."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        from xun.tui import terminal_input
        from xun.tui.app import XunApp

        terminal_input.install()  # a pasted escape code must not turn the paste into keys, nor Esc and a letter Alt
        app = XunApp(opener=session) if callable(session) else XunApp(session)
        try:
            result = app.run(headless=headless, size=size, auto_pilot=auto_pilot)
        finally:
            try:  # the app saves on quit; this also covers a crash, and costs one write when it did
                app.save_now()
            except (OSError, SessionFormatError) as exc:
                import sys

                print(f"xun: could not save the session: {exc}", file=sys.stderr)
            finally:
                if app.opened_session is not None:
                    app.opened_session.close()
    finally:
        if collecting:
            gc.enable()  # (the app resumed it when the session showed; not if none did)
    if app.open_error is not None:
        raise app.open_error
    if app.saved and app.session is not None:  # as `xun run` does: say how to come back
        import sys

        from xun.base.valid_text import escape_control

        print(
            f"xun: session {app.conversation.conversation_id} saved; continue it with: "
            f"{escape_control(app.session.resume_command('xun'))}",
            file=sys.stderr,
        )
    elif app.session is not None and app.session.read_only:
        import sys

        print(
            f"xun: session {app.conversation.conversation_id} was opened read-only: nothing of this run was saved",
            file=sys.stderr,
        )
    if app.return_code not in (None, 0):
        return int(app.return_code)
    return int(result) if isinstance(result, int) else 0


def __getattr__(name: str) -> object:
    if name == "XunApp":
        from xun.tui.app import XunApp

        return XunApp
    raise AttributeError(name)
