"""`xun compact [ID]`: compact a saved session now (a summary, or with --toolcall a reclaim), and save it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from xun.cli.exits import EXIT_FAILED, EXIT_OK, LATEST, CommandError
from xun.cli.commands.common import (
    InterruptGuard,
    announce_provider,
    api_key_of,
    latest_session_id,
    open_model_session,
    session_id_argument,
    store_of,
)
from xun.cli.console import JsonPrinter, TextPrinter


def main(args: argparse.Namespace) -> int:
    if args.toolcall and args.focus is not None:
        raise CommandError("xun compact: --focus is for summaries; --toolcall only reclaims old tool results")
    wanted = session_id_argument(args)
    if not wanted:
        latest_session_id(store_of(args))  # a clear error when there is none
    printer: JsonPrinter | TextPrinter = JsonPrinter() if args.json else TextPrinter(compaction_out=sys.stdout)
    session = open_model_session(args, resume=wanted or LATEST, on_event=printer)
    with session:
        printer.add_secret(api_key_of(session))
        if not args.toolcall:
            announce_provider(session, args, sys.stderr)
        return asyncio.run(_compact(session, args, printer))


async def _compact(session: Any, args: argparse.Namespace, printer: JsonPrinter | TextPrinter) -> int:
    agent = session.agent
    settings = session.config.auto_compact
    if args.toolcall:
        work = agent.reclaim_tool_results(keep_max=args.keep or settings.toolcall_keep_max, trigger="manual")
    else:
        from xun.compact.summary import compact_conversation

        work = compact_conversation(
            agent, keep_recent=args.keep or settings.summary_keep_max, instructions=args.focus, trigger="manual"
        )
    with InterruptGuard() as guard:
        completed, result = await guard.run(work)
        if not completed:
            printer.note("interrupted; the session was not changed")
            return guard.exit_code or 130
        printer.finish()
        changed = result.reclaimed_count > 0 if args.toolcall else result.compacted
        ident = agent.conversation.conversation_id
        if changed:
            path = session.save()
            printer.note(f"session {ident} saved in {path}")
        if args.toolcall:
            return EXIT_OK
        failed = result.status is type(result).Status.SUMMARIZE_FAILED
        return EXIT_FAILED if failed else EXIT_OK
