"""Public names a package imports on first use, so importing the package stays cheap (`xun --version`
does not pay for the SDK, pydantic or Textual)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name in `homes` is imported from its module when first
    read, then kept in the package like any other attribute."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
