"""Shared fixtures: a real offline model server for any test that needs a model.

`offline_server` -- a started `xun.offline.OfflineServer` with default options, on 127.0.0.1 and a
free port, stopped after the test. Point any OpenAI client at it::

    def test_something(offline_server):
        client = openai.OpenAI(base_url=offline_server.base_url, api_key="offline", max_retries=0)

`offline_server_factory(**kwargs)` -- starts one more server with custom options (the keyword arguments
of `OfflineServer`: `context_window`, `faults`, `reasoning`, `tokens_per_second`, `host`, `port`) and
returns it started; every server it made is stopped after the test::

    def test_overflow(offline_server_factory):
        server = offline_server_factory(context_window=200, faults="500@2")

Both are function-scoped, so request counts (and therefore fault schedules) start at 1 in every test.
Pass `max_retries=0` to the client when a test expects a fault to surface: the SDK retries 5xx, 429 and
dropped connections by itself.

The suite runs on several workers (pytest-xdist, `-n` in pyproject's addopts, `--dist loadgroup`): the
real-server tests of one server go to one worker (`pytest_collection_modifyitems`), so each server starts
once, and the two servers' tests run side by side, from the start. A module with a module-scoped fixture
names its own `xdist_group`, so that fixture is built once, not once per worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from xun.offline import OfflineServer


REAL_SERVER_FIXTURES = {"llama_cpp_python": "llama-cpp-python", "llama_cpp_server": "llama-server"}
"""The session-scoped real servers (tests/real/conftest.py), by the kind the `llama_server` parameter names."""


def pytest_configure(config: pytest.Config) -> None:
    """The `xun` processes tests start (in tmux, on the command line) import xun from its source folder:
    compile it once here, as an installed package is, rather than in every process where writing bytecode
    is off (PYTHONDONTWRITEBYTECODE, as on CI: about 0.2 s of CPU a start). Once, before the workers."""
    config.addinivalue_line(
        "markers", "long: one of the suite's longest tests (about 20 s or more on 2 cores), started before the others"
    )
    if hasattr(config, "workerinput"):
        return
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("xun")
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        compileall.compile_dir(folder, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group into each test's id
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("llama_server") if callspec is not None else None
        kind = kind or next(
            (k for f, k in REAL_SERVER_FIXTURES.items() if f in getattr(item, "fixturenames", ())), None
        )
        if kind is not None:
            item.add_marker(pytest.mark.xdist_group(kind))
    # the longest parts first, so that they start while the rest shares the workers and no worker is left
    # with one at the end: grouped tests (the real servers', and modules whose one fixture is long), then
    # the tests marked long (the wheel's too)
    items[:] = sorted(
        items,
        key=lambda item: (
            item.get_closest_marker("xdist_group") is None,
            not any(item.get_closest_marker(name) for name in ("long", "wheel")),
        ),
    )


@pytest.fixture(autouse=True, scope="session")
def _terminal_size_unset() -> None:
    """pytest-xdist's workers set COLUMNS=80 and LINES=24, and Textual and Rich take those over a terminal's
    own size: an app started in a 100x30 tmux window would draw 80x24."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """What xun learns about servers (`xun.agent.window.LearnedWindows`) goes to a folder of the test's own,
    never the user's, and no test sees what another learned."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def offline_server_factory() -> Iterator[Callable[..., OfflineServer]]:
    """Start offline servers with custom options; all are stopped at teardown."""
    from xun.offline import OfflineServer

    started: list[OfflineServer] = []

    def start(**options: Any) -> OfflineServer:
        server = OfflineServer(**options)
        server.start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture
def offline_server(offline_server_factory: Callable[..., OfflineServer]) -> OfflineServer:
    """A started offline server with default options, stopped after the test."""
    return offline_server_factory()
