"""Fixtures for the TUI tests, and where the snapshot SVGs live.

pytest-textual-snapshot stores each SVG through syrupy's single-file extension, whose folder is
`__snapshots__/<test module>/` beside the test file. `snap_compare` asks for the `snapshot` fixture and
switches it to the plugin's SVG extension with `use_extension`; the `snapshot` fixture below hands it an
assertion that swaps in a subclass of that extension whose folder is the top-level `snapshots/`
(`snapshots/<test module>/<test name>.svg`), so syrupy's own bookkeeping (unused snapshots,
`--snapshot-update`) keeps working on the files there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_textual_snapshot import SVGImageExtension
from syrupy.assertion import SnapshotAssertion

from xun.agent.launch import Session, open_session

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = REPO / "snapshots"


class RepoSnapshots(SVGImageExtension):
    """The plugin's SVG snapshots, kept in the repository's top-level `snapshots/` folder."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOTS / test_location.basename)


class _RepoSnapshotAssertion(SnapshotAssertion):
    def use_extension(self, extension_class: Any = None) -> SnapshotAssertion:
        if extension_class is SVGImageExtension:
            extension_class = RepoSnapshots
        return super().use_extension(extension_class)


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return _RepoSnapshotAssertion(
        update_snapshots=snapshot.update_snapshots,
        extension_class=snapshot.extension_class,
        test_location=snapshot.test_location,
        session=snapshot.session,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "wheel: builds the wheel, installs it into a fresh virtual environment (dependencies from PyPI) and "
        "starts the app from there; slow (about a minute), but part of the normal run",
    )


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user config file, no XUN_HOME and no API key from the machine running the tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))
    for name in ("XUN_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def session_factory(tmp_path: Path) -> Iterator[Callable[..., Session]]:
    """`session_factory(server, *overrides, workdir=None, resume=None)`: a session on that server."""
    opened: list[Session] = []

    def make(server: Any, *overrides: str, workdir: Path | None = None, resume: str | None = None) -> Session:
        folder = workdir or tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        session = open_session(folder, base_url=server.base_url, overrides=list(overrides), resume=resume, environ={})
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()
