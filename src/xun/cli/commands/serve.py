"""`xun serve`: the full-screen app in a web browser, through `textual-serve`.

The server (aiohttp, from textual-serve) listens on loopback by default. Every browser tab that opens the
page gets its own app process, `python -m xun serve --app-process <the global options>` with this
interpreter, which runs the same app as plain `xun` on Textual's web driver: its terminal is the page's
xterm.js. The global options are passed on, with `--workdir` made absolute and `--resume` resolved to one
session id when the server starts (so every tab resumes that session). Closing a tab quits its app, which
saves its session.

Ctrl+C (SIGINT) or SIGTERM stops the server: every app is asked to quit (each saves its session), the ones
still running after `QUIT_TIMEOUT` seconds are killed, and the command exits 0. A second signal kills the
apps at once.

The app runs commands and writes files in the working directory, so nothing but the person who started the
server may drive it; loopback is not a boundary (other local users, any web page the browser opens, a DNS
rebinding page all reach 127.0.0.1). Every request passes `guard` first:
- a secret token, new every run (`secrets.token_urlsafe(32)`), printed in the URL as Jupyter does. It never
  goes into a cookie: cookies are not port-scoped, so the browser would hand one to every server on
  127.0.0.1 (another user's, on another port). The page served for `/?token=` (`PAGE_SCRIPT`, put into
  textual-serve's page) keeps the token in the tab's `sessionStorage`, which is per origin and so per port,
  takes it out of the address bar, and presents it when it opens the WebSocket, as a subprotocol
  (`xun-token.<token>`, beside `xun`, the one the server answers with): the only header a browser's
  WebSocket can set, and one no access log writes. `/ws` without it gets HTTP 403, tokens compared in
  constant time. The page itself holds nothing secret and is served without a token (so a reload and
  textual-serve's Restart work), a wrong `?token=` is refused; the static files are open; a download is
  reached by its own key, which only the page's WebSocket is told;
- the `Host` header must name the server (its host, 127.0.0.1, localhost or [::1] with its port) unless
  `--public`, which defeats DNS rebinding; an `Origin` header, when present, must be the page's own.
No response may be framed (`frame-ancestors 'none'`) or send a `Referer` on. The log (`--debug` writes the
access log) never holds the token: every line passes `redact`.
Sessions are capped (`--max-sessions`, one app process each; more get HTTP 503), the terminal size a page
asks for is clamped to `MAX_COLUMNS` x `MAX_ROWS`, a session without input for `--idle-timeout` seconds is
closed (its app quits and saves), and an app that does not quit within `QUIT_TIMEOUT` of its page closing
is killed. A host that is not a loopback address is refused unless `--public` is given too.

textual-serve (pinned with Textual) is imported only when the server starts; its `Server` is extended to
start the app without a shell, to keep track of the app processes so that stopping can end them, to close
the page's session when its app ends for any reason, and to print xun's own lines instead of its banner.
"""

from __future__ import annotations

import argparse
import ipaddress
import hmac
import logging
import os
import re
import secrets
import shlex
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

from xun.base.valid_text import escape_control
from xun.cli.exits import EXIT_FAILED, EXIT_OK, LATEST, CommandError
from xun.cli.commands.common import latest_session_id, resolve_session_id, settings_of, store_of, workdir_of

