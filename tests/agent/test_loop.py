"""The agent loop against the offline server: tools, reasoning, usage, retries, cancellation."""

import asyncio
import json

import pytest

from xun import Agent, AutoCompactor, CompactorAbstract, Conversation
from xun.agent.tool_calls import CANCELLED_TOOL_RESULT, INTERRUPTED_TOOL_RESULT
from xun.agent import loop as loop_module
from xun.agent.tools import builtin
from xun.context.messages import RawOpenAIMessage, UserMessage
from xun.agent.tools import Decision

from .helpers import make_agent, write_files


def test_top_level_names():
    assert issubclass(AutoCompactor, CompactorAbstract)
    assert Agent and Conversation


async def test_parallel_tool_calls_run_and_results_keep_call_order(offline_server, tmp_path):
    (tmp_path / "a.py").write_text("print('a')\n")
    (tmp_path / "b.py").write_text("print('b')\n")
    agent, rec = make_agent(offline_server, tmp_path)
    finished = await agent.run("read a.py and b.py")
    assert finished.status == "ok" and finished.iterations == 2
    started = rec.of("tool_call_started")
    assert [json.loads(e.arguments)["path"] for e in started] == ["a.py", "b.py"]
    calls = [m for m in agent.conversation.messages if isinstance(m, RawOpenAIMessage) and m.raw.get("tool_calls")]
    assert len(calls) == 1 and len(calls[0].raw["tool_calls"]) == 2
    results = [m.raw for m in agent.conversation.messages if m.role == "tool"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls[0].raw["tool_calls"]]
    assert "print('a')" in results[0]["content"] and "print('b')" in results[1]["content"]
    assert "a.py" in rec.text() and agent.last_reply() == rec.text()
    assert rec.types()[0] == "turn_started" and rec.types()[-1] == "turn_finished"


async def test_usage_sets_total_tokens_and_the_estimate(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path)
    await agent.run("hello there")
    usage = [e for e in rec.of("usage") if e.prompt_tokens is not None][-1]
    assert agent.conversation.total_tokens == usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.estimated_tokens == usage.total_tokens  # nothing added since the report
    assert usage.threshold == 192_000


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_is_detected_streamed_and_sent_back(offline_server_factory, tmp_path, field):
    server = offline_server_factory(reasoning=field)
    agent, rec = make_agent(server, tmp_path)
    await agent.run("think about this")
    assert rec.of("reasoning_delta")
    assert agent.config.model.reasoning_field == field
    reply = agent.conversation.messages[-1].raw
    assert reply[field] == "".join(e.text for e in rec.of("reasoning_delta"))
    await agent.run("and again")
    sent = agent.conversation.completion_params()
    assert sum(1 for m in sent if m.get(field)) == 2  # earlier reasoning goes back unchanged


@pytest.mark.parametrize("fault", ["500@1", "disconnect@1", "malformed@1", "truncate@1", "empty@1", "429@1"])
async def test_transient_faults_are_retried(offline_server_factory, tmp_path, fault):
    server = offline_server_factory(faults=fault)
    agent, rec = make_agent(server, tmp_path)
    finished = await agent.run("hello")
    assert finished.status == "ok", rec.of("error")
    assert len(rec.of("retry")) == 1
    assistant = [m for m in agent.conversation.messages if m.role == "assistant"]
    assert len(assistant) == 1  # the broken attempt left nothing behind


async def test_final_failure_is_an_error_event_and_keeps_the_message(offline_server_factory, tmp_path):
    server = offline_server_factory(faults="500@1-10")
    agent, rec = make_agent(server, tmp_path, retry__attempts=3)
    finished = await agent.run("are you there")
    assert finished.status == "error" and "after 3 attempts" in finished.error
    assert len(rec.of("retry")) == 2 and len(rec.of("error")) == 1
    assert agent.conversation.messages[-1] == UserMessage("are you there")


