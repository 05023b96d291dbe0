"""search_history and read_history_entry: through the toolbox, and end to end through the agent."""

from __future__ import annotations

import re

import pytest

from xun.agent.loop import Agent
from xun.compact.summary import compact_conversation
from xun.agent.config import XunConfig
from xun.context.conversation import Conversation
from xun.context.recall import RecallIndex
from xun.context.reclaimed import ReclaimedToolResult
from xun.agent.tools import ToolContext, default_toolbox

from agent.helpers import Recorder, write_files  # tests/ is on sys.path (rootdir-relative packages)
from .conftest import busy_session

ENTRY_LINE = re.compile(r"^- id (\d+) \| session (\S+)( \(this session\))? \| (\S+) \| ([^:]+): (.*)$")


async def call(context, name, **arguments):
    return await default_toolbox().call(name, arguments, context)


@pytest.fixture
def indexed(store):
    c = busy_session(store.new(), "k", rounds=8)
    c.reclaim_tool_results(keep_max=2)
    c.compact(lambda messages: "SUMMARY", keep_recent=4)
    return c


async def test_search_history_lists_matches_with_ids(store, indexed):
    other = busy_session(store.new(), "z", rounds=3)
    other.reclaim_tool_results(keep_max=0)
    context = ToolContext(workdir=store.workdir, conversation=indexed)
    assert context.recall is store.recall_index  # taken from the conversation
    outcome = await call(context, "search_history", query="markerk3")
    assert not outcome.is_error
    head, *lines = outcome.text.split("\n")
    assert head.startswith("[history: ") and "best first" in head
    parsed = [ENTRY_LINE.match(line) for line in lines]
    assert all(parsed) and len(parsed) == 1  # reclaimed, then summarised: one match
    assert parsed[0].group(5) == "tool result of read_file (call call_k_3, reclaimed)"
    assert parsed[0].group(3) and "«markerk3»" in parsed[0].group(6)
    offloaded = await call(context, "search_history", query="k answer 6")
    assert "assistant message" in offloaded.text and "(this session)" in offloaded.text
    elsewhere = await call(context, "search_history", query="markerz1")
    assert ENTRY_LINE.match(elsewhere.text.split("\n")[1]).group(3) is None  # another session: not marked
    users = await call(context, "search_history", query="k question", limit=3)
    assert len(users.text.split("\n")) == 4 and "user message" in users.text


async def test_read_history_entry_gives_the_exact_text(store, indexed):
    context = ToolContext(workdir=store.workdir, conversation=indexed, max_output_chars=100_000)
    found = await call(context, "search_history", query="markerk5 payload")
    entry_id = int(ENTRY_LINE.match(found.text.split("\n")[1]).group(1))
    outcome = await call(context, "read_history_entry", id=entry_id)
    head, _, text = outcome.text.partition("\n")
    assert not outcome.is_error and text == store.recall_index.entry(entry_id).text
    assert f"[history entry {entry_id}: tool result of read_file" in head and "the whole text" in head
    as_string = await call(context, "read_history_entry", id=str(entry_id))
    assert as_string.text == outcome.text


async def test_a_long_entry_is_read_in_pieces(workdir):
    index = RecallIndex(workdir)
    text = "".join(f"{i:05d}\n" for i in range(3000))  # 18,000 characters
    index.index_reclaimed("s", [(ReclaimedToolResult("c", "run_command", "{}", len(text), 1.0), text)])
    context = ToolContext(workdir=workdir, recall=index, max_output_chars=5000)
    pieces, offset = [], 0
    while True:
        outcome = await call(context, "read_history_entry", id=1, offset=offset)
        head, _, piece = outcome.text.partition("\n")
        pieces.append(piece)
        match = re.search(r"continue with offset=(\d+)", head)
        if not match:
            break
        offset = int(match.group(1))
    assert "".join(pieces) == text and len(pieces) == 4
    past = await call(context, "read_history_entry", id=1, offset=99_999)
    assert "past the end" in past.text


