"""Keeping file tools inside the working directory.

A path from the model is resolved the way the OS would follow it (symlinks included, even for a file that
does not exist yet) and refused when the result is not the workspace or below it. This guards against
model mistakes and planted instructions (`../../.ssh`, `/etc/passwd`, a symlink pointing out); it is not
a sandbox: `run_command`, confirmed by the user, can do anything the user can.
"""

from __future__ import annotations

import os
from pathlib import Path

from xun.agent.tools.toolbox import ToolError, escape_control

__all__ = ["PathOutsideWorkspace", "display_path", "is_inside", "resolve_in_workspace", "workspace_root"]


class PathOutsideWorkspace(ToolError):
    """The path resolves outside the working directory."""


def workspace_root(workdir: str | os.PathLike[str]) -> Path:
    """The real, absolute workspace folder; a missing one is a tool error, not a crash."""
    try:
        root = Path(workdir).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ToolError(f"the working directory {workdir} is not available: {exc}") from None
    if not root.is_dir():
        raise ToolError(f"the working directory {root} is not a directory")
    return root


def is_inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_in_workspace(workdir: str | os.PathLike[str], path: str) -> Path:
    """The real absolute path for `path` (relative to the workspace, or absolute inside it), following
    every symlink, including one in a not-yet-existing path's existing ancestors. Raises
    PathOutsideWorkspace when it lands outside, ToolError for unusable input."""
    root = workspace_root(workdir)
    if not isinstance(path, str) or not path.strip():
        raise ToolError("the path is empty; give a path relative to the workspace, e.g. src/main.py")
    if "\x00" in path:
        raise ToolError("the path contains a NUL character")
    shown = escape_control(path, keep_newlines=False)
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve(strict=False)
    except RuntimeError:  # a symlink loop
        raise ToolError(f"{shown}: too many levels of symbolic links") from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot resolve the path ({exc.strerror or exc})") from None
    if not is_inside(resolved, root):
        raise PathOutsideWorkspace(
            f"{shown} resolves to {escape_control(str(resolved), keep_newlines=False)}, which is outside the "
            f"workspace {root}; "
            "file tools only work inside the workspace"
        )
    return resolved


def display_path(path: Path, root: Path) -> str:
    """A workspace-relative path for output (`.` for the root itself)."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return str(path)
    return relative.as_posix() or "."