QUIT_TIMEOUT = 10.0
"""Seconds the apps get to quit (and save) once the server is told to stop; then they are killed."""
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
"""What textual-serve puts in TEXTUAL_DRIVER for the processes it starts."""
MAX_COLUMNS = 500
MAX_ROWS = 200
"""The largest terminal a page may ask for: a 100000 x 100000 terminal took gigabytes per session."""
TOKEN_PARAMETER = "token"
PROTOCOL = "xun"
"""The WebSocket subprotocol the server answers with (a browser refuses a handshake that names none)."""
TOKEN_PROTOCOL = "xun-token."
"""The page offers `xun-token.<token>` beside `PROTOCOL`: how the token reaches `/ws` (token_urlsafe's
letters are all allowed in a subprotocol name)."""
STORAGE_KEY = "xun-serve-token"
PAGE_SCRIPT = """<script>
/* xun serve: the token stays in this tab's sessionStorage (per origin, so per port), never in a cookie,
   and goes to the server only as a WebSocket subprotocol. */
(() => {
  const address = new URL(window.location.href);
  const given = address.searchParams.get("%(parameter)s");
  if (given !== null) {
    window.sessionStorage.setItem("%(key)s", given);
    address.searchParams.delete("%(parameter)s");
    window.history.replaceState(window.history.state, "", address.pathname + address.search + address.hash);
  }
  const token = window.sessionStorage.getItem("%(key)s");
  const say = (text) => {
    const line = document.createElement("p");
    line.textContent = text;
    line.style.cssText = "color: #eee; font: 16px monospace; margin: 2em";
    document.body.replaceChildren(line);
  };
  if (token === null) {  /* no app: textual-serve's script finds no terminal to connect */
    document.addEventListener("DOMContentLoaded", () => say("xun serve: open the URL that `xun serve` printed, with its token."));
    return;
  }
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(url) {
      super(url, ["%(protocol)s", "%(prefix)s" + token]);
      let opened = false;
      this.addEventListener("open", () => { opened = true; });
      this.addEventListener("close", () => {
        if (!opened) say("xun serve did not take this tab: open the URL it printed (every run has a new token), "
                         + "and mind --max-sessions.");
      });
    }
  };
})();
</script>
""" % {"parameter": TOKEN_PARAMETER, "key": STORAGE_KEY, "protocol": PROTOCOL, "prefix": TOKEN_PROTOCOL}  # noqa: E501, UP031 - the script's own lines and braces
"""Put at the top of textual-serve's page (before its own script opens the WebSocket)."""
_SECRETS_IN_TEXT = re.compile(rf"(\b{TOKEN_PARAMETER}=|{re.escape(TOKEN_PROTOCOL)})[^\s&\"',;]*")


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The `Host` headers that name this server (lower case): a DNS rebinding page sends its own name."""
    text = host.strip().strip("[]").lower()
    names = {text, "127.0.0.1", "localhost", "::1"} if is_loopback(host) else {text}
    return frozenset(f"[{name}]:{port}" if ":" in name else f"{name}:{port}" for name in names)


def protocol_token(header: str | None) -> str | None:
    """The token a WebSocket handshake offers in `Sec-WebSocket-Protocol` (`xun-token.<token>`), if any."""
    for offered in (header or "").split(","):
        offered = offered.strip()
        if offered.startswith(TOKEN_PROTOCOL):
            return offered[len(TOKEN_PROTOCOL) :]
    return None


def redact(text: str, token: str) -> str:
    """`text` (a log line) without the token: neither this run's nor any other given as `token=` or a subprotocol."""
    return _SECRETS_IN_TEXT.sub(r"\1[redacted]", text.replace(token, "[redacted]"))


def check_request(
    *,
    host_header: str | None,
    origin: str | None,
    path: str,
    query_token: str | None,
    protocol_token: str | None,
    token: str,
    hosts: frozenset[str] | None,
) -> str | None:
    """Why a request is refused, or None when it may go on. `hosts` None (with --public) accepts any Host."""
    claimed = (host_header or "").strip().lower()
    if hosts is not None and claimed not in hosts:
        return f"the Host header {host_header!r} does not name this server"
    if origin is not None:
        parts = urlsplit(origin.strip().lower())
        if parts.scheme not in ("http", "https") or parts.netloc != claimed:
            return f"requests from the page {origin!r} are not accepted (only from the app's own page)"
    if path.startswith(("/static/", "/download/")):
        return None  # textual-serve's JavaScript and fonts: nothing secret; a download's key is its secret
    if path == "/":  # the page: nothing secret in it, its script takes the token from the URL
        if query_token is None or _same(query_token, token):
            return None
        return "this is not the token that `xun serve` printed for this run; open the URL it printed"
    if protocol_token is not None and _same(protocol_token, token):
        return None
    return "open the URL with the token that `xun serve` printed (the page presents it on its WebSocket)"


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def main(args: argparse.Namespace) -> int:
    if args.app_process:
        return _run_app(args)
    host = args.host
    if args.port > 65535:
        raise CommandError(f"--port {args.port}: a port is at most 65535")
    if not is_loopback(host) and not args.public:
        raise CommandError(
            f"--host {host}: not a loopback address, so anyone who can reach it could use the app, "
            "which runs commands and writes files in the working directory; "
            "add --public to serve it there anyway"
        )
    _check_settings(args)
    command = app_command(args)
    if args.idle_timeout <= 0:
        raise CommandError(f"--idle-timeout {args.idle_timeout:g}: give a number of seconds above 0")
    try:
        server = _make_server(
            command,
            host=host,
            port=args.port,
            url=public_url(host, args.port),
            debug=args.debug,
            token=secrets.token_urlsafe(32),
            hosts=None if args.public else allowed_hosts(host, args.port),
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout,
        )
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("textual_serve", "aiohttp", "aiohttp_jinja2", "jinja2"):
            raise CommandError(
                f"`xun serve` needs the textual-serve package, which cannot be imported ({exc})", EXIT_FAILED
            ) from None
        raise
    server.run()
    return EXIT_OK


