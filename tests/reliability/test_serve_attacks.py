"""Issue 13, item 1: `xun serve` is driven only by the browser that opened its secret URL.

Every test starts a real `xun serve --offline` process on a free loopback port and attacks it over real
HTTP and WebSocket (aiohttp's client): a page on another origin, a request without the token, a DNS
rebinding page (a foreign Host header), too many sessions, a 100000 x 100000 terminal, an idle session.
The attack's goal is the one that was reproduced: type a prompt that makes the app run `touch pwned`
and approve it. `test_with_the_token_the_app_runs_the_command` is the control: the same keys, sent with
the printed URL's cookie, do create the file, so the refusals below are what stops the others.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from xun.cli.commands.serve import MAX_COLUMNS, MAX_ROWS, cookie_name

SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS")
ATTACK_KEYS = "run `touch pwned`\r"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    def __init__(self, workdir: Path, *options: str) -> None:
        self.workdir = workdir
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env["XDG_CONFIG_HOME"] = str(workdir.parent / "config")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "xun", "serve", "--offline", "--port", str(self.port), *options],
            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        line = self.process.stdout.readline()
        found = re.search(r"(http://\S+)/\?token=(\S+)", line)
        assert found, line
        self.base, self.token = found[1], found[2]
        self.url = f"{self.base}/?token={self.token}"

    def app_processes(self) -> dict[int, dict[str, str]]:
        """The app processes this server started, with their environments."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) != self.process.pid or stat[0] == "Z":
                    continue
                raw = (entry / "environ").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
            found[int(entry.name)] = env
        return found

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        return self.process.stderr.read()


