"""`xun serve`: the app in a real browser (Debian's headless Chromium, driven by playwright-core), and
the command's checks (loopback only without --public, the app command it runs, a busy port).

The browser test starts `xun serve --offline --port <free port>` as a subprocess, opens its page with
`read_screen.mjs` and reads the screen the page shows from xterm.js's buffer (see that script): the
context gauge pane (its border title) and the header's offline badge must be there. It types a prompt
into the page and waits for the offline model's reply on the screen. Then it stops the server with
SIGINT, as Ctrl+C would, while the page is still open: the server must ask the app to quit (the app
saves the session, prompt included), exit 0, and the page must show textual-serve's "Session ended". Every process the
test started (the server, the app, node, Chromium) is gone at the end, or killed and reported.

It skips only when Chromium or Node and npm are missing and cannot be installed (apt-get, as root), or
when npm cannot install playwright-core, and says which.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from xun.cli.main import main
from xun.cli.commands import serve

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "read_screen.mjs"
CHROMIUM = "/usr/bin/chromium"
PLAYWRIGHT_VERSION = json.loads((HERE / "package.json").read_text())["dependencies"]["playwright-core"]
SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL", "XUN_HOME", "XUN_OFFLINE_FAULTS", "NO_COLOR")
GAUGE_TITLE = "─ context ─"
"""The gauge pane's border title ("context", `ContextGauge.border_title`) as it sits in the top border."""
OFFLINE_BADGE = "offline demo model"
BUDGET = 60.0
"""Seconds the browser test may take once Chromium and playwright-core are there (it takes about 7)."""
PROMPT = "hello from the browser"
REPLY = "xun-offline here"
"""How the offline demo model's reply starts."""


def _apt_install(*packages: str) -> str | None:
    """Install Debian packages; None when done, else why not."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root, or no apt-get"
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", *packages]):
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{' '.join(command)}` failed: {exc}"
        if done.returncode != 0:
            return f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return None


def _chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        problem = _apt_install("chromium")
        if not os.access(CHROMIUM, os.X_OK):
            pytest.skip(
                f"SKIPPED: Chromium is not installed ({CHROMIUM}) and cannot be installed: {problem}; "
                "the browser test of `xun serve` did not run"
            )
    return CHROMIUM


def _playwright() -> str:
    """node, with playwright-core installed from package-lock.json into tests/cli/serve/node_modules."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        problem = _apt_install("nodejs", "npm")
        if shutil.which("node") is None or shutil.which("npm") is None:
            pytest.skip(
                f"SKIPPED: Node.js and npm are not installed and cannot be installed: {problem}; "
                "the browser test of `xun serve` did not run"
            )
    installed = HERE / "node_modules" / "playwright-core" / "package.json"
    if not installed.is_file() or json.loads(installed.read_text()).get("version") != PLAYWRIGHT_VERSION:
        try:
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True, timeout=180
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"SKIPPED: npm cannot install playwright-core {PLAYWRIGHT_VERSION}: {exc}")
        if done.returncode != 0:
            pytest.skip(
                f"SKIPPED: npm cannot install playwright-core {PLAYWRIGHT_VERSION} "
                f"(npm ci exited {done.returncode}): {done.stderr.strip()[-400:]}"
            )
    return shutil.which("node") or "node"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lines(stream, into: queue.Queue[str | None]) -> threading.Thread:
    def pump() -> None:
        for line in stream:
            into.put(line)
        into.put(None)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


