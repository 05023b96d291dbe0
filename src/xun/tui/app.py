"""XunApp: the full-screen app around one session, and the table of contents of its parts.

The app's class holds the keys, the layout and the state every part shares; each concern is a mixin in
its own module:
- `session_lifecycle.SessionLifecycle`: open the session after the first frame, show it, save it, switch, quit;
- `key_help.KeysAndHelp`: which actions are enabled, the keys after `ui.keymap`, the help and the palette;
- `app_actions.AppActions`: what the keys do, and the workers that run the agent's work;
- `slash_commands.SlashCommands`: a typed prompt or slash command;
- `engine_handlers.EngineHandlers`: the engine's events (posted by `EventBridge`) update the panes.

The agent runs in workers (a turn in the "agent" group, manual compaction in "compaction", saving in a
thread worker); the agent's `on_event` is an `EventBridge` that posts messages, and the handlers update
the panes. Nothing a worker runs touches a widget.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.events import DescendantBlur, DescendantFocus, Key, Paste, Resize
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from xun.agent.opener import SessionOpener
from xun.base.paths import styles_dir
from xun.base.valid_text import escape_control
from xun.tui import messages as m
from xun.tui.format import Presentation, shown_path
from xun.tui.textual_private import check_bindings, notifications
from xun.tui.widgets.chat_view import ChatView
from xun.tui.widgets.command_menu import CommandMenu
from xun.tui.widgets.context_gauge import ContextGauge
from xun.tui.widgets.header import XunHeader
from xun.tui.widgets.key_bar import KeyBar
from xun.tui.widgets.prompt_input import PromptInput
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.welcome_block import WelcomeBlock

from xun.tui.app_actions import AppActions
from xun.tui.engine_handlers import EngineHandlers
from xun.tui.key_help import KeysAndHelp
from xun.tui.session_lifecycle import SessionLifecycle
from xun.tui.slash_commands import SlashCommands

if TYPE_CHECKING:
    from xun.context.conversation import Conversation
    from xun.context.messages import UserMessage
    from xun.agent.launch import Session
    from xun.tui.bridge import EventBridge
    from xun.tui.widgets.compaction_log import CompactionLog
    from xun.tui.widgets.recoverable_list import RecoverableList

# The screens are imported where they are first shown: none of them is needed for the first frame. Nor
# is the engine (events, conversation, settings, toolbox, agent: pydantic, SQLite, the offline server):
# an app given an `opener` draws its first frame, then opens the session in a thread.

NARROW = 100
"""Below this many columns the side panel is not beside the chat: F4 shows it in the chat's place."""
WIDE = 140
"""From this many columns the side panel takes half the width: its log rows and result arguments need it."""
SHORT = 30
"""Below this many rows a list in the side panel with the keyboard shrinks the gauge to its figures and bar."""

ANSWERS_A_KEY = frozenset({"Quit?"})
"""Toasts that answer the key just pressed: a question holding the others back still shows these, so a
Ctrl+C under a confirmation always says "Quit?" before a second one quits."""