async def test_cancel_mid_stream_leaves_a_consistent_conversation(offline_server_factory, tmp_path):
    server = offline_server_factory(tokens_per_second=50)
    agent, rec = make_agent(server, tmp_path)
    before = list(agent.conversation.messages)
    task = asyncio.create_task(agent.run("write 2000 tokens"))
    for _ in range(200):
        if rec.of("text_delta"):
            break
        await asyncio.sleep(0.01)
    assert rec.of("text_delta"), "the slow stream never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deltas = len(rec.of("text_delta"))
    await asyncio.sleep(0.3)
    assert len(rec.of("text_delta")) == deltas  # streaming stopped
    finished = rec.of("turn_finished")[-1]
    assert finished.status == "cancelled" and finished.restored_prompt is None
    # the reply so far is kept after the prompt, marked as cancelled (issue 14), and nothing else changed
    messages = agent.conversation.messages
    assert messages[: len(before)] == before and len(messages) == len(before) + 2
    assert messages[-2].text == "write 2000 tokens"
    streamed = "".join(event.text for event in rec.of("text_delta"))
    assert messages[-1].raw["content"] == streamed + "\n\n[cancelled by the user]"


async def test_cancel_during_a_tool_answers_the_call_and_kills_it(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path, auto_confirm=True)
    task = asyncio.create_task(agent.run("run `sleep 30 && touch late.txt`"))
    for _ in range(300):
        if rec.of("tool_call_started"):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    tool = [m.raw for m in agent.conversation.messages if m.role == "tool"]
    # it was running: the record says it may have had effects, not that it never ran (trial 2, finding 9)
    assert tool and tool[-1]["content"] == INTERRUPTED_TOOL_RESULT
    assert rec.of("turn_finished")[-1].restored_prompt is None  # the call was made: the turn stays
    assert not (tmp_path / "late.txt").exists()
    ended = rec.of("tool_call_finished")[-1]  # the call ends as every call does, so a front end shows it
    assert ended.id == tool[-1]["tool_call_id"] and ended.name == "run_command" and ended.is_error


async def test_a_cancel_right_after_a_command_finished_keeps_its_real_result(offline_server, tmp_path, monkeypatch):
    """Ctrl+Q or Esc after the command ran, before the loop recorded its result: the record is the
    command's own result, not "cancelled before it ran" (a model would run it again)."""
    agent, rec = make_agent(offline_server, tmp_path, auto_confirm=True)
    task: list[asyncio.Task] = []
    real_run_shell = builtin.run_shell

    async def run_then_cancel(*args, **kwargs):
        result = await real_run_shell(*args, **kwargs)
        asyncio.get_running_loop().call_soon(task[0].cancel)  # the quit lands as the tool returns
        return result

    monkeypatch.setattr(builtin, "run_shell", run_then_cancel)
    task.append(asyncio.create_task(agent.run("run `echo 26 >> steps.txt`")))
    with pytest.raises(asyncio.CancelledError):
        await task[0]
    assert (tmp_path / "steps.txt").read_text() == "26\n"
    tool = [m.raw for m in agent.conversation.messages if m.role == "tool"]
    assert len(tool) == 1 and tool[0]["content"].endswith("[exit code 0]"), tool
    ended = rec.of("tool_call_finished")
    assert len(ended) == 1 and not ended[0].is_error and ended[0].name == "run_command"


async def test_a_cancel_that_a_finishing_model_call_swallowed_still_ends_the_turn(
    offline_server, tmp_path, monkeypatch
):
    """Python 3.11's wait_for returns the result of a call that ends just as the cancel lands, and the
    cancel is lost: the turn must still stop, and run no tool (a Ctrl+Q then waited for the whole turn)."""
    agent, rec = make_agent(offline_server, tmp_path, auto_confirm=True)
    real_within_deadline = loop_module.within_deadline

    async def finish_as_the_cancel_lands(call, seconds):
        reply = await real_within_deadline(call, seconds)
        asyncio.current_task().cancel()
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:  # what wait_for does when its call is already done
            pass
        return reply

    monkeypatch.setattr(loop_module, "within_deadline", finish_as_the_cancel_lands)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(agent.run("append the numbers 1 to 5 to steps.txt"), 20)
    assert not (tmp_path / "steps.txt").exists(), "no step runs after the cancel"
    assert rec.of("turn_finished")[-1].status == "cancelled"
    tool = [m.raw for m in agent.conversation.messages if m.role == "tool"]
    assert len(tool) == 1 and tool[0]["content"] == CANCELLED_TOOL_RESULT


