"""`/render` writes control characters from tool output visibly, as the app shows them: `cat` of an export
must not retitle, clear or recolour the terminal (trial 2, finding 8)."""

from __future__ import annotations

import re

import pytest

from xun.tui.app import XunApp

from .helpers import submit, turn, wait_until

HOSTILE = "Hello\n\x1b[31mANSI red\x1b[0m and \x1b]0;TITLE\x07 osc and \x1b[2J clear, a bell \x07 and \x9b C1\n"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("name", ["out.md", "out.html"])
async def test_an_export_holds_no_raw_escape_bytes_from_tool_output(offline_server, session_factory, tmp_path, name):
    (tmp_path / "markup.txt").write_text(HOSTILE)
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "read markup.txt")
        await submit(pilot, f"/render {name}")
        await wait_until(pilot, lambda: (tmp_path / name).exists(), what="the export")
    exported = (tmp_path / name).read_text()
    assert not RAW.findall(exported), sorted(set(RAW.findall(exported)))
    assert "\\x1b[31mANSI red\\x1b[0m" in exported and "\\x1b]0;TITLE\\x07" in exported
