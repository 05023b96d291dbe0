"""The main screen: the panes (header, chat, prompt, gauge, compaction log, recoverable results), their
layout, what the engine's events show in them, and moving through the chat.

The engine's messages are posted to the app (one queue keeps their order with the work's own messages);
the app's handlers hand each to this screen, which owns everything they change on it. The screen forgets
its focus when a modal covers it, so closing any screen brings the keyboard back to the prompt (the app's
AUTO_FOCUS), wherever it was before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.events import DescendantBlur, DescendantFocus, Key, Paste
from textual.screen import Screen
from textual.widget import Widget

from xun.tui import messages as m
from xun.tui.commands import as_typed
from xun.tui.context_advice import restored_over, still_over, summaries_off
from xun.tui.format import counted, one_line, percent, tokens
from xun.tui.transcript import OffloadedItem, offloaded_of, offloaded_prompts, transcript
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.chat_view import ChatView
from xun.tui.widgets.command_menu import CommandMenu
from xun.tui.widgets.context_gauge import ContextGauge
from xun.tui.widgets.header import XunHeader
from xun.tui.widgets.key_bar import KeyBar
from xun.tui.widgets.prompt_input import PromptInput
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.user_block import UserBlock
from xun.tui.widgets.welcome_block import WelcomeBlock

if TYPE_CHECKING:
    from xun.context.conversation import Conversation
    from xun.tui.widgets.compaction_log import CompactionLog
    from xun.tui.widgets.recoverable_list import RecoverableList

NARROW = 100
"""Below this many columns the side panel is not beside the chat: F4 shows it in the chat's place."""
WIDE = 140
"""From this many columns the side panel takes half the width: its log rows and result arguments need it."""
SHORT = 30
"""Below this many rows a list in the side panel with the keyboard shrinks the gauge to its figures and bar."""
FULL_WARNING = 0.9
"""The share of the threshold past which the app warns, once per session, how to compact or preview."""


def _summaries_off() -> str:
    """The policy's reason for a skip with automatic summaries off (the policy is imported when used: it is
    not needed for the first frame)."""
    from xun.compact.policy import SUMMARIES_OFF

    return SUMMARIES_OFF


def _history_points(conversation: Conversation) -> tuple[list[int], list[str]]:
    """The sparkline of a resumed session, and what made each point: a compaction's "before" stands for the
    model call before it, its "after" for the compaction, as they were drawn live."""
    points: list[int] = []
    kinds: list[str] = []
    for record in conversation.compaction_log:
        before, after = record.get("tokens_before"), record.get("tokens_after")
        if (
            record.get("type") in ("tool_results_reclaimed", "summary_finished")
            and isinstance(before, int)
            and isinstance(after, int)
        ):
            points += [before, after]
            kinds += ["call", "compaction"]
    if conversation.total_tokens is not None:
        points.append(conversation.total_tokens)
        kinds.append("call")
    return points, kinds


