"""The eight built-in tools: read, list, search and write files in the workspace, run a command, fetch
the original of a reclaimed tool result, and search and read the history (`xun.agent.tools.recall`).

Docstrings here are what the model reads as tool descriptions, so they speak to the model. File paths go
through `resolve_in_workspace`; `write_file` and `run_command` ask the user first (see `Toolbox.call`).
"""

from __future__ import annotations

import difflib
import io
import os
import stat
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Annotated, Any, BinaryIO

import regex
from pydantic import Field

from xun.base import paths
from xun.base.confined import LinkRefused, dir_fd_beneath, open_beneath, write_beneath
from xun.agent.tools.confinement import display_path, is_inside, resolve_in_workspace, workspace_root
from xun.agent.tools.recall import read_history_entry, search_history
from xun.agent.tools.process import run_shell
from xun.agent.tools.toolbox import (
    ConfirmationRequest,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    Toolbox,
    escape_control,
)

__all__ = [
    "BUILTIN_TOOLS",
    "default_toolbox",
    "extract_compacted_tool_result",
    "list_directory",
    "read_file",
    "read_history_entry",
    "run_command",
    "search_history",
    "search_text",
    "write_file",
]

SKIPPED_DIRS = frozenset({".git", ".xun"})
MAX_SEARCH_MATCHES = 200
MAX_SEARCH_LINE = 300
MAX_SEARCH_FILE_BYTES = 10 * 1024 * 1024
SEARCH_TIME_LIMIT = 10.0
"""Seconds one search_text call may spend matching (the `regex` package's timeout): a pattern with
catastrophic backtracking is stopped with an error instead of freezing xun."""
MAX_LIST_ENTRIES = 1000
MAX_REVIEW_CHARS = 200_000
MAX_REVIEW_LINES = 4_000
"""The most a confirmation shows. It always shows all of what will run or be written (never a middle
left out); what is larger cannot be reviewed, so it is refused with the reason instead of asked."""
_BINARY_SAMPLE = 8192
MAX_LINE_CHARS = 100_000
"""The most of one line read_file holds: the rest of a longer line (an 800 MB one-line file) is skipped in
pieces of this size and the line is marked cut, so memory stays bounded whatever the file."""
MAX_PATTERN_SIZE = 100_000
"""The most units a search pattern may expand to (counted repeats multiplied through their nesting):
`(?:x{65535}){65535}` compiles to billions and took 5.6 GB before any time limit could apply."""


def _is_binary(sample: bytes) -> bool:
    return b"\x00" in sample


def _count(number: int, word: str, plural: str | None = None) -> str:
    return f"{number:,} {word if number == 1 else (plural or word + 's')}"


def _shown(path: str) -> str:
    return escape_control(path, keep_newlines=False)


def reviewable(preview: str, tool: str) -> str:
    """`preview` when a person can review all of it; else a ToolError saying why and what to do."""
    lines = preview.count("\n") + 1
    if len(preview) > MAX_REVIEW_CHARS or lines > MAX_REVIEW_LINES:
        raise ToolError(
            f"{tool} was not run: what it would do is too large to show for review ({_count(lines, 'line')}, "
            f"{_count(len(preview), 'character')}; the most is {MAX_REVIEW_LINES:,} lines and "
            f"{MAX_REVIEW_CHARS:,} characters); split it into smaller steps"
        )
    return preview


