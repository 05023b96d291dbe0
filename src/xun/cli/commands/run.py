"""`xun run PROMPT`: one turn headless, streamed as text or as JSON events; the session is saved after."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from xun.base.errors import SessionFormatError
from xun.cli.exits import EXIT_FAILED, EXIT_OK, LATEST, CommandError
from xun.cli.commands.common import InterruptGuard, announce_provider, api_key_of, open_model_session
from xun.cli.console import JsonPrinter, TerminalConfirm, TextPrinter

TURN_EXIT = {"ok": EXIT_OK, "max_iterations": EXIT_FAILED, "error": EXIT_FAILED}


def _is_session_id(text: str) -> bool:
    from xun.context.sessions import check_session_id

    try:
        check_session_id(text)
    except ValueError:
        return False
    return True


def read_prompt(args: argparse.Namespace) -> tuple[str, bool]:
    """The prompt, and whether it came from standard input."""
    prompt = args.prompt
    if prompt is None and args.resume not in (None, LATEST) and not _is_session_id(args.resume):
        # `xun run --resume "what next"`: the option took the prompt as its id; it cannot be one.
        prompt, args.resume = args.resume, LATEST
    hint = ""
    if args.resume not in (None, LATEST):
        hint = f" (--resume took {args.resume!r} as a session id; put the prompt first, or use --continue)"
    from_stdin = False
    if prompt is None or prompt == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise CommandError(f"xun run: a PROMPT is required, as an argument or on standard input{hint}")
        prompt = sys.stdin.read()
        from_stdin = True
    if not prompt.strip():
        raise CommandError(f"xun run: the prompt is empty{hint if from_stdin else ''}")
    return prompt.rstrip("\n") if from_stdin else prompt, from_stdin


class _Turn:
    """Receives every event: prints it, and remembers what the command needs after the turn."""

    def __init__(self, printer: JsonPrinter | TextPrinter, refusal_hint: str | None) -> None:
        self.printer = printer
        self.refusal_hint = refusal_hint
        self.finished: Any = None

    def __call__(self, event: Any) -> None:
        self.printer(event)
        if event.type == "turn_finished":
            self.finished = event
        elif event.type == "tool_call_finished" and event.denied and self.refusal_hint is not None:
            from xun.base.events import Warning

            self.printer(Warning(f"{event.name} was refused: {self.refusal_hint}"))


def main(args: argparse.Namespace) -> int:
    prompt, from_stdin = read_prompt(args)
    interactive = not args.json and not from_stdin and sys.stdin is not None and sys.stdin.isatty()
    printer: JsonPrinter | TextPrinter = JsonPrinter() if args.json else TextPrinter()
    extra = ["auto_confirm=true"] if args.yes else []
    confirm = TerminalConfirm(printer) if interactive and isinstance(printer, TextPrinter) else None
    why = "--json cannot ask" if args.json else "standard input is not a terminal, so nobody can be asked"
    turn = _Turn(
        printer,
        None
        if interactive
        else f"it needs confirmation and {why}; allow write_file, run_command and MCP tools with --yes "
        "(or --set auto_confirm=true)",
    )
    if args.drop_unanswered and args.resume is None:
        raise CommandError("xun run: --drop-unanswered goes with --resume (a new session has no unanswered prompt)")
    session = open_model_session(args, resume=args.resume, extra_overrides=extra, on_event=turn, confirm=confirm)
    with session:
        printer.add_secret(api_key_of(session))
        announce_provider(session, args, sys.stderr)
        if args.drop_unanswered:
            _drop_unanswered(session, printer)
        return asyncio.run(_run_turn(session, prompt, args, printer, turn))


def _drop_unanswered(session: Any, printer: JsonPrinter | TextPrinter) -> None:
    """Take a never-answered prompt off the end of the session; it goes to the kept originals."""
    import time

    conversation = session.agent.conversation
    popped = conversation.pop_last_message_if_user()
    if popped is None:
        printer.note("--drop-unanswered: the session does not end with an unanswered prompt; nothing dropped")
        return
    conversation.kept_originals.append(
        {"time": time.time(), "reason": "unanswered prompt dropped by --drop-unanswered", "messages": [popped]}
    )
    printer.note(
        f"dropped the unanswered prompt ({len(popped.text):,} characters, kept in the session file): "
        f"{popped.text[:200]}"
    )


async def _run_turn(
    session: Any, prompt: str, args: argparse.Namespace, printer: JsonPrinter | TextPrinter, turn: _Turn
) -> int:
    def still_stopping() -> None:
        printer.note("stopping: the session is being saved, please wait")

    with InterruptGuard(on_repeat=still_stopping) as guard:
        try:
            return await _turn_and_save(session, prompt, args, printer, turn, guard)
        finally:  # also after SIGINT/SIGTERM: no server process outlives the command
            if session.mcp:
                await session.mcp.aclose()


async def _turn_and_save(
    session: Any,
    prompt: str,
    args: argparse.Namespace,
    printer: JsonPrinter | TextPrinter,
    turn: _Turn,
    guard: InterruptGuard,
) -> int:
    if session.mcp:  # a server that fails is reported (an mcp_server event) and the turn goes on without it
        await guard.run(session.mcp.start())
    if guard.signals:  # stopped while the servers started: the prompt is kept for the next --resume turn
        completed = False
        session.agent.conversation.add_user_message(prompt)
    else:
        completed, _ = await guard.run(session.agent.run(prompt, max_iterations=args.max_iterations))
    finished = turn.finished
    if not completed and finished is not None and finished.restored_prompt:
        # The agent takes an unanswered prompt back for a front end to offer again; here nobody
        # could, so the saved session keeps it (the next `--resume` turn comes after it).
        session.agent.conversation.add_user_message(finished.restored_prompt)
    printer.finish()
    try:
        path = session.save()
    except (OSError, SessionFormatError) as exc:
        printer.note(f"could not save the session: {exc}")
        return guard.exit_code or EXIT_FAILED
    ident = session.agent.conversation.conversation_id
    if path is None:
        printer.note(f"session {ident} was opened --read-only: this turn was not saved")
        return guard.exit_code or (TURN_EXIT.get(finished.status, EXIT_FAILED) if completed and finished else 130)
    if not completed:
        printer.note(f"interrupted; session {ident} saved in {path}")
        return guard.exit_code or 130
    printer.note(f"session {ident} saved; continue it with: {session.resume_command('xun run')} PROMPT")
    status = finished.status if finished is not None else "error"
    return TURN_EXIT.get(status, EXIT_FAILED)
