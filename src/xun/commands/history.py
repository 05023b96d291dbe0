"""`xun history [ID]`: print the offload log (the originals a summary replaced) of a session."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from xun.cli import EXIT_OK
from xun.commands.common import latest_session_id, resolve_session_id, session_id_argument, store_of


def main(args: argparse.Namespace) -> int:
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
        from xun.offload import read_offload_log

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
