"""The toolbox machinery: schemas from signatures, argument errors, confirmation, capping, redaction."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Annotated, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from xun.agent.config import XunConfig
from xun.agent.tools import (
    ConfirmationRequest,
    Decision,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    Toolbox,
    cap_text,
    default_toolbox,
    tool,
)

from .conftest import Confirmer


def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number,
            which defaults to two.
    """
    return a + b


async def shout(text: Annotated[str, Field(description="What to shout.", min_length=1)], times: int = 1) -> str:
    """Repeat text in capitals."""
    return " ".join([text.upper()] * times)


def boom(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"exploded because {reason}")


def refuse(reason: str) -> str:
    """Fails the expected way."""
    raise ToolError(f"cannot do that: {reason}")


def where(context: ToolContext) -> str:
    """Say the working directory."""
    return str(context.workdir)


class Point(BaseModel):
    x: int
    y: int


def describe(point: Point, unit: Literal["cm", "in"] = "cm") -> dict:
    """Describe a point."""
    return {"sum": point.x + point.y, "unit": unit}


def touch_request(args: dict, context: ToolContext) -> ConfirmationRequest:
    return ConfirmationRequest(tool="touch", title=f"Touch {args['name']}", preview="")


touched: list[str] = []


@tool(confirmation=touch_request)
def touch(name: str) -> str:
    """Pretend to change something."""
    touched.append(name)
    return f"touched {name}"


@pytest.fixture(autouse=True)
def _reset_touched():
    touched.clear()


@pytest.fixture
def box() -> Toolbox:
    return Toolbox([add, shout, boom, refuse, where, describe, touch])


# ---------------------------------------------------------------------------------------- schemas


def test_schema_from_signature_and_docstring():
    schema = Tool.from_function(add).schema()
    assert schema == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "The first number."},
                    "b": {"type": "integer", "default": 2, "description": "The second number, which defaults to two."},
                },
                "required": ["a"],
                "additionalProperties": False,
            },
        },
    }


def test_schema_from_annotated_fields_hides_the_context_and_handles_models():
    params = Tool.from_function(shout).parameters
    assert params["properties"]["text"] == {"type": "string", "description": "What to shout.", "minLength": 1}
    assert Tool.from_function(where).parameters["properties"] == {}
    described = Tool.from_function(describe).parameters
    assert described["properties"]["unit"]["enum"] == ["cm", "in"]
    assert "$ref" in json.dumps(described["properties"]["point"]) and "Point" in described["$defs"]
    assert "title" not in json.dumps(described)


def test_builtin_schemas_are_complete(toolbox):
    assert toolbox.names() == [
        "read_file",
        "list_directory",
        "search_text",
        "write_file",
        "run_command",
        "extract_compacted_tool_result",
        "search_history",
        "read_history_entry",
    ]
    by_name = {s["function"]["name"]: s["function"] for s in toolbox.schemas()}
    assert by_name["read_file"]["parameters"]["required"] == ["path"]
    assert set(by_name["read_file"]["parameters"]["properties"]) == {"path", "offset", "limit"}
    assert by_name["run_command"]["parameters"]["required"] == ["command"]
    assert by_name["write_file"]["parameters"]["required"] == ["path", "content"]
    assert by_name["extract_compacted_tool_result"]["parameters"]["required"] == ["toolcall_id"]
    assert by_name["search_history"]["parameters"]["required"] == ["query"]
    assert by_name["read_history_entry"]["parameters"]["required"] == ["id"]
    assert all("context" not in f["parameters"]["properties"] for f in by_name.values())
    for function in by_name.values():
        assert function["description"] and "\n" not in function["description"].split("\n\n")[0]
        for prop in function["parameters"]["properties"].values():
            assert prop.get("description"), function["name"]
    assert toolbox.get("write_file").needs_confirmation and toolbox.get("run_command").needs_confirmation
    assert not toolbox.get("read_file").needs_confirmation


def test_bad_declarations_fail_at_definition():
    def untyped(x):
        """No annotation."""

    def star(*args: int):
        """Varargs."""

    with pytest.raises(TypeError, match="needs a type annotation"):
        Tool.from_function(untyped)
    with pytest.raises(TypeError, match="plain named parameter"):
        Tool.from_function(star)
    with pytest.raises(ValueError, match="must be 1-64"):
        Tool.from_function(add, name="has space")