class _Collected(list[str]):
    """The lines of a stream, read by a thread as they come (a pipe nobody reads can block its writer)."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.append(line)

    def text(self, wait: float = 0) -> str:
        """Everything read so far; with `wait`, up to the end of the stream first (at most `wait` s)."""
        if wait:
            self.thread.join(wait)
        return "".join(self)


def _wait_for(lines: queue.Queue[str | None], seen: list[str], predicate, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return None
        if line is None:
            return None
        seen.append(line)
        if predicate(line):
            return line
    return None


def _processes_mentioning(text: str) -> dict[int, str]:
    """Live processes whose command line contains `text` (this test's tmp dir names all of its own)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if text in command and state != "Z":
            found[int(entry.name)] = command
    return found


def _kill(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait(timeout=10)


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    workdir, home = tmp_path / "work", tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PYTHONUNBUFFERED="1")
    return workdir, env


def test_the_app_works_in_headless_chromium_and_ctrl_c_stops_it(tmp_path: Path, workspace):
    chromium = _chromium()
    node = _playwright()
    workdir, env = workspace
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    user_data = tmp_path / "chromium-profile"
    user_data.mkdir()  # empty: no profile, no first-run state
    shot = tmp_path / "screen.png"
    started = time.monotonic()
    deadline = started + BUDGET

    def left(most: float) -> float:
        return max(0.5, min(most, deadline - time.monotonic()))

    server = browser = None
    out: queue.Queue[str | None] = queue.Queue()
    page: queue.Queue[str | None] = queue.Queue()
    server_out: list[str] = []
    page_out: list[str] = []
    try:
        server = subprocess.Popen(
            [sys.executable, "-m", "xun", "serve", "--offline", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _lines(server.stdout, out)
        server_err = _Collected(server.stderr)
        ready = _wait_for(out, server_out, lambda line: "serving the app at" in line, left(20))
        assert ready is not None, f"the server did not start: {server_out} {server_err.text(wait=1)}"
        assert url + "/?token=" in ready and "Ctrl+C" in ready
        secret_url = ready.split("serving the app at ", 1)[1].split()[0]  # the page needs the token

        browser = subprocess.Popen(
            [node, str(SCRIPT), secret_url, str(user_data), str(shot), GAUGE_TITLE, OFFLINE_BADGE],
            cwd=HERE,
            env={**env, "XUN_CHROMIUM": chromium},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _lines(browser.stdout, page)
        browser_err = _Collected(browser.stderr)
        line = _wait_for(page, page_out, lambda line: line.startswith("{"), left(45))
        assert line is not None, f"no screen from the browser: {page_out} {browser_err.text(wait=1)}"
        screen = json.loads(line)
        text = "\n".join(screen["lines"])
        assert screen["shown"], f"the page never showed the terminal\n{text}"
        assert screen["found"], f"missing {screen['missing']} on the screen (screenshot: {shot}):\n{text}"
        gauge_row = next(i for i, row in enumerate(screen["lines"]) if GAUGE_TITLE in row)
        assert "/" in screen["lines"][gauge_row + 1] and "%" in screen["lines"][gauge_row + 1], text  # "0 / 192k (0%)"
        assert OFFLINE_BADGE in screen["lines"][0], text  # the header's badge
        assert shot.stat().st_size > 10_000
        apps = {
            pid: cmd for pid, cmd in _processes_mentioning(f"--workdir={workdir}").items() if "--app-process" in cmd
        }
        assert len(apps) == 1, apps  # one app for the one tab, started with the global options
        assert "--offline" in next(iter(apps.values()))
        seen_at = time.monotonic() - started

        browser.stdin.write(json.dumps({"type": PROMPT, "wait": REPLY}) + "\n")  # keys typed into the page
        browser.stdin.flush()
        line = _wait_for(page, page_out, lambda line: line.startswith("{"), left(30))
        assert line is not None, page_out
        typed = json.loads(line)
        assert typed["found"], "the offline model's reply did not show:\n" + "\n".join(typed["lines"])
        replied_at = time.monotonic() - started

        server.send_signal(signal.SIGINT)  # Ctrl+C, to the server only: it has to stop the app itself
        assert server.wait(timeout=left(20)) == 0
        stopped_at = time.monotonic() - started
        errors = server_err.text(wait=5)
        assert "asking 1 app to quit" in errors and "xun: stopped" in errors, errors
        assert "Traceback" not in errors + "".join(server_out), errors
        saved = list((workdir / ".xun" / "sessions").glob("*.json"))  # the app saved its session on the way out
        assert len(saved) == 1 and PROMPT in saved[0].read_text(), saved

        browser.stdin.close()  # the page now shows textual-serve's "Session ended"
        line = _wait_for(page, page_out, lambda line: line.startswith("{"), left(20))
        assert line is not None and json.loads(line)["closed"], page_out
        assert browser.wait(timeout=left(15)) == 0, browser_err.text(wait=5)
        print(
            f"page read {seen_at:.1f} s after the start, reply {replied_at:.1f} s, server stopped {stopped_at:.1f} s, "
            f"all done after {time.monotonic() - started:.1f} s"
        )
    finally:
        _kill(browser)
        _kill(server)
        left = _processes_mentioning(str(tmp_path))
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not left, f"processes left running (now killed): {left}"


RECORDER_PAGE = b"""<!DOCTYPE html><html><head><title>another local server</title></head><body>
<p>another server on 127.0.0.1</p>
<script>
  /* what a page of another local port can see of xun's secret: its cookies, storage and referrer */
  const seen = {cookie: document.cookie, session: {...window.sessionStorage}, local: {...window.localStorage},
                referrer: document.referrer, href: window.location.href};
  fetch("/report", {method: "POST", body: JSON.stringify(seen)});
</script></body></html>"""


class _Recorder(ThreadingHTTPServer):
    """Another local server, on another port of 127.0.0.1 (another user's, say): it keeps every request it
    gets (method, path with query, headers with Cookie, body), and its page reports what its script sees."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                recorder.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": self.headers.items(),
                        "body": self.rfile.read(length).decode("utf-8", "replace"),
                    }
                )
                page = RECORDER_PAGE if self.path == "/" else b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if self.path == "/" else "text/plain")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            do_GET = do_POST = do_HEAD = _record

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def seen(self, timeout: float) -> bool:
        """Whether its page's report came (its script ran) within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(request["path"] == "/report" for request in list(self.requests)):
                return True
            time.sleep(0.1)
        return False


def test_the_token_stays_with_its_port_in_headless_chromium(tmp_path: Path, workspace):
    """Issue 22.3: the browser that opened the secret URL hands nothing of it to another port of 127.0.0.1.
    The same tab (same profile) opens the app, types into it, leaves for a recording server on another port
    as a link would, and comes back to the bare URL, where the app works again without the token in it."""
    chromium = _chromium()
    node = _playwright()
    workdir, env = workspace
    port = _free_port()
    user_data = tmp_path / "chromium-profile"
    user_data.mkdir()
    shot = tmp_path / "screen.png"
    deadline = time.monotonic() + 2 * BUDGET

    def left(most: float) -> float:
        return max(0.5, min(most, deadline - time.monotonic()))

    def ask(command: dict, wait: float) -> dict:
        browser.stdin.write(json.dumps(command) + "\n")
        browser.stdin.flush()
        line = _wait_for(page, page_out, lambda line: line.startswith("{"), left(wait))
        assert line is not None, f"no answer to {command}: {page_out} {browser_err.text(wait=1)}"
        return json.loads(line)

    recorder = _Recorder()
    server = browser = None
    out: queue.Queue[str | None] = queue.Queue()
    page: queue.Queue[str | None] = queue.Queue()
    server_out: list[str] = []
    page_out: list[str] = []
    try:
        server = subprocess.Popen(
            [sys.executable, "-m", "xun", "serve", "--offline", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _lines(server.stdout, out)
        server_err = _Collected(server.stderr)
        ready = _wait_for(out, server_out, lambda line: "serving the app at" in line, left(20))
        assert ready is not None, f"the server did not start: {server_out} {server_err.text(wait=1)}"
        secret_url = ready.split("serving the app at ", 1)[1].split()[0]
        token = secret_url.split("?token=", 1)[1]
        bare_url = f"http://127.0.0.1:{port}/"

        browser = subprocess.Popen(
            [node, str(SCRIPT), secret_url, str(user_data), str(shot), GAUGE_TITLE, OFFLINE_BADGE],
            cwd=HERE,
            env={**env, "XUN_CHROMIUM": chromium},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _lines(browser.stdout, page)
        browser_err = _Collected(browser.stderr)
        line = _wait_for(page, page_out, lambda line: line.startswith("{"), left(45))
        assert line is not None, f"no screen from the browser: {page_out} {browser_err.text(wait=1)}"
        first = json.loads(line)
        assert first["found"], f"missing {first['missing']} on the screen:\n" + "\n".join(first["lines"])
        state = ask({"state": True}, 10)
        typed = ask({"type": PROMPT, "wait": REPLY}, 30)
        assert typed["found"], "the offline model's reply did not show:\n" + "\n".join(typed["lines"])

        went = ask({"goto": recorder.url}, 20)  # as a link on the app's page would
        assert went["url"] == recorder.url, went
        assert recorder.seen(10), f"the other server's page did not report: {recorder.requests}"
        back = ask({"goto": bare_url, "expect": [GAUGE_TITLE, OFFLINE_BADGE]}, 45)  # the same tab, no token in the URL
        assert back["found"], f"the app did not come back at {bare_url}:\n" + "\n".join(back.get("lines", []))
        again = ask({"type": PROMPT, "wait": REPLY}, 30)
        assert again["found"], "a key did not reach the app after coming back:\n" + "\n".join(again["lines"])
        later = ask({"state": True}, 10)

        received = json.dumps(recorder.requests)
        assert token not in received, f"the other port received the token: {recorder.requests}"
        assert "xun-serve-token" not in received, recorder.requests
        report = json.loads(next(r["body"] for r in recorder.requests if r["path"] == "/report"))
        assert report["cookie"] == "" and report["session"] == {} and report["local"] == {}, report
        assert report["referrer"] == "", report  # not even the app's address
        assert {r["path"] for r in recorder.requests} >= {"/", "/report"}, recorder.requests
        for seen in (state, later):  # the token is in no cookie, nor in the address bar, only in the tab's storage
            assert token not in json.dumps(seen["cookies"]), seen
            assert seen["url"] == bare_url, seen
            assert token in seen["session"].values(), seen

        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=left(20)) == 0
        errors = server_err.text(wait=5)
        assert token not in errors and "Traceback" not in errors, errors
        browser.stdin.close()
        line = _wait_for(page, page_out, lambda line: line.startswith("{"), left(20))
        assert line is not None and json.loads(line)["closed"], page_out
        assert browser.wait(timeout=left(15)) == 0, browser_err.text(wait=5)
    finally:
        recorder.shutdown()
        recorder.server_close()
        _kill(browser)
        _kill(server)
        remaining = _processes_mentioning(str(tmp_path))
        for pid in remaining:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert not remaining, f"processes left running (now killed): {remaining}"


# ---------------------------------------------------------------------------------------- the command


def test_a_host_other_machines_can_reach_needs_public(capsys):
    for host in ("0.0.0.0", "::", "192.0.2.7"):
        assert main(["serve", "--host", host]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"xun: --host {host}: not a loopback address") and "--public" in err, err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("", False),
        ("::", False),
        ("192.0.2.7", False),
        ("example.invalid", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert serve.is_loopback(host) is loopback


def test_urls():
    assert serve.public_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert serve.public_url("::1", 9000) == "http://[::1]:9000"


def test_each_tab_runs_this_python_with_the_global_options(tmp_path: Path, monkeypatch):
    from xun.cli.main import _merge_global_options, _prepare_argv, build_parser

    monkeypatch.chdir(tmp_path)
    argv = [
        "--offline",
        "--set",
        "a.b=1",
        "serve",
        "--model=-odd",
        "--base-url",
        "http://x/v1",
        "--set",
        "c=2",
        "--workdir",
        str(tmp_path),
        "--debug",
    ]
    args = _merge_global_options(build_parser().parse_args(_prepare_argv(argv)))
    command = serve.app_command(args)
    assert command[:5] == [sys.executable, "-m", "xun", "serve", "--app-process"]
    assert set(command[5:]) == {
        "--offline",
        "--base-url=http://x/v1",
        "--model=-odd",
        "--set=a.b=1",
        "--set=c=2",
        f"--workdir={tmp_path.resolve()}",
        "--debug",
    }
    parsed = _merge_global_options(build_parser().parse_args(command[3:]))  # the tab's process parses it back
    assert (parsed.command, parsed.app_process, parsed.offline, parsed.model, parsed.base_url) == (
        "serve",
        True,
        True,
        "-odd",
        "http://x/v1",
    )
    assert parsed.overrides == ["a.b=1", "c=2"] and parsed.workdir == str(tmp_path.resolve())


def test_resume_is_resolved_once_when_the_server_starts(tmp_path: Path, monkeypatch, capsys):
    from xun.cli.main import _merge_global_options, _prepare_argv, build_parser

    monkeypatch.chdir(tmp_path)
    from xun.context.conversation import Conversation
    from xun.context.sessions import SessionStore

    SessionStore(tmp_path).save(Conversation(conversation_id="abc123"))
    for argv in (["--resume", "serve"], ["serve", "--resume", "abc"], ["serve", "-c"]):
        args = _merge_global_options(build_parser().parse_args(_prepare_argv(argv)))
        assert serve.app_command(args)[-1] == "--resume=abc123", argv
    assert main(["serve", "--resume", "nope"]) == 2
    assert "no session 'nope'" in capsys.readouterr().err


def test_a_busy_port_is_one_line(workspace):
    workdir, env = workspace
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "xun", "serve", "--offline", "--port", str(port)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines()[-1].startswith(f"xun: cannot listen on 127.0.0.1:{port}: "), done.stderr
    assert "Traceback" not in done.stderr


def test_the_app_process_is_only_for_the_server(capsys, monkeypatch):
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert main(["serve", "--app-process"]) == 2
    assert "for the app processes that `xun serve` starts" in capsys.readouterr().err


def test_serve_is_not_imported_by_version(workspace):
    workdir, env = workspace
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "xun", "--version"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert imported & {"textual_serve", "aiohttp", "jinja2", "xun.cli.commands.serve"} == set()


def test_the_serve_module_imports_textual_serve_only_when_serving():
    code = (
        "import sys, xun.cli.commands.serve; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual_serve', 'aiohttp')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done
