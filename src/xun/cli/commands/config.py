"""`xun config show|set|unset|path`: the merged settings with their sources, and changing one file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from xun.cli.console import Visible
from xun.cli.exits import EXIT_OK, CommandError
from xun.cli.commands.common import settings_of, workdir_of


def show_value(value: Any) -> str:
    """A value as it would be written in TOML (strings quoted), `(unset)` for None."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def _file(args: argparse.Namespace) -> Path:
    from xun.base import paths

    return paths.user_config_path() if args.user else paths.project_config_path(workdir_of(args))


def main(args: argparse.Namespace) -> int:
    action = args.config_action or "show"
    if action == "path":
        return _path(args)
    if action == "show":
        return _show(args)
    from xun.agent.config import set_config_value, unset_config_value

    target = _file(args)
    out, err = Visible(sys.stdout), Visible(sys.stderr)
    if action == "set":
        value = set_config_value(target, args.key, args.value, before_write=lambda key: _refuse_if_withheld(args, key))
        print(f"{args.key.strip()} = {show_value(value)}  (written to {target})", file=out)
        return EXIT_OK
    if unset_config_value(target, args.key):
        print(f"{args.key.strip()} removed from {target}", file=out)
    else:
        print(f"xun: {args.key.strip()} is not set in {target}; nothing changed", file=err)
    return EXIT_OK


def _refuse_if_withheld(args: argparse.Namespace, key: str) -> None:
    """A key the project file may set only in a trusted folder: in an untrusted one it would be written and
    then ignored, so nothing is written and the user learns the two ways that work."""
    from xun.agent.config import TRUST_REQUIRED_KEYS
    from xun.agent.trust import folder_key, is_trusted

    if args.user or not any(key == k or key.startswith(k + ".") for k in TRUST_REQUIRED_KEYS):
        return
    folder = workdir_of(args)
    if not is_trusted(folder):
        raise CommandError(
            f"{key} not written: this folder is not trusted, so its .xun/config.toml may not set {key} (xun "
            f"would ignore it). Add --user to set it in your user config, or run `xun trust` in "
            f"{folder_key(folder)} first if you trust this folder"
        )


def _path(args: argparse.Namespace) -> int:
    from xun.base import paths

    user = paths.user_config_path()
    project = paths.project_config_path(workdir_of(args))
    if args.user or args.project:
        print(user if args.user else project)
        return EXIT_OK
    for label, path in (("user", user), ("project", project)):
        state = "exists" if path.is_file() else "not created yet"
        print(f"{label:8} {path}  ({state})")
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    from xun.agent.config import describe_config, resolve_api_key

    config = settings_of(args)
    if config.withheld:  # as `xun run` and the app say it: the value shown is not what the folder's file set
        from xun.agent.trust import describe_withheld

        print(f"xun: {describe_withheld(config.withheld, workdir_of(args))}", file=Visible(sys.stderr))
    for warning in config.keymap_warnings:
        print(f"xun: warning: {warning}", file=Visible(sys.stderr))
    items = describe_config(config)
    key_set = resolve_api_key(config) is not None
    out = Visible(sys.stdout, json_lines=bool(args.json))  # keys and values come from config files
    if args.json:
        for item in items:
            out.write(
                json.dumps(
                    {"key": item.key, "value": item.value, "source": item.source, "description": item.description},
                    ensure_ascii=False,
                    default=str,
                )
                + "\n"
            )
        return EXIT_OK
    rows = [(item.key, show_value(item.value), item.source) for item in items]
    key_width = max(len(r[0]) for r in rows)
    value_width = min(max(len(r[1]) for r in rows), 40)
    for (key, value, source), item in zip(rows, items, strict=True):
        out.write(f"{key.ljust(key_width)}  {value.ljust(value_width)}  {source}\n")
        if args.verbose and item.description:
            out.write(f"{'':{key_width}}    {item.description}\n")
    variable = config.provider.api_key_env
    if key_set:
        state = f"${variable} is set (its value is never shown or stored)"
    elif config.provider.base_url is None:
        state = f"${variable} is not set: xun uses the offline demo model (scripted, not an LLM)"
    else:
        state = f"${variable} is not set (the server at provider.base_url may not need one)"
    out.write(f"\nAPI key: {state}\n")
    if args.offline:
        out.write("--offline: this run would use the offline demo model whatever the settings say\n")
    return EXIT_OK