# -------------------------------------------------------------------------------------- registry


def test_register_unregister_copy(box):
    assert "add" in box and len(box) == 7
    with pytest.raises(ValueError, match="already registered"):
        box.register(add)
    box.register(Tool.from_function(add, description="Replaced."), replace=True)
    assert box.get("add").description == "Replaced."
    copied = box.copy()
    box.unregister("add")
    assert "add" not in box and "add" in copied
    with pytest.raises(KeyError, match="no tool named 'add'"):
        box.unregister("add")
    assert [s["function"]["name"] for s in box.schemas()] == box.names()


# ---------------------------------------------------------------------------------------- calling


async def test_sync_and_async_tools_run(box, make_context):
    ctx = make_context()
    outcome = await box.call("add", '{"a": 40}', ctx)
    assert (outcome.text, outcome.is_error, outcome.truncated_chars) == ("42", False, 0)
    assert outcome.name == "add" and outcome.arguments == {"a": 40} and outcome.duration >= 0
    assert (await box.call("shout", {"text": "hi", "times": 2}, ctx)).text == "HI HI"
    assert (await box.call("where", "", ctx)).text == str(ctx.workdir)
    described = await box.call("describe", '{"point": {"x": 1, "y": 2}}', ctx)
    assert json.loads(described.text) == {"sum": 3, "unit": "cm"}


async def test_a_sync_function_returning_an_awaitable_is_awaited(make_context):
    async def later() -> str:
        return "awaited"

    def deferred() -> str:
        """Returns a coroutine."""
        return later()  # type: ignore[return-value]

    assert (await Toolbox([deferred]).call("deferred", "{}", make_context())).text == "awaited"


async def test_sync_tools_do_not_block_the_event_loop(make_context):
    release = threading.Event()

    def wait_for_release() -> str:
        """Blocks its thread until released."""
        release.wait(5)
        return "released"

    box = Toolbox([wait_for_release])
    call = asyncio.create_task(box.call("wait_for_release", "{}", make_context()))
    await asyncio.sleep(0.05)
    assert not call.done()  # the loop is free while the tool blocks its own thread
    release.set()
    assert (await asyncio.wait_for(call, 5)).text == "released"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("nope", "{}", "[Error] unknown tool 'nope'; the available tools are: add, shout"),
        ("add", '{"a": 1', "[Error] the arguments for add are not valid JSON ("),
        ("add", "[1, 2]", "[Error] the arguments for add must be a JSON object, got list"),
        ("add", '"a"', "[Error] the arguments for add must be a JSON object, got str"),
        ("add", "{}", "[Error] invalid arguments for add: missing required argument 'a'. Usage: add(a, b=2)"),
        ("add", '{"a": "ten"}', "[Error] invalid arguments for add: argument 'a': Input should be a valid integer"),
        ("add", '{"a": 1, "c": 3}', "[Error] invalid arguments for add: unexpected argument 'c'"),
        (
            "shout",
            '{"text": ""}',
            "[Error] invalid arguments for shout: argument 'text': String should have at least 1",
        ),
        (
            "describe",
            '{"point": {"x": 1}}',
            "[Error] invalid arguments for describe: missing required argument 'point.y'",
        ),
        (
            "describe",
            '{"point": {"x": 1, "y": 1}, "unit": "m"}',
            "[Error] invalid arguments for describe: argument 'unit'",
        ),
        ("add", '{"a": ' + "9" * 5000 + "}", "[Error] the arguments for add could not be read as JSON (Exceeds"),
        ("add", "[" * 100_000 + "]" * 100_000, "[Error] the arguments for add could not be read as JSON (nested"),
        ("add", 5, "[Error] the arguments for add must be a JSON object, got int"),
        ("boom", '{"reason": "test"}', "[Error] boom failed: RuntimeError: exploded because test"),
        ("refuse", '{"reason": "no"}', "[Error] cannot do that: no"),
    ],
)
async def test_every_failure_is_an_error_result(box, make_context, name, arguments, expected):
    outcome = await box.call(name, arguments, make_context())
    assert outcome.is_error
    assert outcome.text.startswith(expected), outcome.text


