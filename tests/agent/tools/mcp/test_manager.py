"""McpManager against real servers over stdio: tools listed and called, faults turned into states.

No model here: the toolbox calls the tools as the agent would (`Toolbox.call`, the same caps and errors)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import pytest

from xun.agent.config import McpSettings
from xun.agent.tools import Decision, Toolbox, ToolContext, default_toolbox
from xun.agent.tools.mcp import FAILED, READY, STOPPED, McpManager

from .conftest import FAULT_SERVER, MARKER_VARIABLE, make_repository


def manager(tmp_path, tables, toolbox=None, events=None, environ=None):
    settings = McpSettings.model_validate({"servers": tables})
    return McpManager(
        settings,
        toolbox if toolbox is not None else Toolbox(),
        workdir=tmp_path,
        environ=environ,
        log_dir=tmp_path / "logs",
        on_change=(events.append if events is not None else None),
    )


def context(tmp_path, **kw):
    return ToolContext(workdir=tmp_path, max_output_chars=kw.pop("max_output_chars", 50_000), **kw)


async def test_time_and_git_servers_list_and_answer(tmp_path, servers):
    repo = make_repository(tmp_path / "repo")
    toolbox = default_toolbox()
    builtins = len(toolbox)
    events = []
    m = manager(tmp_path, {"time": servers.time(trust=True), "git": servers.git(repo, trust=True)}, toolbox, events)
    try:
        await m.start()
        assert m.servers["time"].state == READY and m.servers["git"].state == READY, [
            s.reason for s in m.servers.values()
        ]
        assert "time__get_current_time" in toolbox and "git__git_log" in toolbox
        assert len(toolbox) == builtins + len(m.servers["time"].tools) + len(m.servers["git"].tools)
        schema = toolbox.get("time__get_current_time").schema()["function"]
        assert schema["parameters"]["required"] == ["timezone"] and "MCP server time" in schema["description"]

        now = await toolbox.call("time__get_current_time", '{"timezone": "Asia/Tokyo"}', context(tmp_path))
        assert not now.is_error and '"timezone": "Asia/Tokyo"' in now.text and "+09:00" in now.text
        log = await toolbox.call("git__git_log", {"repo_path": str(repo)}, context(tmp_path))
        assert not log.is_error and "Second commit mentions zebras" in log.text and "First commit: notes" in log.text
        bad = await toolbox.call("time__get_current_time", {"timezone": "Nowhere/Atlantis"}, context(tmp_path))
        assert bad.is_error and bad.text.startswith("[Error]") and "Nowhere/Atlantis" in bad.text

        sizes = m.definition_chars()
        assert sizes["time"] > 200 and sizes["git"] > sizes["time"]  # git offers more tools
        assert toolbox.definition_chars()[""] > 0  # the built-ins, apart
    finally:
        await m.aclose()
    assert [(e.name, e.state) for e in events if e.state == STOPPED] and "time__get_current_time" not in toolbox
    assert servers.alive() == []


async def test_untrusted_server_asks_and_a_denial_runs_nothing(tmp_path, servers):
    asked = []

    async def confirm(request):
        asked.append(request)
        return Decision.DENY

    m = manager(tmp_path, {"f": servers.fault()})
    try:
        await m.start()
        outcome = await m.toolbox.call("f__echo", {"text": "secret plan"}, context(tmp_path, confirm=confirm))
        assert outcome.denied and outcome.is_error
        assert len(asked) == 1 and "MCP server f" in asked[0].title and "echo" in asked[0].title
        assert '"text": "secret plan"' in asked[0].preview
        unasked = await m.toolbox.call("f__echo", {"text": "x"}, context(tmp_path))  # nobody to ask: refused
        assert unasked.is_error and "confirmation" in unasked.text
        allowed = await m.toolbox.call("f__echo", {"text": "ok"}, context(tmp_path, auto_confirm=True))
        assert allowed.text == "ok"
    finally:
        await m.aclose()


async def test_faults_are_states_and_the_rest_works(tmp_path, servers):
    events = []
    m = manager(
        tmp_path,
        {
            "good": servers.fault(trust=True, timeout=1.5),
            "dies": servers.fault("crash-at-start"),
            "hangs": servers.fault("hang-at-start", startup_timeout=2),
            "missing": {"command": str(tmp_path / "no-such-program")},
        },
        events=events,
    )
    started = time.monotonic()
    try:
        await m.start()
        assert time.monotonic() - started < 15  # the hanging one gives up at its startup_timeout
        s = m.servers
        assert s["good"].state == READY
        assert s["dies"].state == FAILED and "crashing at start as asked" in s["dies"].reason
        assert s["hangs"].state == FAILED and "did not answer within 2s" in s["hangs"].reason
        assert s["missing"].state == FAILED and "no such program" in s["missing"].reason
        assert {e.name for e in events if e.state == FAILED} == {"dies", "hangs", "missing"}
        # the hanging server's process is gone already, not only at the end
        assert len(servers.alive()) == 1

        ctx = context(tmp_path)
        assert "bad_schema" not in m.toolbox and any("bad_schema" in why for why in s["good"].skipped)
        failed = await m.toolbox.call("good__fail", {}, ctx)
        assert failed.is_error and failed.text == "[Error] the fail tool always fails"
        picture = await m.toolbox.call("good__picture", {}, ctx)
        assert "a picture follows" in picture.text and "[image content: image/png" in picture.text
        assert "application/octet-stream" in picture.text and "binary data" in picture.text

        big = await m.toolbox.call("good__big", {}, context(tmp_path, max_output_chars=20_000))
        assert len(big.text) <= 20_000 and big.truncated_chars > 4_900_000 and "characters cut here" in big.text

        slow = await m.toolbox.call("good__slow", {"seconds": 30}, ctx)
        assert slow.is_error and "did not answer slow within 1.5s" in slow.text and slow.duration < 10
        assert s["good"].state == READY  # a slow call is not a dead server
        assert (await m.toolbox.call("good__echo", {"text": "still here"}, ctx)).text == "still here"

        crash = await m.toolbox.call("good__crash", {}, ctx)
        assert crash.is_error and "failed during crash" in crash.text
        assert "crashing in the middle of a call" in crash.text
        assert s["good"].state == FAILED and "good__echo" not in m.toolbox
        gone = await m.toolbox.call("good__echo", {"text": "x"}, ctx)
        assert gone.is_error and "unknown tool" in gone.text

        await m.restart("good")  # from /mcp: back with its tools
        assert s["good"].state == READY and (await m.toolbox.call("good__echo", {"text": "again"}, ctx)).text == "again"
    finally:
        await m.aclose()
    assert servers.alive() == []


async def test_allow_and_deny_lists(tmp_path, servers):
    m = manager(tmp_path, {"f": servers.fault(tools={"allow": ["echo", "fail", "slow"], "deny": ["slow"]})})
    try:
        await m.start()
        assert sorted(t.name for t in m.servers["f"].tools) == ["f__echo", "f__fail"]
        assert any(why.startswith("slow: not allowed") for why in m.servers["f"].skipped)
    finally:
        await m.aclose()


async def test_everything_server_through_npx(tmp_path, servers):
    m = manager(tmp_path, {"all": servers.everything(trust=True)})
    try:
        await m.start()
        server = m.servers["all"]
        if server.state == FAILED and ("npm" in server.reason.lower() or "registry" in server.reason.lower()):
            pytest.skip(f"npx could not fetch @modelcontextprotocol/server-everything: {server.reason}")
        assert server.state == READY, server.reason
        assert "all__echo" in m.toolbox
        echo = await m.toolbox.call("all__echo", {"message": "hello from xun"}, context(tmp_path))
        assert not echo.is_error and "hello from xun" in echo.text
        names = m.toolbox.names()
        image_tool = next((n for n in names if "image" in n.lower()), None)
        if image_tool is not None:  # its image comes back described, not dropped
            shown = await m.toolbox.call(image_tool, {}, context(tmp_path))
            assert "[image content: image/png" in shown.text, shown.text[:300]
    finally:
        await m.aclose()
    await asyncio.sleep(0.2)
    assert servers.alive() == []


async def test_a_server_gets_only_the_variables_it_is_given(tmp_path, servers):
    environ = {"XUN_TEST_PASSED": "passed-value", "XUN_TEST_OTHER": "other", "OPENAI_API_KEY": "sk-test-never-sent"}
    m = manager(tmp_path, {"f": servers.fault(trust=True, pass_env=["XUN_TEST_PASSED"])}, environ=environ)
    try:
        await m.start()
        ctx = context(tmp_path)

        async def getenv(name):
            return (await m.toolbox.call("f__getenv", {"name": name}, ctx)).text

        assert await getenv("XUN_TEST_PASSED") == "passed-value"
        assert await getenv("XUN_TEST_OTHER") == "(unset)"
        assert await getenv("OPENAI_API_KEY") == "(unset)"
        assert await getenv("XUN_TEST_MCP_MARKER") == servers.marker  # from env
    finally:
        await m.aclose()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_streamable_http_with_a_header_from_the_environment(tmp_path, servers):
    port = free_port()
    token = "tok-" + servers.marker
    process = subprocess.Popen(
        [sys.executable, str(FAULT_SERVER), "http", str(port)],
        env={"PATH": "/usr/bin:/bin", "FAULT_SERVER_TOKEN": token, MARKER_VARIABLE: servers.marker},
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        tables = {
            "web": {"url": url, "headers": {"Authorization": "WEB_AUTH"}, "trust": True},
            "nokey": {"url": url, "headers": {"Authorization": "WRONG_AUTH"}, "startup_timeout": 10},
        }
        m = manager(tmp_path, tables, environ={"WEB_AUTH": f"Bearer {token}", "WRONG_AUTH": "Bearer nope"})
        try:
            await m.start()
            assert m.servers["web"].state == READY, m.servers["web"].reason
            echo = await m.toolbox.call("web__echo", {"text": "over http"}, context(tmp_path))
            assert echo.text == "over http"
            big = await m.toolbox.call("web__words", {"size": 100_000}, context(tmp_path, max_output_chars=10_000))
            assert big.truncated_chars > 80_000
            assert m.servers["nokey"].state == FAILED and "401" in m.servers["nokey"].reason
        finally:
            await m.aclose()
    finally:
        process.terminate()
        process.wait(10)
