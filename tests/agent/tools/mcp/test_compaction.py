"""An MCP tool's big result goes through the same pipeline as a built-in one: cut at the cap with a note,
reclaimed into the exact placeholder, restored, and found by recall (the history index)."""

from __future__ import annotations

import pytest
import tomli_w

from xun.compact.breakdown import OVERHEAD, context_breakdown
from xun.agent.launch import open_session
from xun.agent.tools.mcp import READY


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("XUN_HOME", raising=False)
    return tmp_path / "config" / "xun" / "config.toml"


def configure(path, tables):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps({"mcp": {"servers": tables}}), encoding="utf-8")


async def test_big_result_is_capped_reclaimed_restored_and_recalled(tmp_path, home, servers):
    configure(home, {"f": servers.fault(trust=True)})
    work = tmp_path / "work"
    work.mkdir()
    with open_session(work, environ={}, overrides=["tools.max_output_chars=30000"]) as session:
        try:
            await session.mcp.start()
            assert session.mcp.servers["f"].state == READY
            agent = session.agent
            await agent.run('use the tool f__words with {"size": 200000}')
            c = agent.conversation
            [result] = [m for m in c.messages if getattr(m, "raw", {}).get("role") == "tool"]
            call_id = result.raw["tool_call_id"]
            text = result.raw["content"]
            assert len(text) <= 30_000 and "characters cut here" in text and "MCP-FAULT-WORDS quartz lantern" in text
            overhead = agent.toolbox.definition_chars()
            assert overhead["f"] > 0 and overhead[""] > 0
            breakdown = context_breakdown(c, threshold=agent.threshold, tool_definitions=overhead)
            mine = breakdown.part(OVERHEAD, "f")
            assert mine.chars == overhead["f"] and mine.label == "tool definitions: MCP server f (every request)"
            assert breakdown.part(OVERHEAD, "").label == "tool definitions: built-in tools (every request)"
            assert sum(part.chars for part in breakdown.parts) == breakdown.chars

            await agent.run('use the tool f__echo with {"text": "a small one"}')  # the newest stays
            reclaimed = await agent.reclaim_tool_results(keep_max=1)
            assert call_id in reclaimed.reclaimed_ids
            placeholder = next(m for m in c.messages if getattr(m, "raw", {}).get("tool_call_id") == call_id)
            assert placeholder.raw["content"].startswith(f"[Compacted, ID: {call_id}")
            assert c.reclaimed_original(call_id) == text  # what the inspector shows

            hits = c.recall_index.search("quartz lantern", session=c.conversation_id)
            [hit] = [h for h in hits if h.tool_call_id == call_id]
            assert hit.source == "reclaimed" and hit.tool == "f__words"
            assert c.recall_index.entry(hit.id).text == text

            await agent.restore_tool_result(call_id)
            restored = next(m for m in c.messages if getattr(m, "raw", {}).get("tool_call_id") == call_id)
            assert restored.raw["content"] == text
            session.save()
        finally:
            await session.mcp.aclose()
    assert servers.alive() == []
