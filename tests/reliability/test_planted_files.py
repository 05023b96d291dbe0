"""Files planted in a cloned repo's `.xun`, run against the real `xun`.

A session whose `draft` is 30 MB (a million lines): the app drew it all in the prompt on resume and took
1.1 GB. Offload logs with one 300 MB entry and 200,000 small ones: `xun history --reindex` read each log
whole, held every row at once and indexed every character (2 GB, a 399 MB index). `.xun/sessions` (or
`.xun` itself) as a link to another folder: sessions, MCP logs and settings were written there.
"""

from __future__ import annotations

import os
from pathlib import Path

from xun.base import paths
from xun.context.conversation import Conversation

from tui.terminal import Terminal

MiB = 1024 * 1024


def _xun_pid(workdir: Path) -> int:
    """The pid of the `python -m xun` process running in `workdir`."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            command = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            if b"xun" in command and b"-m" in command and os.readlink(Path(entry.path, "cwd")) == str(workdir):
                return int(entry.name)
        except OSError:
            continue
    raise AssertionError(f"no xun process runs in {workdir}")


def _peak_bytes(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_30_mb_draft_comes_back_folded_and_the_app_stays_small(tmp_path):
    """A session file's draft of a million lines (29 MB) comes back as one paste marker, the app's peak
    memory stays under 512 MB on resume (1.1 GB when it was drawn in the prompt), and the draft is whole
    in the session file after a quit: nothing of it is lost."""
    draft = "".join(f"line {number:07d} of a planted draft\n" for number in range(1_000_000))
    conversation = Conversation()
    conversation.draft = draft
    root = tmp_path / "t"
    session = paths.sessions_dir(root / "work") / f"{conversation.conversation_id}.json"
    session.parent.mkdir(parents=True)
    conversation.dump(session)
    term = Terminal(root, "--resume")
    try:
        screen = term.wait_for(lambda text: "what the prompt held when xun quit" in text, timeout=90, what="the draft")
        peak = _peak_bytes(_xun_pid(term.workdir))
        assert peak < 512 * MiB, f"peak {peak / MiB:.0f} MB on resume"
        assert "[pasted 1,000,000 lines #1]" in screen and "line 0999999" not in screen
        term.keys("C-q")
        assert term.wait_exit(90) == 0
    finally:
        term.close()
    assert Conversation().load(session).draft == draft.strip("\n")
