"""The wheel carries the style sheets: build it, install it into a fresh virtual environment (its
dependencies from PyPI), and start the app headless from there, far from this checkout.

Slow (a build, a venv and a download of Textual and the openai SDK), marked `wheel`; it runs in the
normal suite. Deselect it with `-m "not wheel"` when offline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, json, sys
from pathlib import Path

import xun
from xun.agent.launch import open_session
from xun.base.paths import styles_dir
from xun.tui.app import XunApp

async def main(workdir):
    facts = {"xun": xun.__file__, "styles": str(styles_dir())}
    with open_session(workdir, offline=True, environ={}) as session:
        app = XunApp(session)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            facts["css_paths"] = [str(p) for p in app.css_path]
            facts["chat_layout"] = app.query_one("#chat").styles.layout.name
            facts["badge_has_background"] = app.query_one("#provider").styles.background.a > 0
            app.main.prompt.load_text("hello from the wheel")
            await pilot.press("enter")
            for _ in range(500):
                await pilot.pause(0.02)
                if app.work.finished:
                    break
            facts["reply"] = app.agent.last_reply()
            await pilot.press("f1")
            await pilot.pause(0.2)
            facts["help_border"] = app.screen.query_one("#help-box").styles.border_top[0]
            await pilot.press("escape")
            await pilot.press("ctrl+q")
        facts["return_code"] = app.return_code
    print(json.dumps(facts))

asyncio.run(main(sys.argv[1]))
"""


def run(command: list[str], cwd: Path, timeout: float = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.wheel
def test_the_installed_wheel_runs_the_app_with_its_styles(tmp_path: Path):
    dist = tmp_path / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(REPO)],
        cwd=tmp_path,
    )
    wheels = list(dist.glob("xun_tui-*.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as archive:
        names = archive.namelist()
    assert "xun/styles/xun.tcss" in names and "xun/styles/modals.tcss" in names
    assert "xun/tui/app.py" in names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheels[0])], cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "probe.py").write_text(SCRIPT)
    facts = json.loads(run([str(python), "probe.py", str(elsewhere)], cwd=elsewhere).strip().splitlines()[-1])

    assert str(venv) in facts["xun"], "the app ran from the installed wheel, not from this checkout"
    assert facts["styles"].startswith(str(venv)) and facts["styles"].endswith("xun/styles")
    assert any(p.startswith(str(venv)) and p.endswith("xun/styles/xun.tcss") for p in facts["css_paths"])
    assert facts["chat_layout"] == "stream", "a rule of xun.tcss is in force"
    assert facts["badge_has_background"]
    assert facts["help_border"] == "round", "modals.tcss, read from the wheel when F1 opens"
    assert "xun-offline" in facts["reply"]
    assert facts["return_code"] == 0