def _open_checked(root: Path, target: Path, shown: str) -> BinaryIO:
    """Open a resolved path for reading from a descriptor of the workspace, following no link on the way:
    a folder swapped for a link after `resolve_in_workspace` checked the path fails here, never leads out."""
    try:
        return os.fdopen(open_beneath(root, target.relative_to(root), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
    except LinkRefused:
        raise ToolError(
            f"{shown} changed while it was being opened (a folder on the way became a link); try again"
        ) from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot read the file ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------------------------- read


def read_file(
    path: str,
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int | None, Field(ge=1)] = None,
    *,
    context: ToolContext,
) -> str:
    """Read a text file from the workspace, with line numbers.

    The first line of the result says which lines are shown, the file's total line count, and whether
    more remains (then call again with the given offset). Long files are shown in pieces.

    Args:
        path: File path relative to the workspace (or absolute inside it).
        offset: Number of lines to skip from the start (0 reads from the first line).
        limit: Maximum number of lines to return; omit to read as much as fits.
    """
    root = workspace_root(context.workdir)
    target = resolve_in_workspace(root, path)
    shown = display_path(target, root)
    if not target.exists():
        raise ToolError(f"{_shown(path)}: no such file in the workspace")
    if target.is_dir():
        raise ToolError(f"{shown} is a directory; use list_directory to see what it holds")
    if not target.is_file():  # a FIFO or device would block the read forever
        raise ToolError(f"{shown} is not a regular file")
    handle = _open_checked(root, target, shown)
    budget = max(200, context.max_output_chars - 300)
    picked: list[str] = []
    used = 0
    total = 0
    stopped_at: int | None = None  # index of the first wanted line left out for lack of room
    with handle:
        if _is_binary(handle.read(_BINARY_SAMPLE)):
            raise ToolError(f"{shown} looks like a binary file; read_file only shows text")
        handle.seek(0)
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="")
        end = None if limit is None else offset + limit
        for index, (line, cut) in enumerate(_bounded_lines(text)):
            total = index + 1
            if index < offset or (end is not None and index >= end) or stopped_at is not None:
                continue
            line = line.rstrip(chr(10)).rstrip(chr(13))
            if cut:
                line += f" [... line cut at {MAX_LINE_CHARS:,} characters]"
            numbered = f"{index + 1:>6}\t{line}"
            if picked and used + len(numbered) + 1 > budget:
                stopped_at = index
                continue
            picked.append(numbered)
            used += len(numbered) + 1
    if total == 0:
        return f"[{shown}: empty file, 0 lines]"
    if offset >= total:
        return f"[{shown}: {_count(total, 'line')}; offset {offset} is past the end (use an offset below {total})]"
    first = offset + 1
    last = offset + len(picked)
    remaining = total - last
    if remaining > 0:
        header = (
            f"[{shown}: lines {first}-{last} of {total}; {_count(remaining, 'more line')} remaining, "
            f"continue with offset={last}]"
        )
    elif first == 1:
        header = f"[{shown}: lines 1-{total} of {total}, the whole file]"
    else:
        header = f"[{shown}: lines {first}-{last} of {total}, to the end of the file]"
    return header + "\n" + "\n".join(picked)


def _bounded_lines(text: io.TextIOBase) -> Iterator[tuple[str, bool]]:
    """(line, cut) for each line of `text`, each at most MAX_LINE_CHARS long: the rest of a longer line is
    read and dropped in pieces of that size (never held whole)."""
    while True:
        line = text.readline(MAX_LINE_CHARS)
        if not line:
            return
        cut = False
        if not line.endswith(("\n", "\r")):
            while True:
                rest = text.readline(MAX_LINE_CHARS)
                if not rest:
                    break
                cut = True
                if rest.endswith(("\n", "\r")):
                    break
        yield line, cut


# --------------------------------------------------------------------------------------------- list


def list_directory(path: str = ".", *, context: ToolContext) -> str:
    """List a folder of the workspace, sorted by name; folders end with "/", symlinks show their target.

    Args:
        path: Folder path relative to the workspace; "." is the workspace itself.
    """
    root = workspace_root(context.workdir)
    target = resolve_in_workspace(root, path)
    shown = display_path(target, root)
    if not target.exists():
        raise ToolError(f"{_shown(path)}: no such folder in the workspace")
    if not target.is_dir():
        raise ToolError(f"{shown} is a file, not a folder; use read_file to read it")
    try:
        with dir_fd_beneath(root, target.relative_to(root)) as folder:
            entries = sorted(os.scandir(folder), key=lambda e: (e.name.casefold(), e.name))
            lines = [_listed(entry, folder) for entry in entries[:MAX_LIST_ENTRIES]]
    except LinkRefused:
        raise ToolError(
            f"{shown} changed while it was being opened (a folder on the way became a link); try again"
        ) from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot list the folder ({exc.strerror or exc})") from None
    counted = _count(len(entries), "entry", "entries")
    heading = f"[{shown}/: {counted}]" if shown != "." else f"[workspace root: {counted}]"
    if not entries:
        return heading + "\n(empty folder)"
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[... {_count(len(entries) - MAX_LIST_ENTRIES, 'more entry', 'more entries')} not shown]")
    return heading + "\n" + "\n".join(lines)


def _listed(entry: os.DirEntry[str], folder: int) -> str:
    """One line of a listing (the entry comes from scanning the descriptor `folder`)."""
    name = escape_control(entry.name, keep_newlines=False)
    try:
        if entry.is_symlink():
            suffix = "/" if entry.is_dir() else ""
            return f"{name}{suffix} -> {escape_control(os.readlink(entry.name, dir_fd=folder), keep_newlines=False)}"
        return name + "/" if entry.is_dir() else name
    except OSError:
        return name