async def test_a_cancel_while_a_command_waits_for_its_confirmation_says_it_did_not_run(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path)
    asked = asyncio.Event()

    async def never_answer(request):
        asked.set()
        await asyncio.Event().wait()

    agent.confirm = never_answer
    task = asyncio.create_task(agent.run("run `touch never.txt`"))
    await asyncio.wait_for(asked.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    tool = [m.raw for m in agent.conversation.messages if m.role == "tool"]
    assert tool and tool[-1]["content"] == CANCELLED_TOOL_RESULT and "did not run" in CANCELLED_TOOL_RESULT
    assert not (tmp_path / "never.txt").exists()


async def test_refused_confirmation_writes_nothing(offline_server, tmp_path):
    asked = []

    async def deny(request):
        asked.append(request)
        return Decision.DENY

    agent, rec = make_agent(offline_server, tmp_path)
    agent.confirm = deny
    await agent.run("write hello world to notes.txt")
    assert asked and asked[0].tool == "write_file" and "notes.txt" in asked[0].title
    finished = rec.of("tool_call_finished")[0]
    assert finished.denied and finished.is_error
    assert not (tmp_path / "notes.txt").exists()
    assert rec.of("turn_finished")[-1].status == "ok"


async def test_allowed_confirmation_writes(offline_server, tmp_path):
    async def allow(request):
        return Decision.ALLOW_ONCE

    agent, rec = make_agent(offline_server, tmp_path)
    agent.confirm = allow
    await agent.run("write hello world to notes.txt")
    assert (tmp_path / "notes.txt").exists()


async def test_paths_outside_the_workspace_are_refused(offline_server, tmp_path):
    inside = tmp_path / "ws"
    inside.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    agent, rec = make_agent(offline_server, inside)
    await agent.run("read ../secret.txt")
    finished = rec.of("tool_call_finished")[0]
    assert finished.is_error and "top secret" not in json.dumps(
        [m.completion_param() for m in agent.conversation.messages]
    )


async def test_agents_md_is_synced_before_and_after_every_turn(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path)
    (tmp_path / "AGENTS.md").write_text("Always write tests.")
    await agent.run("hello")
    assert "Always write tests." in agent.conversation.completion_params()[0]["content"]
    (tmp_path / "AGENTS.md").unlink()
    (tmp_path / "agents.md").write_text("")
    await agent.run("hello again")
    assert "Always write tests." not in agent.conversation.completion_params()[0]["content"]


async def test_custom_compactor_is_awaited_before_every_model_call(offline_server, tmp_path):
    write_files(tmp_path, 2)

    class Counting(CompactorAbstract):
        calls = 0

        async def auto_compact(self, agent):
            Counting.calls += 1

    agent, rec = make_agent(offline_server, tmp_path)
    agent.compactor = Counting()
    await agent.run("read f1.py")
    assert Counting.calls == 2  # the first call and the one after the tool result


async def test_max_iterations_stops_the_loop(offline_server, tmp_path):
    write_files(tmp_path, 1)
    agent, rec = make_agent(offline_server, tmp_path)
    finished = await agent.run("read f1.py", max_iterations=1)
    assert finished.status == "max_iterations" and rec.of("info")


async def test_stream_iterates_the_events(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path)
    kinds = [event.type async for event in agent.stream("hello")]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_finished" and "text_delta" in kinds


async def test_the_estimate_is_calibrated_without_the_tool_schemas(offline_server, tmp_path):
    agent, rec = make_agent(offline_server, tmp_path)
    await agent.run("hello")
    reported = agent.conversation.total_tokens
    agent.conversation.add_user_message("z" * 4000)
    added = agent.conversation.estimated_tokens() - reported
    assert 900 <= added <= 1100  # the offline tokenizer counts about four characters per token
    path = tmp_path / "s.json"
    agent.conversation.dump(path)
    assert Conversation().load(path).estimated_tokens() == agent.conversation.estimated_tokens()
    await agent.aclose()
