"""The keys, as the user sees them: which actions the main screen owns, how a key reads after `ui.keymap`,
F1's sections (`HELP`, data: the app adds the keys' own rows, which `ui.keymap` changes) and the command
palette's entries (`PALETTE`)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.binding import Binding, BindingType

from xun.tui.commands import SLASH_COMMANDS


AGENT_ACTIONS = frozenset({"compact", "reclaim", "focus_recoverable", "cancel_turn", "preview", "recall", "context"})
"""Actions that belong to the main screen (disabled while a modal is open)."""


QUIT_TWICE_HELP = "Copy the selection; with none, press twice to quit (the session is saved)"
"""F1's row for Ctrl+C: with text selected (in the prompt, or the chat) it copies, as everywhere else."""


def key_display(keys: str) -> str:
    """`f5` -> `F5`, `ctrl+q` -> `Ctrl+Q`, `escape` -> `Esc`; several keys joined by " / "."""
    names = {
        "escape": "Esc",
        "enter": "Enter",
        "tab": "Tab",
        "up": "Up",
        "down": "Down",
        "home": "Home",
        "pageup": "PgUp",
        "pagedown": "PgDn",
    }
    shown = []
    for key in keys.split(","):
        parts = [
            names.get(part, part.upper() if len(part) <= 3 else part.capitalize()) for part in key.strip().split("+")
        ]
        shown.append("+".join(parts))
    return " / ".join(shown)


def keys_of(binding: Binding, keymap: dict[str, str]) -> str | None:
    """The keys of an app binding after `ui.keymap`; None when the keymap gave its key to another."""
    if binding.id in keymap:
        return keymap[binding.id]
    taken = {key.strip() for bid, keys in keymap.items() if bid != binding.id for key in keys.split(",")}
    return None if binding.key in taken else binding.key


def binding_rows(bindings: Sequence[BindingType], keymap: dict[str, str]) -> list[tuple[str, str]]:
    """F1's "Keys" section: each app binding's keys (after `ui.keymap`) and what it does."""
    rows = []
    for binding in bindings:
        assert isinstance(binding, Binding)
        keys = keys_of(binding, keymap)
        label = {"quit_twice": QUIT_TWICE_HELP}.get(binding.id or "", binding.tooltip or binding.description)
        if keys is None:
            rows.append(("(no key)", f"{label}; its key went to another action in ui.keymap"))
        else:
            rows.append((key_display(keys), label))
    rows.append(
        ("Ctrl+P", 'Command palette: every action (its "Keys" docks these keys beside the chat; Esc hides them)')
    )
    return rows


