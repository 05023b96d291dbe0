"""`xun history [ID]`: print the offload log (the originals a summary replaced) of a session;
`xun history search QUERY`: search the recall index of every session; `--reindex`: rebuild it."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from xun.cli.exits import EXIT_OK, EXIT_USAGE
from xun.cli.commands.common import latest_session_id, resolve_session_id, session_id_argument, store_of


def main(args: argparse.Namespace) -> int:
    if args.reindex:
        return reindex(args)
    if args.id == "search":
        return search(args)
    if args.query:
        print(f"xun: unexpected words after the session id: {' '.join(args.query)} (to search: xun history search WORDS)",
              file=sys.stderr)
        return EXIT_USAGE
    store = store_of(args)
    wanted = session_id_argument(args)
    ident = resolve_session_id(store, wanted, with_logs=True) if wanted else latest_session_id(store)
    path = store.offload_dir / f"{ident}.md"
    if args.path:
        print(path)
        return EXIT_OK
    if not path.is_file():
        print(f"xun: session {ident} has no offload log yet (nothing was summarised); it would be {path}", file=sys.stderr)
        return EXIT_OK
    if args.json:
        from xun.context.offload import read_offload_log

        for section in read_offload_log(path):
            record = {
                "offloaded_at": section.when,
                "conversation_id": section.conversation_id,
                "entries": [{"speaker": e.speaker, "detail": e.detail, "text": e.text} for e in section.entries],
            }
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        return EXIT_OK
    sys.stdout.flush()
    with open(path, "rb") as log:
        shutil.copyfileobj(log, sys.stdout.buffer)
    return EXIT_OK


def search(args: argparse.Namespace) -> int:
    from xun.context.recall import HistoryIndex

    query = " ".join(args.query).strip()
    if not query:
        print("xun: history search needs words to look for, e.g. xun history search parse error", file=sys.stderr)
        return EXIT_USAGE
    if args.limit < 1:
        print("xun: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    store = store_of(args)
    session = resolve_session_id(store, args.session, with_logs=True) if args.session else None
    index = HistoryIndex(store.workdir)
    hits = index.search(query, limit=args.limit, session=session, highlight=("", "") if args.json else ("«", "»"))
    for hit in hits:
        if args.json:
            record = {"type": "history_hit", "id": hit.id, "session": hit.session, "time": hit.when, "role": hit.role, "source": hit.source,
                      "tool": hit.tool, "tool_call_id": hit.tool_call_id, "snippet": hit.snippet, "rank": hit.rank}
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            where = f"{hit.role}" + (f" · {hit.tool}" if hit.tool else "")
            print(f"#{hit.id}  {hit.when}  {hit.session[:12]}  {where}\n    {' '.join(hit.snippet.split())}")
    for warning in index.take_warnings():
        print(f"xun: warning: {warning}", file=sys.stderr)
    if not hits and not args.json:
        print(f"no match for {query!r}", file=sys.stderr)
    return EXIT_OK


def reindex(args: argparse.Namespace) -> int:
    from xun.context.recall import rebuild

    store = store_of(args)
    report = rebuild(store.workdir)
    for problem in report.problems:
        print(f"xun: warning: {problem}", file=sys.stderr)
    print(f"reindexed {report.entries} entries from {report.logs} offload logs and {report.sessions} sessions "
          f"in {report.seconds:.2f}s")
    return EXIT_OK
