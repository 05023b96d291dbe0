"""Configuration mistakes as users read them: each `ConfigProblem` names the source (a file, the
environment, the command line), the dotted key and what was expected, never a pydantic traceback, and
never shows a value that looks like an API key.
"""

from __future__ import annotations

import difflib
import json
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from xun.agent.settings_schema import XunConfig, looks_like_secret


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong: where it came from, which key, and what was wrong with it."""

    source: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.key}: {self.message}" if self.key else f"{self.source}: {self.message}"


class ConfigError(ValueError):
    """Every configuration mistake: the message names the source, the dotted key and what was expected."""

    def __init__(self, problems: ConfigProblem | Iterable[ConfigProblem]):
        if isinstance(problems, ConfigProblem):
            problems = [problems]
        self.problems: list[ConfigProblem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @property
    def source(self) -> str:
        """The source of the first problem (a file path, "environment" or "command line")."""
        return self.problems[0].source if self.problems else ""

    @property
    def key(self) -> str:
        """The dotted key of the first problem."""
        return self.problems[0].key if self.problems else ""


def config_error(source: str, key: str, message: str) -> ConfigError:
    return ConfigError(ConfigProblem(source, key, message))


def walk_annotation(annotation: Any, metadata: list[Any], loc: tuple[Any, ...]) -> tuple[Any, list[Any]] | None:
    """Follow a pydantic error location through the models; returns the annotation at its end."""
    for part in loc:
        annotation = strip_optional(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation, metadata = field.annotation, list(field.metadata)
            continue
        origin = get_origin(annotation)
        if origin is list:
            annotation, metadata = _unwrap_annotated(get_args(annotation)[0])
        elif origin is dict:
            annotation, metadata = _unwrap_annotated(get_args(annotation)[1])
        else:
            return None
    return annotation, metadata


def _unwrap_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        return base, list(extra)
    return annotation, []


def strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _bounds(metadata: list[Any]) -> str:
    words = []
    for item in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(item, attr, None)
            if bound is not None:
                words.append(f"{sign} {bound}")
    return " and ".join(words)


def _expectation(annotation: Any, metadata: list[Any]) -> str:
    """Plain-English description of what a field accepts, e.g. "an integer > 0"."""
    annotation = strip_optional(annotation)
    origin = get_origin(annotation)
    bounds = _bounds(metadata)
    suffix = f" {bounds}" if bounds else ""
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in get_args(annotation))
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer" + suffix
    if annotation is float:
        return "a number" + suffix
    if annotation is str:
        non_empty = any(getattr(m, "min_length", 0) for m in metadata)
        return "a non-empty string" if non_empty else "a string"
    if origin is list:
        return "a list of " + _plural(get_args(annotation)[0])
    if origin is dict:
        return "a table of " + _plural(get_args(annotation)[1])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a table"
    return "a valid value"


def _plural(annotation: Any) -> str:
    annotation = strip_optional(annotation)
    return {str: "strings", int: "integers", float: "numbers", bool: "booleans"}.get(annotation, "values")


def shown_value(value: Any) -> str:
    """A value as the user wrote it (TOML-ish), short, and never a secret."""
    if holds_secret(value):
        return "a value that looks like an API key (not shown)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, list):
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            text = "a list"
    else:
        text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def holds_secret(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif looks_like_secret(item):
            return True
    return False


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":  # the error is in a table's key (ui.keymap.NAME), not its value
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def all_leaf_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    model = model or XunConfig
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = strip_optional(field.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(all_leaf_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append(prefix + name)
    return keys


def suggest_key(loc: tuple[Any, ...]) -> str | None:
    """The closest known key to an unknown one, e.g. "auto_compact.token_threshold"."""
    parent = walk_annotation(XunConfig, [], loc[:-1])
    unknown = str(loc[-1])
    if parent is not None:
        model = strip_optional(parent[0])
        if isinstance(model, type) and issubclass(model, BaseModel):
            close = difflib.get_close_matches(unknown, list(model.model_fields), n=1, cutoff=0.6)
            if close:
                return _format_loc((*loc[:-1], close[0]))
    # Maybe it belongs in another table: match on the last part of every known key, then on the whole.
    leaves = all_leaf_keys()
    by_last = {key.rsplit(".", 1)[-1]: key for key in leaves}
    close = difflib.get_close_matches(unknown, list(by_last), n=1, cutoff=0.75)
    if close:
        return by_last[close[0]]
    close = difflib.get_close_matches(_format_loc(loc), leaves, n=1, cutoff=0.8)
    return close[0] if close else None


def problems_from(error: ValidationError, source_for: Callable[[str], str]) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    seen: set[str] = set()
    for item in error.errors(include_url=False):
        loc = tuple(item.get("loc", ()))
        key = _format_loc(loc)
        if key in seen:
            continue
        seen.add(key)
        source = source_for(".".join(str(p) for p in loc))
        kind = item.get("type", "")
        value = item.get("input")
        if kind == "extra_forbidden":
            hint = suggest_key(loc)
            message = "unknown key" + (f"; did you mean {hint}?" if hint else "")
        elif kind == "xun_problem":
            message = str(item.get("msg", ""))
        elif kind == "value_error":
            ctx = item.get("ctx") or {}
            expected = str(ctx.get("error", item.get("msg", "")))
            message = f"expected {expected}, got {shown_value(value)}"
        else:
            found = walk_annotation(XunConfig, [], loc)
            expected = _expectation(*found) if found else "a valid value"
            message = f"expected {expected}, got {shown_value(value)}"
        problems.append(ConfigProblem(source, key, message))
    return problems
