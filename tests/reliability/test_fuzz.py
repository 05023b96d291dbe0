"""Fuzzing the four parsers that read what xun does not control, each to its one clear error type.

- Session loading (`Conversation.loads`/`load`): `tests/context/test_properties.py` corrupts the text of a
  saved session (cuts, flipped and inserted characters); here the structure is fuzzed (any field of a
  real session, archive entry or message set to any JSON value, or random bytes): only
  `SessionFormatError`, the file never modified, and what loads is usable (compaction, offload, save).
- Config loading: `tests/agent/test_config.py` fuzzes tables, TOML-ish text and `--set`; here arbitrary bytes
  in both files and arbitrary environment values: only `ConfigError`.
- Tool arguments: `tests/agent/tools/test_toolbox.py` fuzzes a toy toolbox; here the eight built-in tools with
  their real parameter names: `Toolbox.call` never raises, every result is a valid run or `[Error]`.
- The offline server's request parsing over real HTTP: always a JSON 400 or a valid answer (a parsable
  completion or a complete SSE stream), never a 500 or a dropped connection.

`XUN_FUZZ_EXAMPLES` sets how many examples each fuzz test runs (default 150). The longer run RELIABILITY.md
gives is `XUN_FUZZ_EXAMPLES=2000 python3 -m pytest tests/reliability/test_fuzz.py -q -p no:cacheprovider`.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xun.agent.config import ConfigError, XunConfig, load_config
from xun.context.conversation import Conversation, newest_messages, read_newest_messages
from xun.base.errors import SessionFormatError
from xun.agent.tools import Decision, ToolContext, default_toolbox

EXAMPLES = int(os.environ.get("XUN_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

KEYS = [
    "kind",
    "raw",
    "role",
    "content",
    "text",
    "images",
    "messages",
    "time",
    "id",
    "original",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "is_compressed",
    "persist_sections",
    "base_prompt",
    "response_schema",
    "tool_call_id",
    "cutoff_index",
    "summary_message",
    "file_path",
    "type",
    "chars",
    "compacted_count",
    "compacted_chars",
]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["../x", "a/b", ""]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=10,
)


# ------------------------------------------------------------------------------------------------ sessions


def _sample_session() -> str:
    c = Conversation(conversation_id="fuzz")
    c.set_system_message_content("You are the fuzzed agent.")
    c.set_persistent_section("AGENTS.md", "rules")
    c.add_user_message("hello", images=["data:image/png;base64,AAAA"])
    for i in range(3):
        c.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}"})},
                    }
                ],
            }
        )
        c.add_tool_result(f"c{i}", f"result {i} " * 60)
    c.add_agent_message({"role": "assistant", "content": "done", "reasoning_content": "thought"})
    c.reclaim_tool_results(keep_max=1)
    c.compact(lambda messages: "the summary", keep_recent=3)
    c.add_user_message("again")
    c.kept_originals.append({"time": 1.0, "reason": "test", "messages": [c.messages[-1]]})
    c.compaction_log.append({"type": "summary_finished", "tokens_before": 10, "tokens_after": 5})
    c.record_usage(1234)
    c.reclaim_tool_results(keep_max=0)
    return c.dumps()


SAMPLE = _sample_session()
HEAD_DATA = json.loads(SAMPLE)  # format 2: one document, the archive last
ARCHIVE_DATA = HEAD_DATA.pop("compacted_toolcalls")


def _document(head: dict, archive: str) -> str:
    """A session in format 2's layout (the archive last; its count and length first, as `head` has them)."""
    return json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + f',"compacted_toolcalls":{archive}}}'


def _archive_text(entries: dict) -> str:
    return json.dumps(entries, ensure_ascii=False, separators=(",", ":"))


ARCHIVE = _archive_text(ARCHIVE_DATA)
assert _document(HEAD_DATA, ARCHIVE) == SAMPLE


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


HEAD_PATHS = list(_paths(HEAD_DATA))[1:]


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def exercise(conversation: Conversation, workdir: Path) -> None:
    """Everything a front end and the agent do with a loaded session."""
    conversation.completion_params()
    conversation.to_history(truncate=True)
    conversation.estimated_tokens()
    for key in list(conversation.reclaimed_results):
        conversation.reclaimed_original(key)
    conversation.offload_dir = workdir / "history"
    again = Conversation().loads(conversation.dumps())
    assert again.completion_params() == conversation.completion_params()
    conversation.reclaim_tool_results(keep_max=0)
    conversation.add_user_message("one more")
    conversation.compact(lambda messages: "fuzz summary", keep_recent=1)
    conversation.dump(workdir / "saved.json")
    Conversation().load(workdir / "saved.json").completion_params()