# ------------------------------------------------------------------------------------------- search


def _skipped_dirs(root: Path) -> set[Path]:
    skipped = {root / name for name in SKIPPED_DIRS}
    try:
        home = paths.xun_home(root).resolve()
    except OSError:
        return skipped
    if is_inside(home, root):
        skipped.add(home)
    return skipped


def _pattern_size(pattern: str) -> int:
    """About how many units `pattern` compiles to: each counted repeat multiplies what it repeats (read
    with the standard library's parser; a pattern it cannot read counts every `{m,n}` as nested)."""
    import re._constants as codes  # type: ignore[import-not-found]  # no stubs: the parser is private
    import re._parser as parser  # type: ignore[import-not-found]

    def size(items: Any) -> int:
        total = 0
        for op, value in items:
            if op in (codes.MAX_REPEAT, codes.MIN_REPEAT, getattr(codes, "POSSESSIVE_REPEAT", None)):
                low, high, inner = value
                count = low if high == codes.MAXREPEAT else high
                total += max(1, count) * size(inner)
            elif op is codes.SUBPATTERN:
                total += size(value[-1])
            elif op in (codes.ATOMIC_GROUP,) if hasattr(codes, "ATOMIC_GROUP") else ():
                total += size(value)
            elif op is codes.BRANCH:
                total += sum(size(branch) for branch in value[1])
            elif op in (codes.ASSERT, codes.ASSERT_NOT):
                total += size(value[1])
            else:
                total += 1
        return total

    try:
        return size(parser.parse(pattern))
    except Exception:  # noqa: BLE001 - syntax only the regex package knows: count conservatively
        product = 1
        for low, high in regex.findall(r"\{\s*(\d*)\s*(?:,\s*(\d*)\s*)?\}", pattern):
            product *= max(1, int(high or low or 1)) if len(high or low or "") < 10 else 10**9
        return product


def search_text(pattern: str, path: str = ".", *, context: ToolContext) -> str:
    """Search text files for a regular expression (Python syntax), like grep -rn.

    Results are "file:line: text", at most 200; binary files and the .git and .xun folders are skipped.
    Use (?i) at the start of the pattern for a case-insensitive search.

    Args:
        pattern: Regular expression to look for in each line.
        path: File or folder to search, relative to the workspace; "." searches everything.
    """
    size = _pattern_size(pattern)
    if size > MAX_PATTERN_SIZE:
        raise ToolError(
            f"the pattern /{pattern[:200]}/ is too big: its counted repeats expand to about "
            f"{size:,} units (at most {MAX_PATTERN_SIZE:,}); use smaller counts or + and *"
        )
    try:
        compiled = regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    deadline = time.monotonic() + SEARCH_TIME_LIMIT

    def matches(line: str) -> bool:
        """The pattern on one line, within what is left of the time limit; the GIL is released meanwhile
        (`concurrent`), so the app's event loop keeps running while a slow pattern is tried."""
        try:
            return compiled.search(line, concurrent=True, timeout=max(0.001, deadline - time.monotonic())) is not None
        except TimeoutError:
            raise ToolError(
                f"the pattern /{pattern}/ took too long (over {SEARCH_TIME_LIMIT:g} s; nested "
                "repetition such as (a+)+ can take forever); simplify it or narrow the path"
            ) from None

    root = workspace_root(context.workdir)
    target = resolve_in_workspace(root, path)
    if not target.exists():
        raise ToolError(f"{_shown(path)}: no such file or folder in the workspace")
    skipped = _skipped_dirs(root)
    results: list[str] = []
    more = False
    files_searched = 0
    skipped_large = 0

    def candidates() -> Iterator[Path]:
        if target.is_file():
            yield target
            return
        for dirpath, dirnames, filenames in os.walk(target):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if here / d not in skipped and d not in SKIPPED_DIRS)
            for filename in sorted(filenames):
                yield here / filename

    for file in candidates():
        try:
            real = file.resolve()
        except (OSError, RuntimeError):
            continue
        if not is_inside(real, root) or not real.is_file():
            continue  # a symlink pointing out of the workspace, or to something that is not a file
        try:
            if real.stat().st_size > MAX_SEARCH_FILE_BYTES:
                skipped_large += 1
                continue
            with os.fdopen(open_beneath(root, real.relative_to(root)), "rb") as handle:
                if _is_binary(handle.read(_BINARY_SAMPLE)):
                    continue
                handle.seek(0)
                files_searched += 1
                text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace")
                for number, line in enumerate(text, start=1):
                    if matches(line):
                        if len(results) >= MAX_SEARCH_MATCHES:
                            more = True
                            break
                        snippet = line.rstrip("\r\n")
                        if len(snippet) > MAX_SEARCH_LINE:
                            snippet = snippet[:MAX_SEARCH_LINE] + " [...]"
                        results.append(
                            f"{escape_control(display_path(file, root), keep_newlines=False)}:{number}: "
                            f"{escape_control(snippet, keep_newlines=False)}"
                        )
        except OSError:
            continue
        if more:
            break
    where = display_path(target, root)
    notes = []
    if skipped_large:
        notes.append(f"{_count(skipped_large, 'file')} over {MAX_SEARCH_FILE_BYTES // (1024 * 1024)} MB skipped")
    if not results:
        tail = f" ({'; '.join(notes)})" if notes else ""
        return f"No matches for /{pattern}/ in {where} ({_count(files_searched, 'text file')} searched){tail}"
    if more:
        notes.insert(0, f"stopped at {MAX_SEARCH_MATCHES} matches; narrow the pattern or the path to see others")
    footer = f"[{_count(len(results), 'match', 'matches')} for /{pattern}/ in {where}"
    footer += f"; {'; '.join(notes)}]" if notes else "]"
    return "\n".join(results) + "\n" + footer


