"""The `xun` command line: argument parsing, error reporting and exit codes.

Only the standard library and `xun.__version__` are imported at module level, so `xun --version` and
every `--help` stay fast; each command's module (`xun.cli.commands.<name>`) is imported when it runs, and
the SDK, pydantic and Textual come in with it.

Exit codes: 0 ok, 1 a failed turn (or another failure at run time), 2 bad usage or configuration,
130 interrupted (SIGINT), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from xun import __version__
from xun.base.arguments import DEFAULT_MAX_ITERATIONS, positive_int
from xun.base.valid_text import escape_control
from xun.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, LATEST, CommandError

COMMANDS = ("run", "sessions", "history", "compact", "config", "mcp", "trust", "serve", "offline-server")

EXIT_CODES_HELP = """\
exit status:
  0    success
  1    the turn failed (model error, or --max-iterations reached before a final answer),
       or a compaction failed, or a file could not be read or written
  2    bad usage or configuration (unknown option, invalid config file or --set value,
       unknown session id)
  130  interrupted with Ctrl+C (SIGINT); `xun run` saves the session first (143 for SIGTERM)
"""


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, usage_error_line(self.prog, message))


def usage_error_line(prog: str, message: str) -> str:
    """How every usage error reads: `xun run: <message> (see 'xun run --help')`."""
    return f"{prog}: {message} (see '{prog} --help')\n"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


def _add_global_options(parser: argparse.ArgumentParser, *, top: bool, set_dest: str = "sub_overrides") -> None:
    """The options every command takes. On subcommands their defaults are SUPPRESS, so an option given
    before the command (`xun --offline run ...`) is not overwritten by the subcommand's default."""

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    group = parser.add_argument_group("global options (accepted by every command)")
    group.add_argument(
        "--offline",
        action="store_true",
        default=default(False),
        help="use the offline demo model (scripted, not an LLM) even when an API key is set",
    )
    group.add_argument(
        "--base-url",
        metavar="URL",
        default=default(None),
        help="an OpenAI-compatible server, e.g. http://localhost:11434/v1 (provider.base_url)",
    )
    group.add_argument("--model", metavar="NAME", default=default(None), help="the model name (model.name)")
    group.add_argument(
        "--set",
        dest="overrides" if top else set_dest,
        action="append",
        metavar="KEY=VALUE",
        default=default([]),
        help="override a setting, e.g. --set auto_compact.token_threshold=50000 (repeatable; see `xun config show`)",
    )
    group.add_argument(
        "--workdir",
        metavar="DIR",
        default=default(None),
        help="the working directory: tools are confined to it, state lives in DIR/.xun (default: .)",
    )
    group.add_argument(
        "--resume",
        nargs="?",
        const=LATEST,
        default=default(None),
        metavar="ID",
        help="continue a saved session: the newest without ID, or ID (a unique prefix is enough)",
    )
    group.add_argument(
        "-c",
        "--continue",
        dest="resume",
        action="store_const",
        const=LATEST,
        default=default(None),
        help="continue the newest session (the same as --resume with no ID)",
    )
    group.add_argument(
        "--fork",
        action="store_true",
        default=default(False),
        help="needs --resume: continue a copy of the session under a new id (the original stays as it is)",
    )
    group.add_argument(
        "--read-only",
        action="store_true",
        default=default(False),
        help="needs --resume: open the session without saving it (even while another xun has it open)",
    )
    group.add_argument("--debug", action="store_true", default=default(False), help="show tracebacks of errors")


class _NotPlain(Exception):
    """The global options alone do not parse the command line: the whole parser will (and name the problem)."""


def _not_plain(message: str) -> NoReturn:
    raise _NotPlain(message)


