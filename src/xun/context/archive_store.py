"""Where the archive of reclaimed originals is read from: the session file it was loaded from or last
saved to (or, for a session read from text rather than a file, that text).

Memory holds each entry's record and where its text lies in the store; the text is read when asked for.
A file is held open by its descriptor, so a save that replaces its path (a rename) leaves the archive
reading the very file its offsets were taken in. A change made to that file itself (truncated, rewritten
in place) shows in its size, or in the id and length the archive checks at each entry's start, and raises
SessionFormatError naming it: reading never returns other text than the entry's.
"""

from __future__ import annotations

import codecs
import os
import re
import weakref
from collections.abc import Iterator
from typing import Any

from xun.base.atomic import open_regular
from xun.base.errors import SessionFormatError

PIECE = 1 << 20
"""What a save copies of the archive in one read (in bytes or characters)."""

ARCHIVE_BYTES = re.compile(
    rb'\{"format_version":\d+,"compacted_count":\d+,"compacted_chars":\d+,"compacted_bytes":(\d+),'
)
"""How a format 2 session file opens: the archive's length in bytes, which ends the file but for its "}"."""
OPENING_READ = 256
"""Bytes read first: the opening's keys are in the first hundred."""


def utf8_length(text: str, start: int = 0, end: int | None = None) -> int:
    """The length in UTF-8 bytes of `text[start:end]` (lone surrogates as 3 bytes, as a save with
    `ensure_ascii` escapes them), encoded a piece at a time."""
    end = len(text) if end is None else end
    if text.isascii():
        return end - start
    total = 0
    for at in range(start, end, PIECE):
        piece = text[at : min(at + PIECE, end)]
        total += len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
    return total


class SessionFile:
    """A session file open for reading the archive's entries by byte offset (`read_text`)."""

    in_bytes = True
    """Offsets and sizes in this store count bytes (in `SessionText`, characters)."""

    def __init__(self, fd: int, path: str | os.PathLike[str]) -> None:
        self.path = path
        self.fd = fd
        self._closer = weakref.finalize(self, os.close, fd)
        self._identity = self._stat()

    def _stat(self) -> tuple[int, int]:
        held = os.fstat(self.fd)
        return held.st_size, held.st_mtime_ns

    @property
    def size(self) -> int:
        return self._identity[0]

    def close(self) -> None:
        self._closer()

    @classmethod
    def read_whole(cls, path: str | os.PathLike[str]) -> tuple[bytes, SessionFile]:
        """The file's content, and the file held open (raises OSError, or SessionFormatError when the
        file changed while it was read)."""
        with open_regular(path) as handle:
            file = cls(os.dup(handle.fileno()), path)
            data = handle.read()
        if len(data) != file.size or file._stat() != file._identity:
            file.close()
            raise SessionFormatError(path, "the file changed while it was read; open the session again")
        return data, file

    @classmethod
    def read_until_archive(cls, path: str | os.PathLike[str]) -> tuple[bytes, SessionFile, bool]:
        """What comes before a format 2 file's archive (whose length in bytes its opening records: the
        archive is most of a long session's file, read from here when needed), or the whole content when
        the file does not open so; the file held open; whether the archive was left out. Raises as
        `read_whole`."""
        with open_regular(path) as handle:
            file = cls(os.dup(handle.fileno()), path)
            data = handle.read(OPENING_READ)
            layout = ARCHIVE_BYTES.match(data)
            archive_at = file.size - 1 - int(layout[1]) if layout is not None else -1
            partial = len(data) < archive_at
            data += handle.read(archive_at - len(data)) if partial else handle.read()
        if len(data) != (archive_at if partial else file.size) or file._stat() != file._identity:
            file.close()
            raise SessionFormatError(path, "the file changed while it was read; open the session again")
        return data, file, partial

    @classmethod
    def reopen(cls, path: str | os.PathLike[str], archive_bytes: int, key: bytes) -> tuple[SessionFile, int]:
        """The file just saved at `path` (itself, not a link) and where its archive opens (its "{"),
        checked to end with `key`, then an archive of `archive_bytes` bytes, then the closing "}";
        raises OSError or SessionFormatError otherwise."""
        with open_regular(path) as handle:
            file = cls(os.dup(handle.fileno()), path)
        try:
            at, held = os.stat(path, follow_symlinks=False), os.fstat(file.fd)
            start = file.size - 1 - archive_bytes
            if (at.st_dev, at.st_ino) != (held.st_dev, held.st_ino) or start < len(key):
                raise SessionFormatError(path, "the file saved is not at its path")
            if (
                file.read_bytes(start - len(key), len(key) + 1) != key + b"{"
                or file.read_bytes(file.size - 2, 2) != b"}}"
            ):
                raise SessionFormatError(path, "the file saved does not end with the archive written")
        except BaseException:
            file.close()
            raise
        return file, start

    def changed(self, what: str) -> SessionFormatError:
        return SessionFormatError(
            self.path,
            f"the file changed on disk while the session was open ({what}); its reclaimed tool results are "
            "read from it when asked, so it must not be edited or replaced in place while xun has it open",
        )

    def read_text(self, offset: int, size: int) -> str:
        """The text of `size` bytes at `offset`; SessionFormatError when the file changed since it was opened."""
        try:
            return self.read_bytes(offset, size).decode("utf-8")
        except UnicodeDecodeError:
            raise self.changed("an archive entry is not UTF-8 text") from None

    def pieces(self, offset: int, size: int) -> Iterator[str]:
        """The text of `size` bytes at `offset`, read a piece at a time (a character cut at a piece's end
        goes with the next piece)."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        end = offset + size
        while offset < end:
            step = min(PIECE, end - offset)
            try:
                yield decoder.decode(self.read_bytes(offset, step), final=offset + step == end)
            except UnicodeDecodeError:
                raise self.changed("an archive entry is not UTF-8 text") from None
            offset += step

    def read_bytes(self, offset: int, size: int) -> bytes:
        try:
            if os.fstat(self.fd).st_size != self.size:  # (a touch is harmless: each entry's id is checked)
                raise self.changed("its size is not what it was")
            data = os.pread(self.fd, size, offset)
            while 0 < len(data) < size:
                more = os.pread(self.fd, size - len(data), offset + len(data))
                if not more:
                    break
                data += more
        except OSError as exc:
            raise SessionFormatError(self.path, f"cannot read the file ({exc.strerror or exc})") from None
        if len(data) != size:
            raise self.changed("it is shorter")
        return data


class SessionText:
    """Session text read without a file (`Conversation.loads`): the archive reads its entries from the
    text, by character offset, until it is first saved to a file."""

    in_bytes = False

    def __init__(self, text: str, path: Any = None) -> None:
        self.text = text
        self.path = path

    def changed(self, what: str) -> SessionFormatError:
        return SessionFormatError(self.path, f"the archive of reclaimed tool results is damaged ({what})")

    def read_text(self, offset: int, size: int) -> str:
        piece = self.text[offset : offset + size]
        if len(piece) != size:
            raise self.changed("it is shorter")
        return piece

    def pieces(self, offset: int, size: int) -> Iterator[str]:
        for at in range(offset, offset + size, PIECE):
            yield self.read_text(at, min(PIECE, offset + size - at))
