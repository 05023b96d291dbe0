"""XunApp: the full-screen app around one session.

The agent runs in workers (a turn in the "agent" group, manual compaction in "compaction", saving in a
thread worker); the agent's `on_event` is an `EventBridge` that posts messages, and the handlers here
update the panes. Nothing a worker runs touches a widget.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from xun.conversation_message import RawOpenAIMessage, SystemPrompt, UserMessage, content_text
from xun.paths import styles_dir
from xun.tui import messages as m
from xun.tui.commands import SLASH_COMMANDS, UnknownCommand, parse
from xun.tui.format import Presentation, one_line, percent, shown_path, tokens
from xun.tui.transcript import PLACEHOLDER_HEAD, reasoning_of, transcript
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.chat_view import ChatView
from xun.tui.widgets.command_menu import CommandMenu
from xun.tui.widgets.compaction_log import CompactionLog
from xun.tui.widgets.context_gauge import ContextGauge
from xun.tui.widgets.header import XunHeader
from xun.tui.widgets.prompt_input import PromptInput
from xun.tui.widgets.recoverable_list import RecoverableList
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock
from xun.tui.widgets.welcome_block import WelcomeBlock

if TYPE_CHECKING:
    from xun.context_breakdown import ReclaimPreview
    from xun.conversation import CompactionPlan, Conversation
    from xun.tui.screens.preview import PreviewFigures
    from xun.launch import Session
    from xun.tui.bridge import EventBridge

# The screens are imported where they are first shown: none of them is needed for the first frame. Nor
# is the engine (events, conversation, settings, toolbox, agent: pydantic, SQLite, the offline server):
# an app given an `opener` draws its first frame, then opens the session in a thread.

QUIT_AGAIN_WITHIN = 2.0
"""Seconds within which a second Ctrl+C quits."""

FULL_WARNING = 0.9
"""The share of the threshold past which the app warns, once per session, how to compact or preview."""

NARROW = 100
"""Below this many columns the side panel is not beside the chat: F4 shows it in the chat's place."""

AGENT_ACTIONS = frozenset({"compact", "reclaim", "focus_recoverable", "cancel_turn", "preview", "recall", "context"})
"""Actions that belong to the main screen (disabled while a modal is open)."""


def key_display(keys: str) -> str:
    """`f5` -> `F5`, `ctrl+q` -> `Ctrl+Q`, `escape` -> `Esc`; several keys joined by " / "."""
    names = {"escape": "Esc", "enter": "Enter", "tab": "Tab", "up": "Up", "down": "Down", "home": "Home"}
    shown = []
    for key in keys.split(","):
        parts = [names.get(part, part.upper() if len(part) <= 3 else part.capitalize()) for part in key.strip().split("+")]
        shown.append("+".join(parts))
    return " / ".join(shown)