async def test_non_string_tool_names_are_unknown_tools(box, make_context):
    outcome = await box.call(None, "{}", make_context())  # type: ignore[arg-type]
    assert outcome.is_error and outcome.text.startswith("[Error] unknown tool")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.one_of(
        st.text(max_size=60),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
            lambda c: st.one_of(
                st.lists(c, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c", "text"]), c, max_size=3)
            ),
            max_leaves=8,
        ).map(json.dumps),
    )
)
async def test_fuzz_arguments_never_raise(box, make_context, arguments):
    for name in ("add", "shout", "describe"):
        outcome = await box.call(name, arguments, make_context())
        assert isinstance(outcome.text, str)
        assert outcome.is_error == outcome.text.startswith("[Error]")


async def test_cancellation_propagates(make_context):
    async def forever() -> str:
        """Never returns."""
        await asyncio.sleep(60)
        return "no"

    box = Toolbox([forever])
    task = asyncio.create_task(box.call("forever", "{}", make_context()))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ----------------------------------------------------------------------------------------- capping


def test_cap_text_keeps_head_and_tail_and_counts_the_cut():
    text = "".join(f"line {i}\n" for i in range(10_000))
    capped, cut = cap_text(text, 2_000)
    assert capped.startswith("line 0\n") and capped.endswith("line 9999\n")
    assert f"{cut:,} characters cut" in capped
    assert len(capped) <= 2_000
    kept = capped.replace(capped[capped.index("\n\n[...") : capped.index("...]\n\n") + 6], "")
    assert len(kept) + cut == len(text)
    assert cap_text("short", 10) == ("short", 0)


async def test_outputs_are_capped_with_a_note(make_context):
    def big() -> str:
        """Lots of output."""
        return "x" * 10_000

    outcome = await Toolbox([big]).call("big", "{}", make_context(max_output_chars=1_000))
    assert outcome.truncated_chars > 9_000 and not outcome.is_error
    assert len(outcome.text) <= 1_000
    assert f"{outcome.truncated_chars:,} characters cut" in outcome.text


async def test_tool_results_report_their_own_error_state(make_context):
    def soft_fail() -> ToolResult:
        """Returns an error result."""
        return ToolResult("it did not work", is_error=True)

    outcome = await Toolbox([soft_fail]).call("soft_fail", "{}", make_context())
    assert outcome.is_error and outcome.text == "[Error] it did not work"


async def test_secret_values_are_redacted_from_outputs(make_context):
    key = "sk-test-1234567890abcdefghij"

    def leak() -> str:
        """Prints a key."""
        return f"OPENAI_API_KEY={key}"

    ctx = make_context(redact=(key,))
    outcome = await Toolbox([leak]).call("leak", "{}", ctx)
    assert key not in outcome.text and "[redacted]" in outcome.text
    assert key not in repr(ctx)


def test_context_from_config(workspace):
    config = XunConfig.model_validate(
        {
            "auto_confirm": True,
            "tools": {"max_output_chars": 1234, "command_timeout": 7},
            "provider": {"api_key_env": "MY_KEY"},
        }
    )
    ctx = ToolContext.from_config(config, workdir=workspace, environ={"MY_KEY": "secret-value-1"})
    assert ctx.auto_confirm and ctx.max_output_chars == 1234 and ctx.command_timeout == 7
    assert {"MY_KEY", "OPENAI_API_KEY"} <= ctx.hidden_env
    assert ctx.redact == ("secret-value-1",) and "secret-value-1" not in repr(ctx)
    with pytest.raises(ValueError, match="max_output_chars"):
        ToolContext(workdir=workspace, max_output_chars=0)


# ------------------------------------------------------------------------------------ confirmation


async def test_no_callback_and_no_auto_confirm_refuses(box, make_context):
    outcome = await box.call("touch", '{"name": "a"}', make_context(auto_confirm=False, confirm=None))
    assert outcome.is_error and outcome.denied
    assert outcome.text.startswith("[Error] touch needs the user's confirmation")
    assert touched == []


async def test_auto_confirm_runs_without_asking(box, make_context):
    confirmer = Confirmer()
    outcome = await box.call("touch", '{"name": "a"}', make_context(auto_confirm=True, confirm=confirmer))
    assert outcome.text == "touched a" and confirmer.requests == [] and touched == ["a"]


