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

The app runs commands and writes files in the working directory, so a host that is not a loopback address
is refused unless `--public` is given too.

textual-serve (pinned with Textual) is imported only when the server starts; its `Server` is extended to
start the app without a shell, to keep track of the app processes so that stopping can end them, to close
the page's session when its app ends for any reason, and to print xun's own lines instead of its banner.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shlex
import socket
import sys
from typing import Any

from xun.cli import EXIT_FAILED, EXIT_OK, LATEST, CommandError
from xun.commands.common import latest_session_id, resolve_session_id, store_of, workdir_of

QUIT_TIMEOUT = 10.0
"""Seconds the apps get to quit (and save) once the server is told to stop; then they are killed."""
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
"""What textual-serve puts in TEXTUAL_DRIVER for the processes it starts."""


def main(args: argparse.Namespace) -> int:
    if args.app_process:
        return _run_app(args)
    host = args.host
    if args.port > 65535:
        raise CommandError(f"--port {args.port}: a port is at most 65535")
    if not is_loopback(host) and not args.public:
        raise CommandError(f"--host {host}: not a loopback address, so anyone who can reach it could use the app, "
                           "which runs commands and writes files in the working directory; "
                           "add --public to serve it there anyway")
    _check_settings(args)
    command = app_command(args)
    try:
        server = _make_server(command, host=host, port=args.port, url=public_url(host, args.port), debug=args.debug)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("textual_serve", "aiohttp", "aiohttp_jinja2", "jinja2"):
            raise CommandError(f"`xun serve` needs the textual-serve package, which cannot be imported ({exc})",
                               EXIT_FAILED) from None
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
    if args.debug:
        command.append("--debug")
    return command


def _check_settings(args: argparse.Namespace) -> None:
    """Fail here, on the terminal, on settings every app process would fail on; say when the demo answers."""
    from xun.config import load_config, uses_offline_demo

    overrides = list(args.overrides)
    if args.base_url:
        overrides.append(f"provider.base_url={args.base_url}")
    if args.model:
        overrides.append(f"model.name={args.model}")
    config = load_config(workdir_of(args), overrides)
    if args.offline:
        why = "--offline"
    elif uses_offline_demo(config):
        why = f"no API key is set (${config.provider.api_key_env}) and no --base-url"
    else:
        return
    print(f"xun: {why}: every browser session uses the offline demo model (scripted, not an LLM)",
          file=sys.stderr, flush=True)


def _run_app(args: argparse.Namespace) -> int:
    """One browser session: the app on Textual's web driver, talking to textual-serve over stdin and stdout."""
    if os.environ.get("TEXTUAL_DRIVER") != WEB_DRIVER:
        raise CommandError("--app-process is for the app processes that `xun serve` starts")
    from xun.commands.common import open_model_session
    from xun.tui import run as run_tui

    return int(run_tui(lambda: open_model_session(args, resume=args.resume)))


def _make_server(command: list[str], *, host: str, port: int, url: str, debug: bool) -> Any:
    """textual-serve's Server, extended (see the module's docstring). Imports textual-serve and aiohttp."""
    import asyncio
    import logging
    import signal

    from aiohttp import web
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

        def initialize_logging(self) -> None:
            logging.basicConfig(level=logging.INFO if self.verbose else logging.WARNING,
                                format="xun serve: %(message)s", stream=sys.stderr)

        async def on_startup(self, app: web.Application) -> None:
            """Nothing: the URL is printed once the port is bound (in `_serve`), not textual-serve's banner."""

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            """textual-serve's `handle_websocket`, starting an `AppProcess`."""
            websocket = web.WebSocketResponse(heartbeat=15)
            width = _int(request.query.get("width", "80"), 80)
            height = _int(request.query.get("height", "24"), 24)
            service: AppProcess | None = None
            try:
                await websocket.prepare(request)
                service = AppProcess(command, self.running, write_bytes=websocket.send_bytes,
                                     write_str=websocket.send_str, close=websocket.close,
                                     download_manager=self.download_manager)
                await service.start(width, height)
                try:
                    await self._process_messages(websocket, service)
                finally:
                    await service.stop()
            except asyncio.CancelledError:
                await websocket.close()
            except Exception:  # one broken session must not stop the server
                log.exception("a browser session failed")
            finally:
                if service is not None:
                    await service.stop()
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
                    raise CommandError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}",
                                       EXIT_FAILED) from None
                print(f"xun: serving the app at {self.public_url} (every browser tab runs its own app; "
                      "Ctrl+C stops)", flush=True)
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
            print(f"xun: stopping: asking {len(services)} app{'s' if len(services) != 1 else ''} to quit",
                  file=sys.stderr, flush=True)
            stopping = [asyncio.ensure_future(service.stop()) for service in services]
            _, pending = await asyncio.wait(stopping, timeout=QUIT_TIMEOUT)
            if pending:
                print(f"xun: {len(pending)} app(s) did not quit within {QUIT_TIMEOUT:g} s; killing them",
                      file=sys.stderr, flush=True)
                self._kill_all()
                await asyncio.wait(pending, timeout=5)

    return XunServer()


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default