def build_parser(commands: bool = True) -> argparse.ArgumentParser:
    """The command line's parser; without `commands`, only the global options (what plain `xun` takes: the
    commands' parsers are a tenth of the app's first frame spent on nothing, see `main`)."""
    parser = _Parser(
        prog="xun",
        formatter_class=_Formatter,
        description="xun: long LLM agent sessions with visible, recoverable context compaction.\n\n"
        "With no command, xun opens the full-screen app. With no API key configured it uses the offline\n"
        "demo model (a deterministic scripted model, not an LLM) on a local port, and says so.",
        epilog=EXIT_CODES_HELP
        + "\nexamples:\n  xun run 'list the files'\n  xun run --json 'read notes.txt' | jq .type\n"
        "  xun run --resume 'and now summarise them'\n  xun sessions\n  xun config set auto_compact.token_threshold "
        "100000",
    )
    parser.add_argument("--version", action="version", version=f"xun {__version__}")
    _add_global_options(parser, top=True)
    if not commands:
        parser.set_defaults(command=None)
        parser.error = _not_plain  # type: ignore[method-assign]
        return parser
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def command(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        sub = subparsers.add_parser(
            name, help=help_text, description=description, formatter_class=_Formatter, epilog=EXIT_CODES_HELP
        )
        return sub

    run = command(
        "run",
        "run one turn headless (text, or --json events)",
        "Send PROMPT to the agent and run one turn: model calls and tools until the model answers.\n"
        "The reply streams to standard output; tool calls, reasoning and compaction notes go to\n"
        "standard error. With --json, standard output carries exactly one JSON object per engine\n"
        "event (see the README's event table). The session is saved after the turn, and also when\n"
        "interrupted. write_file and run_command need confirmation: asked on the terminal when\n"
        "stdin is one (text mode), refused otherwise unless --yes or --set auto_confirm=true.",
    )
    run.add_argument(
        "prompt",
        nargs="?",
        metavar="PROMPT",
        help="what to ask; '-' or nothing reads it from standard input when that is not a terminal",
    )
    run.add_argument("--json", action="store_true", help="print every engine event as one JSON line on stdout")
    run.add_argument(
        "--max-iterations",
        type=positive_int,
        metavar="N",
        help=f"stop after N model calls (default {DEFAULT_MAX_ITERATIONS}); reaching it exits with status 1",
    )
    run.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="allow write_file and run_command without asking (the same as --set auto_confirm=true)",
    )
    run.add_argument(
        "--drop-unanswered",
        action="store_true",
        help="with --resume: when the session ends with a prompt that was never answered (a failed or "
        "interrupted turn), take it out before this turn; it is kept in the session file's "
        "kept_originals and printed on standard error, not lost",
    )
    _add_global_options(run, top=False)

    sessions = command(
        "sessions",
        "list the saved sessions, newest first",
        "List the sessions saved in this working directory (.xun/sessions/), newest first:\n"
        "id, last update, messages, last reported tokens, summaries and reclaimed tool results.\n"
        "Files that cannot be read are named on standard error with their problem.",
    )
    sessions.add_argument("--json", action="store_true", help="one JSON object per session")
    _add_global_options(sessions, top=False)

    history = command(
        "history",
        "print the offload log of a session, or search all history",
        "Print the offload log of session ID (the newest session when no ID is given): the\n"
        "originals of every message a summary replaced, one '## Offloaded at <time>' section\n"
        "per summary, from .xun/conversation_history/<id>.md.\n\n"
        "  xun history search QUERY   full-text search of everything compaction took out of the\n"
        "                             context, in every session (.xun/history.db)\n"
        "  xun history --reindex      rebuild that index from the offload logs and sessions",
    )
    history.add_argument("id", nargs="?", metavar="ID", help="the session (a unique prefix is enough), or 'search'")
    history.add_argument("query", nargs="*", metavar="QUERY", help="with 'search': the words to look for")
    history.add_argument("--json", action="store_true", help="one JSON object per offloaded section or search hit")
    history.add_argument("--path", action="store_true", help="print only the log's path")
    history.add_argument(
        "--limit", type=int, default=10, metavar="N", help="with 'search': at most N hits (default 10)"
    )
    history.add_argument("--session", metavar="ID", help="with 'search': only this session")
    history.add_argument("--reindex", action="store_true", help="rebuild the search index from the logs and sessions")
    _add_global_options(history, top=False)

    compact = command(
        "compact",
        "compact a saved session now",
        "Compact saved session ID (the newest when no ID is given) through the configured model\n"
        "(or the offline demo model), save it, and print what happened. Without --toolcall it\n"
        "writes a summary of all but the newest messages (tier 2); with --toolcall it only\n"
        "replaces old tool results by recoverable placeholders (tier 1).",
    )
    compact.add_argument("id", nargs="?", metavar="ID", help="the session (a unique prefix is enough)")
    compact.add_argument("--toolcall", action="store_true", help="reclaim old tool results only (no summary)")
    compact.add_argument("--focus", metavar="TEXT", help="what the summary must keep (not with --toolcall)")
    compact.add_argument(
        "--keep",
        type=positive_int,
        metavar="N",
        help="messages kept verbatim (default auto_compact.summary_keep_max), or with --toolcall "
        "tool results kept (default auto_compact.toolcall_keep_max)",
    )
    compact.add_argument("--json", action="store_true", help="print every engine event as one JSON line on stdout")
    _add_global_options(compact, top=False)

    config = command(
        "config",
        "show or change settings",
        "Show the merged settings with where each value comes from, or change one in a config\n"
        "file. Layers, later wins: defaults, the user file, the project file (.xun/config.toml),\n"
        "the environment (OPENAI_BASE_URL, XUN_MODEL), then --set. API keys are never stored:\n"
        "provider.api_key_env names the environment variable that holds the key.",
    )
    _add_global_options(config, top=False, set_dest="config_overrides")
    config.set_defaults(json=False, verbose=False)  # bare `xun config` shows the settings
    actions = config.add_subparsers(dest="config_action", metavar="ACTION", title="actions")
    show = actions.add_parser(
        "show",
        help="every setting, its value and its source",
        formatter_class=_Formatter,
        description="Every setting, its value and where it came from.",
    )
    show.add_argument("--json", action="store_true", help="one JSON object per setting")
    show.add_argument("-v", "--verbose", action="store_true", help="also describe each setting")
    _add_global_options(show, top=False)
    set_ = actions.add_parser(
        "set",
        help="write KEY = VALUE to the project (or --user) file",
        formatter_class=_Formatter,
        description="Write KEY = VALUE to the project file .xun/config.toml (or the user file\n"
        'with --user). VALUE is read as TOML when it parses (100, true, ["a"]), else as text.\n'
        "The file is validated before it is written, atomically.",
    )
    set_.add_argument("key", metavar="KEY", help="a dotted key, e.g. auto_compact.token_threshold")
    set_.add_argument("value", metavar="VALUE", help="the new value")
    set_.add_argument("--user", action="store_true", help="write the user file instead of the project file")
    _add_global_options(set_, top=False)
    unset = actions.add_parser(
        "unset",
        help="remove KEY from the project (or --user) file",
        formatter_class=_Formatter,
        description="Remove KEY from the project file (or the user file with --user).",
    )
    unset.add_argument("key", metavar="KEY")
    unset.add_argument("--user", action="store_true", help="change the user file instead of the project file")
    _add_global_options(unset, top=False)
    path = actions.add_parser(
        "path",
        help="where the config files are",
        formatter_class=_Formatter,
        description="Print where the user and project config files are.",
    )
    which = path.add_mutually_exclusive_group()
    which.add_argument("--user", action="store_true", help="print only the user file's path")
    which.add_argument("--project", action="store_true", help="print only the project file's path")
    _add_global_options(path, top=False)

    mcp = command(
        "mcp",
        "list the MCP servers, their state and tools",
        "Start the MCP servers of the user config ([mcp.servers.NAME]) and list each one: its state\n"
        "(ready with N tools, or failed with the reason), its tools as the model sees them\n"
        "(NAME__tool) and the tokens their definitions add to every request. Exits 1 when a\n"
        "server failed.",
    )
    _add_global_options(mcp, top=False, set_dest="mcp_overrides")
    mcp_actions = mcp.add_subparsers(dest="mcp_action", metavar="ACTION", title="actions", required=True)
    mcp_list = mcp_actions.add_parser(
        "list",
        help="servers, state, tools and their tokens",
        formatter_class=_Formatter,
        description="Start every enabled server, list it, and stop it again.",
    )
    mcp_list.add_argument("--json", action="store_true", help="one JSON object per server")
    _add_global_options(mcp_list, top=False)
    trust = command(
        "trust",
        "trust this folder's .xun/config.toml (provider, prompt files, key bindings)",
        "Until you trust a folder, its .xun/config.toml (which may come with someone else's checkout)\n"
        "cannot set the provider (where requests and your API key go), compression.prompt_files or\n"
        "ui.keymap; xun ignores those keys and says so. `xun trust` remembers the working directory\n"
        "(its real path, not its subfolders) in trusted_folders.toml beside the user config.",
    )
    trust.add_argument("--remove", action="store_true", help="stop trusting the folder")
    trust.add_argument("--list", action="store_true", help="print the trusted folders")
    _add_global_options(trust, top=False)

    serve = command(
        "serve",
        "serve the full-screen app in a web browser (textual-serve)",
        "Serve the full-screen app over HTTP on loopback and print its URL: every browser tab that\n"
        "opens it runs its own app, with the global options given here. Ctrl+C stops the server\n"
        "(the apps quit and save their sessions first). The URL carries a secret token, new every run:\n"
        "only the browser tab that opened it can use the app (its page keeps the token; no cookie).\n"
        "The app runs commands and writes files, so a --host that is not a loopback address needs\n"
        "--public too.",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", metavar="HOST", help="the address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=positive_int, default=8000, metavar="PORT", help="the port (default 8000)")
    serve.add_argument("--public", action="store_true", help="allow a --host that other machines can reach")
    serve.add_argument(
        "--max-sessions",
        type=positive_int,
        default=4,
        metavar="N",
        help="browser sessions (app processes) at once; more are refused (default 4)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="close a session after this long without a key, click or resize (default 3600)",
    )
    serve.add_argument("--app-process", action="store_true", help=argparse.SUPPRESS)  # what each tab runs
    _add_global_options(serve, top=False)

    # The offline server parses its own options (`xun offline-server --help`), so they pass through.
    subparsers.add_parser(
        "offline-server",
        add_help=False,
        help="serve the offline demo model (deterministic, scripted, not an LLM) on loopback",
    )
    return parser


