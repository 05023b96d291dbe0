"""The slash commands: what the prompt completes, what the help screen lists, and how a line parses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    """The command word with its slash, e.g. `/compact`."""
    usage: str
    """How it is typed, e.g. `/compact [focus]`."""
    help: str
    completion: str = ""
    """What Tab inserts (defaults to the name and a space when the command takes text)."""

    @property
    def inserts(self) -> str:
        return self.completion or self.name


SLASH_COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand(
        "/compact", "/compact [focus]", "summarise older turns now (F5); the focus says what must survive", "/compact "
    ),
    SlashCommand("/compact", "/compact toolcall", "reclaim old tool results now (F6)", "/compact toolcall"),
    SlashCommand(
        "/compact",
        "/compact preview",
        "what a summary and a reclaim would do now, with buttons to run them (F7)",
        "/compact preview",
    ),
    SlashCommand(
        "/offload",
        "/offload [focus]",
        "the same as /compact: the summarised turns go to the offload log, a file on disk (F9 searches it)",
        "/offload ",
    ),
    SlashCommand("/history", "/history", "the conversation as the model sees it"),
    SlashCommand(
        "/recall",
        "/recall [query]",
        "search what compaction took out of the context; restore a result (F9)",
        "/recall ",
    ),
    SlashCommand(
        "/render",
        "/render FILE",
        "export the whole transcript, summarised turns included (.html, or .md / .markdown)",
        "/render ",
    ),
    SlashCommand("/retry", "/retry", "send the last prompt again, dropping the reply"),
    SlashCommand(
        "/revise", "/revise [text]", "take the last prompt back to edit it, or replace it with text", "/revise "
    ),
    SlashCommand("/clear", "/clear", "start over in this session (the compaction log stays)"),
    SlashCommand(
        "/auto",
        "/auto [auto|ask|off]",
        "automatic summaries for this session: on, asked first, or off (none: say which)",
        "/auto ",
    ),
    SlashCommand("/tokens", "/tokens", "token figures: reported, estimated, threshold, window"),
    SlashCommand(
        "/context", "/context", "what fills the context, part by part, and its largest messages (Enter on the gauge)"
    ),
    SlashCommand("/mcp", "/mcp", "MCP servers: state, tools, what their definitions cost; r restarts one"),
    SlashCommand("/sessions", "/sessions", "switch to another saved session"),
    SlashCommand("/name", "/name TITLE", "name this session (shown in /sessions and xun sessions)", "/name "),
    SlashCommand("/config", "/config", "every setting, its value and where it came from"),
    SlashCommand("/help", "/help", "keys and commands (F1)"),
    SlashCommand("/quit", "/quit", "save the session and quit (Ctrl+Q)"),
)

COMMAND_NAMES = frozenset(command.name for command in SLASH_COMMANDS)


class UnknownCommand(ValueError):
    """A line starting with `/` that names no command."""


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    name: str
    argument: str


def parse(line: str) -> ParsedCommand | None:
    """`/name rest` as a command (None when the line is a prompt); UnknownCommand for a bad name.

    A line starting with `//` is a prompt that begins with one slash."""
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, argument = text.partition(" ")
    name = name.lower()
    if name not in COMMAND_NAMES:
        raise UnknownCommand(f"unknown command {name}; /help lists them")
    return ParsedCommand(name, argument.strip())


def as_typed(prompt: str) -> str:
    """A prompt put back into the input, in the form that sends it again as a prompt: one that starts
    with a slash gets its `//` back (else Enter would take it for a command)."""
    stripped = prompt.lstrip()
    return "/" + stripped if stripped.startswith("/") else prompt


def completions(text: str) -> list[SlashCommand]:
    """Commands worth offering for what was typed: while the line is one slash word, those whose usage
    starts with it; after a space, the fixed arguments that start with it (`/compact to`)."""
    if not text.startswith("/") or text.startswith("//") or "\n" in text:
        return []
    typed = text.lower()
    if " " in typed:
        return [
            c
            for c in SLASH_COMMANDS
            if " " in c.completion.strip() and c.completion.startswith(typed) and c.completion != typed
        ]
    return [c for c in SLASH_COMMANDS if c.usage.startswith(typed) and c.inserts.rstrip() != typed]
