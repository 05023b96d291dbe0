"""`xun offline-server` / `python -m xun.offline`: run the offline server until Ctrl+C."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from xun.base.arguments import positive_int
from xun.offline.faults import FAULT_KINDS
from xun.offline.profiles import PROFILES
from xun.offline.server import REASONING_FIELDS, OfflineServer

FAULTS_ENV = "XUN_OFFLINE_FAULTS"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def build_parser(prog: str = "xun offline-server") -> argparse.ArgumentParser:
    kinds = ", ".join(FAULT_KINDS)
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Serve xun-offline, a deterministic scripted demo model (not an LLM), over the OpenAI "
            "chat-completions protocol on loopback. Point any OpenAI client at it with "
            "OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 (any API key)."
        ),
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1; others are refused)"
    )
    parser.add_argument("--port", type=_port, default=0, help="port (default 0: any free port)")
    parser.add_argument(
        "--context-window",
        type=positive_int,
        default=None,
        metavar="N",
        help="answer HTTP 400 context_length_exceeded above N prompt tokens",
    )
    parser.add_argument(
        "--faults",
        default=os.environ.get(FAULTS_ENV) or None,
        metavar="SPEC",
        help=f"inject faults, e.g. 500@2,disconnect@4,slow@6-8 (default ${FAULTS_ENV}); kinds: {kinds}",
    )
    parser.add_argument(
        "--reasoning", choices=REASONING_FIELDS, default=None, help="also stream scripted reasoning in this delta field"
    )
    parser.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        default="openai",
        help="behave like this kind of server at the edges: how an overflow is refused, usage in streams, "
        "where the window and a tokenizer are (default openai)",
    )
    parser.add_argument(
        "--cache-ttl",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="simulate a prompt prefix cache whose entries live SECONDS after their last use, and report the "
        "cached tokens in the profile's shape (default: no cache, no cache figures)",
    )
    parser.add_argument(
        "--useless-summaries",
        action="store_true",
        help="answer every compaction summary request with empty sections (a summarizer that writes nothing useful)",
    )
    parser.add_argument(
        "--tokens-per-second",
        type=_positive_float,
        default=None,
        metavar="N",
        help="pace streamed replies (default: unpaced)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each request line to stderr (never headers)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground; exit 0 on Ctrl+C or SIGTERM, 2 on a bad option."""
    parser = build_parser()
    try:
        return _run(parser, parser.parse_args(argv))
    except SystemExit as exc:  # argparse's --help and usage errors: report the status instead of raising
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        server = OfflineServer(
            host=args.host,
            port=args.port,
            context_window=args.context_window,
            faults=args.faults,
            reasoning=args.reasoning,
            tokens_per_second=args.tokens_per_second,
            profile=args.profile,
            cache_ttl=args.cache_ttl,
            useless_summaries=args.useless_summaries,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(message)s", stream=sys.stderr)
    try:
        server.start()
    except OSError as exc:
        print(f"xun offline-server: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1

    stop_requested = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop_requested.set()

    previous_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous_handlers[signum] = signal.signal(signum, request_stop)
    try:
        print(f"listening on {server.base_url}", flush=True)
        print(
            "xun-offline: a deterministic scripted demo model, not an LLM. Ctrl+C stops it.",
            file=sys.stderr,
            flush=True,
        )
        while not stop_requested.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
    return 0