def _prepare_argv(argv: Sequence[str]) -> list[str]:
    """`--resume` directly before a command name takes no id: `xun --resume run ...` means the newest."""
    out = list(argv)
    for index, token in enumerate(out[:-1]):
        if token in ("--", "offline-server"):
            break
        if token == "--resume" and out[index + 1] in COMMANDS:
            out[index] = "--resume="
    return out


def _merge_global_options(args: argparse.Namespace) -> argparse.Namespace:
    """`--set` given at every level, in order: `xun --set a=1 config --set b=2 show --set c=3`."""
    merged = list(args.overrides)
    for name in ("config_overrides", "mcp_overrides", "sub_overrides"):
        merged += list(getattr(args, name, None) or [])
        if hasattr(args, name):
            delattr(args, name)
    args.overrides = merged
    return args


def _subparser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command that ran, for its one-line usage errors."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command in action.choices:
            sub = action.choices[args.command]
            action_name = getattr(args, "config_action", None) or getattr(args, "mcp_action", None)
            if action_name:
                for inner in sub._actions:
                    if isinstance(inner, argparse._SubParsersAction) and action_name in inner.choices:
                        return inner.choices[action_name]
            return sub
    return parser


def _without_resume(args: argparse.Namespace) -> str | None:
    """`--fork` or `--read-only` with no `--resume` would open a new session (one never saved, for
    `--read-only`) without a word: the usage error that says so, or None."""
    if args.resume is not None:
        return None
    if args.fork:
        return "--fork needs --resume [ID]: it continues a copy of a saved session"
    if args.read_only:
        return "--read-only needs --resume [ID]: it opens a saved session without saving it"
    return None


