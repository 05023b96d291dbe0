"""The app with MCP servers (Pilot): servers start after the first frame, their state shows, their tools are
called by the offline model (with the confirmation for an untrusted server), a big result is reclaimed,
inspected, found by recall and restored, /mcp restarts a server, a server that hangs at start holds nothing
up, and quitting (while it still starts) leaves no process behind."""

from __future__ import annotations

import pytest
import tomli_w

from tui.helpers import finish, submit, turn, wait_until
from xun.context.messages import RawOpenAIMessage
from xun.agent.launch import open_session
from xun.tui.app import XunApp
from xun.tui.screens.confirm import ConfirmScreen
from xun.tui.screens.inspector import InspectorScreen
from xun.tui.screens.mcp import McpScreen
from xun.tui.screens.recall import RecallScreen
from xun.tui.widgets.tool_block import ToolBlock


@pytest.fixture
def user_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("XUN_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config" / "xun" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def tool_text(app: XunApp, call_id: str) -> str:
    for message in app.conversation.messages:
        if isinstance(message, RawOpenAIMessage) and message.raw.get("tool_call_id") == call_id:
            return message.raw["content"]
    raise AssertionError(call_id)


@pytest.mark.long
async def test_mcp_tools_in_the_app_end_to_end(tmp_path, user_config, servers):
    user_config.write_text(
        tomli_w.dumps(
            {
                "auto_compact": {"toolcall_keep_max": 1},
                "tools": {"max_output_chars": 30000},
                "mcp": {
                    "servers": {
                        "f": servers.fault(trust=True),
                        "time": servers.time(),
                        "dead": servers.fault("crash-at-start"),
                        "hangs": servers.fault("hang-at-start", startup_timeout=60),
                    }
                },
            }
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    opened = []

    def opener():
        opened.append(open_session(work, environ={}))
        return opened[0]

    app = XunApp(opener=opener)
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            mcp = None
            await wait_until(pilot, lambda: app.session is not None, what="the session")
            mcp = app.session.mcp
            others = [mcp.servers[name] for name in ("f", "time", "dead")]
            await wait_until(
                pilot,
                lambda: all(s.state in ("ready", "failed") for s in others),
                timeout=60,
                what="the servers to start",
            )
            await pilot.pause()
            notices = " ".join(str(b.render()) for b in app.main.chat.query("NoticeBlock"))
            assert "MCP server f: ready with 8 tools" in notices and "MCP server time: ready with 2 tools" in notices
            assert "MCP server dead failed" in notices and "crashing at start" in notices

            # a trusted server's tool runs at once; its big result is cut at the cap
            await turn(pilot, 'use the tool f__words with {"size": 200000}', timeout=30)
            [block] = [b for b in app.main.chat.query(ToolBlock) if b.tool_name == "f__words"]
            big_id = block.call_id
            text = tool_text(app, big_id)
            assert len(text) <= 30_000 and "characters cut here" in text
            assert mcp.servers["hangs"].state == "starting"  # a hanging server holds nothing up

            # an untrusted one asks first
            await submit(pilot, 'use the tool time__get_current_time with {"timezone": "Asia/Tokyo"}')
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
            assert "MCP server time" in app.screen.request.title
            await wait_until(pilot, lambda: app.screen.armed, what="the confirmation to take answers")
            await finish(pilot, lambda: pilot.press("y"), timeout=30)
            assert "+09:00" in app.agent.last_reply() or "Asia/Tokyo" in app.agent.last_reply()

            # reclaim (F6): the big result becomes a placeholder, listed, inspected
            await finish(pilot, lambda: pilot.press("f6"))
            assert tool_text(app, big_id).startswith(f"[Compacted, ID: {big_id}")
            assert big_id in app.main.recoverable.shown
            await pilot.press("f8")
            for char in "size":
                await pilot.press(char)
            assert app.main.recoverable.shown == [big_id]
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen), what="the inspector")
            assert app.screen.original == text and app.screen.record.tool_name == "f__words"
            await pilot.press("escape")
            await wait_until(pilot, lambda: not isinstance(app.screen, InspectorScreen))

            # recall finds it, and restores it
            await submit(pilot, "/recall quartz lantern")
            await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="the recall screen")
            recall = app.screen
            await wait_until(pilot, lambda: any(h.tool_call_id == big_id for h in recall.hits), what="the hit")
            await wait_until(pilot, lambda: recall.entry is not None, what="the entry")
            assert recall.entry.text == text
            await finish(pilot, lambda: pilot.press("ctrl+r"))
            assert tool_text(app, big_id) == text
            await pilot.press("escape")

            # /mcp: the servers with their cost; r restarts the highlighted one
            await submit(pilot, "/mcp")
            await wait_until(pilot, lambda: isinstance(app.screen, McpScreen), what="the /mcp screen")
            screen = app.screen
            table = screen.query_one("DataTable")
            assert table.row_count == 4
            first_pid = list(servers.alive())
            await pilot.press("r")  # the first row: f
            await wait_until(
                pilot,
                lambda: mcp.servers["f"].state == "ready" and set(servers.alive()) != set(first_pid),
                timeout=30,
                what="f to restart",
            )
            assert "f__echo" in app.agent.toolbox
            await pilot.press("escape")
            assert mcp.servers["hangs"].state == "starting"
            assert len(servers.alive()) == 3  # f (restarted), time, and the one still hanging
            await pilot.press("ctrl+q")  # while one server still starts
        assert servers.alive() == []
    finally:
        for session in opened:
            session.close()