def is_loopback(host: str) -> bool:
    """True when every address `host` stands for is a loopback one (127.0.0.0/8, ::1, localhost)."""
    text = host.strip().strip("[]")
    if not text:
        return False  # "" is every interface
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        pass
    if text.lower() == "localhost" or text.lower().endswith(".localhost"):
        return True
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(text, None)}
    except (OSError, UnicodeError):
        return False
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%", 1)[0]).is_loopback for a in addresses)


def public_url(host: str, port: int) -> str:
    """Where the page and its websocket are reached (textual-serve builds both from this)."""
    text = host.strip().strip("[]")
    if text in ("", "0.0.0.0", "::"):  # every interface: name the machine
        text = socket.getfqdn()
    if ":" in text:
        text = f"[{text}]"
    return f"http://{text}:{port}"


def app_command(args: argparse.Namespace) -> list[str]:
    """What runs for every browser session: this interpreter's `python -m xun`, with the global options."""
    command = [sys.executable, "-m", "xun", "serve", "--app-process"]
    if args.offline:
        command.append("--offline")
    if args.base_url:
        command.append(f"--base-url={args.base_url}")
    if args.model:
        command.append(f"--model={args.model}")
    command += [f"--set={override}" for override in args.overrides]
    command.append(f"--workdir={workdir_of(args).resolve()}")
    if args.resume is not None:
        store = store_of(args)
        ident = latest_session_id(store) if args.resume == LATEST else resolve_session_id(store, args.resume)
        command.append(f"--resume={ident}")
    if args.fork:
        command.append("--fork")  # every tab continues its own copy
    if args.read_only:
        command.append("--read-only")
    if args.debug:
        command.append("--debug")
    return command


def _check_settings(args: argparse.Namespace) -> None:
    """Fail here, on the terminal, on settings every app process would fail on; say when the demo answers."""
    from xun.agent.config import uses_offline_demo

    config = settings_of(args)
    if config.withheld:
        from xun.agent.trust import describe_withheld

        print(
            f"xun: {escape_control(describe_withheld(config.withheld, workdir_of(args)))}; every browser session asks",
            file=sys.stderr,
            flush=True,
        )
    if args.offline:
        why = "--offline"
    elif uses_offline_demo(config):
        why = f"no API key is set (${config.provider.api_key_env}) and no --base-url"
    else:
        return
    print(
        f"xun: {why}: every browser session uses the offline demo model (scripted, not an LLM)",
        file=sys.stderr,
        flush=True,
    )


def _run_app(args: argparse.Namespace) -> int:
    """One browser session: the app on Textual's web driver, talking to textual-serve over stdin and stdout."""
    if os.environ.get("TEXTUAL_DRIVER") != WEB_DRIVER:
        raise CommandError("--app-process is for the app processes that `xun serve` starts")
    from xun.cli.commands.common import open_model_session
    from xun.tui import run as run_tui

    return int(run_tui(lambda: open_model_session(args, resume=args.resume)))


def _unframed(response: Any) -> Any:
    """No page of another origin may frame the app (a click-jacked approval), and no page sends its address
    (`?token=` on the first visit) on as a `Referer`: every response not yet sent says so (a WebSocket's
    handshake went out already)."""
    if not response.prepared:
        response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"
    return response


class _Redacting(logging.Formatter):
    """Every log line (the access log's request lines and Referers, warnings, tracebacks) without the token."""

    def __init__(self, token: str) -> None:
        super().__init__("xun serve: %(message)s")
        self.token = token

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self.token)


