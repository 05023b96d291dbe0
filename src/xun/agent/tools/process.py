"""Running a shell command without leaving anything behind.

The command gets its own session (so its own process group): on timeout, on cancellation and after it
exits, the whole group is killed, so no background child outlives the call or keeps the output pipe open.
Output is read as it comes and held to a bounded head and tail, so `yes` cannot eat the memory.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import signal
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from xun.agent.tools.toolbox import cap_text, cut_note

__all__ = ["CommandResult", "OutputBuffer", "kill_process_group", "run_shell", "strip_ansi"]

# How long leftover background processes may keep the pipe open after the shell itself exits.
_DRAIN_GRACE = 0.2
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class CommandResult:
    """What happened: the (possibly cut) combined output, how it ended, and the process id it had."""

    output: str
    truncated_chars: int
    exit_code: int | None
    timed_out: bool
    pid: int


class OutputBuffer:
    """Keeps the first and last `limit` characters of a stream and counts what falls in between."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.dropped = 0

    def add(self, text: str) -> None:
        if not text:
            return
        if self._head_len < self.limit:
            take = text[: self.limit - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail and self._tail_len - len(self._tail[0]) >= self.limit:
                gone = self._tail.popleft()
                self._tail_len -= len(gone)
                self.dropped += len(gone)

    def result(self) -> tuple[str, int]:
        """The text within `limit` (a note where it was cut) and the number of characters cut."""
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self.dropped:
            return cap_text(head + tail, self.limit)
        total = len(head) + self.dropped + len(tail)
        reserve = len(cut_note(total, self.limit))
        keep = self.limit - reserve if self.limit > 2 * reserve else self.limit
        keep_head = max(1, (keep * 2) // 3)
        keep_tail = max(0, keep - keep_head)
        cut = total - keep_head - keep_tail
        return head[:keep_head] + cut_note(cut, self.limit) + (tail[-keep_tail:] if keep_tail else ""), cut


def kill_process_group(pid: int) -> None:
    """SIGKILL the process group led by `pid`; quietly nothing when it is already gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_shell(
    command: str,
    *,
    cwd: Path,
    timeout: float,
    max_chars: int,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run `command` through the shell in `cwd` with stdin closed; stdout and stderr combined.

    The output pipe is ours, not asyncio's: `Process.wait()` would otherwise also wait for every process
    holding the pipe, so one background child could stall the call until the timeout."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    stream = asyncio.StreamReader()
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
        )
    except BaseException:
        kill_process_group(proc.pid)
        raise
    buffer = OutputBuffer(max_chars)

    async def pump() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                break
            buffer.add(decoder.decode(chunk))
        buffer.add(decoder.decode(b"", final=True))

    reader = asyncio.ensure_future(pump())
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
            kill_process_group(proc.pid)
            await proc.wait()
        # The shell is done; give its output a moment to drain, then stop anything it left running.
        done, _ = await asyncio.wait({reader}, timeout=_DRAIN_GRACE)
        kill_process_group(proc.pid)
        if not done:
            await asyncio.wait({reader}, timeout=1.0)
    finally:
        if proc.returncode is None:
            kill_process_group(proc.pid)
            try:
                await asyncio.shield(proc.wait())
            except asyncio.CancelledError:
                pass
        if not reader.done():
            reader.cancel()
            try:
                await reader
            except (asyncio.CancelledError, Exception):
                pass
        transport.close()
    output, cut = buffer.result()
    return CommandResult(
        output=strip_ansi(output),
        truncated_chars=cut,
        exit_code=proc.returncode,
        timed_out=timed_out,
        pid=proc.pid,
    )


def strip_ansi(text: str) -> str:
    """Terminal colour and cursor codes cost tokens and mean nothing to the model."""
    return _ANSI.sub("", text)
