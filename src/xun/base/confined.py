"""Opening files below a folder without ever following a symbolic link on the way.

`open_beneath(root, relative)` walks `relative` one component at a time from a descriptor of `root`,
each step `O_NOFOLLOW` (folders also `O_DIRECTORY`), so a link anywhere below `root`, or a folder swapped
for a link between a check and the open, fails the open (`ELOOP`/`ENOTDIR`) instead of leading out. The
file tools use it after resolving a path (`xun.agent.tools.confinement`), and xun's own files under `.xun` and
the project instruction files are opened with it, so a planted link cannot make xun read or write a file
elsewhere. `root` itself may be a link (a workspace or `XUN_HOME` reached through one is fine).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import string
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePath
from typing import BinaryIO

from xun.base.atomic import TEMP_PREFIX, TEMP_SUFFIX, fill_and_sync, private_dirs
from xun.base.paths import split_state_path

__all__ = [
    "LinkRefused",
    "dir_fd_beneath",
    "open_beneath",
    "open_inside",
    "open_regular_inside",
    "open_state",
    "state_dir_fd",
    "write_beneath",
    "write_state",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class LinkRefused(OSError):
    """A path below a folder goes through a symbolic link (or `..`), which xun does not follow there."""


def _parts(relative: str | os.PathLike[str]) -> list[str]:
    path = PurePath(relative)
    if path.is_absolute():
        raise LinkRefused(errno.EINVAL, "expected a path relative to its folder", str(relative))
    parts = [part for part in path.parts if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise LinkRefused(errno.EINVAL, "'..' is not allowed here", str(relative))
    return parts


def _refused(exc: OSError, root: Path, relative: str | os.PathLike[str]) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return LinkRefused(
            exc.errno,
            "a symbolic link (or something that is not a folder) is in the way; xun does not follow links here",
            str(root / relative),
        )
    return exc


@contextlib.contextmanager
def dir_fd_beneath(
    root: str | os.PathLike[str],
    relative: str | os.PathLike[str] = ".",
    *,
    create: bool = False,
    folder_mode: int = 0o700,
) -> Iterator[int]:
    """A descriptor of the folder `root/relative`, reached without following links below `root`
    (`create` makes missing folders with `folder_mode`, less the umask)."""
    root = Path(root)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    at = root
    try:
        for part in _parts(relative):
            try:
                child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, folder_mode, dir_fd=fd)
                child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                raise _refused(exc, at, part) from None  # names the link itself
            os.close(fd)
            fd = child
            at = at / part
        yield fd
    finally:
        os.close(fd)


def open_beneath(
    root: str | os.PathLike[str],
    relative: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    mode: int = 0o600,
    *,
    create_folders: bool = False,
) -> int:
    """A raw descriptor of `root/relative` opened with `flags`, no link followed below `root`."""
    parts = _parts(relative)
    if not parts:
        raise LinkRefused(errno.EINVAL, "expected a file below the folder", str(root))
    with dir_fd_beneath(root, PurePath(*parts[:-1]) if len(parts) > 1 else ".", create=create_folders) as parent:
        try:
            return os.open(parts[-1], flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=parent)
        except OSError as exc:
            raise _refused(exc, Path(root), relative) from None


def open_inside(path: str | os.PathLike[str], roots: list[Path], flags: int = os.O_RDONLY) -> int:
    """Open `path` (absolute, or taken as is) when its real location is below one of `roots`, without
    following links after the check. Raises LinkRefused (an OSError) naming the roots otherwise."""
    real = Path(path).expanduser().resolve()
    for root in roots:
        try:
            base = root.resolve()
            relative = real.relative_to(base)
        except (OSError, ValueError):
            continue
        return open_beneath(base, relative, flags)
    where = " or ".join(str(root) for root in roots)
    raise LinkRefused(errno.EACCES, f"it is outside {where}, where these files must be", str(path))


def open_regular_inside(path: str | os.PathLike[str], roots: list[Path]) -> BinaryIO:
    """`open_inside` for reading a regular file (a FIFO or device is refused, as `atomic.open_regular`)."""
    fd = open_inside(path, roots, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def write_beneath(
    root: str | os.PathLike[str],
    relative: str | os.PathLike[str],
    text: str | Iterable[str],
    mode: int,
    folder_mode: int = 0o777,
) -> None:
    """`atomic.write_text_atomic` for `root/relative` done from a descriptor of its folder (made when
    missing, `folder_mode` less the umask): the temporary file and the rename stay in the folder that was
    reached without links, whatever is swapped meanwhile."""
    parts = _parts(relative)
    if not parts:
        raise LinkRefused(errno.EINVAL, "expected a file below the folder", str(root))
    name = parts[-1]
    with dir_fd_beneath(
        root, PurePath(*parts[:-1]) if len(parts) > 1 else ".", create=True, folder_mode=0o777
    ) as folder:
        letters = string.ascii_lowercase + string.digits + "_"
        temp = f"{TEMP_PREFIX}{name}.{''.join(secrets.choice(letters) for _ in range(8))}{TEMP_SUFFIX}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=folder)
        try:
            fill_and_sync(fd, text, mode)
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise
        with contextlib.suppress(OSError):
            os.fsync(folder)


# xun's own state (`.xun`, or `$XUN_HOME`): no link followed below where `paths.split_state_path` says


@contextlib.contextmanager
def state_dir_fd(folder: str | os.PathLike[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of a folder of xun's state, reached without following a link below the working folder
    (or `$XUN_HOME`): a `.xun`, `.xun/sessions` or `.xun/mcp` planted as a link raises LinkRefused naming
    it. `create` makes the missing folders private (0700)."""
    root, below = split_state_path(folder)
    if create:
        private_dirs(root)
    with dir_fd_beneath(root, below, create=create) as fd:
        yield fd


def open_state(path: str | os.PathLike[str], flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """`open_beneath` for a file of xun's state (`state_dir_fd`); with O_CREAT its missing folders are made
    private (0700)."""
    root, below = split_state_path(path)
    create = bool(flags & os.O_CREAT)
    if create:
        private_dirs(root)
    return open_beneath(root, below, flags, mode, create_folders=create)


def write_state(path: str | os.PathLike[str], text: str | Iterable[str], mode: int = 0o600) -> None:
    """`write_beneath` for a file of xun's state (`state_dir_fd`): written atomically, its missing folders
    made private (0700)."""
    root, below = split_state_path(path)
    private_dirs(root)
    write_beneath(root, below, text, mode, folder_mode=0o700)
