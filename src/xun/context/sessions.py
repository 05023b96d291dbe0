"""The session store: one file per conversation under `.xun/sessions/` (`XUN_HOME` replaces `.xun`).

One writer per session: a process that opens a session for writing holds an advisory lock (`flock`) on
`sessions/<id>.lock` until it closes it, and writes its pid and command line there; a second opener gets
`SessionLocked` naming that process (and may fork the session or open it read-only instead). A save by a
store that does not hold the lock takes it for the length of the write, so no process can overwrite a
session another one has open. The kernel drops the lock when its holder dies: a lock file left behind
means nothing. A holder that lets go removes the file first (so a clean exit leaves none), and a taker
checks that the file it locked is still the one at the path (else it was removed under it and it takes
the new one): two processes can never hold the session through two files.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import builtins
import functools
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xun.base import paths
from xun.base.atomic import open_regular, remove_stale_temp_files
from xun.base.confined import open_state, state_dir_fd, write_state
from xun.base.errors import SessionFormatError, SessionLocked
from xun.context.conversation import Conversation
from xun.context.session_format import FORMAT_2_OPENING, is_session_id, read_session, session_head
from xun.base.timestamps import sane_timestamp

if TYPE_CHECKING:
    from xun.context.recall import RecallIndex

STALE_TEMP_SECONDS = 600.0
"""A temporary file of a session save older than this (by mtime) is left over from a killed save and is
removed. Younger ones are kept: another xun process on the same folder may be writing it right now, and a
save takes far less than ten minutes even for a large session on a slow disk."""
LATEST = ""
"""Pass as `resume` to continue the newest session."""


class NoSessionToResume(LookupError):
    """`--resume` with no saved session in this working directory."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of `xun sessions`: read without parsing the session's archive of reclaimed originals."""

    conversation_id: str
    path: Path
    updated_at: float
    messages: int
    tokens: int | None
    summaries: int
    reclaimed: int
    title: str = ""
    """/name's name, else the first prompt."""


def check_session_id(conversation_id: str) -> str:
    """Refuse ids that could name a path outside the store (`../x`, `a/b`, empty)."""
    if not is_session_id(conversation_id):
        raise ValueError(f"{conversation_id!r} is not a valid session id (letters, digits, '_', '-', '.')")
    return conversation_id