async def test_allow_once_asks_every_time(box, make_context):
    confirmer = Confirmer(Decision.ALLOW_ONCE, Decision.ALLOW_ONCE)
    ctx = make_context(auto_confirm=False, confirm=confirmer)
    assert (await box.call("touch", '{"name": "a"}', ctx)).text == "touched a"
    assert (await box.call("touch", '{"name": "b"}', ctx)).text == "touched b"
    assert [r.title for r in confirmer.requests] == ["Touch a", "Touch b"]
    assert box.allowed_for_session() == frozenset()


async def test_allow_session_is_remembered_per_tool(box, make_context):
    confirmer = Confirmer(Decision.ALLOW_SESSION)
    ctx = make_context(auto_confirm=False, confirm=confirmer)
    for name in ("a", "b", "c"):
        assert (await box.call("touch", json.dumps({"name": name}), ctx)).text == f"touched {name}"
    assert len(confirmer.requests) == 1 and touched == ["a", "b", "c"]
    assert box.allowed_for_session() == {"touch"}
    assert "touch" not in box.copy().allowed_for_session()  # a child does not inherit consent
    assert "touch" in box.copy(keep_permissions=True).allowed_for_session()
    box.forget_permissions()
    assert (await box.call("touch", '{"name": "d"}', ctx)).denied  # asked again; the script now denies


async def test_deny_runs_nothing(box, make_context):
    confirmer = Confirmer(Decision.DENY)
    outcome = await box.call("touch", '{"name": "a"}', make_context(auto_confirm=False, confirm=confirmer))
    assert outcome.is_error and outcome.denied
    assert outcome.text.startswith("[Error] the user declined: Touch a.")
    assert touched == []


async def test_a_broken_or_strange_confirmer_counts_as_deny(box, make_context):
    async def broken(request):
        raise RuntimeError("modal crashed")

    async def strange(request):
        return "yes"

    for confirm in (broken, strange):
        outcome = await box.call("touch", '{"name": "a"}', make_context(auto_confirm=False, confirm=confirm))
        assert outcome.is_error and outcome.denied
    assert touched == []


async def test_invalid_arguments_are_reported_before_asking(box, make_context):
    confirmer = Confirmer(Decision.ALLOW_ONCE)
    outcome = await box.call("touch", "{}", make_context(auto_confirm=False, confirm=confirmer))
    assert outcome.is_error and confirmer.requests == []


async def test_parallel_calls_ask_one_at_a_time_and_share_a_session_allow(box, make_context):
    asking = 0
    most = 0
    asked: list[str] = []

    async def slow_confirm(request):
        nonlocal asking, most
        asking += 1
        most = max(most, asking)
        asked.append(request.title)
        await asyncio.sleep(0.02)
        asking -= 1
        return Decision.ALLOW_SESSION

    ctx = make_context(auto_confirm=False, confirm=slow_confirm)
    outcomes = await asyncio.gather(*(box.call("touch", json.dumps({"name": str(i)}), ctx) for i in range(4)))
    assert [o.text for o in outcomes] == [f"touched {i}" for i in range(4)]
    assert most == 1 and len(asked) == 1


async def test_timing_is_measured(make_context):
    def nap() -> str:
        """Sleeps a little."""
        time.sleep(0.05)
        return "ok"

    assert (await Toolbox([nap]).call("nap", "{}", make_context())).duration >= 0.05


def test_default_toolbox_is_fresh_each_time():
    first = default_toolbox()
    first.allow_for_session("run_command")
    assert default_toolbox().allowed_for_session() == frozenset()


async def test_the_duration_leaves_out_the_wait_for_the_confirmation(make_context):
    async def slow_yes(request: ConfirmationRequest) -> Decision:
        await asyncio.sleep(0.3)  # the user reading the dialog
        return Decision.ALLOW_ONCE

    box = Toolbox([touch])
    outcome = await box.call("touch", '{"name": "a"}', make_context(auto_confirm=False, confirm=slow_yes))
    assert outcome.text == "touched a"
    assert outcome.waited >= 0.3
    assert outcome.duration < 0.3, "the run time, not the time the user took to answer"
