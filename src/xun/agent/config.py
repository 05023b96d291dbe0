"""xun's settings: one validated model, merged from TOML files, the environment and `--set` flags.

Layers, later wins, merged per table: defaults, the user file (`$XDG_CONFIG_HOME/xun/config.toml`), the
project file (`.xun/config.toml`, or under `$XUN_HOME`), the environment (`OPENAI_BASE_URL`, `XUN_MODEL`),
then command-line overrides `key.sub=value`. Every mistake becomes one `ConfigError` whose lines name the
source, the dotted key and what was expected, because users read these, not pydantic tracebacks.

The API key is never part of the config: `provider.api_key_env` names the environment variable holding it,
and `resolve_api_key` reads that variable only when a client is built.

The parts: the model (`settings_schema`), the wording of mistakes (`config_errors`), the layers
(`config_layers`) and editing a file (`config_edit`); this module is their one public face.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from xun.agent.config_edit import set_config_value, unset_config_value
from xun.agent.config_errors import ConfigError, ConfigProblem
from xun.agent.config_layers import CLI_SOURCE, TRUST_REQUIRED_KEYS, flag_overrides, load_config, parse_override
from xun.agent.settings_schema import (
    AutoCompactSettings,
    CacheSettings,
    CompressionSettings,
    McpServerSettings,
    McpSettings,
    ModelSettings,
    OffloadSettings,
    ProviderSettings,
    RetrySettings,
    ToolSettings,
    UiSettings,
    XunConfig,
    looks_like_secret,
)

__all__ = [
    "AutoCompactSettings",
    "CLI_SOURCE",
    "CacheSettings",
    "CompressionSettings",
    "ConfigError",
    "ConfigItem",
    "ConfigProblem",
    "McpServerSettings",
    "McpSettings",
    "ModelSettings",
    "OffloadSettings",
    "ProviderSettings",
    "RetrySettings",
    "TRUST_REQUIRED_KEYS",
    "ToolSettings",
    "UiSettings",
    "XunConfig",
    "describe_config",
    "flag_overrides",
    "load_config",
    "looks_like_secret",
    "parse_override",
    "resolve_api_key",
    "set_config_value",
    "unset_config_value",
    "uses_offline_demo",
]


def resolve_api_key(config: XunConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key from the variable named by `provider.api_key_env`, read now and never stored."""
    env = os.environ if environ is None else environ
    value = env.get(config.provider.api_key_env, "")
    value = value.strip() if isinstance(value, str) else ""
    return value or None


def uses_offline_demo(config: XunConfig, environ: Mapping[str, str] | None = None) -> bool:
    """True when no API key is set and no base_url is configured: the app then starts its offline demo
    server instead of failing against the official API."""
    return config.provider.base_url is None and resolve_api_key(config, environ) is None


# ------------------------------------------------------------------------------------------- describing


@dataclass(frozen=True)
class ConfigItem:
    """One row of `xun config show`."""

    key: str
    value: Any
    source: str
    description: str


def describe_config(config: XunConfig) -> list[ConfigItem]:
    """Every leaf setting with its value, where it came from and what it does, in declaration order."""
    items: list[ConfigItem] = []

    def walk(model: BaseModel, prefix: str) -> None:
        for name, field in type(model).model_fields.items():
            value = getattr(model, name)
            key = prefix + name
            if isinstance(value, BaseModel):
                walk(value, key + ".")
            elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
                for sub, model in value.items():  # e.g. mcp.servers.NAME.*
                    walk(model, f"{key}.{sub}.")
            else:
                items.append(ConfigItem(key, copy.deepcopy(value), config.source_of(key), field.description or ""))

    walk(config, "")
    return items
