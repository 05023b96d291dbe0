"""Coverage-guided fuzzing with atheris (optional: `pip install atheris`), of the same four parsers as
`test_fuzz.py`. Not collected by pytest.

    python3 tests/reliability/atheris_fuzz.py TARGET [libFuzzer options, e.g. -runs=20000 -max_len=4096]

TARGET is one of:
  session  `Conversation().loads(data)`: a Conversation or SessionFormatError; a loaded one dumps and reloads
  config   the bytes as a project `.xun/config.toml`: an XunConfig or ConfigError
  request  `parse_chat_request(data)`, then the scripted model's reply: a request or a 400 RequestError
  tool     the bytes as `Toolbox.call` arguments for every built-in tool: never raises, `[Error]` or a run
Any other exception is a crash: atheris prints the input and exits non-zero.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from xun.agent.config import ConfigError, load_config
    from xun.context.conversation import Conversation
    from xun.base.errors import SessionFormatError
    from xun.offline.model import decide_reply
    from xun.offline.protocol import RequestError, parse_chat_request
    from xun.agent.tools import Decision, ToolContext, default_toolbox


def fuzz_session(data: bytes) -> None:
    try:
        conversation = Conversation().loads(data)
    except SessionFormatError:
        return
    try:
        conversation.completion_params()
        for key in list(conversation.reclaimed_results):
            conversation.reclaimed_original(key)
        Conversation().loads(conversation.dumps())
        conversation.reclaim_tool_results(keep_max=0)
        conversation.compact(lambda messages: "summary", keep_recent=1)
    except SessionFormatError:
        return


_WORK = Path(tempfile.mkdtemp(prefix="xun-atheris-"))
(_WORK / ".xun").mkdir()
os.environ["XDG_CONFIG_HOME"] = str(_WORK / "no-user-config")
os.environ.pop("XUN_HOME", None)


def fuzz_config(data: bytes) -> None:
    (_WORK / ".xun" / "config.toml").write_bytes(data)
    try:
        load_config(_WORK, [], {})
    except ConfigError:
        pass


def fuzz_request(data: bytes) -> None:
    try:
        request = parse_chat_request(data)
    except RequestError as error:
        assert error.status == 400
        return
    decide_reply(request)


_TOOLBOX = default_toolbox()
(_WORK / "ws").mkdir()
(_WORK / "ws" / "a.txt").write_text("alpha\n")


async def _deny(request):
    return Decision.DENY


def fuzz_tool(data: bytes) -> None:
    arguments = data.decode("utf-8", errors="replace")
    context = ToolContext(_WORK / "ws", confirm=_deny)

    async def run() -> None:
        for name in _TOOLBOX.names():
            outcome = await _TOOLBOX.call(name, arguments, context)
            assert outcome.is_error == outcome.text.startswith("[Error]")

    asyncio.run(run())


TARGETS = {"session": fuzz_session, "config": fuzz_config, "request": fuzz_request, "tool": fuzz_tool}


def seeds(target: str) -> list[bytes]:
    """Valid inputs to start from, so the fuzzer mutates real structure rather than random bytes."""
    if target == "session":
        c = Conversation(conversation_id="seed")
        c.set_system_message_content("role")
        c.add_user_message("hi")
        c.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
                ],
            }
        )
        c.add_tool_result("c1", "output " * 40)
        c.add_agent_message({"role": "assistant", "content": "done"})
        c.reclaim_tool_results(keep_max=0)
        c.compact(lambda messages: "## key_facts\n- x", keep_recent=1)
        return [c.dumps().encode(), b'[{"role": "user", "content": "legacy"}]']
    if target == "request":
        return [
            b'{"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": '
            b'[{"role": "user", "content": "read a.py"}], "tools": [{"type": "function", "function": '
            b'{"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, '
            b'"required": ["path"]}}}]}'
        ]
    if target == "config":
        return [
            b'[model]\nname = "m"\ncontext_window = 8000\n[auto_compact]\ntoken_threshold = 5000\n'
            b'[compression]\nprompt_files = ["a.md"]\n[ui.keymap]\ncompact = "f5"\n'
        ]
    return [b'{"path": "a.txt", "offset": 0, "limit": 5}', b'{"pattern": "al", "path": "."}', b'{"toolcall_id": "x"}']


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer options]")
    name = sys.argv[1]
    corpus = _WORK / f"corpus-{name}"
    corpus.mkdir()
    for index, seed in enumerate(seeds(name)):
        (corpus / f"seed{index}").write_bytes(seed)
    atheris.Setup([sys.argv[0], *sys.argv[2:], str(corpus)], TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