# -------------------------------------------------------------------------------------------- write


def _write_target(path: str, context: ToolContext) -> tuple[Path, Path]:
    root = workspace_root(context.workdir)
    target = resolve_in_workspace(root, path)
    for protected in _skipped_dirs(root) - {root / ".git"}:
        if is_inside(target, protected):
            raise ToolError(
                f"{_shown(path)} is inside xun's own state folder {protected}; write_file does not change it"
            )
    if target == root or target.is_dir():
        raise ToolError(f"{display_path(target, root)} is a folder; give the path of a file")
    if target.exists() and not target.is_file():  # reading it for the diff would block (a FIFO) or never end
        raise ToolError(
            f"{display_path(target, root)} is not a regular file (a FIFO, socket or device); write_file only replaces "
            "regular files"
        )
    return root, target


def _write_confirmation(args: dict[str, Any], context: ToolContext) -> ConfirmationRequest:
    """The exact resolved path, and a unified diff against the file as it is now (or the new content)."""
    root, target = _write_target(args["path"], context)
    content: str = args["content"]
    new_lines = content.splitlines()
    rel = display_path(target, root)
    if target.exists():
        try:
            old_bytes = target.read_bytes()
        except OSError as exc:
            raise ToolError(f"{rel}: cannot read the existing file ({exc.strerror or exc})") from None
        try:
            old = old_bytes.decode("utf-8")
        except UnicodeDecodeError:
            old = None
        if old is None or _is_binary(old_bytes[:_BINARY_SAMPLE]):
            kind = "new_file"
            preview = f"The existing file is binary ({len(old_bytes):,} bytes) and will be replaced by:\n{content}"
            title = f"Overwrite binary file {target} with {len(new_lines)} lines of text"
        elif old == content:
            kind = "diff"
            preview = "(no change: the file already has exactly this content)"
            title = f"Rewrite {target} (unchanged)"
        else:
            kind = "diff"
            diff = difflib.unified_diff(
                old.splitlines(), new_lines, fromfile=f"a/{rel}", tofile=f"b/{rel}", lineterm=""
            )
            preview = "\n".join(diff)
            if old.endswith("\n") != content.endswith("\n"):
                preview += "\n(the final newline changes too)"
            added = sum(1 for line in preview.splitlines() if line.startswith("+") and not line.startswith("+++"))
            removed = sum(1 for line in preview.splitlines() if line.startswith("-") and not line.startswith("---"))
            title = f"Overwrite {target} (+{added} -{removed} lines)"
    else:
        kind = "new_file"
        preview = content
        title = f"Create {target} ({_count(len(new_lines), 'line')}, {_count(len(content), 'character')})"
    preview = reviewable(escape_control(preview), "write_file")
    return ConfirmationRequest(
        tool="write_file",
        title=escape_control(title, keep_newlines=False),
        preview=preview,
        kind=kind,
        path=target,
    )


