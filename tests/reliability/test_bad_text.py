"""Issue 13, item 3: text that UTF-8 cannot hold never breaks a session.

The attacks: a file named `bad\\xffname.txt` in the workspace, then "list the files" (the listing held
`\\udcff` and every save raised); a reply from the server with a lone surrogate (`"\\ud83d"`); a prompt
given as bytes that are not UTF-8 on the command line. Each runs through the real agent (or the real
`xun run` process) against a real HTTP server; then the session must save, load, and go on.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xun.context.conversation import Conversation
from xun.base.valid_text import valid_text

from .helpers import make_agent
from .hostile_server import HostileServer

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")


def _contents(conversation) -> str:
    return "\n".join(str(m.get("content") or "") for m in conversation.completion_params())


def _saves_and_loads(store, conversation) -> Conversation:
    path = store.save(conversation)
    raw = path.read_bytes()
    raw.decode("utf-8")  # strict: the file is valid UTF-8
    return store.load(conversation.conversation_id)


async def test_a_file_name_that_is_not_utf8_does_not_break_the_session(offline_server, tmp_path):
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"bad\xffname.txt"), os.O_CREAT | os.O_WRONLY))
    agent, rec, store = make_agent(offline_server, tmp_path)
    finished = await agent.run("list the files")
    assert finished.status == "ok", rec.of("error")
    [done] = rec.of("tool_call_finished")
    assert not done.is_error
    assert "bad\\xffname.txt" in _contents(agent.conversation)
    loaded = _saves_and_loads(store, agent.conversation)
    assert "bad\\xffname.txt" in _contents(loaded)
    assert (await agent.run("list the files")).status == "ok"
    store.save(agent.conversation)


async def test_a_lone_surrogate_from_the_server_does_not_break_the_session(tmp_path):
    server = HostileServer("surrogate")
    try:
        agent, rec, store = make_agent(server, tmp_path)
        finished = await agent.run("say something")
        assert finished.status == "ok", rec.of("error")
        assert agent.conversation.completion_params()[-1]["content"] == "half \ufffd pair"
        loaded = _saves_and_loads(store, agent.conversation)
        assert loaded.completion_params()[-1]["content"] == "half \ufffd pair"
    finally:
        server.stop()


def test_xun_run_with_a_bad_file_name_and_a_bad_prompt_saves(tmp_path):
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"bad\xffname.txt"), os.O_CREAT | os.O_WRONLY))
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    for prompt in (b"list the files", b"list the files \xff\xfe"):
        done = subprocess.run(
            [sys.executable.encode(), b"-m", b"xun", b"run", prompt],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
    [first, second] = sorted((tmp_path / ".xun" / "sessions").glob("*.json"), key=os.path.getmtime)
    assert "bad\\\\xffname.txt" in second.read_text(encoding="utf-8")
    assert "\\\\xff\\\\xfe" in second.read_text(encoding="utf-8")


def test_a_conversation_with_surrogates_in_every_field_still_saves(tmp_path):
    """The second line of defence: text that got in without `valid_text` is saved as JSON escapes."""
    conversation = Conversation()
    conversation.add_user_message("fine")
    conversation._messages.append(type(conversation.messages[-1])(text="raw \udcff and \ud83d"))
    conversation.dump(tmp_path / "s.json")
    (tmp_path / "s.json").read_bytes().decode("utf-8")
    loaded = Conversation().load(tmp_path / "s.json")
    assert loaded.completion_params()[-1]["content"] == "raw \udcff and \ud83d"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)))
def test_valid_text_always_encodes_and_keeps_clean_text(text):
    fixed = valid_text(text)
    fixed.encode("utf-8")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return
    assert fixed == text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("a\udcffb", "a\\xffb"), ("\ud83d", "\ufffd"), ("\ud83d\ude00", "\U0001f600"), ("\ude00\ud83d", "\ufffd\ufffd")],
)
def test_valid_text_cases(raw, shown):
    assert valid_text(raw) == shown