class XunApp(App[int], inherit_bindings=False):
    """`XunApp(session)`, or `XunApp(opener=...)` to draw the first frame before the session is opened
    (what `xun` does); `presentation=Presentation.fixed()` makes screenshots repeatable."""

    TITLE = "xun"
    CSS_PATH: ClassVar[list[str | Path]] = [styles_dir() / "xun.tcss"]
    AUTO_FOCUS = "#prompt"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help", id="help", tooltip="Keys and commands (this screen)"),
        Binding("f4", "toggle_side", "Panel", id="toggle_side", priority=True,
                tooltip="Hide or show the side panel (gauge, compaction log, recoverable results)"),
        Binding("f5", "compact", "Summarise", id="compact", priority=True,
                tooltip="Summarise older turns now (/compact)"),
        Binding("f6", "reclaim", "Reclaim", id="reclaim", priority=True,
                tooltip="Reclaim old tool results now (/compact toolcall)"),
        Binding("f7", "preview", "Preview", id="preview", priority=True,
                tooltip="What a summary and a reclaim would do now (/compact preview)"),
        Binding("f8", "focus_recoverable", "Results", id="recoverable", priority=True,
                tooltip="Focus the recoverable tool results; Enter opens one"),
        Binding("f9", "recall", "Recall", id="recall", priority=True,
                tooltip="Search what compaction took out of the context (/recall)"),
        Binding("escape", "cancel_turn", "Cancel", id="cancel", tooltip="Cancel the running turn"),
        Binding("escape", "focus_prompt", "Prompt", id="focus_prompt", show=False,
                tooltip="Back to the prompt (from any pane; after cancelling a turn or closing a screen too)"),
        Binding("ctrl+q", "quit_saving", "Quit", id="quit", priority=True, tooltip="Save the session and quit"),
        Binding("ctrl+c", "quit_twice", "Quit", id="quit_twice", show=False),
    ]

    def __init__(self, session: Session | None = None, *, opener: Callable[[], Session] | None = None,
                 presentation: Presentation | None = None) -> None:
        super().__init__()
        if (session is None) == (opener is None):
            raise TypeError("XunApp takes a session or an opener, not both")
        self.session: Session | None = None
        """None until the opener has opened it; the agent's actions wait until then."""
        self._opener = opener
        self.opened_session: Session | None = None
        """The session the opener returned, set from its thread: `run()` closes it, even after an early quit."""
        self.open_error: Exception | None = None
        """Why the opener failed; the app then exits and `run()` raises it."""
        self._early_prompt: str | None = None
        """A prompt sent before the session was open: it goes out once the session is ready."""
        self._unanswered: UserMessage | None = None
        """The prompt of a failed turn that got no answer: kept in the session and put back in the input;
        sending from the input replaces it rather than leaving two prompts in a row."""
        self.presentation = presentation or Presentation()
        self.bridge: EventBridge | None = None
        """Turns the agent's events into messages; made with the session."""
        if session is not None:
            self._attach(session)
        self.busy: str | None = None
        """What runs now: "turn", "compact", "reclaim", "restore" (None when idle)."""
        self._last_ctrl_c = 0.0
        self._pending_divider: SummaryDivider | None = None
        self._pending_focus: str | None = None
        self._consent_declined = False
        """"Not now" to an automatic summary holds for the rest of the turn (the engine asks before every call)."""
        self._consent_granted = False
        """So does "run now": a summary that was not enough may be followed by another without asking again."""
        self._open_asks: list[ModalScreen[Any]] = []
        self.saved = False
        self.last_saved_path: Path | None = None
        self.finished_work = 0
        """How many turns, compactions and restores have finished (a worker posted AgentWorkDone)."""
        self._warned_full: set[str] = set()
        """Sessions (conversation ids) already warned that the context passed FULL_WARNING of the threshold."""
        self._heap_frozen = False
        self._last_call: dict[str, int] | None = None
        """The last model call's reported tokens, for the usage line under the gauge."""

    def get_default_screen(self) -> Screen[Any]:
        from xun.tui.screens.main import MainScreen

        return MainScreen(id="_default")

    def _attach(self, session: Session) -> None:
        from xun.tui.bridge import EventBridge

        self.session = session
        self.bridge = EventBridge(self.post_message)
        agent = session.agent
        agent.on_event = self.bridge
        agent.confirm = self.bridge.confirm
        agent.consent = self.bridge.consent

    # ------------------------------------------------------------------------------ properties

    @property
    def agent(self):
        return self.session.agent

    @property
    def conversation(self) -> Conversation:
        return self.session.agent.conversation

    @property
    def workdir(self) -> Path:
        return Path(self.session.agent.workdir)

    def shown_path(self, path: str | None) -> str:
        return shown_path(path, self.workdir)

    @property
    def chat(self) -> ChatView:
        return self.query_one(ChatView)

    @property
    def gauge(self) -> ContextGauge:
        return self.query_one(ContextGauge)

    @property
    def log_pane(self) -> CompactionLog:
        return self.query_one(CompactionLog)

    @property
    def recoverable(self) -> RecoverableList:
        return self.query_one(RecoverableList)

    @property
    def prompt(self) -> PromptInput:
        return self.query_one(PromptInput)

    @property
    def header(self) -> XunHeader:
        return self.query_one(XunHeader)

    # ---------------------------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        yield XunHeader()
        with Horizontal(id="main"):
            with Vertical(id="chat-column"):
                yield ChatView(shown_path=self.shown_path, welcome=self._welcome)
                menu = CommandMenu()
                yield menu
                yield PromptInput(menu, cursor_blink=self.presentation.cursor_blink)
            with Vertical(id="side"):
                yield ContextGauge()
                yield CompactionLog(clock=self.presentation.clock, shown_path=self.shown_path)
                yield RecoverableList(clock=self.presentation.clock, cursor_blink=self.presentation.cursor_blink)
        # Ctrl+P (the palette) is in the help and the welcome text: without its corner every key fits in 80 columns
        yield Footer(show_command_palette=False, compact=True)

    def _welcome(self) -> WelcomeBlock:
        session = self.session
        provider = "the offline demo model (scripted, not an LLM)" if session.offline else session.describe_provider()
        return WelcomeBlock(session.config.model.name, provider)

    async def on_mount(self) -> None:
        self.query_one("#main").set_class(self.size.width < NARROW, "-narrow")
        if self.session is not None:
            await self._show_session()
            return
        self.header.status = "opening the session…"
        self.chat.border_subtitle = "opening the session…"
        # after the first frame: a thread started now would take the interpreter's lock from the first
        # frame's styling, layout and rendering
        self.call_after_refresh(self._open_session)

    @work(thread=True, group="open", exit_on_error=False)
    def _open_session(self) -> None:
        """Settings, model server, conversation and agent, off the event loop (after the first frame)."""
        assert self._opener is not None
        try:
            session = self._opener()
        except Exception as exc:  # noqa: BLE001 - the app exits and `run()` raises it, as the command line would
            self.post_message(m.SessionOpenFailed(exc))
            return
        self.opened_session = session
        self.post_message(m.SessionOpened(session))

    async def on_session_opened(self, message: m.SessionOpened) -> None:
        self._attach(message.session)
        with self.batch_update():  # one layout and one frame for the header, the transcript and the panes
            await self._show_session()
        self.refresh_bindings()
        if message.session.config.withheld:
            self._ask_trust(message.session)
        if self._early_prompt is not None:
            text, self._early_prompt = self._early_prompt, None
            await self.submit(text)

    def _ask_trust(self, session: Session) -> None:
        """The folder's config set keys that need trust: ask; a yes is remembered and the session reopened
        with them (nothing has happened in it yet)."""
        from xun.trust import describe_withheld, folder_key, trust_folder
        from xun.tui.screens.trust import TrustScreen

        folder = session.agent.workdir
        self.notify(describe_withheld(session.config.withheld, folder), severity="warning", timeout=10)

        def answered(trusted: bool | None) -> None:
            if not trusted:
                return
            trust_folder(folder)
            if self._opener is None or self.busy or self.finished_work:
                self.notify("trusted; the folder's settings apply when xun starts next", timeout=10)
                return
            session.close()
            self.header.status = "opening the session…"
            self._open_session()

        self.push_screen(TrustScreen(folder_key(folder), session.config.withheld_settings), answered)

    def on_session_open_failed(self, message: m.SessionOpenFailed) -> None:
        self.open_error = message.error
        self.exit(1)

    async def _show_session(self) -> None:
        session = self.session
        assert session is not None
        keymap = dict(session.config.ui.keymap)
        if keymap:
            self.set_keymap(keymap)
        self.header.show_model(model=session.config.model.name, provider=session.describe_provider(),
                               offline=session.offline)
        await self.show_conversation()
        self.header.status = "ready"
        self.call_after_refresh(self._freeze_heap)
        self.call_after_refresh(self.discover_window)
        if session.mcp:
            self.start_mcp_servers()

    @work(group="window", exit_on_error=False)
    async def discover_window(self) -> None:
        """Ask the server for its window after the frame that shows the session (never before: the first
        prompt need not wait for it), then show the figure and where it came from."""
        await self.agent.start_discovery()
        self._refresh_gauge()

    async def show_conversation(self) -> None:
        """Fill every pane from the conversation (start, resume, session switch)."""
        conversation = self.conversation
        self.header.set_session(conversation.conversation_id)
        await self.chat.show_transcript(transcript(conversation).items)
        self._refresh_gauge()
        self.gauge.set_history(self._history_points(conversation))
        self._last_call = None
        self._count_usage(None)
        self.log_pane.load(list(conversation.compaction_log))
        self.recoverable.load([])
        self.call_after_refresh(self._load_recoverable)

    def _load_recoverable(self) -> None:
        """After the first frame: a resumed session parses its archive of originals only now."""
        try:
            records = list(self.conversation.compacted_toolcalls.values())
        except Exception as exc:  # noqa: BLE001 - a damaged archive line: say so, keep the rest working
            self.notify(f"the reclaimed results could not be read: {exc}", severity="error")
            records = []
        self.recoverable.load(records)
        self._mark_summarised_results()

    def _mark_summarised_results(self) -> None:
        """Reclaimed results whose placeholder a summary took out of the context can no longer be restored."""
        in_context = {str(msg.raw.get("tool_call_id")) for msg in self.conversation.messages
                      if type(msg) is RawOpenAIMessage and msg.raw.get("role") == "tool"}
        self.recoverable.set_summarised(i for i in self.recoverable.records if i not in in_context)

    @staticmethod
    def _history_points(conversation: Conversation) -> list[int]:
        points: list[int] = []
        for record in conversation.compaction_log:
            before, after = record.get("tokens_before"), record.get("tokens_after")
            if record.get("type") in ("tool_results_reclaimed", "summary_finished") and isinstance(before, int) \
                    and isinstance(after, int):
                points += [before, after]
        if conversation.total_tokens is not None:
            points.append(conversation.total_tokens)
        return points

    def _refresh_gauge(self) -> None:
        conversation = self.conversation
        count = len(conversation.messages)
        summaries = self._summaries_in_context()
        window = self.agent.window
        self.gauge.cache_share = conversation.prompt_cache.last_hit_share
        self.gauge.set_figures(
            reported=conversation.total_tokens,
            estimate=self.agent.request_tokens(),
            threshold=self.agent.threshold,
            window=window.tokens,
            window_source=window.source if window.known else None,
        )
        gauge = self.gauge
        self.chat.border_subtitle = f"{count:,} message{'s' if count != 1 else ''} in the context" + (
            f" · {summaries} summar{'ies' if summaries != 1 else 'y'}" if summaries else "") + (
            f" · {percent(gauge.now, gauge.threshold)}% of the threshold")
        self._warn_if_nearly_full()

    def _summaries_in_context(self) -> int:
        """Summaries the model still sees: none after /clear (the log and the offloads stay as history)."""
        messages = self.conversation.messages
        first = messages[0] if len(messages) else None
        compressed = isinstance(first, SystemPrompt) and first.is_compressed
        return len(self.conversation.summarizations) or 1 if compressed else 0

    def key_of(self, binding_id: str) -> str:
        """How the key of a binding reads now (after `ui.keymap`), e.g. "F5" ("Ctrl+P" when it has none)."""
        binding = next((b for b in self.BINDINGS if isinstance(b, Binding) and b.id == binding_id), None)
        keys = self._keys_of(binding) if binding is not None else None
        return key_display(keys) if keys else "Ctrl+P"

    def _warn_if_nearly_full(self) -> None:
        """Once per session: a warning when the context passes FULL_WARNING of the threshold."""
        gauge = self.gauge
        session = self.conversation.conversation_id
        now = max(gauge.reported or 0, gauge.estimate)
        if session in self._warned_full or now < FULL_WARNING * gauge.threshold:
            return
        self._warned_full.add(session)
        over = now >= gauge.threshold
        # no figure here: the gauge has it, and a toast's figure is stale a turn later
        self.notify(
            ("The context is past the threshold" if over else f"The context passed {FULL_WARNING:.0%} of the threshold")
            + f" (the gauge shows where it is). {self.key_of('compact')} summarises now, {self.key_of('reclaim')} "
            f"reclaims old tool results, {self.key_of('preview')} previews what they would do.",
            title="the context is past the threshold" if over else "the context is nearly full",
            severity="warning", timeout=10)

    def _set_busy(self, busy: str | None, status: str | None = None) -> None:
        self.busy = busy
        self.header.status = status or ("ready" if busy is None else busy)
        self.refresh_bindings()

    # ------------------------------------------------------------------------------- bindings

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in AGENT_ACTIONS and (self.session is None or isinstance(self.screen, ModalScreen)):
            return False
        return not (action == "cancel_turn" and self.busy is None)

    def _keys_of(self, binding: Binding) -> str | None:
        """The keys of an app binding after `ui.keymap`; None when the keymap gave its key to another."""
        keymap = getattr(self, "_keymap", {}) or {}
        if binding.id in keymap:
            return keymap[binding.id]
        taken = {key.strip() for bid, keys in keymap.items() if bid != binding.id for key in keys.split(",")}
        return None if binding.key in taken else binding.key

    def binding_rows(self) -> list[tuple[str, str]]:
        rows = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            keys = self._keys_of(binding)
            label = {"quit_twice": "Quit (press twice)"}.get(binding.id or "", binding.tooltip or binding.description)
            if keys is None:
                rows.append(("(no key)", f"{label}; its key went to another action in ui.keymap"))
            else:
                rows.append((key_display(keys), label))
        rows.append(("Ctrl+P", "Command palette: every action"))
        return rows

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        return [
            ("Keys", self.binding_rows()),
            ("The prompt", [
                ("Enter", "send the prompt (or take the highlighted completion)"),
                ("Shift+Enter / Ctrl+J", "new line"),
                ("Up / Down", "earlier and later prompts (from the first or last line)"),
                ("Tab", "complete the slash command"),
                ("//text", "send a prompt that starts with a slash"),
            ]),
            ("The chat (Tab to it, or Esc then Shift+Tab)", [
                ("[ / ]", "select the previous / next block (a prompt, a reply, a tool call, a divider)"),
                ("Enter / Space", "open or fold the selected tool call (or the reply's reasoning)"),
                ("Home / End", "the top of the whole history (older turns load as you go) / the newest"),
                ("dimmed turns", "out of the context: a summary replaced them (the divider below them says which)"),
            ]),
            ("Words", [
                ("reclaim", "an old tool result is replaced by a short placeholder; F8 lists them, r restores one"),
                ("summary", "older turns are replaced by a summary the model writes"),
                ("offload log", "the file the summarised turns are written to, word for word "
                                "(.xun/conversation_history/ID.md); the chat shows them dimmed, F9 searches them"),
            ]),
            ("Recoverable results (F8)", [
                ("typing", "filter the list (Backspace, Esc clears)"),
                ("Enter", "open the inspector: c copy · s save to a file · r restore into the context"),
            ]),
            ("Preview (F7, /compact preview)", [
                ("F5 / s", "run the summary shown (the cut ✂: above is summarised, below kept)"),
                ("F6 / r", "run the reclaim (↺ marks the tool results it replaces)"),
                ("Esc", "close, nothing changes"),
            ]),
            ("Recall (F9, /recall [query])", [
                ("typing", "search summarised turns and reclaimed results (results as you type)"),
                ("Up / Down, Enter", "move through the results, read the highlighted one"),
                ("Ctrl+R", "restore a reclaimed tool result into the context (while it is a placeholder)"),
                ("F2", "this session only, or every session of this folder"),
            ]),
            ("What fills the context (Enter on the gauge, /context)", [
                ("1-5 / Enter", "show one of the five largest messages in the chat"),
            ]),
            ("MCP servers (/mcp)", [("r", "restart the highlighted server (after it failed, or a disabled one)")]),
            ("Confirmations", [("a / s / d", "allow once · allow for this session · deny")]),
            ("Ask mode (auto_compact.mode = \"ask\")", [
                ("y / n / o", "summarise now · not now · turn automatic summaries off for this session"),
            ]),
            ("Slash commands", [(c.usage, c.help) for c in SLASH_COMMANDS]),
        ]

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own "Quit" would sit beside "Save and quit" below: one quit in the palette
        yield from (command for command in super().get_system_commands(screen) if command.title != "Quit")
        if self.session is None:
            return
        yield SystemCommand("Summarise now", "Summary compaction of older turns (F5, /compact)", self.action_compact)
        yield SystemCommand("Reclaim tool results", "Replace old tool results with placeholders (F6)", self.action_reclaim)
        yield SystemCommand("Recoverable results", "Focus the reclaimed tool results (F8)", self.action_focus_recoverable)
        yield SystemCommand("Cancel the turn", "Stop the running turn (Esc)", self.action_cancel_turn)
        yield SystemCommand("Preview compaction", "What a summary and a reclaim would do now (F7, /compact preview)",
                            self.action_preview)
        yield SystemCommand("Recall", "Search what compaction took out of the context (F9, /recall)", self.action_recall)
        yield SystemCommand("What fills the context", "A breakdown of the context and its largest messages (/context)",
                            self.action_context)
        yield SystemCommand("History", "The conversation as the model sees it (/history)", self.action_history)
        yield SystemCommand("MCP servers", "State, tools and token cost of the MCP servers; restart one (/mcp)",
                            self.action_mcp)
        yield SystemCommand("Sessions", "Switch to another saved session (/sessions)", self.action_sessions)
        yield SystemCommand("Settings", "Every setting and where it came from (/config)", self.action_config)
        yield SystemCommand("Tokens", "Reported and estimated tokens, threshold, window (/tokens)", self.action_tokens)
        yield SystemCommand("Retry", "Send the last prompt again (/retry)", self.action_retry)
        yield SystemCommand("Revise", "Take the last prompt back to edit it (/revise)", self.action_revise)
        yield SystemCommand("Clear", "Start over in this session (/clear)", self.action_clear)
        yield SystemCommand("Render transcript", "Export as HTML or Markdown (/render FILE)",
                            lambda: self.prompt.set_prompt("/render transcript.html"))
        yield SystemCommand("Help", "Keys and commands (F1)", self.action_help)
        yield SystemCommand("Save and quit", "Save the session and quit (Ctrl+Q)", self.action_quit_saving)

    # --------------------------------------------------------------------------------- actions

    def action_help(self) -> None:
        from xun.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))

    def action_compact(self, focus: str | None = None) -> None:
        if not self._may_start("a summary"):
            return
        self._set_busy("compact", "summarising…")
        self.compact_now(focus or None)

    def action_reclaim(self) -> None:
        if not self._may_start("a reclaim"):
            return
        self._set_busy("reclaim", "reclaiming…")
        self.reclaim_now()

    def action_focus_recoverable(self) -> None:
        main = self.query_one("#main")
        if main.has_class("-narrow"):
            main.add_class("-side-shown")  # the panel takes the chat's place until Esc or F4
        self.recoverable.focus_table()

    def preview_figures(self) -> tuple[PreviewFigures, CompactionPlan, ReclaimPreview]:
        """What a summary (F5), a reclaim (F6) and the automatic policy would do now: F7 and /context show it."""
        from xun.compact import AutoCompactor, first_tool_result, tokens_from
        from xun.context_breakdown import reclaim_preview
        from xun.tui.screens.preview import PreviewFigures

        c = self.conversation
        settings = self.session.config.auto_compact
        plan = c.plan_compaction(settings.summary_keep_max)
        reclaim = reclaim_preview(c, settings.toolcall_keep_max)
        now = self.agent.request_tokens()
        condensed = plan.estimated_length_before - plan.estimated_length_after
        first = first_tool_result(c, reclaim.ids)
        policy = self.agent.compactor
        automatic = (reclaim_preview(c, policy.first_keep(self.agent, policy.toolcall_keep_max))
                     if isinstance(policy, AutoCompactor) and policy.needs_compaction(self.agent) else None)
        figures = PreviewFigures(
            tokens_now=now, tokens_after=max(now - round(condensed * c.tokens_per_char), 0), reported=c.total_tokens,
            threshold=self.agent.threshold, condensed=plan.condensed_count, kept=len(plan.kept),
            nothing_to_condense=plan.nothing_to_condense, keep_recent=settings.summary_keep_max, reclaim=reclaim,
            reclaim_cache_miss=tokens_from(c, first) - reclaim.tokens_saved if first is not None else None,
            automatic=automatic)
        return figures, plan, reclaim

    def action_preview(self) -> None:
        from xun.tui.screens.preview import PreviewScreen, preview_rows

        if isinstance(self.screen, PreviewScreen):
            return
        figures, plan, reclaim = self.preview_figures()
        c = self.conversation

        def chosen(what: str | None) -> None:
            if what == "compact":
                self.action_compact()
            elif what == "reclaim":
                self.action_reclaim()

        self.push_screen(PreviewScreen(preview_rows(c, plan, reclaim), figures), chosen)

    def action_recall(self, query: str = "") -> None:
        from xun.tui.screens.recall import RecallScreen

        if isinstance(self.screen, RecallScreen):
            return
        index = self.conversation.history_index or self.session.store.history
        self.push_screen(RecallScreen(index, session=self.conversation.conversation_id, query=query,
                                      clock=self.presentation.clock, restorable=self.restore_state,
                                      cursor_blink=self.presentation.cursor_blink))

    def restore_state(self, session: str, call_id: str) -> tuple[bool, str]:
        """Whether a reclaimed result found in the history can be restored into this context now, and why not."""
        if session != self.conversation.conversation_id:
            return False, f"it belongs to session {session}; switch to it (/sessions) to restore it"
        if call_id not in self.conversation.compacted_toolcalls:
            return False, "it is not reclaimed now (restored already, or the session was cleared)"
        if not self._restorable(call_id):
            return False, "it was summarised away after it was reclaimed: read it here, or run the tool again"
        return True, ""

    def action_context(self) -> None:
        from xun.context_breakdown import context_breakdown
        from xun.tui.screens.breakdown import BreakdownScreen
        from xun.tui.screens.preview import outlook_line

        if isinstance(self.screen, BreakdownScreen):
            return
        definitions = self.agent.toolbox.definition_chars()
        self.agent.request_tokens()  # prices the tool definitions afresh when no server count holds them
        window = self.agent.window
        breakdown = context_breakdown(self.conversation, threshold=self.agent.threshold,
                                      window=window.tokens, window_source=window.source if window.known else None,
                                      tool_definitions=definitions if len(definitions) > 1 else None)

        def chosen(index: int | None) -> None:
            if index is not None:
                self.run_worker(self.jump_to_message(index), group="jump", exclusive=True)

        self.push_screen(BreakdownScreen(breakdown, outlook_line(self.preview_figures()[0])), chosen)

    def on_open_breakdown(self, message: m.OpenBreakdown) -> None:
        message.stop()
        if self.session is not None and not isinstance(self.screen, ModalScreen):
            self.action_context()

    async def jump_to_message(self, index: int) -> Widget | None:
        """Scroll the chat to the block showing `conversation.messages[index]` (older pages are loaded
        until it is mounted), mark it, and return it; None when the chat does not show that message."""
        block = self.chat_block_for(index)
        while block is None and self.chat.older_count:
            await self.chat.load_older()
            block = self.chat_block_for(index)
        if block is None:
            self.notify(f"message #{index} is not shown in the chat", severity="warning")
            return None
        self.chat.select(block, scroll=False)
        self.call_after_refresh(self.chat.scroll_to_widget, block, animate=False, top=True)
        self.chat.focus()  # [ and ] go on from here, Enter opens it
        return block

    def chat_block_for(self, index: int) -> Widget | None:
        """The chat block of one message: a tool result or a call by its id; a user message or an
        assistant reply by its place counted from the newest (the chat and the context end alike)."""
        messages = self.conversation.messages
        if not 0 <= index < len(messages):
            return None
        message = messages[index]
        raw = message.raw if isinstance(message, RawOpenAIMessage) else None
        if raw is not None and raw.get("role") == "tool":
            return self.chat.tool_block(str(raw.get("tool_call_id", "")))
        if isinstance(message, UserMessage):
            later = sum(1 for msg in messages[index + 1:] if isinstance(msg, UserMessage))
            blocks = list(self.chat.query(UserBlock))
            return blocks[-1 - later] if later < len(blocks) else None
        if raw is not None and raw.get("role") == "assistant":
            if content_text(raw.get("content")) or reasoning_of(raw):
                later = sum(1 for msg in messages[index + 1:] if type(msg) is RawOpenAIMessage
                            and msg.raw.get("role") == "assistant"
                            and (content_text(msg.raw.get("content")) or reasoning_of(msg.raw)))
                replies = list(self.chat.query(AssistantBlock))
                return replies[-1 - later] if later < len(replies) else None
            calls = [c for c in raw.get("tool_calls") or () if isinstance(c, dict)]
            return self.chat.tool_block(str(calls[0].get("id", ""))) if calls else None
        return None

    def action_cancel_turn(self) -> None:
        if self.busy is None:
            return
        self.workers.cancel_group(self, "agent")
        self.workers.cancel_group(self, "compaction")
        self.action_focus_prompt()

    def action_focus_prompt(self) -> None:
        """Esc from anywhere on the main screen: the keyboard goes back to the prompt."""
        self.chat.select(None)
        main = self.query_one("#main")
        if main.has_class("-narrow"):
            main.remove_class("-side-shown")
        self.prompt.focus()

    def action_toggle_side(self) -> None:
        """Wide: hide or show the side panel beside the chat. Narrow: switch between the chat and the panel."""
        main = self.query_one("#main")
        if main.has_class("-narrow"):
            main.toggle_class("-side-shown")
            if main.has_class("-side-shown"):
                self.gauge.focus()
            else:
                self.prompt.focus()
        else:
            main.toggle_class("-side-hidden")
            if main.has_class("-side-hidden") and not self.prompt.has_focus:
                self.prompt.focus()

    def on_resize(self, event: Resize) -> None:
        self.query_one("#main").set_class(event.size.width < NARROW, "-narrow")

    async def action_quit_twice(self) -> None:
        now = time.monotonic()
        if now - self._last_ctrl_c <= QUIT_AGAIN_WITHIN:
            await self.action_quit_saving()
            return
        self._last_ctrl_c = now
        self.notify("Press Ctrl+C again to quit (the session is saved).", title="Quit?", timeout=QUIT_AGAIN_WITHIN)

    async def action_quit_saving(self) -> None:
        self.workers.cancel_group(self, "agent")
        self.workers.cancel_group(self, "compaction")
        await self._settle_save()
        try:
            await asyncio.to_thread(self.save_now)
        except OSError as exc:
            self.notify(f"could not save the session: {exc}", severity="error")
        self.exit(0)

    def action_history(self) -> None:
        from xun.tui.screens.history import HistoryScreen

        conversation = self.conversation
        records = self.history_records()
        subtitle = f"~{tokens(self.agent.request_tokens())} tokens · esc close"
        self.push_screen(HistoryScreen(records, subtitle))

    def history_records(self) -> list[dict[str, str]]:
        """What the model is sent, one record per message: the text (cut at 1,000 characters, tabs
        expanded), the tool calls of assistant messages, and the call id of each tool result."""
        conversation = self.conversation
        records = conversation.to_history(truncate=True)
        for record, message in zip(records, conversation.messages, strict=False):
            text = record["content"].expandtabs(4)
            raw = getattr(message, "raw", None)
            if isinstance(raw, dict) and raw.get("role") == "tool":
                text = f"(result of {raw.get('tool_call_id', '')})\n{text}"
            elif isinstance(raw, dict):
                calls = [
                    f"→ calls {(call.get('function') or {}).get('name', '?')} "
                    f"{one_line(str((call.get('function') or {}).get('arguments', '')), 200)} (id {call.get('id', '')})"
                    for call in raw.get("tool_calls") or ()
                ]
                text = "\n".join(([text] if text else []) + calls)
            record["content"] = text
        return records

    async def action_sessions(self) -> None:
        from xun.tui.screens.sessions import SessionsScreen

        def chosen(conversation_id: str | None) -> None:
            if conversation_id and conversation_id != self.conversation.conversation_id:
                self.post_message(m.SwitchSession(conversation_id))

        infos = await asyncio.to_thread(self.session.store.list)  # reads every session's head: off the loop
        self.push_screen(SessionsScreen(infos, self.conversation.conversation_id, self.presentation.moment), chosen)

    # ------------------------------------------------------------------------------------ mcp

    def action_mcp(self) -> None:
        from xun.tui.screens.mcp import McpScreen

        if self.session is None or self.session.mcp is None or isinstance(self.screen, McpScreen):
            return
        self.push_screen(McpScreen(self.session.mcp, self.conversation.tokens_per_char, self.restart_mcp_server))

    @work(group="mcp", exit_on_error=False)
    async def start_mcp_servers(self) -> None:
        """After the first frame: the SDK is imported in a thread (a second of work), then every server
        starts on this loop, where the turns call their tools; each change of state is a message."""
        from xun.tools.mcp import preload

        names = [name for name, server in self.session.mcp.servers.items() if server.state != "disabled"]
        if names:
            self.post_message(m.Notice("info", f"MCP: starting {', '.join(names)} (/mcp shows their state)"))
        await asyncio.to_thread(preload)
        await self.session.mcp.start()

    @work(group="mcp", exit_on_error=False)
    async def restart_mcp_server(self, name: str) -> None:
        from xun.tools.mcp import preload

        await asyncio.to_thread(preload)  # a disabled server may be the first to start
        await self.session.mcp.restart(name)

    async def stop_mcp_servers(self) -> None:
        """On quit: no server process outlives the app."""
        self.workers.cancel_group(self, "mcp")
        if self.session is not None and self.session.mcp:
            with contextlib.suppress(Exception):
                await self.session.mcp.aclose()

    async def on_mcp_server_changed(self, message: m.McpServerChanged) -> None:
        from xun.tui.screens.mcp import McpScreen

        event = message.event
        if event.state == "ready":
            count = f"{event.tools} tool{'s' if event.tools != 1 else ''}"
            await self.chat.add_notice("info", f"MCP server {event.name}: ready with {count} (/mcp lists them)")
        elif event.state == "failed":
            text = f"MCP server {event.name} failed: {event.reason}"
            await self.chat.add_notice("warning", text + " (/mcp restarts it)")
            self.notify(text, title="MCP server failed", severity="warning", timeout=8)
        for screen in self.screen_stack:
            if isinstance(screen, McpScreen):
                screen.refresh_servers()

    def action_config(self) -> None:
        from xun.config import describe_config
        from xun.tui.screens.config import ConfigScreen

        items = describe_config(self.session.config)
        window = self.agent.window
        if window.known and window.kind != "config":  # unset, but known: say the figure in use and whence
            items = [dataclasses.replace(item, value=window.tokens, source=window.source)
                     if item.key == "model.context_window" else item for item in items]
        self.push_screen(ConfigScreen(items))

    async def action_tokens(self) -> None:
        c = self.conversation
        config = self.session.config
        threshold = self.agent.threshold
        window = self.agent.window
        source = "auto_compact.token_threshold"
        if window.tokens is not None and threshold < config.auto_compact.token_threshold:
            source = f"{config.auto_compact.threshold_ratio:g} of the window"
        archive = c.compacted_toolcalls
        estimate = self.agent.request_tokens()
        reported = f"reported {tokens(c.total_tokens)} (last model call)" if c.total_tokens is not None else \
            "no count from the server since the last summary (or it sends none)"
        lines = [
            f"{reported} · estimate {tokens(estimate)} now (the next request)",
            (f"threshold {tokens(threshold)} ({source}) · {window.describe()}"
             f" · {percent(estimate, threshold)}% of the threshold"),
            (f"{len(c.messages):,} messages · {len(archive)} reclaimed results · {self._summaries_in_context()} summaries"
             f" · {c.tokens_per_char:.3f} tokens per char"),
        ]
        await self.chat.add_notice("info", "\n  ".join(lines))

    async def action_retry(self) -> None:
        if not self._may_start("/retry"):
            return
        if not any(isinstance(msg, UserMessage) for msg in self.conversation.messages):
            await self.chat.add_notice("warning", "/retry: there is no prompt to send again")
            return
        await self._settle_save()
        if self._unanswered is not None and self.prompt.text == self._unanswered.text:
            self.prompt.clear()  # /retry sends the failed prompt: the copy in the input would send it twice
        self.conversation.pop_from_last_user_message(inclusive=False)
        await self.chat.remove_from_last_user(inclusive=False)
        self._refresh_gauge()
        self._start_turn(None)

    async def action_revise(self, text: str = "") -> None:
        if not self._may_start("/revise"):
            return
        await self._settle_save()
        popped = self.conversation.pop_from_last_user_message(inclusive=True)
        if not popped:
            await self.chat.add_notice("warning", "/revise: there is no prompt to revise")
            return
        await self.chat.remove_from_last_user(inclusive=True)
        self._refresh_gauge()
        old = getattr(popped[0], "text", "")
        if text.strip():
            await self.send_prompt(text.strip())
        else:
            self.prompt.set_prompt(old)
            self.prompt.focus()

    async def action_clear(self) -> None:
        if not self._may_start("/clear"):
            return
        await self._settle_save()
        self.conversation.clear()
        await self.chat.clear()
        self.recoverable.load([])
        self._refresh_gauge()
        self.gauge.set_history([])
        await self.chat.add_notice("info", "cleared: a fresh start in this session (the compaction log stays)")
        self.save_session()

    def _may_start(self, what: str) -> bool:
        if self.busy is None:
            return True
        doing = {"turn": "a turn is running", "compact": "a summary is running", "reclaim": "a reclaim is running",
                 "restore": "a restore is running"}.get(self.busy, "something is running")
        self.notify(f"{what} has to wait: {doing} (Esc cancels it).", severity="warning")
        return False

    # ---------------------------------------------------------------------------------- prompts

    @on(m.PromptSubmitted)
    async def _prompt_submitted(self, message: m.PromptSubmitted) -> None:
        if self.session is None:
            if self._early_prompt is None:
                self._early_prompt = message.text
                self.header.status = "opening the session… (your prompt goes out when it is open)"
            elif not self.prompt.text.strip():  # one prompt waits; a second stays in the input
                self.prompt.set_prompt(message.text)
            return
        await self.submit(message.text)

    async def submit(self, text: str) -> None:
        """A prompt or a slash command, as typed."""
        try:
            command = parse(text)
        except UnknownCommand as exc:
            self.notify(str(exc), severity="warning")
            self.prompt.set_prompt(text)
            return
        if command is None:
            await self.send_prompt(text[1:] if text.startswith("//") else text)
            return
        await self.run_command(command.name, command.argument)

    async def run_command(self, name: str, argument: str) -> None:
        if name in ("/compact", "/offload"):
            if name == "/compact" and argument.lower() == "toolcall":
                self.action_reclaim()
            elif name == "/compact" and argument.lower() == "preview":
                self.action_preview()
            else:
                self.action_compact(argument or None)
        elif name == "/history":
            self.action_history()
        elif name == "/recall":
            self.action_recall(argument)
        elif name == "/context":
            self.action_context()
        elif name == "/render":
            from xun.tui.export import ExportError, render_transcript

            try:
                path = render_transcript(self.conversation, argument, self.workdir)
            except ExportError as exc:
                self.notify(str(exc), severity="error")
                return
            await self.chat.add_notice("info", f"transcript written to {self.shown_path(str(path))}")
        elif name == "/retry":
            await self.action_retry()
        elif name == "/revise":
            await self.action_revise(argument)
        elif name == "/clear":
            await self.action_clear()
        elif name == "/tokens":
            await self.action_tokens()
        elif name == "/mcp":
            self.action_mcp()
        elif name == "/sessions":
            await self.action_sessions()
        elif name == "/name":
            title = " ".join(argument.split())
            if not title:
                self.notify(f"this session is called {self.conversation.session_title() or '(nothing yet)'}; "
                            "/name TITLE names it", severity="warning")
                return
            self.conversation.title = title[:80]
            await self.chat.add_notice("info", f"this session is now called {title[:80]!r}")
            self.save_session()
        elif name == "/config":
            self.action_config()
        elif name == "/help":
            self.action_help()
        elif name == "/quit":
            await self.action_quit_saving()

    async def send_prompt(self, text: str) -> None:
        if self.busy is not None:
            self._may_start("the prompt")
            if not self.prompt.text.strip():
                self.prompt.set_prompt(text)
            return
        unanswered, self._unanswered = self._unanswered, None
        messages = self.conversation.messages
        if unanswered is not None and messages and messages[-1] is unanswered:
            self.conversation.pop_last_message_if_user()
        await self.chat.add_user(text)
        self._start_turn(text)

    def _start_turn(self, prompt: str | None) -> None:
        self._set_busy("turn", "thinking…")
        self.run_turn(prompt)

    # ---------------------------------------------------------------------------------- workers

    @work(exclusive=True, group="agent", exit_on_error=False)
    async def run_turn(self, prompt: str | None) -> None:
        try:
            await self._settle_save()
            if prompt is None:
                await self.agent.execute()
            else:
                await self.agent.run(prompt)
        finally:
            self.post_message(m.AgentWorkDone("turn"))

    @work(group="compaction", exit_on_error=False)
    async def compact_now(self, focus: str | None) -> None:
        from xun.compact import compact_conversation

        try:
            await self._settle_save()
            await compact_conversation(self.agent, keep_recent=self.session.config.auto_compact.summary_keep_max,
                                       instructions=focus, trigger="manual")
        finally:
            self.post_message(m.AgentWorkDone("compact"))

    @work(group="compaction", exit_on_error=False)
    async def reclaim_now(self) -> None:
        try:
            await self._settle_save()
            await self.agent.reclaim_tool_results(trigger="manual")
        finally:
            self.post_message(m.AgentWorkDone("reclaim"))

    @work(group="compaction", exit_on_error=False)
    async def restore_now(self, tool_call_id: str) -> None:
        try:
            await self._settle_save()
            try:
                await self.agent.restore_tool_result(tool_call_id)
            except (KeyError, ValueError) as exc:
                self.post_message(m.Notice("error", f"could not restore {tool_call_id}: {exc.args[0] if exc.args else exc}"))
        finally:
            self.post_message(m.AgentWorkDone("restore"))

    def save_session(self) -> None:
        """Save in a thread worker (after each turn and each manual compaction)."""
        if self._nothing_to_save():
            return
        self._save_worker()

    @work(thread=True, group="save", exit_on_error=False)
    def _save_worker(self) -> None:
        try:
            path = self.save_now()
        except OSError as exc:
            self.post_message(m.SessionSaved(None, str(exc)))
        else:
            self.post_message(m.SessionSaved(str(path) if path else None))

    def _nothing_to_save(self) -> bool:
        """A session that never got a message is not written (each launch would leave an empty file)."""
        if self.session is None:
            return True
        conversation = self.conversation
        if conversation.messages and any(msg.role != "system" for msg in conversation.messages):
            return False
        if conversation.compaction_log:
            return False
        try:
            return not self.session.store.path_for(conversation.conversation_id).exists()
        except ValueError:
            return True

    def save_now(self) -> Path | None:
        if self._nothing_to_save():
            return None
        path = self.session.save()
        self.saved = True
        self.last_saved_path = path
        return path

    async def _settle_save(self) -> None:
        """Wait for a save in progress: nothing may change the conversation while it is written."""
        for worker in list(self.workers):
            if worker.group == "save" and worker.is_running:
                with contextlib.suppress(Exception):  # a failed save was reported by the worker itself
                    await worker.wait()

    def _freeze_heap(self) -> None:
        """Once the session is shown: move everything alive now (Textual, the SDK, the loaded session)
        out of the collector's reach. Otherwise a full collection walks all of it every few seconds
        while a reply streams, a pause of 100 ms or more that the keyboard feels."""
        gc.collect()
        gc.freeze()
        self._heap_frozen = True

    async def on_unmount(self) -> None:
        """The HTTP client belongs to this app's event loop: close it, so a later app on the same session
        (or the session's next user) builds its own instead of one tied to a closed loop."""
        if self._heap_frozen:
            gc.unfreeze()  # what this app froze may be collected again once it is gone
            self._heap_frozen = False
        if self.session is None:
            return
        await self.stop_mcp_servers()
        with contextlib.suppress(Exception):  # closing a client that already failed must not stop the exit
            await self.agent.aclose()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{event.worker.name} failed: {type(error).__name__}: {error}", severity="error")

    # --------------------------------------------------------------------------- engine messages

    def on_turn_began(self, message: m.TurnBegan) -> None:
        self._unanswered = None
        self._consent_declined = False
        self._consent_granted = False
        self.gauge.reset_stream()
        self.header.status = "thinking…"

    async def on_reply_text(self, message: m.ReplyText) -> None:
        text = message.stream.take(message.upto)
        if not text:
            return
        block = await self.chat.current_reply()
        await block.write(text)
        self.gauge.streamed(len(text))
        self.header.status = "streaming…"

    async def on_reasoning_text(self, message: m.ReasoningText) -> None:
        text = message.stream.take(message.upto)
        if not text:
            return
        block = await self.chat.current_reply()
        await block.write_reasoning(text)
        self.gauge.streamed(len(text))
        self.header.status = "reasoning…"

    async def on_reply_complete(self, message: m.ReplyComplete) -> None:
        await self.chat.end_reply(message.content, message.reasoning)
        self.gauge.reset_stream()

    async def on_reply_retrying(self, message: m.ReplyRetrying) -> None:
        await self.chat.discard_reply()
        self.gauge.reset_stream()
        await self.chat.add_notice(
            "retry", f"retrying ({message.attempt}/{message.attempts - 1}) in {message.delay:g} s: {message.reason}")

    async def on_tool_call_began(self, message: m.ToolCallBegan) -> None:
        self.chat.reply = None
        await self.chat.add_tool(message.id, message.name, message.arguments)
        self.header.status = f"running {message.name}…"

    def on_tool_call_ended(self, message: m.ToolCallEnded) -> None:
        event = message.event
        block = self.chat.tool_block(event.id)
        if block is not None:
            block.finished(result_chars=event.result_chars, duration_text=self.presentation.duration(event.duration),
                           result=self._tool_result_text(event.id), is_error=event.is_error, denied=event.denied)
        self.gauge.set_estimate(self.agent.request_tokens(), self.conversation.total_tokens)
        self._warn_if_nearly_full()

    def _tool_result_text(self, call_id: str) -> str | None:
        for msg in reversed(self.conversation.messages):
            if type(msg) is RawOpenAIMessage and msg.raw.get("role") == "tool" and msg.raw.get("tool_call_id") == call_id:
                content = msg.raw.get("content")
                return content if isinstance(content, str) else str(content)
        return None

    def _count_usage(self, event: Any | None) -> None:
        """The one place the app reads a model call's usage (the server's prompt and completion tokens):
        added to the session's totals, shown under the gauge with the cost when `pricing` has the model."""
        from xun.usage import add_call, cost, price_for

        totals = self.conversation.usage_totals
        if event is not None:
            prompt, completion = getattr(event, "prompt_tokens", None), getattr(event, "completion_tokens", None)
            if add_call(totals, prompt, completion):
                self._last_call = {"prompt": prompt or 0, "completion": completion or 0}
        if not totals.get("calls"):
            self.gauge.set_usage("")
            return
        price = price_for(self.session.config.pricing, self.session.config.model.name)
        parts = []
        last = self._last_call
        if last is not None:
            parts.append(f"last call {last['prompt']:,} in · {last['completion']:,} out")
        spent = cost(totals, price)
        parts.append(f"session {tokens(totals['prompt'])} in · {tokens(totals['completion'])} out "
                     f"({totals['calls']:,} call{'s' if totals['calls'] != 1 else ''})"
                     + ("" if spent is None else f" · ${spent:,.4f}" if spent < 1 else f" · ${spent:,.2f}"))
        self.gauge.set_usage("\n".join(parts))

    def on_context_usage(self, message: m.ContextUsage) -> None:
        usage = message.event
        if message.after_model_call:
            self.gauge.model_called(usage.source == "server")
            self._count_usage(usage)
            self.gauge.cache_share = self.conversation.prompt_cache.last_hit_share
        self.gauge.set_figures(reported=usage.total_tokens, estimate=usage.estimated_tokens, threshold=usage.threshold,
                               window=usage.context_window, window_source=usage.window_source)
        if message.after_model_call:
            self.gauge.add_point(usage.total_tokens if usage.total_tokens is not None else usage.estimated_tokens)
        self._warn_if_nearly_full()

    async def on_notice(self, message: m.Notice) -> None:
        await self.chat.add_notice(message.level, message.text)
        if message.level in ("error", "warning"):  # e.g. the model call failed, automatic compaction is off
            self.notify(message.text, severity=message.level, title=message.level)

    async def on_summary_began(self, message: m.SummaryBegan) -> None:
        event = message.event
        focus = f" (focus: {event.focus})" if event.focus else ""
        self._pending_focus = event.focus
        self._pending_divider = await self.chat.add_divider(
            f"summarising {event.condensed} messages, keeping {event.kept}{focus}…", "running")
        self.header.status = "summarising…"

    async def on_compaction_recorded(self, message: m.CompactionRecorded) -> None:
        from xun import events

        event = message.event
        self.log_pane.add_record(event.to_json())
        conversation = self.conversation
        if isinstance(event, events.ToolResultsReclaimed):
            for block in self.chat.tool_blocks(event.ids):
                block.mark_reclaimed()
            archive = conversation.compacted_toolcalls
            self.recoverable.add(archive[i] for i in event.ids if i in archive)
            self._refresh_gauge()
            if event.count:
                self.gauge.add_point(self.agent.request_tokens())
            elif event.trigger == "manual":
                keep = self.session.config.auto_compact.toolcall_keep_max
                self.notify(f"Nothing to reclaim: {event.reason} (F6 keeps auto_compact.toolcall_keep_max = {keep}).",
                            title="reclaim")
        elif isinstance(event, events.SummaryFinished):
            text = SummaryDivider.describe(event.condensed, event.kept, self.shown_path(event.offload_path),
                                           self._pending_focus)
            self._pending_focus = None
            divider, self._pending_divider = self._pending_divider, None
            first_kept = self.chat_block_for(1) if len(conversation.messages) > 1 else None
            await self.chat.place_divider(text, first_kept, replacing=divider)
            self._mark_summarised_results()
            self._refresh_gauge()
            self.gauge.add_point(self.agent.request_tokens())
        elif isinstance(event, events.ToolResultRestored):
            block = self.chat.tool_block(event.id)
            if block is not None:
                block.mark_restored()
            self.recoverable.discard(event.id)
            self._refresh_gauge()
            self.gauge.add_point(self.agent.request_tokens())
        elif isinstance(event, (events.CompactionFailed, events.CompactionSkipped)):
            divider, self._pending_divider = self._pending_divider, None
            verb = "failed" if isinstance(event, events.CompactionFailed) else "skipped"
            if divider is not None and divider.is_attached:
                divider.set_text(f"summary {verb}: {event.reason}", verb)
            if event.trigger == "manual":
                self.notify(f"compaction {verb}: {event.reason}", severity="warning")

    async def on_turn_ended(self, message: m.TurnEnded) -> None:
        if message.status == "cancelled":
            if message.restored_prompt is not None:
                await self.chat.remove_from_last_user(inclusive=True)
                if not self.prompt.text.strip():
                    self.prompt.set_prompt(message.restored_prompt)
                    await self.chat.add_notice("cancelled", "cancelled; the prompt is back in the input")
                else:  # never replace what the user typed meanwhile; the prompt stays in the input's history
                    await self.chat.add_notice(
                        "cancelled", f"cancelled; the prompt ({one_line(message.restored_prompt, 60)}) is no longer "
                        "in the session and the input holds new text, so it was not put back: Up brings it back")
            elif self.chat.reply is not None and self.chat.reply.text.strip():
                last = self.conversation.messages[-1] if self.conversation.messages else None
                kept = last.raw.get("content") if type(last) is RawOpenAIMessage else None  # with its mark
                await self.chat.end_reply(kept if isinstance(kept, str) else self.chat.reply.text, "", cancelled=True)
                await self.chat.add_notice("cancelled", "cancelled; the reply so far is kept, marked as cancelled")
            else:
                await self.chat.add_notice("cancelled", "cancelled")
        elif message.status == "max_iterations":
            await self.chat.add_notice("warning", "stopped at the limit of model calls for one turn")
        elif message.status == "error" and message.restored_prompt is not None:  # never sent: too large to fit
            await self.chat.remove_from_last_user(inclusive=True)
            if not self.prompt.text.strip():
                self.prompt.set_prompt(message.restored_prompt)
            await self.chat.add_notice("error", f"{message.error}. The prompt is back in the input, and not in the session.")
        elif message.status == "error":
            messages = self.conversation.messages
            last = messages[-1] if messages else None
            if isinstance(last, UserMessage):  # the prompt got nothing at all: offer it again
                self._unanswered = last
                if not self.prompt.text.strip():
                    self.prompt.set_prompt(last.text)
                await self.chat.add_notice(
                    "info", "the prompt is kept in the session and is back in the input: Enter sends it again "
                    "(in place of the unanswered one), or /retry")

    async def on_agent_work_done(self, message: m.AgentWorkDone) -> None:
        if self.chat.reply is not None:
            await self.chat.end_reply(self.chat.reply.text, "")
        for screen in list(self._open_asks):
            self._close_ask(screen)
        divider, self._pending_divider = self._pending_divider, None
        if divider is not None and divider.is_attached and divider.state == "running":
            divider.set_text("summary cancelled; nothing changed", "cancelled")
        self.gauge.reset_stream()
        self._refresh_gauge()
        self._set_busy(None)
        for screen in self.screen_stack:  # an open recall screen re-checks what it may restore
            changed = getattr(screen, "context_changed", None)
            if callable(changed):
                changed(message.kind)
        self.finished_work += 1
        self.save_session()

    def on_session_saved(self, message: m.SessionSaved) -> None:
        if message.error:
            self.notify(f"could not save the session: {message.error}", severity="error")

    # ------------------------------------------------------------------------------ asking the user

    def _close_ask(self, screen: ModalScreen[Any]) -> None:
        if screen in self._open_asks:
            self._open_asks.remove(screen)
        if screen.is_attached and self.screen is screen:
            screen.dismiss(None)

    def on_confirmation_asked(self, message: m.ConfirmationAsked) -> None:
        from xun.tools import Decision
        from xun.tui.screens.confirm import ConfirmScreen

        answer = message.answer
        screen = ConfirmScreen(message.request)

        def answered(decision: Decision | None) -> None:
            if screen in self._open_asks:
                self._open_asks.remove(screen)
            if not answer.done():
                answer.set_result(decision if isinstance(decision, Decision) else Decision.DENY)

        self._open_asks.append(screen)
        answer.add_done_callback(lambda _f: self._close_ask(screen))
        self.header.status = "waiting for you"
        self.push_screen(screen, answered)

    def on_consent_asked(self, message: m.ConsentAsked) -> None:
        from xun.tui.screens.consent import ConsentScreen

        answer = message.answer
        if answer.done():  # the agent stopped waiting before the question arrived
            return
        if self._consent_declined or self._consent_granted:
            answer.set_result(self._consent_granted)
            return
        c = self.conversation
        settings = self.session.config.auto_compact
        plan = c.plan_compaction(settings.summary_keep_max)
        keep_text = "" if plan.nothing_to_condense else f"{plan.condensed_count} messages summarised, {len(plan.kept)} kept"
        figures = f"{tokens(self.agent.request_tokens())} / {tokens(self.agent.threshold)}"
        screen = ConsentScreen(figures, settings.ask_timeout, keep_text=keep_text)

        def answered(choice: str | None) -> None:
            if screen in self._open_asks:
                self._open_asks.remove(screen)
            if answer.done():
                return
            if choice == "off":
                self.session.config.set_here("auto_compact.mode", "off", "chosen in the app (this session only)")
                self.notify('Automatic summaries are off for this session (auto_compact.mode = "off"); '
                            f"{self.key_of('compact')} still summarises.", title="ask mode")
            answer.set_result(choice == "now")
            self._consent_declined = choice != "now"
            self._consent_granted = choice == "now"

        self._open_asks.append(screen)
        answer.add_done_callback(lambda _f: self._close_ask(screen))
        self.push_screen(screen, answered)  # the question and its countdown are on the screen (no toast to go stale)

    # -------------------------------------------------------------------------- inspector, sessions

    def on_open_inspector(self, message: m.OpenInspector) -> None:
        from xun.tui.screens.inspector import InspectorScreen

        call_id = message.tool_call_id
        archive = self.conversation.compacted_toolcalls
        original = self.conversation.compacted_toolcall_result(call_id)
        if call_id not in archive or original is None:
            self.notify(f"{call_id} is no longer reclaimed", severity="warning")
            self.recoverable.discard(call_id)
            return
        record = archive[call_id]

        def closed(result: str | None) -> None:
            if result == "restore":
                self.post_message(m.RestoreRequested(call_id))

        self.push_screen(InspectorScreen(
            record, original, workdir=self.workdir,
            when=self.presentation.clock(record.reclaimed_at) if record.reclaimed_at else "earlier",
            restorable=self._restorable(call_id)), closed)

    def _restorable(self, call_id: str) -> bool:
        for msg in self.conversation.messages:
            if type(msg) is RawOpenAIMessage and msg.raw.get("role") == "tool" and msg.raw.get("tool_call_id") == call_id:
                content = msg.raw.get("content")
                return isinstance(content, str) and content.startswith(PLACEHOLDER_HEAD)
        return False

    def on_restore_requested(self, message: m.RestoreRequested) -> None:
        if not self._may_start("a restore"):
            return
        self._set_busy("restore", "restoring…")
        self.restore_now(message.tool_call_id)

    async def on_switch_session(self, message: m.SwitchSession) -> None:
        if not self._may_start("switching sessions"):
            return
        await self._settle_save()
        try:
            await asyncio.to_thread(self.save_now)
            conversation = await asyncio.to_thread(self.session.store.load, message.conversation_id)
        except Exception as exc:  # noqa: BLE001 - unreadable file, bad id: say so and stay
            self.notify(f"could not open session {message.conversation_id}: {exc}", severity="error")
            return
        self.agent.conversation = conversation
        await self.show_conversation()
        await self.chat.add_notice("info", f"switched to session {conversation.conversation_id}")

    async def on_older_blocks_wanted(self, message: m.OlderBlocksWanted) -> None:
        await self.chat.load_older()
