"""`xun config set` and `xun config unset`: one key changed in a TOML file, the whole file validated
before anything is written, the write atomic and private; never an API key stored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

from xun.agent.config_errors import ConfigError, ConfigProblem, config_error, holds_secret, suggest_key
from xun.agent.config_layers import (
    check_depth,
    check_trust,
    deep_set,
    parse_value,
    read_toml_file,
    same_file,
    split_key,
    validate,
)
from xun.base import paths
from xun.base.confined import write_state


def _check_not_secret(dotted_key: str, value: Any, source: str) -> None:
    last = dotted_key.rsplit(".", 1)[-1].lower()
    if re.search(r"api_?key|secret|passw", last) and last != "api_key_env":
        raise config_error(
            source,
            dotted_key,
            "xun never stores API keys or secrets; put the key in an environment variable and set "
            "provider.api_key_env to that variable's NAME",
        )
    if holds_secret(value):
        raise config_error(
            source,
            dotted_key,
            "refusing to store a value that looks like an API key; put the key in an environment variable "
            "and set provider.api_key_env to that variable's NAME",
        )


def _is_user_file(path: Path) -> bool:
    return same_file(path, paths.user_config_path())


def set_config_value(
    path: str | os.PathLike[str],
    dotted_key: str,
    raw_value: str,
    *,
    project: bool | None = None,
    before_write: Callable[[str], None] | None = None,
) -> Any:
    """Set one key in a TOML config file (`xun config set KEY VALUE`) and return the value stored.

    The value is parsed like a `--set` override; the whole resulting file is validated before anything is
    written; the write is atomic and the file is private (0600). `project` says whether the file is a
    project file (default: any file that is not the user config), which may not turn auto_confirm on.
    Comments in the file are not preserved. `before_write(dotted_key)` runs once all is valid, before the
    write, and may refuse it by raising.
    """
    path = Path(path)
    source = str(path)
    parts = split_key(dotted_key, source)
    dotted_key = ".".join(parts)
    value = parse_value(raw_value, parts)
    _check_not_secret(dotted_key, value, source)
    data = read_toml_file(path) or {}
    deep_set(data, parts, value)
    check_depth(data, source)
    is_project = (not _is_user_file(path)) if project is None else project
    if is_project:
        check_trust(data, source)
    try:
        validate(data, lambda _dotted: source)
    except ConfigError as exc:
        raise ConfigError(_whole_key(problem, parts) for problem in exc.problems) from None
    if before_write is not None:
        before_write(dotted_key)
    _atomic_write_toml(path, data)
    return value


def _whole_key(problem: ConfigProblem, parts: list[str]) -> ConfigProblem:
    """`config set no.such.key 1` is refused for `no`, the first part nobody knows: name the key as given."""
    dotted = ".".join(parts)
    if problem.message.startswith("unknown key") and dotted.startswith(problem.key + ".") and problem.key:
        hint = suggest_key(tuple(parts))
        return ConfigProblem(problem.source, dotted, "unknown key" + (f"; did you mean {hint}?" if hint else ""))
    return problem


def unset_config_value(path: str | os.PathLike[str], dotted_key: str) -> bool:
    """Remove a key from a TOML config file (back to the lower layers' value); False if it was not set."""
    path = Path(path)
    source = str(path)
    parts = split_key(dotted_key, source)
    data = read_toml_file(path)
    if data is None:
        return False
    chain = [data]
    for part in parts[:-1]:
        child = chain[-1].get(part)
        if not isinstance(child, dict):
            return False
        chain.append(child)
    if parts[-1] not in chain[-1]:
        return False
    del chain[-1][parts[-1]]
    for depth in range(len(chain) - 1, 0, -1):  # drop tables left empty
        if not chain[depth]:
            del chain[depth - 1][parts[depth - 1]]
    validate(data, lambda _dotted: source)
    _atomic_write_toml(path, data)
    return True


def _atomic_write_toml(path: Path, data: Mapping[str, Any]) -> None:
    """A crash leaves the old file or the new, never half; owner-only, like every file xun writes; a
    project file is written only in the `.xun` below the working folder, never where a link leads."""
    write_state(path, tomli_w.dumps(dict(data)))
