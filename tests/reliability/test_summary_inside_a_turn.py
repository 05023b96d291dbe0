"""A summary inside a turn: with a small threshold a turn's own tool results were summarised away and the
command ran twice.

Here the real agent runs a command (auto-confirmed) in a session compacted before every call, and the
plan of a summary inside a turn carries the turn's prompt and names every condensed call.
"""

from __future__ import annotations

from xun.context.conversation import Conversation

from .helpers import make_agent


async def test_a_summary_before_a_call_inside_a_turn_keeps_the_turn_and_nothing_runs_twice(offline_server, tmp_path):
    agent, rec, _ = make_agent(
        offline_server,
        tmp_path,
        auto_confirm=True,
        auto_compact__token_threshold=600,
        auto_compact__summary_keep_max=1,
        auto_compact__toolcall_keep_max=1,
        auto_compact__escalation_rounds=0,
    )
    finished = await agent.run("run `echo once >> ran.txt; seq 1 600`")
    assert finished.status == "ok"
    assert (tmp_path / "ran.txt").read_text() == "once\n"  # before the fix: four times
    types = rec.types()
    assert "tool_results_reclaimed" in types, "no compaction ran inside the turn: the test proved nothing"
    # (the estimate of the very first request, with the tool definitions, is already over 600: a check ran
    # before it too; what matters is the one after the command's result)
    assert "tool_results_reclaimed" in types[types.index("tool_call_finished") :]
    roles = [m["role"] for m in agent.conversation.completion_params()]
    assert roles[-4:] == ["user", "assistant", "tool", "assistant"]  # the turn, whole


def test_the_plan_inside_a_turn_carries_its_prompt_and_records_every_condensed_call():
    """Round 3 (issue 23): the turn is cut like any other history, never a dead end; the goal of the
    round-2 rule (nothing runs twice) is kept by the turn ledger, which names every condensed call."""
    c = Conversation()
    c.set_system_message_content("role")
    for i in range(3):
        c.add_user_message(f"old {i}")
        c.add_agent_message({"role": "assistant", "content": "ok"})
    c.add_user_message("do it")
    for i in range(6):
        c.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "run_command", "arguments": f'{{"command": "step {i}"}}'},
                    }
                ],
            }
        )
        c.add_tool_result(f"c{i}", f"result {i}")
    plan = c.plan_compaction(keep_recent=2)
    assert plan.carried_user is not None and plan.carried_user.text == "do it"
    assert [m.role for m in plan.kept] == ["user", "assistant", "tool"]
    assert plan.turn_rounds == 5
    result = c.apply_compaction(plan, "a summary")
    assert result.compacted and result.turn_rounds == 5
    system = c.completion_params()[0]["content"]
    for i in range(5):
        assert f'command="step {i}"' in system and f"[id c{i}]" in system
    assert "never repeat one" in system