class MainScreen(Screen[None]):
    """The app's default screen (`app.main`)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._layout = {"narrow": False, "wide": False, "short": False, "side_shown": False, "side_hidden": False}
        """The layout (`set_layout`)."""
        self._last_call: dict[str, int] | None = None
        """The last model call's reported tokens, for the usage line under the gauge."""
        self._pending_divider: SummaryDivider | None = None
        """The running summary's divider in the chat, until the summary is recorded (or the work is over)."""
        self._pending_focus: str | None = None
        """The running summary's focus (/compact FOCUS), for its divider."""
        self._warned_full: set[str] = set()
        """Sessions (conversation ids) already warned that the context passed FULL_WARNING of the threshold."""
        self._full_warning: str | None = None
        """The title of that warning while it may still be on screen: withdrawn if the context drops back."""
        self._told_summaries_off: set[str] = set()
        """Sessions (conversation ids) already told in the chat that automatic summaries are off."""
        self._prompts_recalled: set[str] = set()
        """The conversations whose own prompts the prompt's history (Up) holds already."""

    def on_screen_suspend(self) -> None:
        self.set_focus(None)

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

    def compose_panes(self) -> ComposeResult:
        """The panes, composed by the app into this screen (its default screen) as its own: the app's mount
        comes after them."""
        yield XunHeader()
        with Horizontal(id="main"):
            with Vertical(id="chat-column"):
                yield ChatView(shown_path=self.app.shown_path, welcome=self.welcome)
                menu = CommandMenu()
                yield menu
                yield PromptInput(menu, cursor_blink=self.app.presentation.cursor_blink)
            with Vertical(id="side"):
                yield ContextGauge()
                if self.app.session is not None:  # (with an opener they come after the first frame: `on_mount`)
                    yield from self.side_panes()
        # Ctrl+P (the palette) is in the help and the welcome text: without its corner every key fits in 80 columns
        yield KeyBar()

    def side_panes(self) -> ComposeResult:
        from xun.tui.widgets.compaction_log import CompactionLog
        from xun.tui.widgets.recoverable_list import RecoverableList

        yield CompactionLog(clock=self.app.presentation.clock, shown_path=self.app.shown_path)
        yield RecoverableList(clock=self.app.presentation.clock, cursor_blink=self.app.presentation.cursor_blink)

    async def mount_side_panes(self) -> None:
        """The compaction log and the recoverable results, right after the first frame (empty until the session
        is open, their tables were a twentieth of what that frame cost); before the session opens, so every
        pane is there when it shows."""
        await self.query_one("#side").mount_all(self.side_panes())

    def welcome(self) -> WelcomeBlock | None:
        """None before the session is open (a resumed session with no message shows its empty transcript
        first: the welcome needs the session, so it comes with it)."""
        session = self.app.session
        if session is None:
            return None
        provider = "the offline demo model (scripted, not an LLM)" if session.offline else session.describe_provider()
        return WelcomeBlock(session.config.model.name, provider, self.app.key_of)

    def fit(self, width: int, height: int) -> None:
        self.set_layout(narrow=width < NARROW, wide=width >= WIDE, short=height < SHORT)

    def set_layout(self, **flags: bool) -> None:
        """The main screen's layout ("narrow", "wide", "short", "side_shown": the panel in the chat's place
        when narrow, "side_hidden": F4 when wide) as classes on the side panel and the chat column's
        display, never as classes on #main: Textual restyles every node under a node whose classes change,
        so a class on #main would restyle every block of the chat at each resize."""
        self._layout.update(flags)
        try:
            side, column = self.query_one("#side"), self.query_one("#chat-column")
        except Exception:  # (not composed yet: applied once it is, from on_mount)
            return
        for name, enabled in self._layout.items():
            side.set_class(enabled, "-" + name.replace("_", "-"))
        column.display = not (self._layout["narrow"] and self._layout["side_shown"])

    def layout_is(self, name: str) -> bool:
        return self._layout[name]

    def typed(self, event: Key | Paste) -> None:
        """A key or a paste, as the app reads it: a streaming reply's next update waits for a pause in the
        typing (`AssistantBlock.hold_for_typing`), and typing in a pane with no use for it goes to the prompt."""
        if self.chat.reply is not None:
            self.chat.reply.hold_for_typing()
        self.take_typing(event)

    def take_typing(self, event: Key | Paste) -> None:
        """Give the prompt the keyboard, at once, for a printable key no binding takes or a paste, while
        another pane of this screen has it (the chat after Tab, the gauge after F4 at 60x20): what was
        typed there is never lost, Enter included. At once (the app calls this as it reads the key), so that
        each key of a burst, Enter included, goes to the prompt; a pane that takes typing (`TAKES_TYPING`)
        keeps it."""
        from textual.widgets import Input, TextArea

        app = self.app
        if isinstance(event, Key) and (
            not (event.is_printable and event.character) or event.key in app.active_bindings
        ):
            return
        focused = app.focused
        if app.screen is not self or focused is None or isinstance(focused, (Input, TextArea)):
            return
        if any(getattr(node, "TAKES_TYPING", False) for node in focused.ancestors_with_self):
            return
        prompt = self.prompt
        if prompt.read_only:
            return
        if self.layout_is("narrow") and self.layout_is("side_shown"):  # the panel stands where the prompt is
            self.set_layout(side_shown=False)
        self.set_focus(prompt)

    @on(DescendantFocus)
    @on(DescendantBlur)
    def _focus_moved(self) -> None:
        self.call_after_refresh(self._mark_side_focus)

    def _mark_side_focus(self) -> None:
        """A list in the side panel with the keyboard gets the rows (on a short screen the gauge keeps its
        figures and bar): at 60x20 the recoverable results had one row under the whole gauge."""
        if self.app.screen is not self:  # a dialog's focus: the panel under it stays as it was
            return
        focused = self.focused
        listed = focused is not None and any(
            node.id in ("compaction-log", "recoverable") for node in focused.ancestors_with_self
        )
        self.query_one("#side").set_class(listed, "-list-focused")

    # ------------------------------------------------------------------------------ a conversation shown

    async def show_conversation(self, conversation: Conversation, *, read_only: bool, shown: Any) -> None:
        """Fill every pane from the conversation (start, resume, session switch); `shown`: the conversation
        whose transcript the chat shows already (a resume shows it before the session is open)."""
        self.header.set_session(conversation.conversation_id, read_only=read_only)
        if conversation is not shown or not self.chat.children:  # (an empty one: now with the welcome)
            await self.chat.show_transcript(transcript(conversation).items)
        self.gauge.context_replaced()
        self.refresh_gauge()
        self.gauge.set_history(*_history_points(conversation))
        self.usage_reset()
        self.log_pane.load(list(conversation.compaction_log))
        self.recoverable.load([])
        self.call_after_refresh(self._load_recoverable)
        # what is there now: the prompts sent from here on are in the history already
        self.call_after_refresh(self._recall_prompts, len(conversation.messages), offloaded_of(conversation))

    def _recall_prompts(self, shown: int, offloads: list[OffloadedItem]) -> None:
        """After the first frame: a resumed session's own prompts go into the prompt's history (Up), oldest
        first and before those typed since; the ones a summary took out come from the offload log, in a thread."""
        conversation = self.app.conversation
        if conversation.conversation_id in self._prompts_recalled:
            return
        self._prompts_recalled.add(conversation.conversation_id)
        from xun.context.messages import UserMessage

        in_context = [message.text for message in conversation.messages[:shown] if isinstance(message, UserMessage)]
        self._read_prompts(offloads, in_context)

    @work(thread=True, group="prompts", exit_on_error=False)
    def _read_prompts(self, offloads: list[OffloadedItem], in_context: list[str]) -> None:
        # one summary's turns at a time, read as a stream (what cannot be read is said when the chat shows it)
        prompts = [prompt for one in offloads for prompt in offloaded_prompts(one)]
        prompts += in_context
        if prompts:
            self.app.call_from_thread(self.prompt.recall_earlier, prompts)

    def _load_recoverable(self) -> None:
        """After the first frame: a resumed session parses its archive of originals only now."""
        try:
            records = list(self.app.conversation.reclaimed_results.values())
        except Exception as exc:  # noqa: BLE001 - a damaged archive line: say so, keep the rest working
            self.app.notify(f"the reclaimed results could not be read: {exc}", severity="error")
            records = []
        self.recoverable.load(records)
        self.mark_summarised_results()

    # ------------------------------------------------------------------------------ the engine's events

    def turn_began(self) -> None:
        self.gauge.reset_stream()
        self.header.status = "thinking…"

    async def reply_text(self, message: m.ReplyText) -> None:
        text = message.stream.take(message.upto)
        if not text:
            return
        await self.chat.hide_waiting()
        block = await self.chat.current_reply()
        await block.write(text)
        self.gauge.streamed(len(text))
        self.header.status = "streaming…"

    async def reasoning_text(self, message: m.ReasoningText) -> None:
        text = message.stream.take(message.upto)
        if not text:
            return
        await self.chat.hide_waiting()
        block = await self.chat.current_reply()
        await block.write_reasoning(text)
        self.gauge.streamed(len(text))
        self.header.status = "reasoning…"

    async def reply_complete(self, message: m.ReplyComplete) -> None:
        await self.chat.end_reply(message.content, message.reasoning)
        self.gauge.reset_stream()

    async def reply_retrying(self, message: m.ReplyRetrying) -> None:
        await self.chat.hide_waiting()
        await self.chat.discard_reply()
        self.gauge.reset_stream()
        await self.chat.add_notice(
            "retry", f"retrying ({message.attempt}/{message.attempts - 1}) in {message.delay:g} s: {message.reason}"
        )

    async def tool_call_began(self, message: m.ToolCallBegan) -> None:
        await self.chat.hide_waiting()
        self.chat.reply = None
        await self.chat.add_tool(message.id, message.name, message.arguments)
        self.header.status = f"running {message.name}…"

    def tool_call_ended(self, message: m.ToolCallEnded) -> None:
        event = message.event
        block = self.chat.tool_block(event.id)
        if block is not None:
            block.finished(
                result_chars=event.result_chars,
                duration_text=self.app.presentation.duration(event.duration),
                result=self._tool_result_text(event.id),
                is_error=event.is_error,
                denied=event.denied,
            )
        self.gauge.set_estimate(self.app.agent.request_tokens(), self.app.conversation.total_tokens)
        self._warn_if_nearly_full()

    def _tool_result_text(self, call_id: str) -> str | None:
        from xun.context.messages import RawOpenAIMessage

        for msg in reversed(self.app.conversation.messages):
            if (
                type(msg) is RawOpenAIMessage
                and msg.raw.get("role") == "tool"
                and msg.raw.get("tool_call_id") == call_id
            ):
                content = msg.raw.get("content")
                return content if isinstance(content, str) else str(content)
        return None

    def count_usage(self, event: Any | None) -> None:
        """The usage line under the gauge: the last model call's reported tokens, and the session's totals
        (which the agent keeps: `xun.context.usage`) with their cost when `pricing` has the model."""
        from xun.context.usage import cost_text

        totals = self.app.conversation.usage_totals
        if event is not None and getattr(event, "prompt_tokens", None) is not None:
            self._last_call = {"prompt": event.prompt_tokens or 0, "completion": event.completion_tokens or 0}
        elif event is not None and event.source == "disbelieved":  # the last call's count was not believed
            self._last_call = None
        if not totals.get("calls"):
            self.gauge.set_usage("")
            return
        parts = []
        last = self._last_call
        if last is not None:
            parts.append(f"last call {last['prompt']:,} in · {last['completion']:,} out")
        spent = self.app.agent.session_cost()
        cached = f" ({tokens(totals['cached_input'])} cached)" if totals.get("cached_input") else ""
        parts.append(
            f"session {tokens(totals['prompt'])} in{cached} · {tokens(totals['completion'])} out "
            f"({totals['calls']:,} call{'s' if totals['calls'] != 1 else ''})"
            + ("" if spent is None else f" · {cost_text(spent)}")
        )
        self.gauge.set_usage("\n".join(parts))

    def summaries_off_said_again(self, session: str) -> None:
        """Automatic summaries turned back on: if they go off again later, the chat says so again."""
        self._told_summaries_off.discard(session)

    def usage_reset(self) -> None:
        """A conversation shown afresh (resume, switch, /clear): no last call yet, the session's totals."""
        self._last_call = None
        self.count_usage(None)

    def context_usage(self, message: m.ContextUsage) -> None:
        usage = message.event
        if message.after_model_call:
            self.gauge.model_called(usage.source)
            self.count_usage(usage)
            self.gauge.cache_share = self.app.conversation.prompt_cache.last_hit_share
        self.gauge.set_figures(
            reported=usage.total_tokens,
            estimate=usage.estimated_tokens,
            threshold=usage.threshold,
            window=usage.context_window,
            window_source=usage.window_source,
        )
        if message.after_model_call:
            self.gauge.add_point(usage.total_tokens if usage.total_tokens is not None else usage.estimated_tokens)
        self._refresh_chat_footer()
        self._warn_if_nearly_full()

    async def notice(self, message: m.Notice) -> None:
        await self.chat.add_notice(message.level, message.text)
        if message.level in ("error", "warning"):  # e.g. the model call failed, automatic compaction is off
            self.app.notify(message.text, severity=message.level, title=message.level)

    async def summary_began(self, message: m.SummaryBegan) -> None:
        event = message.event
        focus = f" (focus: {event.focus})" if event.focus else ""
        self._pending_focus = event.focus
        self._pending_divider = await self.chat.add_divider(
            f"summarising {event.condensed} messages, keeping {event.kept}{focus}…", "running"
        )
        self.header.status = "summarising…"

    async def compaction_recorded(self, message: m.CompactionRecorded) -> None:
        from xun.base import events

        event = message.event
        self.log_pane.add_record(event.to_json())
        conversation = self.app.conversation
        if isinstance(event, events.ToolResultsReclaimed):
            self.chat.mark_reclaimed(event.ids)
            archive = conversation.reclaimed_results
            self.recoverable.add(archive[i] for i in event.ids if i in archive)
            self.refresh_gauge()
            if event.count:
                self.gauge.add_point(self.app.agent.request_tokens(), "compaction")
            elif event.trigger == "manual":
                keep = self.app.session.config.auto_compact.toolcall_keep_max
                self.app.notify(
                    f"Nothing to reclaim: {event.reason} ({self.app.key_of('reclaim')} keeps "
                    f"auto_compact.toolcall_keep_max = {keep}).",
                    title="reclaim",
                )
        elif isinstance(event, events.SummaryFinished):
            text = SummaryDivider.describe(
                event.condensed, event.kept, self.app.shown_path(event.offload_path), self._pending_focus
            )
            self._pending_focus = None
            divider, self._pending_divider = self._pending_divider, None
            carried = bool(conversation.summarizations) and conversation.summarizations[-1].carried
            await self.chat.go_end()  # the cut is among the newest blocks: found, and shown, there
            first_kept = self.chat_block_for(2 if carried else 1) if len(conversation.messages) > 1 else None
            await self.chat.place_divider(
                text, first_kept, replacing=divider, carried=self.chat_block_for(1) if carried else None
            )
            self.mark_summarised_results()
            self.refresh_gauge()
            self.gauge.add_point(self.app.agent.request_tokens(), "compaction")
            if event.trigger == "manual":
                text = still_over(self.app.agent, self.app.session.config, event.kept, self.app.key_of)
                if text is not None:
                    await self.chat.add_notice("warning", text)
        elif isinstance(event, events.ToolResultRestored):
            self.chat.mark_restored(event.id)
            self.recoverable.discard(event.id)
            self.refresh_gauge()
            self.gauge.add_point(self.app.agent.request_tokens(), "restore")
            text = restored_over(self.app.agent, self.app.session.config.auto_compact.mode)
            if text is not None:
                self.app.notify(text, title="restore", severity="warning", timeout=10)
        elif isinstance(event, (events.CompactionFailed, events.CompactionSkipped)):
            divider, self._pending_divider = self._pending_divider, None
            verb = "failed" if isinstance(event, events.CompactionFailed) else "skipped"
            reason = event.reason.removeprefix("Summary failed: ")  # the row says "summary failed" itself
            if divider is not None and divider.is_attached:
                divider.set_text(f"summary {verb}: {reason}", verb)
            if event.trigger == "manual":
                self.app.notify(f"compaction {verb}: {reason}", severity="warning")
            elif event.reason == _summaries_off():
                await self._say_summaries_are_off()

    async def _say_summaries_are_off(self) -> None:
        """Once per session, in the chat: the context is over the threshold and nothing compacts it because
        automatic summaries are off (the compaction log's rows say it on every call, in a panel hidden
        below 100 columns)."""
        session = self.app.conversation.conversation_id
        if session in self._told_summaries_off:
            return
        self._told_summaries_off.add(session)
        await self.chat.add_notice("warning", summaries_off(self.app.agent, self.app.session.config, self.app.key_of))

    async def turn_ended(self, message: m.TurnEnded) -> None:
        from xun.context.messages import RawOpenAIMessage, UserMessage

        if message.status == "error":  # a failed attempt's text, never a reply (it stayed, looking like one)
            await self.chat.discard_reply()
        if message.status == "cancelled":
            if message.restored_prompt is not None:
                await self.chat.remove_from_last_user(inclusive=True)
                if not self.prompt.text.strip():
                    self.prompt.set_prompt(as_typed(message.restored_prompt))
                    self.app.work.give_back("cancelled")
                    await self.chat.add_notice("cancelled", "cancelled; the prompt is back in the input")
                else:  # never replace what the user typed meanwhile; the prompt stays in the input's history
                    await self.chat.add_notice(
                        "cancelled",
                        f"cancelled; the prompt ({one_line(message.restored_prompt, 60)}) is no longer "
                        "in the session and the input holds new text, so it was not put back: Up brings it back",
                    )
            elif self.chat.reply is not None and self.chat.reply.text.strip():
                last = self.app.conversation.messages[-1] if self.app.conversation.messages else None
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
                self.prompt.set_prompt(as_typed(message.restored_prompt))
            await self.chat.add_notice(
                "error", f"{message.error}. The prompt is back in the input, and not in the session."
            )
        elif message.status == "error":
            messages = self.app.conversation.messages
            last = messages[-1] if messages else None
            if isinstance(last, UserMessage):  # the prompt got nothing at all: offer it again
                self.app.work.fail_unanswered(last)
                waiting = ""
                if not self.prompt.text.strip():
                    self.prompt.set_prompt(as_typed(last.text))
                    self.app.work.give_back("failed")
                    if self.app.work.queued:
                        waiting = (
                            f"; {counted(len(self.app.work.queued), 'queued prompt')} typed after it will go out "
                            "once it is answered (Esc takes the queued prompts back into the input)"
                        )
                await self.chat.add_notice(
                    "info",
                    "the prompt is kept in the session and is back in the input: Enter sends it again "
                    f"(in place of the unanswered one), or /retry{waiting}",
                )

    async def work_over(self) -> None:
        """The work is over: its reply ends (a cancelled one keeps its text), a summary that never finished
        says so, and the stream's figure leaves the gauge."""
        await self.chat.hide_waiting()
        if self.chat.reply is not None:
            await self.chat.end_reply(self.chat.reply.text, "")
        divider, self._pending_divider = self._pending_divider, None
        if divider is not None and divider.is_attached and divider.state == "running":
            divider.set_text("summary cancelled; nothing changed", "cancelled")
        self.gauge.reset_stream()

    def refresh_gauge(self) -> None:
        conversation = self.app.conversation
        count = len(conversation.messages)
        summaries = self.summaries_in_context()
        window = self.app.agent.window
        self.gauge.cache_share = conversation.prompt_cache.last_hit_share
        self.gauge.set_figures(
            reported=conversation.total_tokens,
            estimate=self.app.agent.request_tokens(),
            threshold=self.app.agent.threshold,
            window=window.tokens,
            window_source=window.source if window.known else None,
        )
        self._refresh_chat_footer(count, summaries)
        self._warn_if_nearly_full()

    def _refresh_chat_footer(self, count: int | None = None, summaries: int | None = None) -> None:
        """The gauge in short under the chat (for when the side panel is hidden): kept current through a
        turn, not only after it (it said "0 messages" while the first turn ran)."""
        count = len(self.app.conversation.messages) if count is None else count
        summaries = self.summaries_in_context() if summaries is None else summaries
        gauge = self.gauge
        self.chat.border_subtitle = (
            f"{count:,} message{'s' if count != 1 else ''} in the context"
            + (f" · {summaries} summar{'ies' if summaries != 1 else 'y'}" if summaries else "")
            + (f" · {percent(gauge.now, gauge.threshold)}% of the threshold")
        )

    def summaries_in_context(self) -> int:
        """Summaries the model still sees: none after /clear (the log and the offloads stay as history)."""
        from xun.context.messages import SystemPrompt

        messages = self.app.conversation.messages
        first = messages[0] if len(messages) else None
        compressed = isinstance(first, SystemPrompt) and first.is_summary
        return len(self.app.conversation.summarizations) or 1 if compressed else 0

    def _warn_if_nearly_full(self) -> None:
        """Once per session: a warning when the context passes FULL_WARNING of the threshold, given when the
        work is over: during a turn or a compaction, a compaction often brings it back under at once (a big
        paste summarised before it is sent), and the toast must not stand beside a gauge saying "calm".
        One that no longer holds (F5 brought the context back under) is withdrawn."""
        gauge = self.gauge
        session = self.app.conversation.conversation_id
        now = max(gauge.reported or 0, gauge.estimate)
        if now < FULL_WARNING * gauge.threshold:
            if self._full_warning is not None:
                self.app.withdraw_toast(self._full_warning)  # (one still queued is not shown: `_on_notify`)
                self._full_warning = None
            return
        if session in self._warned_full or self.app.work.busy is not None:
            return
        self._warned_full.add(session)
        over = now >= gauge.threshold
        # no figure here: the gauge has it, and a toast's figure is stale a turn later; a narrow screen (or
        # F4) hides the side panel, and then the toast names the key that shows the gauge
        where = (
            "the gauge shows where it is"
            if gauge.region.area
            else f"{self.app.key_of('toggle_side')} shows the gauge, with where it is"
        )
        title = "the context is past the threshold" if over else "the context is nearly full"
        self.app.notify(
            ("The context is past the threshold" if over else f"The context passed {FULL_WARNING:.0%} of the threshold")
            + f" ({where}). {self.app.key_of('compact')} summarises now, {self.app.key_of('reclaim')} "
            f"reclaims old tool results, {self.app.key_of('preview')} previews what they would do.",
            title=title,
            severity="warning",
            timeout=10,
        )
        self._full_warning = title

    def mark_summarised_results(self) -> None:
        """Reclaimed results (and call arguments) whose placeholder a summary took out of the context can no
        longer be restored."""
        in_context = self.app.conversation.reclaimed_in_context()
        self.recoverable.set_summarised(i for i in self.recoverable.records if i not in in_context)

    def waiting_for_you(self, question: str | None) -> None:
        """While ask mode's question is open the model has not got the prompt: the header and the chat's
        waiting line say xun waits for the user (they said "thinking… the model has the prompt"); None,
        once answered, back to thinking (a summary, when chosen, then says so)."""
        if question:
            self.header.status = "waiting for you"
        elif self.header.status == "waiting for you":  # (not over "summarising…" if the summary started first)
            self.header.status = "thinking…"
        if self.chat.waiting is not None:
            self.chat.waiting.hold(question)

    # ------------------------------------------------------------------------------ chat navigation

    async def jump_to_message(self, index: int) -> Widget | None:
        """Scroll the chat to the block showing `conversation.messages[index]` (its page is mounted at once,
        wherever it is in the session), mark it, and return it; None when the chat does not show that message."""
        wanted = self._entry_test(index)
        block = await self.chat.show_entry(wanted) if wanted is not None else None
        if block is None:  # a block made in this run: counted from the newest, which the chat then shows
            await self.chat.go_end()
            block = self.chat_block_for(index)
        if block is None:
            self.app.notify(f"message #{index} is not shown in the chat", severity="warning")
            return None
        self.chat.select(block, scroll=False)
        self.call_after_refresh(self.chat.scroll_to_widget, block, animate=False, top=True)
        self.chat.focus()  # [ and ] go on from here, Enter opens it
        return block

    async def show_in_chat(
        self, wanted: Callable[[object], bool], what: str, marks: Sequence[str] = ()
    ) -> Widget | None:
        """Jump the chat to the block `wanted` picks (its page mounted at once, read from the offload log when
        a summary took it out: the page `marks` are on), mark it and focus the chat; say so when the chat has
        no such block."""
        return self._shown(await self.chat.show_summarised(wanted, marks), what)

    def _shown(self, block: Widget | None, what: str) -> Widget | None:
        """The jump's block marked, in view and the chat focused; a warning when the chat has no such block."""
        if block is None:
            self.app.notify(f"{what} is not in the chat", severity="warning")
            return None
        self.chat.select(block, scroll=False)
        self.call_after_refresh(self.chat.scroll_to_widget, block, animate=False, top=True)
        self.chat.focus()
        return block

    def show_call_in_chat(self, call_id: str) -> None:
        """The chat at the block of tool call `call_id` (the recoverable list, a search hit)."""
        from xun.context.reclaimed import ARGUMENTS_SUFFIX
        from xun.tui.chat_window import Released
        from xun.tui.transcript import ToolItem, call_marks

        call_id = call_id.removesuffix(ARGUMENTS_SUFFIX)

        def wanted(entry: object) -> bool:
            item = entry.item if isinstance(entry, Released) else entry
            return isinstance(item, ToolItem) and item.call_id == call_id

        self.run_worker(
            self.show_in_chat(wanted, f"the call {call_id}", call_marks(call_id)), group="jump", exclusive=True
        )

    def show_summary_in_chat(self, ordinal: int) -> None:
        """The chat at the divider of the session's `ordinal`-th summary (a compaction-log row)."""

        async def show() -> None:
            self._shown(await self.chat.show_divider(ordinal), "that summary's divider")

        self.run_worker(show(), group="jump", exclusive=True)

    def show_said_in_chat(self, speaker: str, text: str) -> None:
        """The chat at a prompt or a reply found in the history (a search hit), by its words."""
        from xun.tui.chat_window import Released
        from xun.tui.transcript import AssistantItem, UserItem, said_marks

        def wanted(entry: object) -> bool:
            item = entry.item if isinstance(entry, Released) else entry
            if speaker == "Human":
                return isinstance(item, UserItem) and item.text == text
            if speaker == "AI reasoning":
                return isinstance(item, AssistantItem) and bool(text) and text in item.reasoning
            return isinstance(item, AssistantItem) and item.content == text

        self.run_worker(
            self.show_in_chat(wanted, "that message", said_marks(speaker, text)), group="jump", exclusive=True
        )

    def _entry_test(self, index: int) -> Callable[[object], bool] | None:
        """What picks the chat entry of `conversation.messages[index]`: a tool call or result by its id, any
        other by its position (entries read from the session file know it)."""
        from xun.context.messages import RawOpenAIMessage
        from xun.tui.chat_window import Released
        from xun.tui.transcript import AssistantItem, ToolItem, UserItem

        messages = self.app.conversation.messages
        if not 0 <= index < len(messages):
            return None
        message = messages[index]
        raw = message.raw if isinstance(message, RawOpenAIMessage) else None
        call_id: str | None = None
        if raw is not None and raw.get("role") == "tool":
            call_id = str(raw.get("tool_call_id", ""))

        def wanted(entry: object) -> bool:
            item = entry.item if isinstance(entry, Released) else entry
            if call_id is not None:
                return isinstance(item, ToolItem) and item.call_id == call_id and not item.summarised
            return isinstance(item, (UserItem, AssistantItem, ToolItem)) and item.index == index and not item.summarised

        return wanted

    def chat_block_for(self, index: int) -> Widget | None:
        """The chat block of one message: a tool result or a call by its id; a user message or an
        assistant reply by its place counted from the newest (the chat and the context end alike)."""
        from xun.context.messages import RawOpenAIMessage, UserMessage, content_text
        from xun.tui.transcript import reasoning_of

        messages = self.app.conversation.messages
        if not 0 <= index < len(messages):
            return None
        message = messages[index]
        raw = message.raw if isinstance(message, RawOpenAIMessage) else None
        if raw is not None and raw.get("role") == "tool":
            return self.chat.tool_block(str(raw.get("tool_call_id", "")))
        if isinstance(message, UserMessage):
            later = sum(1 for msg in messages[index + 1 :] if isinstance(msg, UserMessage))
            blocks = list(self.chat.query(UserBlock))
            return blocks[-1 - later] if later < len(blocks) else None
        if raw is not None and raw.get("role") == "assistant":
            if content_text(raw.get("content")) or reasoning_of(raw):
                later = sum(
                    1
                    for msg in messages[index + 1 :]
                    if type(msg) is RawOpenAIMessage
                    and msg.raw.get("role") == "assistant"
                    and (content_text(msg.raw.get("content")) or reasoning_of(msg.raw))
                )
                replies = list(self.chat.query(AssistantBlock))
                return replies[-1 - later] if later < len(replies) else None
            calls = [c for c in raw.get("tool_calls") or () if isinstance(c, dict)]
            return self.chat.tool_block(str(calls[0].get("id", ""))) if calls else None
        return None
