"""Memory is bounded with no approval needed. Each attack runs the real code in a
subprocess whose address space is capped (RLIMIT_AS), on sparse files so the test is fast."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

LIMIT = 1536 * 1024 * 1024  # the attacks took 2.6 to 10.8 GB before the fixes


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _run(cwd, *parts: str) -> subprocess.CompletedProcess:
    code = "\n".join(textwrap.dedent(part) for part in parts)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_capped,
        env=dict(os.environ),
    )


def _sparse_line(path, size: int) -> None:
    """`size` bytes of one line: "x" at the start, zeros after (a sparse file: nothing is written)."""
    with open(path, "wb") as handle:
        handle.write(b"x" * 10)
        handle.truncate(size)


TOOL = """
    from pathlib import Path
    from xun.agent.tools import ToolContext
    from xun.agent.tools.builtin import read_file, search_text
    from xun.agent.tools.toolbox import ToolError
    context = ToolContext(workdir=Path.cwd())
"""


def test_read_file_of_an_800_mb_line_stays_bounded(tmp_path):
    with open(tmp_path / "one-line.txt", "wb") as handle:
        handle.write(b"a" * 10_000)  # text where read_file looks for binary; sparse zeros after
        handle.seek(800 * 1024 * 1024)
        handle.write(b"b\nsecond line\n")
    done = _run(tmp_path, TOOL, "print(read_file('one-line.txt', context=context))")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "line cut at 100,000 characters" in done.stdout
    assert "lines 1-1 of 2; 1 more line remaining" in done.stdout


def test_a_pattern_that_expands_to_billions_is_refused_before_compiling(tmp_path):
    (tmp_path / "a.txt").write_text("x" * 10 + "\n")
    done = _run(
        tmp_path,
        TOOL,
        """
    try:
        search_text('(?:x{65535}){65535}', context=context)
    except ToolError as exc:
        print('refused:', exc)
    print(search_text('x{3}', context=context))
    """,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "too big" in done.stdout
    assert "a.txt:1:" in done.stdout


def test_a_huge_agents_md_is_cut_and_says_so(tmp_path):
    with open(tmp_path / "AGENTS.md", "wb") as handle:
        handle.write("Be brief. ünïcode\n".encode() * 20_000)  # 400 KB of text, then sparse zeros
        handle.truncate(1536 * 1024 * 1024)
    done = _run(
        tmp_path,
        """
    from pathlib import Path
    from xun.agent.config import XunConfig
    from xun.agent.loop import Agent
    agent = Agent(XunConfig(), workdir=Path.cwd())
    agent.sync_project_instructions()
    print(agent.conversation.dumps())
    """,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "AGENTS.md cut: only its first 256 KB of 1,610,612,736 bytes are read" in done.stdout


def test_the_offline_server_refuses_parallel_huge_bodies(tmp_path):
    done = _run(
        tmp_path,
        """
    import http.client, threading
    from xun.offline.server import OfflineServer
    server = OfflineServer(port=0)
    server.start()
    host, port = server.base_url.split('//')[1].split('/')[0].split(':')
    body = b'{"model": "m", "messages": [{"role": "user", "content": "' + b'a' * (61 * 1024 * 1024) + b'"}]}'
    statuses = []
    def send():
        import select, socket
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b'POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n'
                         + b'Content-Length: %d\\r\\n\\r\\n' % len(body))
            if not select.select([sock], [], [], 1.0)[0]:  # no answer before the body: send it
                try:
                    sock.sendall(body)
                except OSError as exc:
                    statuses.append(type(exc).__name__)
                    return
            statuses.append(sock.recv(100).split(b' ')[1].decode())
    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads: thread.start()
    for thread in threads: thread.join()
    server.stop()
    print('statuses', sorted(map(str, statuses)))
    """,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "statuses ['413', '413', '413', '413', '413', '413']" in done.stdout, done.stdout