@pytest.fixture
def served(tmp_path):
    workdir = tmp_path / "ws"
    workdir.mkdir()
    started: list[Served] = []

    def start(*options: str) -> Served:
        server = Served(workdir, *options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


async def _drive(ws: aiohttp.ClientWebSocketResponse, keys: str, approve_after: float = 4.0) -> None:
    """What an attacker's page does once connected: type the prompt, then approve the confirmation."""
    await _read_for(ws, 3.0)  # the app starts and draws
    await ws.send_json(["stdin", keys])
    await _read_for(ws, approve_after)
    await ws.send_json(["stdin", "y"])
    await _read_for(ws, 3.0)


async def _read_for(ws: aiohttp.ClientWebSocketResponse, seconds: float) -> int:
    received = 0
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await ws.receive(timeout=left)
        except asyncio.TimeoutError:
            break
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            break
        received += len(message.data or b"")
    return received


def _session(**kwargs) -> aiohttp.ClientSession:
    """A client that keeps cookies for 127.0.0.1 as a browser does (aiohttp's default jar drops them)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), **kwargs)


async def _handshake_status(url: str, **kwargs) -> int:
    async with _session() as session:
        try:
            async with session.ws_connect(url, **kwargs) as ws:
                await _drive(ws, ATTACK_KEYS, approve_after=2.0)
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def test_with_the_token_the_app_runs_the_command(served):
    server = served()
    async with _session() as session:
        async with session.get(server.url, allow_redirects=False) as first:
            assert first.status == 303 and first.headers["Location"] == "/"
            cookie = first.cookies[cookie_name(server.port)]
            assert cookie.value == server.token and cookie["httponly"] and cookie["samesite"] == "Strict"
        async with session.get(server.base + "/") as page:  # the cookie is enough from now on
            assert page.status == 200 and "xun" in await page.text()
        async with session.ws_connect(server.base + "/ws?width=100&height=30", origin=server.base) as ws:
            await _drive(ws, ATTACK_KEYS)
            for _ in range(50):
                if (server.workdir / "pwned").exists():
                    break
                await asyncio.sleep(0.1)
    assert (server.workdir / "pwned").exists()


@pytest.mark.parametrize("attack", ["foreign origin", "no token", "wrong token", "dns rebinding"])
async def test_a_page_without_the_token_or_from_elsewhere_cannot_drive_the_app(served, attack):
    server = served()
    ws_url = server.base + "/ws"
    kwargs: dict = {}
    if attack == "foreign origin":  # a web page the user visits, even one that somehow had the cookie
        kwargs = {"origin": "http://evil.example", "headers": {"Cookie": f"{cookie_name(server.port)}={server.token}"}}
    elif attack == "wrong token":
        ws_url += "?token=" + "x" * len(server.token)
    elif attack == "dns rebinding":  # evil.example resolved to 127.0.0.1: the browser sends its own Host
        kwargs = {"origin": f"http://evil.example:{server.port}",
                  "headers": {"Host": f"evil.example:{server.port}"}}
        ws_url += "?token=" + server.token  # even knowing the token
    assert await _handshake_status(ws_url, **kwargs) == 403
    headers = dict(kwargs.get("headers", {}))
    if "origin" in kwargs:
        headers["Origin"] = kwargs["origin"]
    async with _session() as session:  # the page itself is refused too
        async with session.get(server.base + "/", headers=headers) as page:
            assert page.status == 403
    assert not (server.workdir / "pwned").exists()
    assert server.app_processes() == {}
    assert "refused" in server.stop()


async def test_sessions_are_capped_and_the_terminal_size_is_clamped(served):
    server = served("--max-sessions", "2")
    cookies = {cookie_name(server.port): server.token}
    async with _session(cookies=cookies) as session:
        big = f"{server.base}/ws?width=100000&height=100000"
        first = await session.ws_connect(big, origin=server.base)
        second = await session.ws_connect(big, origin=server.base)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(big, origin=server.base)
        assert refused.value.status == 503
        await _read_for(first, 2.0)
        await first.send_json(["resize", {"width": 100000, "height": 100000}])
        await _read_for(first, 1.0)
        apps = server.app_processes()
        assert len(apps) == 2
        for env in apps.values():
            assert (env["COLUMNS"], env["ROWS"]) == (str(MAX_COLUMNS), str(MAX_ROWS))
        await first.close()
        await second.close()
        for _ in range(100):  # both apps quit once their pages are gone
            if not server.app_processes():
                break
            await asyncio.sleep(0.1)
        assert server.app_processes() == {}
        for _ in range(100):  # room again once the server has seen both pages go
            try:
                third = await session.ws_connect(f"{server.base}/ws", origin=server.base)
                break
            except aiohttp.WSServerHandshakeError as exc:
                assert exc.status == 503
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("no room for a session after the others closed")
        await third.close()


async def test_an_idle_session_is_closed_and_its_app_quits(served):
    server = served("--idle-timeout", "2")
    async with _session(cookies={cookie_name(server.port): server.token}) as session:
        ws = await session.ws_connect(f"{server.base}/ws", origin=server.base)
        started = time.monotonic()
        await _read_for(ws, 30.0)  # returns when the server closes the socket
        assert ws.closed
        assert 2.0 <= time.monotonic() - started < 20.0
    for _ in range(100):
        if not server.app_processes():
            break
        await asyncio.sleep(0.1)
    assert server.app_processes() == {}
    assert "no input for 2 s" in server.stop()


async def test_no_page_may_frame_the_app(served):
    """Issue 22.3 (in part): the page, the redirect and refusals all forbid framing, so another origin
    cannot lay the app under a decoy and have its approval clicked."""
    server = served()
    async with _session() as session:
        async with session.get(server.url, allow_redirects=False) as first:
            assert first.headers.get("X-Frame-Options") == "DENY"
        async with session.get(server.base + "/") as page:
            assert page.status == 200
            assert page.headers.get("X-Frame-Options") == "DENY"
            assert "frame-ancestors 'none'" in page.headers.get("Content-Security-Policy", "")
    async with _session() as session, session.get(server.base + "/") as refused:
        assert refused.status == 403 and refused.headers.get("X-Frame-Options") == "DENY"