NO_PYDANTIC_PLUGINS = ("PYDANTIC_DISABLE_PLUGINS", "__all__")
"""The environment setting `xun` starts with, unless it is set already (see `main`)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run `xun` with `argv` and return its exit status.

    Called with no `argv` it is the process's entry point (`xun`, `python -m xun`): after a command
    other than the full-screen app and `offline-server` it flushes the output and ends the process
    with `os._exit`, skipping the interpreter's teardown of the SDK's thousands of classes (about
    0.2 s of every `xun run`). Everything the commands write is already flushed and fsynced by then.
    """
    as_program = argv is None
    if as_program:  # xun uses no pydantic plugins; looking for them reads every installed package's
        # metadata when the settings are first validated (tens of ms of each start). An explicit value wins.
        os.environ.setdefault(*NO_PYDANTIC_PLUGINS)
    argv = _prepare_argv(sys.argv[1:] if argv is None else argv)
    args, rest = None, []
    try:
        if not {*COMMANDS, "-h", "--help"} & set(argv):  # plain `xun` (the app): the global options alone
            with contextlib.suppress(_NotPlain):
                parser = build_parser(commands=False)
                args, rest = parser.parse_known_args(argv)
        if args is None or rest:  # a command, or something the whole parser names the problem of
            parser = build_parser()
            args, rest = parser.parse_known_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return _exit_code(exc)
    if args.command == "offline-server":
        from xun.offline import main as offline_server_main  # imported here so `xun --version` stays light

        return offline_server_main(rest)
    if rest:
        try:
            _subparser(parser, args).error(f"unrecognized arguments: {' '.join(rest)}")
        except SystemExit as exc:
            return _exit_code(exc)
    args = _merge_global_options(args)
    misplaced = _without_resume(args)
    if misplaced:
        sys.stderr.write(usage_error_line(_subparser(parser, args).prog, misplaced))
        return EXIT_USAGE
    try:
        code = _dispatch(args)
    except KeyboardInterrupt:
        _report("interrupted", args.debug)
        code = EXIT_INTERRUPTED
    except SystemExit as exc:
        code = _exit_code(exc)
    except BrokenPipeError:  # the reader closed the pipe early (`xun sessions --json | head`): not an error
        code = EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every error becomes one line (a traceback with --debug)
        code, message = _describe_error(exc)
        _report(message, args.debug)
    _flush_stdout()
    if as_program and args.command is not None:
        _end_process(code)
    return code