async def test_errors_are_clear(store, indexed, workdir):
    context = ToolContext(workdir=store.workdir, conversation=indexed)
    unknown = await call(context, "read_history_entry", id=99_999)
    assert unknown.is_error and unknown.text.startswith("[Error] no history entry has the id 99999")
    negative = await call(context, "read_history_entry", id=-1)
    assert negative.is_error and "invalid arguments" in negative.text
    nothing = await call(context, "search_history", query="neverseenword")
    assert not nothing.is_error and nothing.text.startswith("[history: no match")
    symbols = await call(context, "search_history", query='" * -')
    assert symbols.is_error and "no letters or digits" in symbols.text
    for query in ["foo-bar", "AND(", 'a"b', "NEAR(", "*x*"]:
        assert not (await call(context, "search_history", query=query)).is_error
    bare = ToolContext(workdir=workdir, conversation=Conversation())
    for name, arguments in (("search_history", {"query": "x"}), ("read_history_entry", {"id": 1})):
        outcome = await call(bare, name, **arguments)
        assert outcome.is_error and "no searchable history" in outcome.text


async def test_from_config_takes_the_history_of_the_conversation(store, indexed):
    context = ToolContext.from_config(XunConfig(), workdir=store.workdir, conversation=indexed)
    assert context.recall is store.recall_index
    other = RecallIndex(store.workdir)
    assert (
        ToolContext.from_config(XunConfig(), workdir=store.workdir, conversation=indexed, recall=other).recall is other
    )


async def test_the_model_searches_and_reads_the_history_through_the_agent(offline_server, store, workdir):
    """End to end: the offline model calls search_history, then read_history_entry with an id it saw."""
    write_files(workdir, 4)
    (workdir / "f2.py").write_text(
        "def frobnicate_widgets():\n    return 'zebra-striped answer'\n" + "# padding\n" * 30
    )
    config = XunConfig()
    config.provider.base_url = offline_server.base_url
    config.model.name = "xun-offline"
    recorder = Recorder()
    conversation = store.new()
    agent = Agent(config, conversation=conversation, workdir=workdir, on_event=recorder, environ={})
    agent.system("You are the test agent.")
    for i in range(1, 5):
        await agent.run(f"please read f{i}.py")
    reclaimed = await agent.reclaim_tool_results(keep_max=0)
    assert reclaimed.reclaimed_count == 4
    summary = await compact_conversation(agent, keep_recent=2)
    assert summary.compacted and summary.warning is None

    await agent.run("search the history for frobnicate_widgets")
    searched = recorder.of("tool_call_finished")[-1]
    assert searched.name == "search_history" and not searched.is_error
    result = conversation.messages[-2].raw["content"]
    lines = [ENTRY_LINE.match(line) for line in result.split("\n")[1:]]
    assert lines and all(lines) and all("«frobnicate_widgets»" in m.group(6) for m in lines)
    assert all(m.group(3) == " (this session)" for m in lines)
    assert "search_history" in agent.last_reply()  # the scripted model quoted what the tool returned

    entry_id = int(lines[0].group(1))
    await agent.run(f"read history entry {entry_id}")
    read = recorder.of("tool_call_finished")[-1]
    assert read.name == "read_history_entry" and not read.is_error
    content = conversation.messages[-2].raw["content"]
    assert content.split("\n", 1)[1] == store.recall_index.entry(entry_id).text
    assert "zebra-striped answer" in content


def test_the_compacted_history_template_names_the_tools(store, indexed):
    from xun.context.messages import COMPACTED_SYSTEM_PROMPT

    assert "call extract_compacted_tool_result with that ID" in COMPACTED_SYSTEM_PROMPT
    sent = indexed.completion_params()[0]["content"]
    assert "SUMMARY" in sent and "search_history" in sent and "read_history_entry" in sent
    assert "never instructions" in sent.split("read_history_entry", 1)[1]
    assert all(
        name in default_toolbox() for name in ("search_history", "read_history_entry", "extract_compacted_tool_result")
    )
