"""Atomic file writes (a reader sees the old file or the new one, never half of either), and reads of
xun's own files that fail at once on anything but a regular file."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

TEMP_PREFIX = "."
TEMP_SUFFIX = ".tmp"
"""`write_text_atomic` writes `<folder>/.<name>.<random>.tmp` (`mkstemp` with these around `<name>.`), so
the temporary file is hidden, sits beside its target and cannot be taken for it."""

_TEMP_NAME = re.compile(re.escape(TEMP_PREFIX) + r"(?P<target>.+)\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX), re.ASCII)
"""The name of a temporary file of `write_text_atomic`: the prefix, the target's name, a dot, the eight
random characters `mkstemp` draws (lower-case letters, digits, `_`) and the suffix; nothing else."""


def private_dirs(folder: str | os.PathLike[str], mode: int = 0o700) -> None:
    """Make `folder` and every missing folder above it with `mode` (owner-only by default); `mkdir`'s
    `parents` would give the folders above the default mode (0755: `.xun` readable by every user)."""
    missing = []
    path = Path(folder)
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=mode)


def fill_and_sync(fd: int, text: str | Iterable[str], mode: int) -> None:
    """Give a new temporary file `mode`, write `text` (or its pieces, one after the other) into it and flush
    it to disk; closes `fd`."""
    os.fchmod(fd, mode)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        for piece in [text] if isinstance(text, str) else text:
            handle.write(piece)
        handle.flush()
        os.fsync(handle.fileno())


def write_text_atomic(
    path: str | os.PathLike[str], text: str | Iterable[str], mode: int = 0o600, folder_mode: int = 0o700
) -> None:
    """Write `text` (or its pieces) to `path` through a temporary file in the same folder, fsynced, then renamed.

    The file gets `mode` (owner-only by default); missing folders are made with `folder_mode`. On any
    failure the old file is left as it was and the temporary file is removed.
    """
    target = Path(path)
    private_dirs(target.parent, folder_mode)
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    try:
        fill_and_sync(fd, text, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


def temp_target(name: str) -> str | None:
    """The name of the file a temporary file of `write_text_atomic` was for, or None when `name` is not
    the name of such a temporary file."""
    found = _TEMP_NAME.fullmatch(name)
    return found["target"] if found else None


def remove_stale_temp_files(folder: str | os.PathLike[str] | int, older_than: float, target_suffix: str = "") -> int:
    """Delete the temporary files of `write_text_atomic` left in `folder` by a process that was killed
    between creating one and renaming it; return how many were removed.

    Only regular files with exactly that name (for a target ending in `target_suffix`) whose mtime is more
    than `older_than` seconds ago: a younger one may belong to a write in progress in another process.
    Symlinks and everything else are left alone, and nothing here raises: a folder that is missing,
    unreadable or read-only just keeps its files. `folder` may be a descriptor of the folder (the names are
    then removed in the folder it holds, whatever its path leads to meanwhile).
    """
    removed = 0
    cutoff = time.time() - older_than
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                target = temp_target(entry.name)
                if target is None or not target.endswith(target_suffix):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                        continue
                    os.unlink(entry.name, dir_fd=folder) if isinstance(folder, int) else os.unlink(entry.path)
                except OSError:
                    continue
                removed += 1
    except OSError:
        pass
    return removed


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable (best effort where the OS does not allow it)."""
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file for reading in binary mode, refusing anything but a regular file: a FIFO where a
    session or config should be would block the open forever, and a device such as /dev/zero would
    never end. Raises IsADirectoryError for a directory and OSError(EINVAL) for the rest."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