@FUZZ
@given(
    changes=st.lists(st.tuples(st.sampled_from(HEAD_PATHS), json_values), min_size=1, max_size=3),
    archive=st.sampled_from(["keep", "drop", "mutate"]),
    line_value=json_values,
    data=st.data(),
)
def test_fuzz_session_structure_loads_or_raises_the_clear_error(tmp_path, changes, archive, line_value, data):
    head = copy.deepcopy(HEAD_DATA)
    for path, value in changes:
        try:
            _set(head, path, value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier change replaced a parent
    entries = copy.deepcopy(ARCHIVE_DATA)
    archive_text = ARCHIVE
    if archive == "drop":
        archive_text = "{}"
    elif archive == "mutate" and entries:
        # the recorded length follows the change, so only the entry's content is wrong
        record = entries[data.draw(st.sampled_from(sorted(entries)))]
        record[data.draw(st.sampled_from(sorted(record)))] = line_value
        archive_text = _archive_text(entries)
        if "compacted_chars" in head:
            head["compacted_chars"] = len(archive_text)
    text = _document(head, archive_text)
    newest = newest_messages(text, 3)  # a resume's first view: never raises, and finds the end of what loads
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        path = Path(folder) / "s.json"
        path.write_text(text, encoding="utf-8")
        from_file = read_newest_messages(path, 3)  # the same, reading the file's end alone
        try:
            loaded = Conversation().load(path)
            for seen in (newest, from_file):
                if seen is not None and seen[2]:
                    found = [m.to_json() for m in seen[2]]
                    assert found == [m.to_json() for m in loaded.messages[-len(found) :]]
            exercise(loaded, Path(folder))
        except SessionFormatError as exc:
            assert str(path) in str(exc) or "<session text>" in str(exc)
        assert path.read_text(encoding="utf-8") == text  # a load never writes


@FUZZ
@given(raw=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_any_bytes_load_or_raise_the_clear_error(tmp_path, raw):
    path = tmp_path / "s.json"
    path.write_bytes(raw)
    try:
        Conversation().load(path).completion_params()
    except SessionFormatError as exc:
        assert str(path) in str(exc)
    assert path.read_bytes() == raw


@pytest.mark.parametrize("conversation_id", ["../../outside", "a/b", "/etc/x", "..", "x\x00y", " ", "é" * 3])
def test_a_session_id_that_is_not_a_file_name_is_refused(tmp_path, conversation_id):
    """The id names the offload log (`<id>.md`): from a foreign file it must not name a path elsewhere."""
    head = dict(HEAD_DATA, conversation_id=conversation_id)
    with pytest.raises(SessionFormatError, match="conversation_id"):
        Conversation().loads(_document(head, ARCHIVE))


# -------------------------------------------------------------------------------------------------- config


@pytest.fixture
def homes(tmp_path, monkeypatch):
    work, config_home = tmp_path / "work", tmp_path / "config"
    (work / ".xun").mkdir(parents=True)
    (config_home / "xun").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.delenv("XUN_HOME", raising=False)
    return work, config_home / "xun" / "config.toml", work / ".xun" / "config.toml"


@FUZZ
@given(user=st.binary(max_size=120), project=st.binary(max_size=120))
def test_fuzz_config_bytes_give_a_config_or_a_config_error(homes, user, project):
    work, user_file, project_file = homes
    user_file.write_bytes(user)
    project_file.write_bytes(project)
    try:
        assert isinstance(load_config(work, [], {}), XunConfig)
    except ConfigError as exc:
        assert str(exc).startswith((str(user_file), str(project_file)))


@FUZZ
@given(
    environ=st.dictionaries(
        st.sampled_from(["OPENAI_BASE_URL", "XUN_MODEL"]),
        st.text(max_size=30) | st.sampled_from(["http://", "https://h:1/v1", "ftp://x", "http://u:p@h"]),
    ),
    key=st.text("0123456789abcdef", min_size=20, max_size=40),
)
def test_fuzz_environment_values_give_a_config_or_a_config_error(homes, environ, key):
    work, _, _ = homes
    secret = "sk-test-" + key
    shown_elsewhere = any(secret in value for value in environ.values())
    environ = {**environ, "OPENAI_API_KEY": secret}
    try:
        config = load_config(work, [], environ)
    except ConfigError as exc:
        assert "environment" in str(exc) and (shown_elsewhere or secret not in str(exc))
    else:
        assert isinstance(config, XunConfig)


# ------------------------------------------------------------------------------------------ tool arguments

TOOLBOX = default_toolbox()
PARAMETERS = {name: sorted(TOOLBOX.get(name).parameters.get("properties", {})) for name in TOOLBOX.names()}
argument_values = (
    json_values
    | st.sampled_from(
        ["", ".", "..", "../..", "/", "/etc/passwd", "f.txt", "sub/", "a" * 300, "\x00", "~", "-1", "(", "call_1"]
    )
    | st.integers()
)


@st.composite
def tool_arguments(draw):
    name = draw(st.sampled_from(sorted(PARAMETERS)))
    keys = PARAMETERS[name] + ["extra"]
    chosen = draw(st.dictionaries(st.sampled_from(keys), argument_values, max_size=4))
    shape = draw(st.sampled_from(["object", "text", "cut", "value"]))
    if shape == "object":
        arguments = json.dumps(chosen)
    elif shape == "cut":
        full = json.dumps(chosen)
        arguments = full[: draw(st.integers(0, len(full)))]
    elif shape == "value":
        arguments = json.dumps(draw(json_values))
    else:
        arguments = draw(st.text(max_size=60))
    return name, arguments


@FUZZ
@given(call=tool_arguments(), auto_confirm=st.booleans())
async def test_fuzz_builtin_tool_arguments_never_raise(tmp_path, call, auto_confirm):
    name, arguments = call
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True, exist_ok=True)
    (workspace / "f.txt").write_text("alpha\nbeta\n")
    asked = []

    async def deny(request):
        asked.append(request)
        return Decision.DENY

    # write_file may run (auto_confirm) inside the workspace; run_command is only ever denied or refused
    context = ToolContext(workspace, confirm=deny, auto_confirm=auto_confirm and name != "run_command")
    outcome = await TOOLBOX.call(name, arguments, context)
    assert isinstance(outcome.text, str) and outcome.is_error == outcome.text.startswith("[Error]")
    if name == "run_command":
        assert outcome.is_error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # nothing written outside the workspace


# --------------------------------------------------------------------------------------- the offline server

roles = st.sampled_from(["system", "user", "assistant", "tool", "developer", "function", "bot"])
texts = st.text(max_size=12) | st.sampled_from(
    [
        "read f.py",
        "run `ls`",
        "list src/",
        "system_context pending_tasks",
        "call the missing tool x",
        "write 5 tokens",
        "\ud800",
    ]
)
message = st.fixed_dictionaries(
    {"role": roles},
    optional={
        "content": texts
        | json_values
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image_url", "x"])},
                optional={"text": texts | json_values, "image_url": json_values},
            ),
            max_size=2,
        ),
        "tool_calls": json_values
        | st.lists(
            st.fixed_dictionaries(
                {
                    "id": texts | json_values,
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {"name": texts | json_values}, optional={"arguments": texts | json_values}
                    ),
                }
            ),
            max_size=2,
        ),
        "tool_call_id": texts | json_values,
        "name": texts | json_values,
        "reasoning_content": json_values,
    },
)
tool = st.fixed_dictionaries(
    {
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["read_file", "run_command", "write_file", "list_directory", "x", ""])},
            optional={
                "parameters": json_values
                | st.fixed_dictionaries({}, optional={"properties": json_values, "required": json_values})
            },
        ),
    }
)
request_body = st.fixed_dictionaries(
    {"messages": st.lists(message, max_size=4)},
    optional={
        "model": json_values,
        "stream": st.booleans() | json_values,
        "stream_options": json_values | st.just({"include_usage": True}),
        "tools": st.lists(tool, max_size=3) | json_values,
        "tool_choice": json_values,
        "max_tokens": json_values,
        "n": json_values,
        "parallel_tool_calls": json_values,
    },
)
bodies = st.one_of(
    request_body.map(lambda b: json.dumps(b).encode()),
    st.binary(max_size=60),
    json_values.map(lambda v: json.dumps(v).encode()),
)