def write_file(path: str, content: str, *, context: ToolContext) -> str:
    """Create or overwrite a text file in the workspace with exactly `content` (missing parent folders
    are created). The user is asked to confirm and sees a diff.

    Args:
        path: File path relative to the workspace (or absolute inside it).
        content: The complete new content of the file.
    """
    root, target = _write_target(path, context)
    existed = target.exists()
    try:
        mode = stat.S_IMODE(target.stat().st_mode) if existed else 0o666 & ~_current_umask()
        write_beneath(root, target.relative_to(root), content, mode)  # no link followed on the way
    except LinkRefused:
        raise ToolError(
            f"{display_path(target, root)} changed while it was being written (a folder on the way "
            "became a link); nothing was written, try again"
        ) from None
    except OSError as exc:
        raise ToolError(f"{display_path(target, root)}: cannot write the file ({exc.strerror or exc})") from None
    lines = len(content.splitlines())
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {display_path(target, root)}: {_count(lines, 'line')}, {_count(len(content), 'character')}."


def _current_umask() -> int:
    """The process umask, read without changing it (Linux exposes it in /proc; else assume 022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


# ------------------------------------------------------------------------------------------ command


def _command_confirmation(args: dict[str, Any], context: ToolContext) -> ConfirmationRequest:
    """The exact command (control characters made visible), where it runs and for how long at most."""
    root = workspace_root(context.workdir)
    command: str = args["command"]
    timeout = args.get("timeout") or context.command_timeout
    one_line = escape_control(command, keep_newlines=False)
    preview = reviewable(f"$ {escape_control(command)}\n\n(in {root}; killed after {timeout:g} s)", "run_command")
    return ConfirmationRequest(
        tool="run_command",
        title=f"Run in {root}: {one_line}",
        preview=preview,
        kind="command",
        command=command,
        cwd=root,
    )


async def run_command(
    command: Annotated[str, Field(min_length=1)],
    timeout: Annotated[float | None, Field(gt=0)] = None,
    *,
    context: ToolContext,
) -> ToolResult:
    """Run a shell command in the workspace folder and return its combined stdout and stderr and its exit
    code. Stdin is closed; the command and anything it started are killed at the timeout. The user is
    asked to confirm first.

    Args:
        command: The shell command line, run with /bin/sh.
        timeout: Seconds before the command is killed; omit for the default.
    """
    if not command.strip():
        raise ToolError("the command is empty")
    root = workspace_root(context.workdir)
    limit = timeout or context.command_timeout
    env = {k: v for k, v in os.environ.items() if k not in context.hidden_env}
    budget = max(100, context.max_output_chars - 200)
    try:
        result = await run_shell(command, cwd=root, timeout=limit, max_chars=budget, env=env)
    except OSError as exc:
        raise ToolError(f"cannot start the command: {exc.strerror or exc}") from None
    output = result.output if result.output else "(no output)"
    if result.timed_out:
        return ToolResult(
            text=f"[Error] the command timed out after {limit:g} s and was killed with everything it started. "
            f"Output before that:\n{output}",
            is_error=True,
            truncated_chars=result.truncated_chars,
        )
    code = result.exit_code
    ending = f"[killed by signal {-code}]" if code is not None and code < 0 else f"[exit code {code}]"
    return ToolResult(text=f"{output}\n{ending}", truncated_chars=result.truncated_chars)


# --------------------------------------------------------------------------------------------- recall


async def extract_compacted_tool_result(
    toolcall_id: Annotated[str, Field(min_length=1)], *, context: ToolContext
) -> str:
    """Return the original content of a tool result that was compacted to save context, by the ID shown
    in its "[Compacted, ID: ...]" placeholder.

    Args:
        toolcall_id: The ID from the placeholder, exactly as written.
    """
    conversation = context.conversation
    if conversation is None:
        raise ToolError("no conversation is attached, so there are no compacted tool results to fetch")
    wanted = toolcall_id.strip()
    original = conversation.reclaimed_original(wanted)
    if original is None:
        raise ToolError(
            f"no compacted tool result has the ID {wanted!r}; use the ID exactly as written in the "
            "[Compacted, ID: ...] placeholder, or re-run the tool"
        )
    return original


# --------------------------------------------------------------------------------------------- the set

BUILTIN_TOOLS: tuple[Tool, ...] = (
    Tool.from_function(read_file),
    Tool.from_function(list_directory),
    Tool.from_function(search_text),
    Tool.from_function(write_file, confirmation=_write_confirmation),
    Tool.from_function(run_command, confirmation=_command_confirmation),
    Tool.from_function(extract_compacted_tool_result),
    Tool.from_function(search_history),
    Tool.from_function(read_history_entry),
)


def default_toolbox() -> Toolbox:
    """A fresh toolbox with the eight built-ins (and no session permissions yet)."""
    return Toolbox(BUILTIN_TOOLS)
