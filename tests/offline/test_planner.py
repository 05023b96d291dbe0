"""The offline model's multi-step work: one tool call a step, each next step read from the request only
(issue 23, item 5), over real HTTP."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from .conftest import BUILTIN_TOOLS, calls_of, only_tools, user

APPEND = "append the numbers 1 to {n} to steps.txt, one tool call per number"


def _call(number: int, step: int, command: str | None = None) -> list[dict[str, Any]]:
    """An assistant call of one append step and its (empty) result."""
    call_id = f"call_{number}"
    command = command or f"echo {step} >> steps.txt"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "run_command", "arguments": json.dumps({"command": command})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "(exit 0, no output)"},
    ]


def test_a_20_step_turn_completes_with_each_step_once(client, tmp_path):
    messages = [{"role": "system", "content": "You are an agent."}, *user(APPEND.format(n=20))]
    for _ in range(40):
        message = client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS).choices[0].message
        calls = calls_of(message)
        if not calls:
            break
        [(name, arguments)] = calls
        assert name == "run_command"
        done = subprocess.run(arguments["command"], shell=True, cwd=tmp_path, capture_output=True, text=True)
        messages.append(message.model_dump(exclude_none=True))
        messages.append(
            {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": f"exit {done.returncode}"}
        )
    assert not calls, "the turn did not finish in 40 requests"
    assert "All 20 steps are done" in message.content
    assert (tmp_path / "steps.txt").read_text().split() == [str(k) for k in range(1, 21)]


def test_a_request_showing_steps_1_to_7_done_gets_step_8(client):
    messages = [*user(APPEND.format(n=20))]
    for step in range(1, 8):
        messages += _call(step, step)
    [(name, arguments)] = calls_of(
        client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS).choices[0].message
    )
    assert (name, arguments["command"]) == ("run_command", "echo 8 >> steps.txt")


def test_a_lost_record_shows_up_as_a_repeated_step(client):
    messages = [*user(APPEND.format(n=20))]
    for step in (1, 2, 3, 5, 6):
        messages += _call(step, step)
    [(_, arguments)] = calls_of(
        client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS).choices[0].message
    )
    assert arguments["command"] == "echo 4 >> steps.txt"


def test_the_steps_a_summary_lists_count_as_done(client):
    summary = "## key_facts\n- Steps done (echo K >> steps.txt): 1-40, 42\n## pending_tasks\n- (none)\n"
    messages = [{"role": "system", "content": summary}, *user(APPEND.format(n=60)), *_call(43, 41)]
    [(_, arguments)] = calls_of(
        client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS).choices[0].message
    )
    assert arguments["command"] == "echo 43 >> steps.txt"


def test_write_files_steps_write_the_size_asked_and_finish(client):
    messages = [*user("write files step1 to step3 of 500 characters")]
    paths = []
    while calls := calls_of(
        message := client.chat.completions.create(model="m", messages=messages, tools=only_tools("write_file"))
        .choices[0]
        .message
    ):
        [(name, arguments)] = calls
        assert name == "write_file" and len(arguments["content"]) == 500
        paths.append(arguments["path"])
        messages.append(message.model_dump(exclude_none=True))
        messages.append(
            {
                "role": "tool",
                "tool_call_id": message.tool_calls[0].id,
                "content": f"Wrote 500 characters to {arguments['path']}",
            }
        )
    assert paths == ["step1.txt", "step2.txt", "step3.txt"] and "All 3 steps are done" in message.content


SUMMARY_REQUEST = (
    "Summarize the conversation above into these sections: system_context, overview, key_facts, user_preferences, "
    "decisions, pending_tasks, open_questions, tone_context."
)


def test_a_faithful_summary_lists_the_steps_done_and_a_useless_one_nothing(offline_server_factory):
    import openai

    messages = [*user(APPEND.format(n=30))]
    for step in range(1, 13):
        messages += _call(step, step)
    messages += user(SUMMARY_REQUEST)
    texts = []
    for useless in (False, True):
        server = offline_server_factory(useless_summaries=useless)
        client = openai.OpenAI(base_url=server.base_url, api_key="offline", max_retries=0, timeout=10)
        texts.append(client.chat.completions.create(model="m", messages=messages).choices[0].message.content)
    faithful, useless_text = texts
    assert "Steps done (echo K >> steps.txt): 1-12" in faithful
    assert "key_facts" in useless_text and "echo" not in useless_text and "Steps done" not in useless_text


def test_a_step_whose_result_is_an_error_is_issued_again(client):
    messages = [*user(APPEND.format(n=20)), *_call(1, 1), *_call(2, 2)]
    messages[-1]["content"] = "[Error] the arguments for run_command are not valid JSON"
    [(_, arguments)] = calls_of(
        client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS).choices[0].message
    )
    assert arguments["command"] == "echo 2 >> steps.txt"


def test_files_a_listing_shows_are_not_steps_done(client):
    """Trial D: a `list_directory` that showed step1.txt to step3.txt left by an earlier run made the summary
    write "Steps done (write_file stepK.txt): 1-3", and the next turn began at step 4, leaving the three old
    files as they were. Only write_file and run_command calls do steps."""
    listing = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_ls",
                    "type": "function",
                    "function": {"name": "list_directory", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_ls", "content": "step1.txt  12\nstep2.txt  12\nstep3.txt  12\n"},
    ]
    messages = [*user("list files"), *listing, *user("write files step1 to step5")]
    [(name, arguments)] = calls_of(
        client.chat.completions.create(model="m", messages=messages, tools=BUILTIN_TOOLS).choices[0].message
    )
    assert (name, arguments["path"]) == ("write_file", "step1.txt")