def _check_stream(data: bytes) -> None:
    events = [line[6:] for line in data.decode("utf-8").split("\n") if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", data[-200:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert any(c["choices"] and c["choices"][0].get("finish_reason") for c in chunks)


@FUZZ
@given(body=bodies)
def test_fuzz_http_bodies_get_a_json_400_or_a_valid_answer(offline_server, body):
    connection = http.client.HTTPConnection("127.0.0.1", offline_server.port, timeout=10)
    try:
        connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()  # a dropped connection raises here and fails the test
        data = response.read()
    finally:
        connection.close()
    assert response.status in (200, 400), (response.status, data[:300])
    if response.status == 400 or "json" in response.getheader("Content-Type", ""):
        payload = json.loads(data)
        if response.status == 400:
            assert payload["error"]["message"] and payload["error"]["type"] == "invalid_request_error"
        else:
            assert payload["choices"][0]["finish_reason"] and "usage" in payload
    else:
        _check_stream(data)


def test_a_stored_session_with_a_foreign_id_is_listed_as_unreadable_and_writes_nowhere(tmp_path):
    from xun.context.sessions import SessionStore

    store = SessionStore(tmp_path)
    store.root.mkdir(parents=True)
    head = dict(HEAD_DATA, conversation_id="../../../outside")
    (store.root / "planted.json").write_text(_document(head, ARCHIVE))
    assert store.list() == []
    [(path, reason)] = store.unreadable()
    assert path.name == "planted.json" and "conversation_id" in reason
    with pytest.raises(SessionFormatError, match="conversation_id"):
        store.load("planted")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".xun"]
