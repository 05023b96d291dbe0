"""What several commands share: the working directory, session ids, opening a session, interrupts."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from xun.base.valid_text import escape_control
from xun.cli.exits import CommandError

if TYPE_CHECKING:
    from xun.agent.config import XunConfig
    from xun.agent.launch import Session
    from xun.agent.opener import SessionOpener
    from xun.context.sessions import SessionStore

T = TypeVar("T")

SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def workdir_of(args: argparse.Namespace) -> Path:
    return Path(args.workdir) if args.workdir else Path.cwd()


def settings_of(args: argparse.Namespace) -> XunConfig:
    """The settings as the command line gives them: the files, `--set`, `--base-url` and `--model`
    (raises ConfigError)."""
    from xun.agent.config import flag_overrides, load_config

    return load_config(workdir_of(args), flag_overrides(args.overrides, args.base_url, args.model))


def store_of(args: argparse.Namespace) -> SessionStore:
    from xun.context.sessions import SessionStore

    return SessionStore(workdir_of(args))


def _known_ids(store: SessionStore, extra_folders: Iterable[tuple[Path, str]] = ()) -> set[str]:
    ids = {path.stem for path in store.root.glob("*.json")} if store.root.is_dir() else set()
    for folder, suffix in extra_folders:
        if folder.is_dir():
            ids.update(path.name[: -len(suffix)] for path in folder.glob(f"*{suffix}"))
    return ids


def resolve_session_id(store: SessionStore, text: str, *, with_logs: bool = False) -> str:
    """The session id `text` names: itself, or the one id it is a prefix of. Raises CommandError (exit 2)."""
    from xun.context.sessions import check_session_id

    try:
        check_session_id(text)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    ids = _known_ids(store, [(store.offload_dir, ".md")] if with_logs else [])
    if text in ids:
        return text
    matches = sorted(i for i in ids if i.startswith(text))
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise CommandError(f"session id {text!r} is ambiguous: it starts {len(matches)} sessions ({shown})")
    raise CommandError(f"no session {text!r} in {store.root} (see `xun sessions`)")


def latest_session_id(store: SessionStore) -> str:
    infos = store.list()
    if not infos:
        raise CommandError(f"there is no saved session in {store.root}")
    return infos[0].conversation_id


def session_id_argument(args: argparse.Namespace) -> str | None:
    """The session a command names: its positional ID, else `--resume ID`; None for the newest."""
    ident = getattr(args, "id", None)
    if ident:
        return ident
    if args.resume:  # LATEST ("") means the newest, like no id
        return args.resume
    return None


def open_model_session(
    args: argparse.Namespace,
    *,
    resume: str | None,
    extra_overrides: Iterable[str] = (),
    on_event: Callable[[Any], Any] | None = None,
    confirm: Callable[[Any], Awaitable[Any]] | None = None,
) -> Session:
    """Open the session the global options describe (settings, model server, conversation, agent)."""
    return session_opener(args, resume=resume, extra_overrides=extra_overrides, on_event=on_event, confirm=confirm)()


def session_opener(
    args: argparse.Namespace,
    *,
    resume: str | None,
    extra_overrides: Iterable[str] = (),
    on_event: Callable[[Any], Any] | None = None,
    confirm: Callable[[Any], Awaitable[Any]] | None = None,
) -> SessionOpener:
    """`open_model_session` not yet called: the app reads the conversation first and shows it while the rest
    opens (`SessionOpener`)."""
    from xun.agent.opener import SessionOpener

    return SessionOpener(
        workdir_of(args),
        resume=resume,
        resolve=resolve_session_id,
        fork=getattr(args, "fork", False),
        read_only=getattr(args, "read_only", False),
        overrides=[*args.overrides, *extra_overrides],
        base_url=args.base_url,
        model=args.model,
        offline=args.offline,
        on_event=on_event,
        confirm=confirm,
    )


def announce_provider(session: Session, args: argparse.Namespace, err: TextIO) -> None:
    """Say on stderr when an untrusted folder's settings were left out, and when the offline demo model
    answers, and why."""
    if session.config.withheld:
        from xun.agent.trust import describe_withheld

        print(
            f"xun: {escape_control(describe_withheld(session.config.withheld, session.agent.workdir))}",
            file=err,
            flush=True,
        )  # the key names are the folder's own
    if not session.offline:
        return
    if args.offline:
        why = "--offline"
    else:
        why = f"no API key is set (${session.config.provider.api_key_env}) and no --base-url"
    print(f"xun: {why}: using the {escape_control(session.describe_provider())}", file=err, flush=True)


def api_key_of(session: Session) -> str | None:
    from xun.agent.config import resolve_api_key

    return resolve_api_key(session.config)


class InterruptGuard:
    """SIGINT and SIGTERM cancel the running work once; later signals only call `on_repeat`.

    The handlers run on the event loop, so they can never interrupt synchronous code such as saving
    the session: a second Ctrl+C while the session is being written waits for the write to finish.
    """

    def __init__(self, on_repeat: Callable[[], None] | None = None) -> None:
        self.on_repeat = on_repeat
        self.signals: list[int] = []
        self._task: asyncio.Future[Any] | None = None
        self._installed: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> InterruptGuard:
        self._loop = asyncio.get_running_loop()
        for signum in SIGNAL_EXIT:
            try:
                self._loop.add_signal_handler(signum, self._received, signum)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
                continue
            self._installed.append(signum)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        for signum in self._installed:
            self._loop.remove_signal_handler(signum)
        self._installed.clear()

    def _received(self, signum: int) -> None:
        self.signals.append(signum)
        if len(self.signals) == 1:  # without a running task yet, `run` cancels the work when it starts
            if self._task is not None and not self._task.done():
                self._task.cancel()
        elif self.on_repeat is not None:
            self.on_repeat()

    @property
    def exit_code(self) -> int | None:
        """130 after SIGINT, 143 after SIGTERM, None when no signal came."""
        return SIGNAL_EXIT.get(signal.Signals(self.signals[0])) if self.signals else None

    async def run(self, work: Awaitable[T]) -> tuple[bool, T | None]:
        """Run `work`; (True, result) when it finished, (False, None) when a signal cancelled it."""
        task = asyncio.ensure_future(work)
        self._task = task
        if self.signals:  # a signal came before the work started
            task.cancel()
        await asyncio.wait({task})
        self._task = None
        if task.cancelled():
            return False, None
        return True, task.result()
