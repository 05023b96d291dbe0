"""Atomic file writes (a reader sees the old file or the new one, never half of either), and reads of
xun's own files that fail at once on anything but a regular file."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO


def write_text_atomic(path: str | os.PathLike[str], text: str, mode: int = 0o600, folder_mode: int = 0o700) -> None:
    """Write `text` to `path` through a temporary file in the same folder, fsynced, then renamed.

    The file gets `mode` (owner-only by default); missing folders are made with `folder_mode`. On any
    failure the old file is left as it was and the temporary file is removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True, mode=folder_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(target.parent)


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
