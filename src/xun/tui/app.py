"""XunApp: the full-screen app around one session, and the table of contents of its parts.

The app holds the keys, the screens and the session's life; each other concern is an object the app
owns, the only writer of its state:
- `app.main` (`screens.main.MainScreen`): the panes, their layout, what the engine's events show, moving
  through the chat;
- `app.work` (`work_queue.WorkQueue`, no Textual): what runs now, the prompts queued behind it, the turn's
  state (an unanswered prompt, the prompt given back);
- `app.toasts` (`toasts.ToastHold`, no Textual): which toasts wait for a dialog to close;
- `app.questions` (`questions.EngineQuestions`): the confirmations and ask mode's question;
- `app.commands` (`slash_commands.SlashCommands`): a typed prompt or slash command;
- `key_help`: F1's text (`HELP`) and the palette's entries (`PALETTE`), as data.
Two mixins hold the rest of the app's own methods: `session_lifecycle.SessionLifecycle` (open the
session after the first frame, show it, save it, switch, quit) and `app_actions.AppActions` (what the keys
do, sending prompts, and the workers that run the agent's work).

The agent runs in workers (a turn in the "agent" group, manual compaction in "compaction", saving in a
thread worker); the agent's `on_event` is an `EventBridge` that posts messages to the app, whose handlers
hand them to their owner. Nothing a worker runs touches a widget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.events import InputEvent, Key, MouseMove, Paste, Resize
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from xun.agent.opener import SessionOpener
from xun.base.paths import styles_dir
from xun.base.valid_text import escape_control
from xun.tui import messages as m
from xun.tui.format import Presentation, shown_path
from xun.tui.heap import HeapKeeper
from xun.tui.key_help import AGENT_ACTIONS, HELP, PALETTE, binding_rows, key_display, keys_of
from xun.tui.questions import EngineQuestions
from xun.tui.screens.main import MainScreen
from xun.tui.slash_commands import SlashCommands
from xun.tui.textual_private import check_bindings, notifications
from xun.tui.toasts import ToastHold
from xun.tui.work_queue import WorkQueue

from xun.tui.app_actions import AppActions
from xun.tui.session_lifecycle import SessionLifecycle

if TYPE_CHECKING:
    from xun.context.conversation import Conversation
    from xun.agent.launch import Session
    from xun.tui.bridge import EventBridge

# The screens are imported where they are first shown: none of them is needed for the first frame. Nor
# is the engine (events, conversation, settings, toolbox, agent: pydantic, SQLite, the offline server):
# an app given an `opener` draws its first frame, then opens the session in a thread.


class XunApp(SessionLifecycle, AppActions, App[int], inherit_bindings=False):
    """`XunApp(session)`, or `XunApp(opener=...)` to draw the first frame before the session is opened
    (what `xun` does); `presentation=Presentation.fixed()` makes screenshots repeatable."""

    TITLE = "xun"
    CSS_PATH: ClassVar[list[str | Path]] = [styles_dir() / "xun.tcss"]
    AUTO_FOCUS = "#prompt"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help", id="help", tooltip="Keys and commands (this screen)"),
        Binding(
            "f4",
            "toggle_side",
            "Panel",
            id="toggle_side",
            priority=True,
            tooltip="Hide or show the side panel (gauge, compaction log, recoverable results)",
        ),
        Binding(
            "f5", "compact", "Summarise", id="compact", priority=True, tooltip="Summarise older turns now (/compact)"
        ),
        Binding(
            "f6",
            "reclaim",
            "Reclaim",
            id="reclaim",
            priority=True,
            tooltip="Reclaim old tool results now (/compact toolcall)",
        ),
        Binding(
            "f7",
            "preview",
            "Preview",
            id="preview",
            priority=True,
            tooltip="What a summary and a reclaim would do now (/compact preview)",
        ),
        Binding(
            "f8",
            "focus_recoverable",
            "Results",
            id="recoverable",
            priority=True,
            tooltip="Focus the recoverable tool results; Enter opens one",
        ),
        Binding(
            "f9",
            "recall",
            "Recall",
            id="recall",
            priority=True,
            tooltip="Search what compaction took out of the context (/recall)",
        ),
        Binding("escape", "cancel_turn", "Cancel", id="cancel", tooltip="Cancel the running turn"),
        Binding(
            "escape",
            "focus_prompt",
            "Prompt",
            id="focus_prompt",
            show=False,
            tooltip="Back to the prompt (from any pane; after cancelling a turn or closing a screen too)",
        ),
        Binding("ctrl+q", "quit_saving", "Quit", id="quit", priority=True, tooltip="Save the session and quit"),
        Binding("ctrl+c", "quit_twice", "Quit", id="quit_twice", show=False),
        Binding(
            "pageup",
            "chat_page(-1)",
            "Page up",
            id="chat_page_up",
            show=False,
            tooltip="Scroll the chat a page up (from the prompt too)",
        ),
        Binding(
            "pagedown",
            "chat_page(1)",
            "Page down",
            id="chat_page_down",
            show=False,
            tooltip="Scroll the chat a page down (from the prompt too)",
        ),
    ]

    def __init__(
        self,
        session: Session | None = None,
        *,
        opener: Callable[[], Session] | None = None,
        presentation: Presentation | None = None,
    ) -> None:
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
        self._transcript_shown: Conversation | None = None
        """The resumed conversation the chat shows already (`TranscriptLoaded`), not to be mounted twice."""
        self._newest_shown: list[Any] | None = None
        """A resumed session's newest turns, shown before the whole session was read (`NewestTurns`)."""
        self.presentation = presentation or Presentation()
        self.bridge: EventBridge | None = None
        """Turns the agent's events into messages; made with the session."""
        if session is not None:
            self._attach(session)
        self._last_ctrl_c = 0.0
        self._ctrl_c_keys = (0.0, 0.0)
        """When the last two Ctrl+C keys came (a key's `time`)."""
        self._other_key_at = 0.0
        """When the last other key (or paste) came: typed between two Ctrl+C, the second does not quit."""
        self.quitting = False
        """Ctrl+Q (or Ctrl+C twice) was pressed: the running work winds down, the session is saved, the app exits."""
        self.saved = False
        self.last_saved_path: Path | None = None
        self.heap = HeapKeeper()
        """The frozen heap and when the collector may walk the rest."""
        self.main: MainScreen
        """The panes (made by `get_default_screen`, when the app starts)."""
        self.work = WorkQueue()
        """What runs now and the prompts waiting for it."""
        self.toasts = ToastHold(self.NOTIFICATION_TIMEOUT)
        """Which toasts show now and which wait for a dialog."""
        self.questions = EngineQuestions(self)
        """The confirmations and ask mode's question on screen, and the answers that hold for the turn."""
        self.commands = SlashCommands(self)
        """A typed prompt or slash command."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every toast (the app's, a screen's, a widget's) as text: its message and title often carry what a
        server, a config key or an MCP server wrote, which Textual would read as markup (a `[@click=…]`
        that answers the dialog under it, a `[/]` that crashes the app). Control characters show as `\\x1b`."""
        toast = {
            "message": escape_control(message),
            "title": escape_control(title, keep_newlines=False),
            "severity": severity,
            "timeout": timeout,
        }
        if self.toasts.admit(toast):
            super().notify(**toast, markup=False)

    async def on_event(self, event: Any) -> None:
        """Before Textual hands a key or a paste to the focused pane: typing or pasting in a pane with no
        use for it goes to the prompt (`MainScreen.typed`). Any input but a mouse move puts off the next
        full collection (`HeapKeeper.collect_if_quiet`)."""
        if isinstance(event, InputEvent) and not isinstance(event, MouseMove):
            self.heap.input_seen()
        if isinstance(event, (Key, Paste)) and not event.is_forwarded:
            if isinstance(event, Key) and event.key == "ctrl+c":  # when each key came, in order (the actions
                self._ctrl_c_keys = (self._ctrl_c_keys[1], event.time)  # run later): `action_quit_twice`
            else:
                self._other_key_at = event.time
            if isinstance(event, Key) and event.key == "escape" and await self._escape_a_dialog():
                return
            self.main.typed(event)
        await super().on_event(event)

    async def _escape_a_dialog(self) -> bool:
        """Esc on a dialog runs its Esc key here, at once, as the app reads it (sent on to the dialog, it
        would run after the keys typed behind it), so those keys go to the screen under the dialog, never
        to the dialog that is closing. Whether it was taken."""
        from xun.tui.screens.modal import Modal

        return isinstance(self.screen, Modal) and await check_bindings(self, "escape")

    def _on_key(self, event: Key) -> None:
        """A key pressed before the dialog on screen was opened, and only now back at the app from the
        screen it was sent to, runs none of the dialog's keys (an Esc typed before F7 must not close the
        preview F7 opened).
        (`App._on_key`, which runs the screen's bindings, comes next unless the default is prevented.)"""
        from xun.tui.screens.modal import Modal

        screen = self.screen
        if isinstance(screen, Modal) and event.time < screen.opened_at:
            event.prevent_default()

    def paste_into_prompt(self, text: str) -> None:
        """A paste made over a dialog with no field for it: into the prompt behind, with a toast saying where."""
        from xun.tui.widgets.prompt_input import PromptInput

        try:
            prompt = self.screen_stack[0].query_one(PromptInput)
        except Exception:  # no main screen yet (the trust question opens before it)
            prompt = None
        if prompt is None or prompt.read_only:
            self.notify(
                "Nothing was pasted: this dialog has no field for it, and the prompt takes no text now.",
                title="paste",
                severity="warning",
            )
            return
        prompt.post_message(Paste(text))
        lines = len(text.replace("\r\n", "\n").replace("\r", "\n").splitlines()) or 1
        self.notify(f"Pasted into the prompt behind this dialog ({lines:,} line{'s' * (lines != 1)}).", title="paste")

    def _unnotify(self, notification: Any, refresh: bool = True) -> None:
        """A toast expired or was clicked away: repaint the screen once it has gone (`_repaint_after_toasts`)."""
        super()._unnotify(notification, refresh)
        self._repaint_after_toasts()

    def _on_notify(self, event: Any) -> None:
        """A toast raised before its title was withdrawn, but handled after (its message was still queued),
        is not shown: it no longer holds. (Textual then calls `App._on_notify`, which shows it, unless the
        default is prevented.)"""
        notification = event.notification
        if self.toasts.withdrawn(notification.title, notification.raised_at):
            event.prevent_default()

    def withdraw_toast(self, title: str) -> None:
        """Take back the toasts with this title that no longer hold: on screen, waiting for a dialog to close
        (or let go by one, not yet shown), remembered for one that opens, or raised and still queued."""
        self.toasts.withdraw(title)
        for notification in [notification for notification in notifications(self) if notification.title == title]:
            self._unnotify(notification)

    def clear_notifications(self) -> None:
        super().clear_notifications()
        self._repaint_after_toasts()

    def _repaint_after_toasts(self) -> None:
        """Once no toast of a gone notification is still on the screen, repaint all of it after the next
        refresh. Textual repaints only what its layout diff finds changed, and under load the diff could miss
        the toast (most likely its map was rebuilt between the removal and the layout): rows of an expired toast
        would stay painted on the prompt's border. Textual is pinned."""
        from xun.tui.textual_private import Toast, toast_notification

        if not self.is_running:
            return
        try:
            screen = self.screen
        except Exception:  # no screen yet, or the app is closing
            return
        if any(toast_notification(toast) not in notifications(self) for toast in screen.query(Toast)):
            self.set_timer(0.1, self._repaint_after_toasts)  # its holder is being removed
            return
        self.call_after_refresh(screen.refresh)

    def hold_toasts(self, *, new_ones_too: bool) -> None:
        """A dialog opened: the toasts on screen wait until it closes, so none covers what was opened to be
        read (at 60x20 a toast hid half of F1, F7 and F9); for a question, those to come wait too, so none
        covers its buttons or its keys (a toast hid an answer of a question that times out). A dialog's own
        toasts (a failed save in the inspector) show on it."""
        if self.toasts.hold(new_ones_too=new_ones_too):
            self.call_later(self.clear_notifications)  # after the toasts already posted (`notify` posts a message)

    def release_toasts(self) -> None:
        """The dialog closed: what waited is shown, for its whole time, on the screen under it, unless it was
        withdrawn meanwhile (a summary made as ask mode's question closed brings the context back under: the
        "nearly full" toast must not come back)."""

        def show(toast: dict[str, Any]) -> None:
            if self.toasts.due(toast):
                self.notify(**toast)

        for toast in self.toasts.release():
            self.call_after_refresh(show, toast)  # (the dialog is still the top screen now)
        # a toast withdrawn while the dialog was open is taken off the screen under it only now: repaint
        # once it is gone, as for any toast that goes (else its rows may stay painted)
        self.call_after_refresh(self._repaint_after_toasts)

    def _attach(self, session: Session) -> None:
        from xun.tui.bridge import EventBridge

        self.session = session
        self.bridge = EventBridge(self.post_message)
        agent = session.agent
        agent.on_event = self.bridge
        agent.confirm = self.bridge.confirm
        agent.consent = self.bridge.consent

    def get_default_screen(self) -> Screen[Any]:
        self.main = MainScreen(id="_default")
        return self.main

    # ------------------------------------------------------------------------------ properties

    @property
    def agent(self):
        return self.session.agent

    @property
    def conversation(self) -> Conversation:
        return self.session.agent.conversation

    @property
    def workdir(self) -> Path:
        """The session's folder (the opener's while a resumed transcript shows before the session is open)."""
        if self.session is None and isinstance(self._opener, SessionOpener):
            return self._opener.workdir
        return Path(self.session.agent.workdir)

    def shown_path(self, path: str | None) -> str:
        return shown_path(path, self.workdir)

    # ------------------------------------------------------------------------------------ keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in AGENT_ACTIONS and (self.session is None or isinstance(self.screen, ModalScreen)):
            return False
        if action == "chat_page" and isinstance(self.screen, ModalScreen):
            return False  # (not the chat behind a modal)
        return not (action == "cancel_turn" and not self.work.cancellable())

    def key_of(self, binding_id: str) -> str:
        """How the key of a binding reads now (after `ui.keymap`), e.g. "F5" ("Ctrl+P" when it has none)."""
        binding = next((b for b in self.BINDINGS if isinstance(b, Binding) and b.id == binding_id), None)
        keys = keys_of(binding, getattr(self, "_keymap", {}) or {}) if binding is not None else None
        return key_display(keys) if keys else "Ctrl+P"

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """F1: the keys as `ui.keymap` left them, then the rest of the help (`HELP`)."""
        return [("Keys", binding_rows(self.BINDINGS, getattr(self, "_keymap", {}) or {})), *HELP]

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own "Quit" would sit beside "Save and quit": one quit in the palette; its "Screenshot"
        # wrote to a Downloads folder (often missing) and said only "Failed to save screenshot": ours writes
        # into .xun/exports and says where
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
        for title, help_text, call in PALETTE:
            if call == "action_cancel_turn" and self.work.busy is None:
                continue  # nothing to cancel
            yield SystemCommand(title, help_text, attrgetter(call)(self))

    def offer_render(self) -> None:
        """The palette's "Render transcript" puts the command in the prompt; a draft there goes into the
        prompt's history first, where Up finds it: a draft is never replaced with no way back."""
        prompt = self.main.prompt
        if prompt.text.strip():
            prompt.remember(prompt.expanded(prompt.text))
        prompt.set_prompt("/render transcript.html")

    # ---------------------------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        """The main screen's panes (`MainScreen.compose_panes`), composed into it as the app's own."""
        return self.main.compose_panes()

    async def on_mount(self) -> None:
        self.main.fit(self.size.width, self.size.height)
        if self.session is not None:
            await self._show_session()
            return
        self.main.header.status = "opening the session…"
        self.main.chat.border_subtitle = "opening the session…"
        # after the first frame: a thread started now would take the interpreter's lock from the first
        # frame's styling, layout and rendering; the side panes first (callbacks run in turn)
        self.call_after_refresh(self.main.mount_side_panes)
        self.call_after_refresh(self._open_session)

    def on_resize(self, event: Resize) -> None:
        self.main.fit(event.size.width, event.size.height)

    @on(m.PromptSubmitted)
    async def _prompt_submitted(self, message: m.PromptSubmitted) -> None:
        if self.session is None:
            if self._early_prompt is None:
                self._early_prompt = message.text
                self.main.header.status = "opening the session… (your prompt goes out when it is open)"
            elif not self.main.prompt.text.strip():  # one prompt waits; a second stays in the input
                self.main.prompt.set_prompt(message.text)
            return
        await self.commands.submit(message.text)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{event.worker.name} failed: {type(error).__name__}: {error}", severity="error")

    # ------------------------------------------------------------------------- the engine's messages
    # (posted to the app by the `EventBridge`: one queue keeps them in order with the workers' own)

    def on_turn_began(self, message: m.TurnBegan) -> None:
        self.work.turn_began()
        self.questions.turn_began()
        self.main.turn_began()

    async def on_reply_text(self, message: m.ReplyText) -> None:
        await self.main.reply_text(message)

    async def on_reasoning_text(self, message: m.ReasoningText) -> None:
        await self.main.reasoning_text(message)

    async def on_reply_complete(self, message: m.ReplyComplete) -> None:
        await self.main.reply_complete(message)

    async def on_reply_retrying(self, message: m.ReplyRetrying) -> None:
        await self.main.reply_retrying(message)

    async def on_tool_call_began(self, message: m.ToolCallBegan) -> None:
        await self.main.tool_call_began(message)

    def on_tool_call_ended(self, message: m.ToolCallEnded) -> None:
        self.main.tool_call_ended(message)

    def on_context_usage(self, message: m.ContextUsage) -> None:
        self.main.context_usage(message)

    async def on_notice(self, message: m.Notice) -> None:
        await self.main.notice(message)

    async def on_summary_began(self, message: m.SummaryBegan) -> None:
        await self.main.summary_began(message)

    async def on_compaction_recorded(self, message: m.CompactionRecorded) -> None:
        await self.main.compaction_recorded(message)

    async def on_turn_ended(self, message: m.TurnEnded) -> None:
        self.work.turn_ended(message.status)
        await self.main.turn_ended(message)

    def on_confirmation_asked(self, message: m.ConfirmationAsked) -> None:
        self.questions.confirm(message)

    def on_consent_asked(self, message: m.ConsentAsked) -> None:
        self.questions.consent(message)
