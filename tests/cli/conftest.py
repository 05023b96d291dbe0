"""Fixtures of the command-line tests; see `helpers` for the `Cli` runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """`xun` as a subprocess in a private workspace (tmp HOME, no API key, no provider variables)."""
    return Cli(tmp_path)