class XunApp(
    SessionLifecycle, KeysAndHelp, AppActions, SlashCommands, EngineHandlers, App[int], inherit_bindings=False
):
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
        self._command_typed: str | None = None
        """The slash command being run, as typed: one that has to wait goes back into the input."""
        self._transcript_shown: Conversation | None = None
        """The resumed conversation the chat shows already (`TranscriptLoaded`), not to be mounted twice."""
        self._drop_warned: tuple[int, int] | None = None
        """The conversation (last message, length) a /retry or /revise warned about: a second one there drops it."""
        self._prompts_recalled: set[str] = set()
        """The conversations whose own prompts the prompt's history (Up) holds already."""
        self._newest_shown: list[Any] | None = None
        """A resumed session's newest turns, shown before the whole session was read (`NewestTurns`)."""
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
        self._work_started = False
        """Whether the worker doing `busy` has taken its first step (one cancelled before never will)."""
        self._turn_prompt: str | None = None
        """The prompt of the turn now running (None for /retry), given back if it is cancelled unsent."""
        self._last_ctrl_c = 0.0
        self._layout = {"narrow": False, "wide": False, "short": False, "side_shown": False, "side_hidden": False}
        """The main screen's layout (`set_layout`)."""
        self._ctrl_c_keys = (0.0, 0.0)
        """When the last two Ctrl+C keys came (a key's `time`)."""
        self._other_key_at = 0.0
        """When the last other key (or paste) came: typed between two Ctrl+C, the second does not quit."""
        self.quitting = False
        self.queued_prompts: list[tuple[str, Any]] = []
        """Prompts sent while something ran, in order, each with its "queued:" notice in the chat: the oldest
        goes out when the work is over; Esc (or a failed turn) puts them back into the input instead."""
        self._queue_held = False
        """The work now ending was cancelled or failed: the queued prompts go back to the input, not out."""
        self._given_back: str | None = None
        """"cancelled" or "failed": the input holds the prompt of the turn now ending, older than the queued ones."""
        self._queue_waits = False
        """A failed turn's prompt is back in the input: the queued prompts wait, and go out after it."""
        """Ctrl+Q (or Ctrl+C twice) was pressed: the running work winds down, the session is saved, the app exits."""
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
        self._full_warning: str | None = None
        """The title of that warning while it may still be on screen: withdrawn if the context drops back."""
        self._told_summaries_off: set[str] = set()
        """Sessions (conversation ids) already told in the chat that automatic summaries are off."""
        self._heap_frozen = False
        self._last_call: dict[str, int] | None = None
        """The last model call's reported tokens, for the usage line under the gauge."""
        self._recent_toasts: deque[tuple[float, dict[str, Any]]] = deque(maxlen=8)
        self._held_toasts: list[dict[str, Any]] | None = None
        """While a dialog is open, the toasts that wait for it to close (None: none is open)."""
        self._releasing: list[dict[str, Any]] = []
        """Toasts a closed dialog let go, to be shown after the next refresh (`_show_released`)."""
        self._withdrawn_at: dict[str, float] = {}
        """When the toasts of a title were last withdrawn (Unix time, as a notification's `raised_at`)."""
        self._holding_new = False
        """Whether toasts raised while it is open wait too (a question: `Modal.HOLDS_TOASTS`)."""

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
        if self._held_toasts is not None and self._holding_new and title not in ANSWERS_A_KEY:
            self._held_toasts.append(toast)
            return
        self._recent_toasts.append((time.monotonic(), toast))
        super().notify(**toast, markup=False)

    async def on_event(self, event: Any) -> None:
        """Before Textual hands a key or a paste to the focused pane: typing or pasting in a pane with no
        use for it goes to the prompt (`_hand_typing_to_prompt`)."""
        if isinstance(event, (Key, Paste)) and not event.is_forwarded:
            if isinstance(event, Key) and event.key == "ctrl+c":  # when each key came, in order (the actions
                self._ctrl_c_keys = (self._ctrl_c_keys[1], event.time)  # run later): `action_quit_twice`
            else:
                self._other_key_at = event.time
            if isinstance(event, Key) and event.key == "escape" and await self._escape_a_dialog():
                return
            self._hand_typing_to_prompt(event)
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

    def _hand_typing_to_prompt(self, event: Key | Paste) -> None:
        """Give the prompt the keyboard, at once, for a printable key no binding takes or a paste, while
        another pane of the main screen has it (the chat after Tab, the gauge after F4 at 60x20): what was
        typed there is never lost, Enter included. At once, and here, so that each key of a burst, Enter
        included, goes to the prompt; a pane that takes typing (`TAKES_TYPING`) keeps it."""
        from textual.widgets import Input, TextArea

        from xun.tui.screens.main import MainScreen

        if isinstance(event, Key) and (
            not (event.is_printable and event.character) or event.key in self.active_bindings
        ):
            return
        screen, focused = self.screen, self.focused
        if not isinstance(screen, MainScreen) or focused is None or isinstance(focused, (Input, TextArea)):
            return
        if any(getattr(node, "TAKES_TYPING", False) for node in focused.ancestors_with_self):
            return
        prompt = self.prompt
        if prompt.read_only:
            return
        if self.layout_is("narrow") and self.layout_is("side_shown"):  # the panel stands where the prompt is
            self.set_layout(side_shown=False)
        screen.set_focus(prompt)

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
        if notification.raised_at <= self._withdrawn_at.get(notification.title, float("-inf")):
            event.prevent_default()

    def _withdraw_toast(self, title: str) -> None:
        """Take back the toasts with this title that no longer hold: on screen, waiting for a dialog to close
        (or let go by one, not yet shown), remembered for one that opens, or raised and still queued."""
        self._withdrawn_at[title] = time.time()
        if self._held_toasts is not None:
            self._held_toasts = [toast for toast in self._held_toasts if toast["title"] != title]
        self._releasing = [toast for toast in self._releasing if toast["title"] != title]
        for entry in [entry for entry in self._recent_toasts if entry[1]["title"] == title]:
            self._recent_toasts.remove(entry)
        gone = [notification for notification in notifications(self) if notification.title == title]
        for notification in gone:
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
        if self._held_toasts is None:
            now = time.monotonic()
            self._held_toasts = [
                toast
                for raised, toast in self._recent_toasts
                if now - raised < (toast["timeout"] or self.NOTIFICATION_TIMEOUT)
            ]
            self._recent_toasts.clear()
            self.call_later(self.clear_notifications)  # after the toasts already posted (`notify` posts a message)
        self._holding_new = self._holding_new or new_ones_too

    def release_toasts(self) -> None:
        """The dialog closed: what waited is shown, for its whole time, on the screen under it."""
        held, self._held_toasts, self._holding_new = self._held_toasts, None, False
        self._releasing.extend(held or ())
        for toast in held or ():
            self.call_after_refresh(self._show_released, toast)  # (the dialog is still the top screen now)
        # a toast withdrawn while the dialog was open is taken off the screen under it only now: repaint
        # once it is gone, as for any toast that goes (else its rows may stay painted)
        self.call_after_refresh(self._repaint_after_toasts)

    def _show_released(self, toast: dict[str, Any]) -> None:
        """A toast that waited for a dialog, unless it was withdrawn meanwhile (a summary made as ask mode's
        question closed brings the context back under: the "nearly full" toast must not come back)."""
        if toast in self._releasing:
            self._releasing.remove(toast)
            self.notify(**toast)

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
        """The session's folder (the opener's while a resumed transcript shows before the session is open)."""
        if self.session is None and isinstance(self._opener, SessionOpener):
            return self._opener.workdir
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
        from xun.tui.widgets.compaction_log import CompactionLog  # (after the first frame, as the pane)

        return self.query_one(CompactionLog)

    @property
    def recoverable(self) -> RecoverableList:
        from xun.tui.widgets.recoverable_list import RecoverableList  # (after the first frame, as the pane)

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
                if self._opener is None:  # (with an opener they come after the first frame: `on_mount`)
                    yield from self._side_panes()
        # Ctrl+P (the palette) is in the help and the welcome text: without its corner every key fits in 80 columns
        yield KeyBar()

    def _side_panes(self) -> ComposeResult:
        from xun.tui.widgets.compaction_log import CompactionLog
        from xun.tui.widgets.recoverable_list import RecoverableList

        yield CompactionLog(clock=self.presentation.clock, shown_path=self.shown_path)
        yield RecoverableList(clock=self.presentation.clock, cursor_blink=self.presentation.cursor_blink)

    async def _mount_side_panes(self) -> None:
        """The compaction log and the recoverable results, right after the first frame (empty until the session
        is open, their tables were a twentieth of what that frame cost); before the session opens, so every
        pane is there when it shows."""
        await self.query_one("#side").mount_all(self._side_panes())

    def _welcome(self) -> WelcomeBlock | None:
        """None before the session is open (a resumed session with no message shows its empty transcript
        first: the welcome needs the session, so it comes with it)."""
        session = self.session
        if session is None:
            return None
        provider = "the offline demo model (scripted, not an LLM)" if session.offline else session.describe_provider()
        return WelcomeBlock(session.config.model.name, provider, self.key_of)

    async def on_mount(self) -> None:
        self._fit_size(self.size.width, self.size.height)
        if self.session is not None:
            await self._show_session()
            return
        self.header.status = "opening the session…"
        self.chat.border_subtitle = "opening the session…"
        # after the first frame: a thread started now would take the interpreter's lock from the first
        # frame's styling, layout and rendering; the side panes first (callbacks run in turn)
        self.call_after_refresh(self._mount_side_panes)
        self.call_after_refresh(self._open_session)

    def on_resize(self, event: Resize) -> None:
        self._fit_size(event.size.width, event.size.height)

    def _fit_size(self, width: int, height: int) -> None:
        self.set_layout(narrow=width < NARROW, wide=width >= WIDE, short=height < SHORT)

    def set_layout(self, **flags: bool) -> None:
        """The main screen's layout ("narrow", "wide", "short", "side_shown": the panel in the chat's place
        when narrow, "side_hidden": F4 when wide) as classes on the side panel and the chat column's
        display, never as classes on #main: Textual restyles every node under a node whose classes change,
        and each resize restyled every block of the chat (seconds in a long session: trials F #30, G #39)."""
        self._layout.update(flags)
        try:
            screen = self.screen_stack[0]
            side, column = screen.query_one("#side"), screen.query_one("#chat-column")
        except Exception:  # (not composed yet: applied once it is, from on_mount)
            return
        for name, enabled in self._layout.items():
            side.set_class(enabled, "-" + name.replace("_", "-"))
        column.display = not (self._layout["narrow"] and self._layout["side_shown"])

    def layout_is(self, name: str) -> bool:
        return self._layout[name]

    @on(DescendantFocus)
    @on(DescendantBlur)
    def _focus_moved(self) -> None:
        self.call_after_refresh(self._mark_side_focus)

    def _mark_side_focus(self) -> None:
        """A list in the side panel with the keyboard gets the rows (on a short screen the gauge keeps its
        figures and bar): at 60x20 the recoverable results had one row under the whole gauge."""
        focused = self.screen.focused
        listed = focused is not None and any(
            node.id in ("compaction-log", "recoverable") for node in focused.ancestors_with_self
        )
        for side in self.screen.query("#side"):
            side.set_class(listed, "-list-focused")

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

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{event.worker.name} failed: {type(error).__name__}: {error}", severity="error")
