"""The layers xun's settings are merged from, later wins, table by table: defaults, the user file, the
project file (whose `TRUST_REQUIRED_KEYS` wait for the folder to be trusted), the environment, then
`--set` overrides; reading TOML, parsing overrides and validating the merge into a `XunConfig`.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from xun.agent.config_errors import (
    ConfigError,
    config_error,
    problems_from,
    shown_value,
    strip_optional,
    walk_annotation,
)
from xun.agent.settings_schema import DEFAULT_SOURCE, XunConfig
from xun.base import paths
from xun.base.atomic import open_regular

ENV_SOURCE = "environment"
CLI_SOURCE = "command line"

# Environment variables that feed config keys (the API key variable is read separately, at run time).
ENV_KEYS: dict[str, str] = {
    "OPENAI_BASE_URL": "provider.base_url",
    "XUN_MODEL": "model.name",
}

# Keys a project file may not turn on: a checkout from someone else must not switch confirmations off.
USER_ONLY_TRUE_KEYS = frozenset({"auto_confirm"})
TRUST_REQUIRED_KEYS = frozenset({"provider", "compression.prompt_files", "ui.keymap", "mcp"})
"""Keys (a dotted key, or a whole table) a project's `.xun/config.toml` may set only once the user trusts
its folder (`xun trust`, or the app's question; see `xun.agent.trust`): where requests and the API key go
(`provider`), files read into requests (`compression.prompt_files`), key bindings (`ui.keymap`, which
could put "allow" on Enter), and MCP servers (`mcp`: programs xun starts, or URLs it sends data to).
Until then they are left out and listed in `XunConfig.withheld`. Add a table here when a new one can
send data or run code."""

_MAX_DEPTH = 8  # our deepest key is ui.keymap.<id>; anything far deeper is garbage, refuse it early
_KEY_PART = re.compile(r"^[A-Za-z0-9_-]+$")


def check_depth(data: Any, source: str) -> None:
    stack = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise config_error(source, "", f"tables or arrays nested more than {_MAX_DEPTH} deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


_TOML_POS = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)\s*$", re.S)
_TOML_END = re.compile(r"^(?P<msg>.*?)\s*\(at end of document\)\s*$", re.S)


def _parse_toml_text(text: str, source: str) -> dict[str, Any]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POS.match(message)
        if match:
            raise config_error(
                source, "", f"invalid TOML at line {match['line']}, column {match['col']}: {match['msg']}"
            ) from None
        match = _TOML_END.match(message)
        if match:
            raise config_error(source, "", f"invalid TOML at the end of the file: {match['msg']}") from None
        raise config_error(source, "", f"invalid TOML: {message}") from None
    except RecursionError:
        raise config_error(source, "", "invalid TOML: nested too deeply") from None
    check_depth(data, source)
    return data


def read_toml_file(path: Path) -> dict[str, Any] | None:
    """The file's tables, or None when it does not exist; every other failure is a ConfigError."""
    source = str(path)
    try:
        with open_regular(path) as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise config_error(source, "", "expected a TOML file, found a directory") from None
    except OSError as exc:
        raise config_error(source, "", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise config_error(source, "", f"invalid TOML: not UTF-8 text (byte {exc.start}, line {line})") from None
    return _parse_toml_text(text, source)


def leaves(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) for every non-table value and every empty table."""
    stack: list[tuple[str, Mapping[str, Any]]] = [(prefix, data)]
    while stack:
        base, node = stack.pop()
        for key, value in node.items():
            dotted = f"{base}{key}"
            if isinstance(value, dict) and value:
                stack.append((dotted + ".", value))
            else:
                yield dotted, value


def _deep_merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """Merge `layer` into `into` table by table; anything that is not two tables is replaced."""
    stack = [(into, layer)]
    while stack:
        target, source = stack.pop()
        for key, value in source.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                stack.append((target[key], value))
            else:
                target[key] = copy.deepcopy(value)


def _record_sources(sources: dict[str, str], layer: Mapping[str, Any], label: str) -> None:
    for dotted, value in leaves(layer):
        prefix = dotted + "."
        if value == {} and any(k.startswith(prefix) for k in sources):
            continue  # an empty table merged onto a full one changes nothing
        for existing in [k for k in sources if k.startswith(prefix)]:
            del sources[existing]
        parts = dotted.split(".")
        for end in range(1, len(parts)):
            sources.pop(".".join(parts[:end]), None)
        sources[dotted] = label


def split_key(dotted_key: str, source: str) -> list[str]:
    parts = dotted_key.strip().split(".")
    if not dotted_key.strip() or not all(_KEY_PART.match(p) for p in parts):
        raise config_error(
            source, dotted_key, "expected a dotted key of letters, digits, _ and -, like auto_compact.enabled"
        )
    return parts


def deep_set(data: dict[str, Any], parts: list[str], value: Any) -> None:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _expects_string(parts: list[str]) -> bool:
    found = walk_annotation(XunConfig, [], tuple(parts))
    if found is None:
        return False
    return strip_optional(found[0]) is str


def parse_override(text: str, source: str = CLI_SOURCE) -> tuple[str, Any]:
    """Split `key.sub=value` and parse the value as TOML when it parses (`=1000`, `=true`, `="x"`, `=[..]`),
    else keep it as a plain string. A bare word for a string key stays a string, so `model.name=o3` and
    `model.name=2024` both mean the text."""
    if "=" not in text:
        raise config_error(source, text.strip(), "expected KEY=VALUE, e.g. auto_compact.token_threshold=100000")
    key, _, raw = text.partition("=")
    key = key.strip()
    parts = split_key(key, source)
    return key, parse_value(raw, parts)


def parse_value(raw: str, parts: list[str]) -> Any:
    raw_stripped = str(raw).strip()
    value: Any = raw_stripped
    try:
        parsed = tomllib.loads(f"v = {raw_stripped}")
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        parsed = None
    if parsed is not None and list(parsed) == ["v"]:
        value = parsed["v"]
    if not isinstance(value, str) and _expects_string(parts) and not isinstance(value, (list, dict)):
        value = raw_stripped
    return value


def validate(data: dict[str, Any], source_for: Callable[[str], str]) -> XunConfig:
    try:
        return XunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from(exc, source_for)) from None
    except RecursionError:
        raise config_error(source_for(""), "", "values nested too deeply") from None


def check_trust(data: Mapping[str, Any], source: str) -> None:
    """A project file may come with someone else's checkout: even in a trusted folder it may not switch
    confirmations off, for xun's own tools or for an MCP server's."""
    servers = data.get("mcp", {}).get("servers") if isinstance(data.get("mcp"), dict) else None
    for name, server in servers.items() if isinstance(servers, dict) else ():
        if isinstance(server, dict) and server.get("trust") is True:
            raise config_error(
                source,
                f"mcp.servers.{name}.trust",
                "can only be turned on in the user config or on the command line, not in a project file "
                "(a checkout from someone else must not let its tools run without asking)",
            )
    for key in USER_ONLY_TRUE_KEYS:
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is True:
            raise config_error(
                source,
                key,
                "can only be turned on in the user config or on the command line, not in a project file "
                "(a checkout from someone else must not switch confirmations off)",
            )


def withhold_untrusted(data: dict[str, Any]) -> dict[str, str]:
    """Remove the `TRUST_REQUIRED_KEYS` from a project file's tables; the dotted keys removed, sorted,
    with their values as `shown_value` shows them."""
    removed: dict[str, str] = {}
    for key in TRUST_REQUIRED_KEYS:
        *parents, last = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node:
            value = node.pop(last)
            if isinstance(value, dict) and value:
                removed.update((f"{key}.{leaf}", shown_value(item)) for leaf, item in leaves(value))
            else:
                removed[key] = shown_value(value)
            if parents and not node:  # `[ui]` left empty: the file set nothing there (`xun config` says default)
                _drop_empty(data, parents)
    return dict(sorted(removed.items()))


def _drop_empty(data: dict[str, Any], parts: list[str]) -> None:
    """Remove the table at `parts` and every table above it that this leaves empty."""
    for end in range(len(parts), 0, -1):
        *above, name = parts[:end]
        node: Any = data
        for part in above:
            node = node[part]
        if node[name]:
            return
        del node[name]


def flag_overrides(overrides: Iterable[str], base_url: str | None = None, model: str | None = None) -> list[str]:
    """`--set KEY=VALUE` overrides with `--base-url` and `--model` after them, so that those two win."""
    return [
        *overrides,
        *([f"provider.base_url={base_url}"] if base_url else []),
        *([f"model.name={model}"] if model else []),
    ]


def load_config(
    workdir: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    *,
    trusted: bool | None = None,
) -> XunConfig:
    """Merge defaults < user file < project file < environment < `--set` overrides, then validate.

    `environ` (default `os.environ`) supplies OPENAI_BASE_URL and XUN_MODEL; the file locations come from
    `xun.base.paths` (XDG_CONFIG_HOME, XUN_HOME). `trusted` (default: what `xun.agent.trust` remembers for the
    workdir) decides whether the project file may set `TRUST_REQUIRED_KEYS`; when not, they are left out
    and named in `withheld`. Raises ConfigError naming every problem found.
    """
    env = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    withheld: dict[str, str] = {}

    user_path = paths.user_config_path()
    project_path = paths.project_config_path(workdir)
    files = [(user_path, False)]
    if same_file(user_path, project_path) is False:
        files.append((project_path, True))
    for path, is_project in files:
        data = read_toml_file(path)
        if data is None:
            continue
        if is_project:
            check_trust(data, str(path))
            if trusted is None:
                from xun.agent.trust import is_trusted

                trusted = is_trusted(workdir)
            if not trusted:
                withheld = withhold_untrusted(data)
        _deep_merge(merged, data)
        _record_sources(sources, data, str(path))

    for var, dotted in ENV_KEYS.items():
        value = env.get(var, "")
        if value.strip():
            layer: dict[str, Any] = {}
            deep_set(layer, dotted.split("."), value.strip())
            _deep_merge(merged, layer)
            _record_sources(sources, layer, f"{ENV_SOURCE} ({var})")

    if isinstance(overrides, str):
        overrides = [overrides]
    for text in overrides:
        key, value = parse_override(text)
        layer = {}
        deep_set(layer, key.split("."), value)
        check_depth(layer, CLI_SOURCE)
        _deep_merge(merged, layer)
        _record_sources(sources, layer, CLI_SOURCE)

    config = validate(merged, lambda dotted: _lookup_source(sources, dotted))
    config._sources = sources
    config._withheld = withheld
    return config


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _lookup_source(sources: Mapping[str, str], dotted: str) -> str:
    parts = dotted.split(".") if dotted else []
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found:
            return found
    # A table-level error (e.g. a wrong type for a whole section): blame whoever set keys under it.
    prefix = dotted + "." if dotted else ""
    below = sorted({src for key, src in sources.items() if key.startswith(prefix)})
    return ", ".join(below) if below else DEFAULT_SOURCE
