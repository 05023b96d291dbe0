"""Below 100 columns the side panel (and its gauge) is hidden: the "nearly full" warning then names the
key that shows the gauge, instead of pointing at a gauge that is not on screen (trial 2, finding 12)."""

from __future__ import annotations

import pytest

from xun.tui.app import XunApp

from .helpers import turn
from .test_compaction import write_files

TITLES = ("the context is nearly full", "the context is past the threshold")


@pytest.mark.parametrize(("size", "says"), [((80, 24), "F4 shows the gauge"), ((140, 44), "the gauge shows where it is")])
async def test_the_nearly_full_warning_names_what_is_on_screen(offline_server, session_factory, tmp_path, size, says):
    names = write_files(tmp_path, 4)
    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=2600"))
    async with app.run_test(size=size, notifications=True) as pilot:
        for name in names:
            await turn(pilot, f"read {name}")
        warned = [n.message for n in app._notifications if n.title in TITLES]
        assert len(warned) == 1 and says in warned[0], warned
