"""Where xun keeps its files: one place, so every room agrees.

Project state lives under the working directory in `.xun/` (or `$XUN_HOME` when set);
user settings live under `$XDG_CONFIG_HOME/xun/` (default `~/.config/xun/`).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath


def xun_home(workdir: str | os.PathLike[str] | None = None) -> Path:
    """The project state folder: `$XUN_HOME`, else `<workdir>/.xun`."""
    env = os.environ.get("XUN_HOME")
    if env:
        return Path(env).expanduser()
    return Path(workdir or os.getcwd()) / ".xun"


def split_state_path(path: str | os.PathLike[str]) -> tuple[Path, PurePath]:
    """A path in xun's state folder as (the folder that may be reached through links, the part below it in
    which xun follows none): below `$XUN_HOME` when it is set and holds `path` (the user chose it), else
    below the folder that holds the nearest `.xun` (a `.xun` that came with a clone may be a planted link).
    Any other path: its folder, and its name."""
    path = Path(path)
    home = os.environ.get("XUN_HOME")
    if home and path.is_relative_to(base := Path(home).expanduser()):
        return base, PurePath(path.relative_to(base))
    for parent in path.parents:
        if parent.name == ".xun":
            return parent.parent, PurePath(path.relative_to(parent.parent))
    return path.parent, PurePath(path.name)


def sessions_dir(workdir: str | os.PathLike[str] | None = None) -> Path:
    return xun_home(workdir) / "sessions"


def offload_dir(workdir: str | os.PathLike[str] | None = None) -> Path:
    """Where the Markdown offload logs (`<conversation_id>.md`) are appended."""
    return xun_home(workdir) / "conversation_history"


def history_db_path(workdir: str | os.PathLike[str] | None = None) -> Path:
    """The full-text index of everything compaction took out of the context (`xun.context.recall`)."""
    return xun_home(workdir) / "history.db"


def project_config_path(workdir: str | os.PathLike[str] | None = None) -> Path:
    return xun_home(workdir) / "config.toml"


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "xun" / "config.toml"


def styles_dir() -> Path:
    """The .tcss style sheets: shipped inside the wheel, or the repo's top-level `styles/` when editable."""
    package = Path(__file__).resolve().parents[1]  # src/xun (this file is src/xun/base/paths.py)
    packaged = package / "styles"
    if packaged.is_dir():
        return packaged
    return package.parents[1] / "styles"


def trusted_folders_path() -> Path:
    """The folders the user trusts (`xun trust`): beside the user config, never in a project."""
    return user_config_path().parent / "trusted_folders.toml"
