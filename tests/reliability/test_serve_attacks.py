"""Issue 13, item 1: `xun serve` is driven only by the browser that opened its secret URL.

Every test starts a real `xun serve --offline` process on a free loopback port and attacks it over real
HTTP and WebSocket (aiohttp's client): a page on another origin, a request without the token, a DNS
rebinding page (a foreign Host header), too many sessions, a 100000 x 100000 terminal, an idle session.
The attack's goal is the one that was reproduced: type a prompt that makes the app run `touch pwned`
and approve it. `test_with_the_token_the_app_runs_the_command` is the control: the same keys, sent on a
WebSocket that offers the printed token as its subprotocol (as the page does), do create the file, so the
refusals below are what stops the others. Issue 22.3: the token is never in a cookie (the cookie earlier
versions set, or the token in the WebSocket's URL, drives nothing) and never in the log, even with --debug.
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

from xun.cli.commands.serve import MAX_COLUMNS, MAX_ROWS, PROTOCOL, TOKEN_PROTOCOL

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
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
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
        except TimeoutError:
            break
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            break
        received += len(message.data or b"")
    return received


def _session(**kwargs) -> aiohttp.ClientSession:
    """A client that keeps cookies for 127.0.0.1 as a browser does (aiohttp's default jar drops them)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), **kwargs)


def _offering(token: str) -> tuple[str, str]:
    """The subprotocols the page offers on its WebSocket: the token goes in the second."""
    return (PROTOCOL, TOKEN_PROTOCOL + token)


def _old_cookie(server: Served) -> str:
    """The cookie earlier versions set on the first visit (and the browser then sent to every port)."""
    return f"xun-serve-token-{server.port}={server.token}"


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
            assert first.status == 200 and "Set-Cookie" not in first.headers  # the page, and no cookie
            text = await first.text()
            assert "sessionStorage" in text and server.token not in text
        async with session.ws_connect(
            server.base + "/ws?width=100&height=30", origin=server.base, protocols=_offering(server.token)
        ) as ws:
            assert ws.protocol == PROTOCOL  # the answer names `xun`, never the token
            await _read_for(ws, 3.0)
            await ws.send_json(["stdin", ATTACK_KEYS])
            # The confirmation takes "y" only once it has been shown for a quiet moment, and a loaded machine
            # shows it late: "y" is sent again, slower than the guard re-arms, until the command has run.
            deadline = time.monotonic() + 60
            while not (server.workdir / "pwned").exists() and time.monotonic() < deadline:
                await _read_for(ws, 2.0)
                await ws.send_json(["stdin", "y"])
                await _read_for(ws, 0.5)
    assert (server.workdir / "pwned").exists()


@pytest.mark.parametrize(
    "attack", ["foreign origin", "no token", "wrong token", "dns rebinding", "old cookie", "token in the url"]
)
async def test_a_page_without_the_token_or_from_elsewhere_cannot_drive_the_app(served, attack):
    server = served()
    ws_url = server.base + "/ws"
    kwargs: dict = {}
    page_url = server.base + "/"
    if attack == "foreign origin":  # a web page the user visits, even one that somehow had the token
        kwargs = {"origin": "http://evil.example", "protocols": _offering(server.token)}
    elif attack == "wrong token":
        kwargs = {"origin": server.base, "protocols": _offering("x" * len(server.token))}
        page_url += "?token=" + "x" * len(server.token)
    elif attack == "dns rebinding":  # evil.example resolved to 127.0.0.1: the browser sends its own Host
        kwargs = {
            "origin": f"http://evil.example:{server.port}",
            "protocols": _offering(server.token),
            "headers": {"Host": f"evil.example:{server.port}"},
        }  # even knowing the token
    elif attack == "old cookie":  # issue 22.3: what another port received from the browser, replayed
        kwargs = {"origin": server.base, "headers": {"Cookie": _old_cookie(server)}}
    elif attack == "token in the url":  # tokens in URLs end up in logs: /ws takes it only as a subprotocol
        ws_url += "?token=" + server.token
        kwargs = {"origin": server.base}
    assert await _handshake_status(ws_url, **kwargs) == 403
    headers = dict(kwargs.get("headers", {}))
    if "origin" in kwargs:
        headers["Origin"] = kwargs["origin"]
    async with _session() as session:  # the page: refused to a foreign Origin or Host and a wrong token, and
        async with session.get(page_url, headers=headers) as page:  # else without anything secret in it
            text = await page.text()
            assert page.status == (200 if attack in ("no token", "old cookie", "token in the url") else 403), text
            assert server.token not in text and "Set-Cookie" not in page.headers
    assert not (server.workdir / "pwned").exists()
    assert server.app_processes() == {}
    assert "refused" in server.stop()


async def test_sessions_are_capped_and_the_terminal_size_is_clamped(served):
    server = served("--max-sessions", "2")
    offered = _offering(server.token)
    async with _session() as session:
        big = f"{server.base}/ws?width=100000&height=100000"
        first = await session.ws_connect(big, origin=server.base, protocols=offered)
        second = await session.ws_connect(big, origin=server.base, protocols=offered)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(big, origin=server.base, protocols=offered)
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
                third = await session.ws_connect(f"{server.base}/ws", origin=server.base, protocols=offered)
                break
            except aiohttp.WSServerHandshakeError as exc:
                assert exc.status == 503
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("no room for a session after the others closed")
        await third.close()


async def test_an_idle_session_is_closed_and_its_app_quits(served):
    server = served("--idle-timeout", "2")
    async with _session() as session:
        started = time.monotonic()  # before the connection: the server's idle clock starts as it accepts
        ws = await session.ws_connect(f"{server.base}/ws", origin=server.base, protocols=_offering(server.token))
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
        async with session.get(server.url, allow_redirects=False) as page:
            assert page.status == 200
            assert page.headers.get("X-Frame-Options") == "DENY"
            assert "frame-ancestors 'none'" in page.headers.get("Content-Security-Policy", "")
            assert page.headers.get("Referrer-Policy") == "no-referrer"  # its address (with ?token=) stays home
        async with session.get(server.base + "/ws") as refused:
            assert refused.status == 403 and refused.headers.get("X-Frame-Options") == "DENY"


async def test_the_debug_log_holds_no_token(served):
    """Issue 22.3: `--debug` writes aiohttp's access log (request lines with `?token=`, Referers) and
    aiohttp's own warnings (a handshake's subprotocols): every line is redacted, this run's token and any."""
    server = served("--debug")
    stale = "y" * len(server.token)
    async with _session() as session:
        for url, headers in (
            (server.url, {}),
            (server.base + "/?token=" + stale, {}),
            (server.base + "/static/css/xterm.css", {"Referer": server.url}),
            (server.base + "/ws?token=" + server.token, {}),
            (server.base + "/ws", {"Sec-WebSocket-Protocol": TOKEN_PROTOCOL + server.token}),
        ):
            async with session.get(url, headers=headers) as response:
                await response.read()
        # only the token offered (no `xun`): aiohttp warns with the offered list; then the page's way
        async with session.ws_connect(
            server.base + "/ws", origin=server.base, protocols=(TOKEN_PROTOCOL + server.token,)
        ) as ws:
            await _read_for(ws, 1.0)
        async with session.ws_connect(server.base + "/ws", origin=server.base, protocols=_offering(server.token)) as ws:
            await _read_for(ws, 2.0)
    log = server.stop()
    assert server.token not in log and stale not in log, log
    assert '"GET /?token=[redacted] HTTP/1.1" 200' in log, log  # the access log was written, redacted
    assert '"GET /?token=[redacted] HTTP/1.1" 403' in log, log
    assert '"GET /ws?token=[redacted] HTTP/1.1" 403' in log, log
    assert "xun-token.[redacted]" in log, log