class SessionLock:
    """An exclusive advisory lock on one session, held until `release` (or the process ends)."""

    def __init__(self, path: Path, conversation_id: str) -> None:
        self.path = path
        while True:
            fd = open_state(path, os.O_RDWR | os.O_CREAT)  # no link followed below the working folder
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(fd, path):
                    break
            except BlockingIOError:
                holder = os.pread(fd, 500, 0).decode("utf-8", "replace").strip()
                os.close(fd)
                raise SessionLocked(conversation_id, holder) from None
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # its holder removed it as it let go, after this opened it: take the file there now
        command = " ".join(sys.argv)[:300]
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {command}\n".encode("utf-8", "replace"), 0)
        except OSError:  # a full disk: who holds it only informs the next taker, the lock itself holds
            pass
        self.fd: int | None = fd

    def release(self) -> None:
        """Remove the lock file while still holding it (a taker that opened it meanwhile sees it is gone
        and takes a new one), then drop the lock."""
        if self.fd is not None:
            try:
                if _same_file(self.fd, self.path):
                    self.path.unlink()
            except OSError:
                pass  # left behind, it means nothing: the next taker locks it
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` (not followed if it is a link) is the file open as `fd`."""
    try:
        at = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (at.st_dev, at.st_ino) == (held.st_dev, held.st_ino)


class SessionStore:
    """Saves, lists and loads conversations for one working directory."""

    def __init__(self, workdir: str | os.PathLike[str] | None = None) -> None:
        self.workdir = Path(workdir) if workdir is not None else Path.cwd()
        self.root = paths.sessions_dir(self.workdir)
        self.offload_dir = paths.offload_dir(self.workdir)
        self._swept = False
        self._locks: dict[str, SessionLock] = {}

    @functools.cached_property
    def recall_index(self) -> RecallIndex:
        """The recall index of this folder (`.xun/history.db`), attached to every conversation the
        store makes or loads, so their summaries and reclaims are indexed as they happen. Made when first
        needed: SQLite is not imported before a resumed session's newest turns show."""
        from xun.context.recall import RecallIndex

        return RecallIndex(self.workdir)

    def lock(self, conversation_id: str) -> None:
        """Hold the session's lock until `unlock`; raises SessionLocked when another process has it."""
        if conversation_id not in self._locks:
            self._locks[conversation_id] = SessionLock(self._lock_path(conversation_id), conversation_id)

    def unlock(self, conversation_id: str | None = None) -> None:
        """Release one session's lock, or every lock this store holds."""
        for ident in [conversation_id] if conversation_id is not None else list(self._locks):
            held = self._locks.pop(ident, None)
            if held is not None:
                held.release()

    def held_elsewhere(self, conversation_id: str) -> str | None:
        """Who holds the session's lock when another process does ("pid N: command", or "" when its lock
        file says nothing), else None. A shared probe of the lock, dropped at once: the holder's file is
        only read."""
        if conversation_id in self._locks:
            return None
        try:
            fd = open_state(self._lock_path(conversation_id), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (OSError, ValueError):
            return None  # no lock file (nobody ever held it), or not one xun reads
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 500, 0).decode("utf-8", "replace").strip()
        except OSError:
            return None
        finally:
            os.close(fd)  # (closing drops the probe's lock)
        return None

    def check_folder(self) -> None:
        """Raise LinkRefused (naming it) when `.xun` or `.xun/sessions` is a symbolic link: xun reads and
        writes sessions only in the folder below the working folder, never where a planted link leads."""
        with contextlib.suppress(FileNotFoundError), state_dir_fd(self.root):
            pass

    def _lock_path(self, conversation_id: str) -> Path:
        return self.root / f"{check_session_id(conversation_id)}.lock"

    def path_for(self, conversation_id: str) -> Path:
        return self.root / f"{check_session_id(conversation_id)}.json"

    def new(self) -> Conversation:
        """A fresh conversation whose summaries offload into this store's history folder (and its index)."""
        return Conversation(offload_dir=self.offload_dir, recall_index=self.recall_index)

    def open(
        self,
        resume: str | None,
        *,
        fork: bool = False,
        read_only: bool = False,
        peek: Callable[[Path], object] | None = None,
    ) -> Conversation:
        """The conversation a session works on, locked for this process unless read-only; the lock is taken
        before the file is read, so what is loaded is what no one else is writing.

        `resume`: None starts a new one, `LATEST` ("") continues the newest, an id continues that one
        (raises NoSessionToResume, FileNotFoundError, SessionFormatError or SessionLocked); `fork`
        continues a copy under a new id, `read_only` takes no lock; `peek` is called with the file to read (locked
        unless read-only) before it is read (`Conversation.load`)."""
        conversation: Conversation | None
        if resume is None:
            conversation = self.new()
        else:
            conversation = self._load_newest(lock=not (fork or read_only), peek=peek) if resume == LATEST else None
            if conversation is None:
                if not (fork or read_only):
                    self.lock(resume)
                try:
                    conversation = self.load(resume, peek=peek)
                except BaseException:
                    self.unlock()
                    raise
            if fork:
                conversation.conversation_id = uuid.uuid4().hex
        if not read_only and (resume is None or fork):
            self.lock(conversation.conversation_id)
        return conversation

    def _load_newest(self, *, lock: bool, peek: Callable[[Path], object] | None = None) -> Conversation:
        """The newest session that can be read (locked with `lock`), found without parsing every session:
        the files are ordered by the save time at their opening (`_saved_at`), and the newest is loaded;
        one whose session part cannot be read is passed over, as `list` passes it over."""
        candidates = []
        self.check_folder()
        for path in self.root.glob("*.json"):
            try:
                candidates.append((*_saved_at(path), path))
            except (OSError, SessionFormatError):
                continue
        candidates.sort(key=lambda candidate: candidate[0], reverse=True)
        for _, ident, path in candidates:
            if lock:
                self.lock(ident)
            try:
                return self.load(ident, peek=peek)
            except SessionFormatError:
                self.unlock(ident)
                try:
                    _read_head(path)
                except (OSError, SessionFormatError):
                    continue
                raise
            except BaseException:
                self.unlock(ident)
                raise
        bad = "; ".join(f"{path}: {reason}" for path, reason in self.unreadable())
        raise NoSessionToResume(
            f"there is no saved session to resume in {self.root}" + (f" that can be read ({bad})" if bad else "")
        )

    def save(self, conversation: Conversation) -> Path:
        path = self.path_for(conversation.conversation_id)
        if not self._swept:
            self._swept = True
            self.remove_stale_temp_files()
        ident = conversation.conversation_id
        with contextlib.ExitStack() as held:
            if ident not in self._locks:  # not ours: hold it for the write, or learn who has it
                held.callback(SessionLock(self._lock_path(ident), ident).release)
            conversation.dump(path, write=write_state)  # no link followed below the working folder
        return path

    def remove_stale_temp_files(self) -> int:
        """Delete what killed saves left in the folder (temporary session files older than
        `STALE_TEMP_SECONDS`; each can be a whole copy of a session); how many were removed.

        `save` calls it once per store, before its first write (which may need the space back): never on
        the way to the app's first frame, and only when this process writes here anyway. Never raises.
        """
        try:
            with state_dir_fd(self.root) as folder:  # never a folder a link leads to
                return remove_stale_temp_files(folder, STALE_TEMP_SECONDS, target_suffix=".json")
        except OSError:
            return 0

    def load(self, conversation_id: str, *, peek: Callable[[Path], object] | None = None) -> Conversation:
        path = self.path_for(conversation_id)
        self.check_folder()
        if not path.exists():
            raise FileNotFoundError(f"no session {conversation_id!r} in {self.root}")
        conversation = Conversation(offload_dir=self.offload_dir).load(path, peek=peek)
        conversation.answer_unanswered_calls()  # a call saved without its result (xun stopped meanwhile)
        conversation.offload_dir = self.offload_dir
        conversation.recall_index = self.recall_index
        return conversation

    def list(self) -> builtins.list[SessionInfo]:
        """Sessions newest first. Files that cannot be read are skipped here; `load` names their problem."""
        return self.scan()[0]

    def unreadable(self) -> builtins.list[tuple[Path, str]]:
        """Session files that cannot be read, with the reason, so front ends can say so."""
        return self.scan()[1]

    def scan(self) -> tuple[builtins.list[SessionInfo], builtins.list[tuple[Path, str]]]:
        """In one reading: the sessions newest first, and the files that cannot be read with the reason
        (newest first by their time on disk), so a listing can show both."""
        infos, bad = [], []
        self.check_folder()
        for path in self.root.glob("*.json"):
            try:
                infos.append(_read_info(path))
            except SessionFormatError as exc:
                bad.append((path, exc.reason))
            except OSError as exc:
                bad.append((path, str(exc)))
        infos.sort(key=lambda info: info.updated_at, reverse=True)
        bad.sort(key=lambda item: _mtime(item[0]), reverse=True)
        return infos, bad

    def latest(self) -> Conversation | None:
        infos = self.list()
        return self.load(infos[0].conversation_id) if infos else None


HEAD_READ = 1 << 18
"""The first piece `xun sessions` reads of a session file (it doubles until the session part is whole)."""


def _read_head(path: Path) -> Any:
    """The session part of a session file (the archive of reclaimed originals neither read nor checked:
    a torn one is named at load), read in growing pieces; older formats are read whole."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    text, size = "", HEAD_READ
    with open_regular(path) as handle:
        while True:
            piece = handle.read(size)
            try:
                text += decoder.decode(piece, final=not piece)
            except UnicodeDecodeError as exc:
                raise SessionFormatError(path, f"not UTF-8 text ({exc})") from None
            head = session_head(text)
            if head is not None:
                return head[0]
            if not piece or not FORMAT_2_OPENING.match(text):
                break
            size *= 2
        text += decoder.decode(handle.read(), final=True)
    return read_session(text, path)[0]


OPENING_READ = 1 << 12
"""What `_saved_at` reads of a session file: format 2 writes the id and the save time in its first bytes."""


def _saved_at(path: Path) -> tuple[float, str]:
    """When the session in `path` was saved and its id, as `list` orders and names it, from the opening of
    the file; the whole session part only for older formats (a 50,000-message session costs 4 KiB here)."""
    with open_regular(path) as handle:
        opening = handle.read(OPENING_READ).decode("utf-8", "ignore")  # a character cut at the end is past the keys
    head = session_head(opening, stop_after="updated_at")
    if head is not None and isinstance(ident := head[0].get("conversation_id"), str) and is_session_id(ident):
        updated = head[0].get("updated_at")
        if isinstance(updated, (int, float)) and not isinstance(updated, bool):
            return float(updated), ident
    info = _read_info(path)
    return info.updated_at, info.conversation_id


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read_info(path: Path) -> SessionInfo:
    data = _read_head(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise SessionFormatError(path, "not a xun session")
    if data.get("conversation_id") and not is_session_id(data["conversation_id"]):
        raise SessionFormatError(path, f"conversation_id {data['conversation_id']!r} is not a file name")
    counter = data.get("compaction")
    counter = counter if isinstance(counter, dict) else {}
    reclaimed = data.get("compacted_toolcalls")
    reclaimed = reclaimed if isinstance(reclaimed, dict) else {}
    updated = data.get("updated_at")
    return SessionInfo(
        conversation_id=str(data.get("conversation_id") or path.stem),
        path=path,
        updated_at=sane_timestamp(updated, path.stat().st_mtime),
        messages=len(data["messages"]),
        # the context as it is now (a reclaim or a summary after the last call made it smaller), else the
        # last reported figure of a session saved before "tokens_now" was
        tokens=next((v for v in (data.get("tokens_now"), data.get("tokens_used")) if isinstance(v, int)), None),
        title=str(data.get("title") or ""),
        summaries=int(counter.get("summary_rounds", 0) or 0),
        reclaimed=int(data.get("compacted_count", reclaimed.get("archived_lines", len(reclaimed))) or 0),
    )