def _make_server(
    command: list[str],
    *,
    host: str,
    port: int,
    url: str,
    debug: bool,
    token: str,
    hosts: frozenset[str] | None,
    max_sessions: int,
    idle_timeout: float,
) -> Any:
    """textual-serve's Server, extended (see the module's docstring). Imports textual-serve and aiohttp."""
    import asyncio
    import signal

    from aiohttp import WSMsgType, web
    from textual_serve.app_service import AppService
    from textual_serve.server import Server

    log = logging.getLogger("textual-serve")

    class AppProcess(AppService):
        """One browser session's app process, started without a shell and known to the server while it runs."""

        def __init__(self, argv: list[str], running: set[AppProcess], **kwargs: Any) -> None:
            super().__init__(shlex.join(argv), **kwargs)
            self.argv = argv
            self.running = running

        async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
            self._process = process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._build_environment(width=width, height=height),
            )
            self.running.add(self)
            assert process.stdin is not None
            self._stdin = process.stdin
            return process

        async def run(self) -> None:
            try:
                await super().run()
            finally:
                if self._process is not None:
                    await self._process.wait()
                self.running.discard(self)
                try:  # the page shows "Session ended" however the app ended
                    await self.remote_close()
                except Exception:  # noqa: BLE001, S110 - the browser may be gone already
                    pass

        async def stop(self) -> None:
            """Ask the app to quit; kill it when it has not within `QUIT_TIMEOUT`."""
            try:
                await asyncio.wait_for(asyncio.shield(super().stop()), QUIT_TIMEOUT)
            except TimeoutError:
                log.warning("an app did not quit within %g s of its page closing; killing it", QUIT_TIMEOUT)
                self.kill()

        def kill(self) -> None:
            if self._process is not None and self._process.returncode is None:
                self._process.kill()

    class XunServer(Server):
        def __init__(self) -> None:
            super().__init__(shlex.join(command), host=host, port=port, title="xun", public_url=url)
            self.running: set[AppProcess] = set()
            self.verbose = debug  # not `self.debug`: that would start every app with Textual's devtools
            self._signals = 0
            self._stop: asyncio.Event | None = None
            self.sessions = 0

        @web.middleware
        async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
            """The token, Host and Origin checks (see the module's docstring) before any handler."""
            refused = check_request(
                host_header=request.headers.get("Host"),
                origin=request.headers.get("Origin"),
                path=request.path,
                query_token=request.query.get(TOKEN_PARAMETER),
                protocol_token=protocol_token(request.headers.get("Sec-WebSocket-Protocol")),
                token=token,
                hosts=hosts,
            )
            if refused is not None:
                log.warning("refused %s %s: %s", request.method, request.path, refused)
                return _unframed(web.Response(status=403, text=f"xun serve: {refused}\n"))
            return _unframed(await handler(request))

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            """textual-serve's page with `PAGE_SCRIPT` first in its head; never kept in a cache."""
            page = await super().handle_index(request)
            if "<head>" not in page.text:
                raise RuntimeError("textual-serve's page has no <head> to put the token's script in")
            page.text = page.text.replace("<head>", "<head>\n" + PAGE_SCRIPT, 1)
            page.headers["Cache-Control"] = "no-store"
            return page

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(self.guard)
            return app

        async def _process_messages(self, websocket: web.WebSocketResponse, service: AppService) -> None:
            """textual-serve's loop, with the terminal size clamped and a session without input closed."""
            while True:
                try:
                    message = await websocket.receive(timeout=idle_timeout)
                except TimeoutError:
                    log.warning("a browser session had no input for %g s; closing it", idle_timeout)
                    return
                if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                    return
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    envelope = message.json()
                except ValueError:
                    continue
                if not isinstance(envelope, list) or not envelope:
                    continue
                kind, data = envelope[0], (envelope[1] if len(envelope) > 1 else None)
                if kind == "stdin" and isinstance(data, str):
                    await service.send_bytes(data.encode("utf-8", "replace"))
                elif kind == "resize" and isinstance(data, dict):
                    await service.set_terminal_size(*_size(data.get("width"), data.get("height")))
                elif kind == "ping":
                    await websocket.send_json(["pong", data])
                elif kind == "blur":
                    await service.blur()
                elif kind == "focus":
                    await service.focus()

        def initialize_logging(self) -> None:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(_Redacting(token))
            logging.basicConfig(level=logging.INFO if self.verbose else logging.WARNING, handlers=[handler])

        async def on_startup(self, app: web.Application) -> None:
            """Nothing: the URL is printed once the port is bound (in `_serve`), not textual-serve's banner."""

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            """textual-serve's `handle_websocket`, starting an `AppProcess`."""
            if self.sessions >= max_sessions:
                log.warning("refused a browser session: %d are open (--max-sessions)", self.sessions)
                return web.Response(
                    status=503,
                    text=f"xun serve: {self.sessions} sessions are open, the most "
                    "allowed (--max-sessions); close one first\n",
                )
            websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=1 << 20, protocols=(PROTOCOL,))
            width, height = _size(request.query.get("width", "80"), request.query.get("height", "24"))
            service: AppProcess | None = None
            self.sessions += 1
            try:
                try:
                    await websocket.prepare(request)
                except web.HTTPException as exc:  # not a WebSocket handshake
                    return web.Response(status=exc.status, text=f"xun serve: {exc.text}\n")
                service = AppProcess(
                    command,
                    self.running,
                    write_bytes=websocket.send_bytes,
                    write_str=websocket.send_str,
                    close=websocket.close,
                    download_manager=self.download_manager,
                )
                await service.start(width, height)
                try:
                    await self._process_messages(websocket, service)
                finally:
                    await service.stop()
            except asyncio.CancelledError:
                pass
            except Exception:  # one broken session must not stop the server
                log.exception("a browser session failed")
            finally:
                self.sessions -= 1
                if service is not None:
                    await service.stop()
                if websocket.prepared:
                    await websocket.close()
            return websocket

        def run(self) -> None:
            self.initialize_logging()
            asyncio.run(self._serve())

        def _received(self) -> None:
            self._signals += 1
            if self._signals == 1:
                assert self._stop is not None
                self._stop.set()
            else:
                print("xun: killing the apps", file=sys.stderr, flush=True)
                self._kill_all()

        def _kill_all(self) -> None:
            for service in list(self.running):
                service.kill()

        async def _serve(self) -> None:
            loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            installed = []
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(signum, self._received)
                except (NotImplementedError, RuntimeError, ValueError):
                    continue
                installed.append(signum)
            runner = web.AppRunner(await self._make_app(), handle_signals=False, shutdown_timeout=QUIT_TIMEOUT)
            await runner.setup()
            try:
                site = web.TCPSite(runner, self.host, self.port)
                try:
                    await site.start()
                except OSError as exc:
                    raise CommandError(
                        f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}", EXIT_FAILED
                    ) from None
                print(
                    f"xun: serving the app at {self.public_url}/?{TOKEN_PARAMETER}={token} (every browser tab "
                    "runs its own app; Ctrl+C stops)",
                    flush=True,
                )
                await self._stop.wait()
                await self._quit_all()
            finally:
                await runner.cleanup()
                for signum in installed:
                    loop.remove_signal_handler(signum)
            print("xun: stopped", file=sys.stderr, flush=True)

        async def _quit_all(self) -> None:
            services = list(self.running)
            if not services:
                return
            print(
                f"xun: stopping: asking {len(services)} app{'s' if len(services) != 1 else ''} to quit",
                file=sys.stderr,
                flush=True,
            )
            stopping = [asyncio.ensure_future(service.stop()) for service in services]
            _, pending = await asyncio.wait(stopping, timeout=QUIT_TIMEOUT)
            if pending:
                print(
                    f"xun: {len(pending)} app(s) did not quit within {QUIT_TIMEOUT:g} s; killing them",
                    file=sys.stderr,
                    flush=True,
                )
                self._kill_all()
                await asyncio.wait(pending, timeout=5)

    return XunServer()


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (ValueError, TypeError, OverflowError):
        return default


def _size(width: object, height: object) -> tuple[int, int]:
    """A terminal size a page asked for, clamped to 1..MAX_COLUMNS by 1..MAX_ROWS."""
    return (min(max(_int(width, 80), 1), MAX_COLUMNS), min(max(_int(height, 24), 1), MAX_ROWS))
