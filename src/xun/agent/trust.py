"""Which project folders the user trusts, remembered in the user config folder (`trusted_folders.toml`).

A project's `.xun/config.toml` comes with the checkout, so until the user trusts its folder it may not set
the keys in `xun.agent.config.TRUST_REQUIRED_KEYS` (where data goes and what runs); `load_config` leaves them
out and says which. A folder is trusted by its real path (symlinks resolved), itself only, not its
subfolders or parents. The file is written atomically and owner-only, and a project cannot reach it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import tomli_w

from xun.base import paths
from xun.base.atomic import open_regular, write_text_atomic

__all__ = ["describe_withheld", "folder_key", "is_trusted", "trust_folder", "trusted_folders", "untrust_folder"]


class TrustFileError(ValueError):
    """The trusted folders file cannot be read or is not what xun writes."""


def folder_key(folder: str | os.PathLike[str] | None) -> str:
    """The real absolute path that names a folder in the trust file."""
    return str(Path(folder or os.getcwd()).expanduser().resolve())


def trusted_folders() -> list[str]:
    """Every trusted folder, as written; a missing file is none. Raises TrustFileError when unreadable."""
    path = paths.trusted_folders_path()
    try:
        with open_regular(path) as handle:
            data = tomllib.loads(handle.read().decode("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TrustFileError(f"{path}: cannot read the trusted folders ({exc}); fix or delete the file") from None
    folders = data.get("folders", [])
    if not isinstance(folders, list) or not all(isinstance(item, str) for item in folders):
        raise TrustFileError(f"{path}: folders should be a list of paths; fix or delete the file")
    return folders


def is_trusted(folder: str | os.PathLike[str] | None) -> bool:
    """True when the user trusted this folder; an unreadable trust file trusts nothing."""
    try:
        return folder_key(folder) in trusted_folders()
    except (TrustFileError, OSError):
        return False


def trust_folder(folder: str | os.PathLike[str] | None) -> str:
    """Remember that the user trusts `folder`; returns its key."""
    key = folder_key(folder)
    folders = trusted_folders()
    if key not in folders:
        _write([*folders, key])
    return key


def untrust_folder(folder: str | os.PathLike[str] | None) -> bool:
    """Forget a folder; False when it was not trusted."""
    key = folder_key(folder)
    folders = trusted_folders()
    if key not in folders:
        return False
    _write([item for item in folders if item != key])
    return True


def _write(folders: list[str]) -> None:
    header = "# Folders whose .xun/config.toml may set the provider, prompt files and the like (`xun trust`).\n"
    write_text_atomic(paths.trusted_folders_path(), header + tomli_w.dumps({"folders": sorted(folders)}))


def describe_withheld(keys: list[str], folder: str | os.PathLike[str] | None) -> str:
    """One line for the user: what the untrusted folder's config set that was left out, and the way out."""
    return (
        f"this folder is not trusted, so its .xun/config.toml may not set {', '.join(keys)}: "
        f"ignored (run `xun trust` in {folder_key(folder)} if you trust it)"
    )
