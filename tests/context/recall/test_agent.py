"""The agent shows index warnings of reclaims as Warning events (a summary's come with its result)."""

from __future__ import annotations

from agent.helpers import make_agent, write_files  # tests/ is on sys.path (rootdir-relative packages)
from xun.compact.summary import compact_conversation

from .test_engine import Broken


async def test_reclaim_and_summary_index_warnings_reach_the_front_end(offline_server, store, workdir):
    write_files(workdir, 4)
    agent, recorder = make_agent(offline_server, workdir)
    broken = Broken(store.workdir)
    agent.conversation.recall_index = broken
    for i in range(1, 5):
        await agent.run(f"please read f{i}.py")
    result = await agent.reclaim_tool_results(keep_max=1)
    assert result.reclaimed_count == 3  # the reclaim happened
    warnings = [w.message for w in recorder.of("warning")]
    assert len(warnings) == 1 and "search index was not updated" in warnings[0]
    assert agent.conversation.recall_warnings == []  # shown once
    summary = await compact_conversation(agent, keep_recent=2)
    assert summary.compacted and "search index was not updated" in summary.warning
    assert recorder.of("summary_finished")[-1].warning == summary.warning
    assert recorder.of("warning")[-1].message == summary.warning

    broken.fixed = True
    await agent.run("please read f1.py")
    await agent.reclaim_tool_results(keep_max=0)
    assert len(recorder.of("warning")) == 2  # nothing new to say: what waited was written
    assert broken.search("line 0 of file 3")
