"""The keys, as the user sees them: which actions are enabled now, the keys after `ui.keymap`, the help
screen's sections and the command palette."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import ModalScreen, Screen

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


class KeysAndHelp:
    """Key bindings, help and palette (mixed into `XunApp`)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in AGENT_ACTIONS and (self.session is None or isinstance(self.screen, ModalScreen)):
            return False
        if action == "chat_page" and isinstance(self.screen, ModalScreen):
            return False  # (not the chat behind a modal)
        return not (action == "cancel_turn" and self.busy is None and not self._queue_waits)

    def _keys_of(self, binding: Binding) -> str | None:
        """The keys of an app binding after `ui.keymap`; None when the keymap gave its key to another."""
        keymap = getattr(self, "_keymap", {}) or {}
        if binding.id in keymap:
            return keymap[binding.id]
        taken = {key.strip() for bid, keys in keymap.items() if bid != binding.id for key in keys.split(",")}
        return None if binding.key in taken else binding.key

    def _offer_render(self) -> None:
        """The palette's "Render transcript" puts the command in the prompt; a draft there goes into the
        prompt's history first, where Up finds it: a draft is never replaced with no way back."""
        prompt = self.prompt
        if prompt.text.strip():
            prompt.remember(prompt.expanded(prompt.text))
        prompt.set_prompt("/render transcript.html")

    def key_of(self, binding_id: str) -> str:
        """How the key of a binding reads now (after `ui.keymap`), e.g. "F5" ("Ctrl+P" when it has none)."""
        binding = next((b for b in self.BINDINGS if isinstance(b, Binding) and b.id == binding_id), None)
        keys = self._keys_of(binding) if binding is not None else None
        return key_display(keys) if keys else "Ctrl+P"

    def binding_rows(self) -> list[tuple[str, str]]:
        rows = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            keys = self._keys_of(binding)
            label = {"quit_twice": QUIT_TWICE_HELP}.get(binding.id or "", binding.tooltip or binding.description)
            if keys is None:
                rows.append(("(no key)", f"{label}; its key went to another action in ui.keymap"))
            else:
                rows.append((key_display(keys), label))
        rows.append(
            ("Ctrl+P", 'Command palette: every action (its "Keys" docks these keys beside the chat; Esc hides them)')
        )
        return rows

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        return [
            ("Keys", self.binding_rows()),
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

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own "Quit" would sit beside "Save and quit" below: one quit in the palette; its "Screenshot"
        # wrote to a Downloads folder (often missing) and said only "Failed to save screenshot": ours writes
        # into .xun/exports and says where. The palette matches titles only, so the compaction actions say
        # "Compaction" (a newcomer searched "comp")
        yield from (
            command for command in super().get_system_commands(screen) if command.title not in ("Quit", "Screenshot")
        )
        if self.session is None:
            return
        yield SystemCommand(
            "Screenshot",
            "Save an SVG picture of the screen in .xun/exports/",
            lambda: self.set_timer(0.1, self.action_save_screenshot),
        )  # once the palette is gone
        yield SystemCommand("Compaction: summarise now", "Summarise older turns (F5, /compact)", self.action_compact)
        yield SystemCommand(
            "Compaction: reclaim tool results",
            "Replace old tool results with placeholders (F6, /compact toolcall)",
            self.action_reclaim,
        )
        yield SystemCommand(
            "Recoverable results", "Focus the reclaimed tool results (F8)", self.action_focus_recoverable
        )
        if self.busy is not None:  # nothing to cancel otherwise
            yield SystemCommand("Cancel the turn", "Stop the running turn (Esc)", self.action_cancel_turn)
        yield SystemCommand(
            "Compaction: preview",
            "What a summary and a reclaim would do now (F7, /compact preview)",
            self.action_preview,
        )
        yield SystemCommand(
            "Recall", "Search what compaction took out of the context (F9, /recall)", self.action_recall
        )
        yield SystemCommand(
            "What fills the context",
            "A breakdown of the context and its largest messages (/context)",
            self.action_context,
        )
        yield SystemCommand("History", "The conversation as the model sees it (/history)", self.action_history)
        yield SystemCommand(
            "MCP servers", "State, tools and token cost of the MCP servers; restart one (/mcp)", self.action_mcp
        )
        yield SystemCommand("Sessions", "Switch to another saved session (/sessions)", self.action_sessions)
        yield SystemCommand("Settings", "Every setting and where it came from (/config)", self.action_config)
        yield SystemCommand("Tokens", "Reported and estimated tokens, threshold, window (/tokens)", self.action_tokens)
        yield SystemCommand("Retry", "Send the last prompt again (/retry)", self.action_retry)
        yield SystemCommand("Revise", "Take the last prompt back to edit it (/revise)", self.action_revise)
        yield SystemCommand("Clear", "Start over in this session (/clear)", self.action_clear)
        yield SystemCommand("Render transcript", "Export as HTML or Markdown (/render FILE)", self._offer_render)
        yield SystemCommand("Help", "Keys and commands (F1)", self.action_help)
        yield SystemCommand("Save and quit", "Save the session and quit (Ctrl+Q)", self.action_quit_saving)