HELP: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "The prompt",
        [
            ("Enter", "send the prompt (or take the highlighted completion)"),
            ("Shift+Enter / Alt+Enter / Ctrl+J", "new line"),
            ("Up / Down", "earlier and later prompts (from the first or last line)"),
            ("Tab", "complete the slash command"),
            ("Ctrl+U", "delete to the start of the line; at its start (Ctrl+U twice), clear the whole prompt"),
            ("//text", "send a prompt that starts with a slash"),
            ("Enter while busy", "queue the prompt: it goes out when the turn is over (Esc takes it back)"),
        ],
    ),
    (
        "The chat (Shift+Tab from the prompt; PgUp and PgDn scroll it from the prompt too)",
        [
            ("[ / ]", "select the previous / next block (a prompt, a reply, a tool call, a divider)"),
            ("Enter / Space", "open or fold the selected tool call (or the reply's reasoning)"),
            ("Home / End", "the session's first prompt / the newest, at once however long the session"),
            ("dimmed turns", "out of the context: a summary replaced them (the divider below them says which)"),
        ],
    ),
    (
        "Words",
        [
            ("reclaim", "an old tool result is replaced by a short placeholder; F8 lists them, r restores one"),
            ("summary", "older turns are replaced by a summary the model writes"),
            (
                "offload log",
                "the file the summarised turns are written to, word for word "
                "(.xun/conversation_history/ID.md); the chat shows them dimmed, F9 searches them",
            ),
        ],
    ),
    (
        "Compaction log (Tab to it)",
        [
            ("Enter", "the highlighted event's whole detail"),
            ("g", "show its turn in the chat: a summary's divider, a restored or reclaimed call"),
        ],
    ),
    (
        "Recoverable results (F8)",
        [
            ("typing", "filter the list (Backspace, Esc clears)"),
            (
                "Enter",
                "open the inspector: c copy · s save to a file · r restore into the context "
                "(f find in the history, once a summary took it out)",
            ),
        ],
    ),
    (
        "Preview (F7, /compact preview)",
        [
            ("F5 / s", "run the summary shown (the cut ✂: above is summarised, below kept)"),
            ("F6 / r", "run the reclaim (↺ marks the tool results it replaces)"),
            ("Esc", "close, nothing changes"),
        ],
    ),
    (
        "Recall (F9, /recall [query])",
        [
            ("typing", "search summarised turns and reclaimed results (results as you type)"),
            ("Up / Down, Enter", "move through the results, read the highlighted one"),
            ("Ctrl+R", "restore a reclaimed tool result into the context (while it is a placeholder)"),
            ("F2", "this session only, or every session of this folder"),
        ],
    ),
    (
        "What fills the context (Enter on the gauge, /context)",
        [
            ("1-5 / Enter", "show one of the five largest messages in the chat"),
            ("PgUp / PgDn", "scroll it (a small screen shows part at a time)"),
        ],
    ),
    ("MCP servers (/mcp)", [("r", "restart the highlighted server (after it failed, or a disabled one)")]),
    # the keys of `xun.agent.tools.CONFIRM_KEYS` (not imported: the help is built before the engine loads)
    (
        "Confirmations",
        [("y / s / n", "allow once · allow for this session · deny"), ("Esc", "deny and stop the turn")],
    ),
    (
        'Ask mode (auto_compact.mode = "ask")',
        [
            (
                "y / n or Esc / o",
                "summarise now · not now (the turn goes on) · turn automatic summaries off for this session",
            ),
        ],
    ),
    ("Slash commands", [(c.usage, c.help) for c in SLASH_COMMANDS]),
]


PALETTE: list[tuple[str, str, str]] = [
    # (title, help, what it calls on the app): the palette matches titles only, so the compaction actions say
    # "Compaction" (a newcomer searched "comp"); "Cancel the turn" shows only while something runs
    ("Compaction: summarise now", "Summarise older turns (F5, /compact)", "action_compact"),
    (
        "Compaction: reclaim tool results",
        "Replace old tool results with placeholders (F6, /compact toolcall)",
        "action_reclaim",
    ),
    ("Recoverable results", "Focus the reclaimed tool results (F8)", "action_focus_recoverable"),
    ("Cancel the turn", "Stop the running turn (Esc)", "action_cancel_turn"),
    ("Compaction: preview", "What a summary and a reclaim would do now (F7, /compact preview)", "action_preview"),
    ("Recall", "Search what compaction took out of the context (F9, /recall)", "action_recall"),
    ("What fills the context", "A breakdown of the context and its largest messages (/context)", "action_context"),
    ("History", "The conversation as the model sees it (/history)", "action_history"),
    ("MCP servers", "State, tools and token cost of the MCP servers; restart one (/mcp)", "action_mcp"),
    ("Sessions", "Switch to another saved session (/sessions)", "action_sessions"),
    ("Settings", "Every setting and where it came from (/config)", "action_config"),
    ("Tokens", "Reported and estimated tokens, threshold, window (/tokens)", "commands.show_tokens"),
    ("Retry", "Send the last prompt again (/retry)", "commands.retry"),
    ("Revise", "Take the last prompt back to edit it (/revise)", "commands.revise"),
    ("Clear", "Start over in this session (/clear)", "commands.clear_session"),
    ("Render transcript", "Export as HTML or Markdown (/render FILE)", "offer_render"),
    ("Help", "Keys and commands (F1)", "action_help"),
    ("Save and quit", "Save the session and quit (Ctrl+Q)", "action_quit_saving"),
]
"""The command palette's entries after Screenshot, in order."""
