"""`xun sessions`: the saved sessions of this working directory, newest first."""

from __future__ import annotations

import argparse
import json
import sys
import time

from xun.cli.console import Visible
from xun.cli.exits import EXIT_OK
from xun.cli.commands.common import store_of

COLUMNS = ("ID", "UPDATED", "MESSAGES", "TOKENS", "SUMMARIES", "RECLAIMED", "OPEN", "TITLE")
"""OPEN marks a session another xun holds (it alone may save it), as the app's /sessions does."""


def main(args: argparse.Namespace) -> int:
    store = store_of(args)
    infos, unreadable = store.scan()
    held = {info.conversation_id: store.held_elsewhere(info.conversation_id) for info in infos}
    out, err = Visible(sys.stdout, json_lines=bool(args.json)), Visible(sys.stderr)  # titles are what was typed or read
    if args.json:
        for info in infos:
            out.write(
                json.dumps(
                    {
                        "id": info.conversation_id,
                        "path": str(info.path),
                        "updated_at": info.updated_at,
                        "messages": info.messages,
                        "tokens": info.tokens,
                        "summaries": info.summaries,
                        "reclaimed": info.reclaimed,
                        "title": info.title,
                        "open_elsewhere": held[info.conversation_id] is not None,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    elif infos or unreadable:
        rows = [COLUMNS] + [
            (
                info.conversation_id,
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.updated_at)),
                f"{info.messages:,}",
                f"{info.tokens:,}" if info.tokens is not None else "-",
                f"{info.summaries:,}",
                f"{info.reclaimed:,}",
                "open" if held[info.conversation_id] is not None else "",
                info.title[:60],
            )
            for info in infos
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        widths[0] = max([widths[0], *(len(path.stem) for path, _ in unreadable)])
        for row in rows:
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            cells += [cell.rjust(width) for cell, width in zip(row[2:-2], widths[2:-2], strict=True)]
            cells.append(row[-2].ljust(widths[-2]))
            cells.append(row[-1])
            out.write("  ".join(cells).rstrip() + "\n")
        for path, problem in unreadable:  # listed, not left out: the file is there, and may matter
            out.write(f"{path.stem.ljust(widths[0])}  cannot read: {problem} ({path})\n")
    else:
        print(f"xun: no saved sessions in {store.root}", file=err)
    if args.json:  # (stdout holds only sessions there)
        for path, problem in unreadable:
            print(f"xun: cannot read session file {path}: {problem}", file=err)
    return EXIT_OK
