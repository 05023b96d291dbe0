"""Benchmark of the offline server (a script, not a test: `python3 tests/benchmarks/bench_offline.py`).

It starts `python -m xun.offline` as its own process, so client and server do not share a GIL and the
server's memory can be read from /proc, then prints one JSON line per figure:

* requests per second for short non-streamed prompts, from several client threads on keep-alive
  connections (raw `http.client`, then the official `openai` client), and for short streamed prompts;
* a 10,000-token streamed reply: time to the first content chunk, total time, and the growth of the
  server process's peak resident memory (VmHWM) while it streamed; the same for 1,000,000 tokens, which
  shows the growth does not scale with the reply (it is generated and written piece by piece).

Options: --threads N (default 4), --requests N (short-prompt requests per client kind, default 3000).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time

SHORT_BODY = json.dumps({"model": "xun-offline", "messages": [{"role": "user", "content": "hello"}]}).encode()
SHORT_STREAM_BODY = json.dumps(
    {
        "model": "xun-offline",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
).encode()


def emit(figure: str, **values: object) -> None:
    print(json.dumps({"figure": figure, **values}), flush=True)


def start_server() -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "xun.offline", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = process.stdout.readline()
    if not line.startswith("listening on http://127.0.0.1:"):
        process.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
    return process, port


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in KiB."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, amount, _ = line.split()
                values[name.rstrip(":")] = int(amount)
    return values


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0, needs write access to /proc/PID/clear_refs)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def post_loop(port: int, body: bytes, count: int, streamed: bool, errors: list[str]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for _ in range(count):
            connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
            if response.status != 200 or (streamed and not payload.endswith(b"data: [DONE]\n\n")):
                errors.append(f"status {response.status}")
    finally:
        connection.close()


def requests_per_second_raw(port: int, threads: int, total: int, streamed: bool) -> None:
    per_thread = total // threads
    errors: list[str] = []
    body = SHORT_STREAM_BODY if streamed else SHORT_BODY
    workers = [
        threading.Thread(target=post_loop, args=(port, body, per_thread, streamed, errors)) for _ in range(threads)
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    done = per_thread * threads
    emit(
        "short_prompt_requests_per_second",
        client="http.client keep-alive",
        streamed=streamed,
        threads=threads,
        requests=done,
        errors=len(errors),
        seconds=round(elapsed, 3),
        value=round(done / elapsed, 1),
    )


def requests_per_second_sdk(port: int, threads: int, total: int) -> None:
    import openai

    per_thread = total // threads
    errors: list[str] = []

    def loop() -> None:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="offline", max_retries=0)
        for _ in range(per_thread):
            reply = client.chat.completions.create(model="xun-offline", messages=[{"role": "user", "content": "hello"}])
            if reply.choices[0].finish_reason != "stop":
                errors.append("bad reply")

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    done = per_thread * threads
    emit(
        "short_prompt_requests_per_second",
        client=f"openai {openai.__version__} (sync)",
        streamed=False,
        threads=threads,
        requests=done,
        errors=len(errors),
        seconds=round(elapsed, 3),
        value=round(done / elapsed, 1),
    )


def long_stream(port: int, pid: int, tokens: int) -> None:
    body = json.dumps(
        {
            "model": "xun-offline",
            "messages": [{"role": "user", "content": f"write {tokens} tokens"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    peak_reset = reset_peak(pid)
    before = memory_kib(pid)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    first_content = None
    received_bytes = 0
    events = 0
    usage = None
    content_chars = 0
    finish_reason = None
    while True:
        line = response.readline()
        if not line:
            break
        received_bytes += len(line)
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        events += 1
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk["choices"]:
            text = choice["delta"].get("content")
            if text:
                content_chars += len(text)
                if first_content is None:
                    first_content = time.perf_counter() - started
            finish_reason = choice.get("finish_reason") or finish_reason
    total = time.perf_counter() - started
    response.read()
    connection.close()
    after = memory_kib(pid)
    emit(
        "long_stream",
        tokens_requested=tokens,
        completion_tokens=(usage or {}).get("completion_tokens"),
        finish_reason=finish_reason,
        content_chars=content_chars,
        sse_events=events,
        sse_bytes=received_bytes,
        first_content_chunk_ms=round((first_content or 0) * 1000, 2),
        total_seconds=round(total, 3),
        server_rss_kib_before=before["VmRSS"],
        server_peak_rss_kib_before=before["VmHWM"],
        server_peak_rss_kib_after=after["VmHWM"],
        server_peak_rss_growth_kib=after["VmHWM"] - before["VmHWM"],
        peak_reset_before=peak_reset,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    process, port = start_server()
    try:
        post_loop(port, SHORT_BODY, 200, False, [])  # warm up code paths and allocator
        post_loop(port, SHORT_STREAM_BODY, 50, True, [])
        emit("environment", python=sys.version.split()[0], cpus=os.cpu_count(), server_pid=process.pid)
        requests_per_second_raw(port, args.threads, args.requests, streamed=False)
        requests_per_second_raw(port, args.threads, args.requests, streamed=True)
        requests_per_second_sdk(port, args.threads, max(args.threads, args.requests // 3))
        long_stream(port, process.pid, 1000)  # warm-up of the long path
        long_stream(port, process.pid, 10_000)
        long_stream(port, process.pid, 1_000_000)
    finally:
        process.terminate()
        process.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