def _dispatch(args: argparse.Namespace) -> int:
    if args.workdir is not None:
        folder = os.path.abspath(os.path.expanduser(args.workdir))
        if not os.path.isdir(folder):
            raise CommandError(f"--workdir {args.workdir}: not a directory")
        args.workdir = folder
    name = args.command or "tui"
    if name == "config":
        from xun.cli.commands import config as module
    elif name == "run":
        from xun.cli.commands import run as module  # type: ignore[no-redef]
    elif name == "sessions":
        from xun.cli.commands import sessions as module  # type: ignore[no-redef]
    elif name == "history":
        from xun.cli.commands import history as module  # type: ignore[no-redef]
    elif name == "compact":
        from xun.cli.commands import compact as module  # type: ignore[no-redef]
    elif name == "mcp":
        from xun.cli.commands import mcp as module  # type: ignore[no-redef]
    elif name == "serve":
        from xun.cli.commands import serve as module  # type: ignore[no-redef]
    elif name == "trust":
        from xun.cli.commands import trust as module  # type: ignore[no-redef]
    else:
        from xun.cli.commands import tui as module  # type: ignore[no-redef]
    return int(module.main(args))


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return EXIT_OK
    if isinstance(exc.code, int):
        return exc.code
    print(escape_control(str(exc.code)), file=sys.stderr)
    return EXIT_FAILED


def _describe_error(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one-line message for an error that reached the top.

    Modules that raise configuration errors are looked up in `sys.modules` instead of imported: if
    one was never imported, the error cannot be one of its classes (and `--version` stays light)."""
    if isinstance(exc, CommandError):
        return exc.code, str(exc)
    config = sys.modules.get("xun.agent.config")
    if config is not None and isinstance(exc, config.ConfigError):
        lines = [str(problem) for problem in exc.problems] or [str(exc)]
        return EXIT_USAGE, "\nxun: ".join(f"configuration error: {line}" for line in lines)
    sessions = sys.modules.get("xun.context.sessions")
    if sessions is not None and isinstance(exc, sessions.NoSessionToResume):
        return EXIT_USAGE, str(exc)
    errors = sys.modules.get("xun.base.errors")
    if errors is not None and isinstance(exc, errors.SessionFormatError):
        return EXIT_FAILED, f"cannot load the session: {exc}"
    if errors is not None and isinstance(exc, errors.SessionLocked):
        return EXIT_FAILED, str(exc)
    recall = sys.modules.get("xun.context.recall")
    if recall is not None and isinstance(exc, recall.RecallError):
        return EXIT_FAILED, str(exc)
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return EXIT_FAILED, f"{exc.strerror or exc}{where}"
    detail = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {detail[0]}" if detail else type(exc).__name__
    return EXIT_FAILED, f"unexpected error: {text} (run with --debug for the traceback)"


def _report(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc(file=sys.stderr)
    prefix = "" if message.startswith("xun ") else "xun: "  # "xun run: …" names its command already
    print(f"{prefix}{escape_control(message)}", file=sys.stderr, flush=True)  # errors quote files and keys


def _end_process(code: int) -> NoReturn:
    """Exit now, without the interpreter's teardown (see `main`)."""
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _flush_stdout() -> None:
    """A reader that closed the pipe early (`xun history | head`) is not an error worth a traceback."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
