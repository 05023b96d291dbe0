"""`xun history [ID]`: print the offload log (the originals a summary replaced) of a session;
`xun history search QUERY`: search the recall index of every session; `--reindex`: rebuild it."""

from __future__ import annotations

import argparse
import json
import sys

from xun.cli.console import Visible
from xun.cli.exits import EXIT_OK, EXIT_USAGE
from xun.cli.commands.common import latest_session_id, resolve_session_id, session_id_argument, store_of


def main(args: argparse.Namespace) -> int:
    out, err = Visible(sys.stdout, json_lines=bool(args.json)), Visible(sys.stderr)  # what files say: no escape codes
    if args.reindex:
        return reindex(args, out, err)
    if args.id == "search":
        return search(args, out, err)
    if args.query:
        print(
            f"xun: unexpected words after the session id: {' '.join(args.query)} (to search: xun history search WORDS)",
            file=err,
        )
        return EXIT_USAGE
    store = store_of(args)
    wanted = session_id_argument(args)
    ident = resolve_session_id(store, wanted, with_logs=True) if wanted else latest_session_id(store)
    path = store.offload_dir / f"{ident}.md"
    if args.path:
        print(path, file=out)
        return EXIT_OK
    if not path.is_file():
        print(f"xun: session {ident} has no offload log yet (nothing was summarised); it would be {path}", file=err)
        return EXIT_OK
    if args.json:
        from xun.context.offload import read_offload_log

        for section in read_offload_log(path):
            record = {
                "offloaded_at": section.when,
                "conversation_id": section.conversation_id,
                "entries": [{"speaker": e.speaker, "detail": e.detail, "text": e.text} for e in section.entries],
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return EXIT_OK
    with open(path, "rb") as log:  # as written, but a byte that is not UTF-8 shows as \xff, a control as \x1b
        for line in log:
            out.write(line.decode("utf-8", "surrogateescape"))
    return EXIT_OK


def search(args: argparse.Namespace, out: Visible, err: Visible) -> int:
    from xun.context.recall import RecallIndex

    query = " ".join(args.query).strip()
    if not query:
        print("xun: history search needs words to look for, e.g. xun history search parse error", file=err)
        return EXIT_USAGE
    if args.limit < 1:
        print("xun: --limit must be at least 1", file=err)
        return EXIT_USAGE
    store = store_of(args)
    session = resolve_session_id(store, args.session, with_logs=True) if args.session else None
    index = RecallIndex(store.workdir)
    hits = index.search(query, limit=args.limit, session=session, highlight=("", "") if args.json else ("«", "»"))
    for hit in hits:
        if args.json:
            record = {
                "type": "history_hit",
                "id": hit.id,
                "session": hit.session,
                "time": hit.when,
                "role": hit.role,
                "source": hit.source,
                "tool": hit.tool,
                "tool_call_id": hit.tool_call_id,
                "snippet": hit.snippet,
                "rank": hit.rank,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            where = f"{hit.role}" + (f" · {hit.tool}" if hit.tool else "")
            print(f"#{hit.id}  {hit.when}  {hit.session[:12]}  {where}\n    {' '.join(hit.snippet.split())}", file=out)
    for warning in index.take_warnings():
        print(f"xun: warning: {warning}", file=err)
    if not hits and not args.json:
        print(f"no match for {query!r}", file=err)
    return EXIT_OK


def reindex(args: argparse.Namespace, out: Visible, err: Visible) -> int:
    from xun.context.recall import rebuild

    store = store_of(args)
    report = rebuild(store.workdir)
    for problem in report.problems:
        print(f"xun: warning: {problem}", file=err)
    print(
        f"reindexed {report.entries} entries from {report.logs} offload logs and {report.sessions} sessions "
        f"in {report.seconds:.2f}s",
        file=out,
    )
    return EXIT_OK
