"""The engine's events, as Textual messages (`xun.tui.messages`, posted by the `EventBridge`): each
handler updates the chat, the gauge, the compaction log and the recoverable list, and asks the user
what the engine asks (confirmations, consent to an automatic summary)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.screen import ModalScreen

from xun.tui import messages as m
from xun.tui.commands import as_typed
from xun.tui.format import counted, one_line, percent, tokens
from xun.tui.widgets.summary_divider import SummaryDivider

if TYPE_CHECKING:
    from xun.tui.screens.guarded import GuardedQuestion


def _summaries_off() -> str:
    """The policy's reason for a skip with automatic summaries off (the policy is imported when used: it is
    not needed for the first frame)."""
    from xun.compact.policy import SUMMARIES_OFF

    return SUMMARIES_OFF


FULL_WARNING = 0.9
"""The share of the threshold past which the app warns, once per session, how to compact or preview."""


class EngineHandlers:
    """Handlers of the engine's messages (mixed into `XunApp`)."""

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
        await self.chat.hide_waiting()
        block = await self.chat.current_reply()
        await block.write(text)
        self.gauge.streamed(len(text))
        self.header.status = "streaming…"

    async def on_reasoning_text(self, message: m.ReasoningText) -> None:
        text = message.stream.take(message.upto)
        if not text:
            return
        await self.chat.hide_waiting()
        block = await self.chat.current_reply()
        await block.write_reasoning(text)
        self.gauge.streamed(len(text))
        self.header.status = "reasoning…"

    async def on_reply_complete(self, message: m.ReplyComplete) -> None:
        await self.chat.end_reply(message.content, message.reasoning)
        self.gauge.reset_stream()

    async def on_reply_retrying(self, message: m.ReplyRetrying) -> None:
        await self.chat.hide_waiting()
        await self.chat.discard_reply()
        self.gauge.reset_stream()
        await self.chat.add_notice(
            "retry", f"retrying ({message.attempt}/{message.attempts - 1}) in {message.delay:g} s: {message.reason}"
        )

    async def on_tool_call_began(self, message: m.ToolCallBegan) -> None:
        await self.chat.hide_waiting()
        self.chat.reply = None
        await self.chat.add_tool(message.id, message.name, message.arguments)
        self.header.status = f"running {message.name}…"

    def on_tool_call_ended(self, message: m.ToolCallEnded) -> None:
        event = message.event
        block = self.chat.tool_block(event.id)
        if block is not None:
            block.finished(
                result_chars=event.result_chars,
                duration_text=self.presentation.duration(event.duration),
                result=self._tool_result_text(event.id),
                is_error=event.is_error,
                denied=event.denied,
            )
        self.gauge.set_estimate(self.agent.request_tokens(), self.conversation.total_tokens)
        self._warn_if_nearly_full()

    def _tool_result_text(self, call_id: str) -> str | None:
        from xun.context.messages import RawOpenAIMessage

        for msg in reversed(self.conversation.messages):
            if (
                type(msg) is RawOpenAIMessage
                and msg.raw.get("role") == "tool"
                and msg.raw.get("tool_call_id") == call_id
            ):
                content = msg.raw.get("content")
                return content if isinstance(content, str) else str(content)
        return None

    def _count_usage(self, event: Any | None) -> None:
        """The usage line under the gauge: the last model call's reported tokens, and the session's totals
        (which the agent keeps: `xun.context.usage`) with their cost when `pricing` has the model."""
        from xun.context.usage import cost_text

        totals = self.conversation.usage_totals
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
        spent = self.agent.session_cost()
        cached = f" ({tokens(totals['cached_input'])} cached)" if totals.get("cached_input") else ""
        parts.append(
            f"session {tokens(totals['prompt'])} in{cached} · {tokens(totals['completion'])} out "
            f"({totals['calls']:,} call{'s' if totals['calls'] != 1 else ''})"
            + ("" if spent is None else f" · {cost_text(spent)}")
        )
        self.gauge.set_usage("\n".join(parts))

    def on_context_usage(self, message: m.ContextUsage) -> None:
        usage = message.event
        if message.after_model_call:
            self.gauge.model_called(usage.source)
            self._count_usage(usage)
            self.gauge.cache_share = self.conversation.prompt_cache.last_hit_share
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

    async def on_notice(self, message: m.Notice) -> None:
        await self.chat.add_notice(message.level, message.text)
        if message.level in ("error", "warning"):  # e.g. the model call failed, automatic compaction is off
            self.notify(message.text, severity=message.level, title=message.level)

    async def on_summary_began(self, message: m.SummaryBegan) -> None:
        event = message.event
        focus = f" (focus: {event.focus})" if event.focus else ""
        self._pending_focus = event.focus
        self._pending_divider = await self.chat.add_divider(
            f"summarising {event.condensed} messages, keeping {event.kept}{focus}…", "running"
        )
        self.header.status = "summarising…"

    async def on_compaction_recorded(self, message: m.CompactionRecorded) -> None:
        from xun.base import events

        event = message.event
        self.log_pane.add_record(event.to_json())
        conversation = self.conversation
        if isinstance(event, events.ToolResultsReclaimed):
            self.chat.mark_reclaimed(event.ids)
            archive = conversation.reclaimed_results
            self.recoverable.add(archive[i] for i in event.ids if i in archive)
            self._refresh_gauge()
            if event.count:
                self.gauge.add_point(self.agent.request_tokens(), "compaction")
            elif event.trigger == "manual":
                keep = self.session.config.auto_compact.toolcall_keep_max
                self.notify(
                    f"Nothing to reclaim: {event.reason} ({self.key_of('reclaim')} keeps "
                    f"auto_compact.toolcall_keep_max = {keep}).",
                    title="reclaim",
                )
        elif isinstance(event, events.SummaryFinished):
            text = SummaryDivider.describe(
                event.condensed, event.kept, self.shown_path(event.offload_path), self._pending_focus
            )
            self._pending_focus = None
            divider, self._pending_divider = self._pending_divider, None
            carried = bool(conversation.summarizations) and conversation.summarizations[-1].carried
            await self.chat.go_end()  # the cut is among the newest blocks: found, and shown, there
            first_kept = self.chat_block_for(2 if carried else 1) if len(conversation.messages) > 1 else None
            await self.chat.place_divider(
                text, first_kept, replacing=divider, carried=self.chat_block_for(1) if carried else None
            )
            self._mark_summarised_results()
            self._refresh_gauge()
            self.gauge.add_point(self.agent.request_tokens(), "compaction")
            if event.trigger == "manual":
                await self._say_if_still_over(event.kept)
        elif isinstance(event, events.ToolResultRestored):
            self.chat.mark_restored(event.id)
            self.recoverable.discard(event.id)
            self._refresh_gauge()
            self.gauge.add_point(self.agent.request_tokens(), "restore")
            self._say_if_restored_over()
        elif isinstance(event, (events.CompactionFailed, events.CompactionSkipped)):
            divider, self._pending_divider = self._pending_divider, None
            verb = "failed" if isinstance(event, events.CompactionFailed) else "skipped"
            reason = event.reason.removeprefix("Summary failed: ")  # the row says "summary failed" itself
            if divider is not None and divider.is_attached:
                divider.set_text(f"summary {verb}: {reason}", verb)
            if event.trigger == "manual":
                self.notify(f"compaction {verb}: {reason}", severity="warning")
            elif event.reason == _summaries_off():
                await self._say_summaries_are_off()

    def _say_if_restored_over(self) -> None:
        """A restore that took the context over the threshold says so, and what the next call does about it:
        the user must not learn it from the next prompt reclaiming or summarising it again."""
        now, threshold = self.agent.request_tokens(), self.agent.threshold
        if now <= threshold:
            return
        then = {
            "auto": "the next model call will compact it again (a reclaim or a summary)",
            "ask": "the next prompt will ask to summarise",
            "off": "automatic summaries are off, so it stays",
        }.get(self.session.config.auto_compact.mode, "")
        self.notify(
            f"The restore put the context over the threshold ({tokens(now)} / {tokens(threshold)}): {then}.",
            title="restore",
            severity="warning",
            timeout=10,
        )

    async def _say_summaries_are_off(self) -> None:
        """Once per session, in the chat: the context is over the threshold and nothing compacts it because
        automatic summaries are off (the compaction log's rows say it on every call, in a panel hidden
        below 100 columns). Names the key that summarises and how to turn them back on."""
        session = self.conversation.conversation_id
        if session in self._told_summaries_off:
            return
        self._told_summaries_off.add(session)
        from xun.agent.config import CLI_SOURCE

        source = self.session.config.source_of("auto_compact.mode")
        if "this session only" in source:  # chosen in the app: it lasts until the app quits
            back = "/auto auto (or /auto ask); they are also back on when xun starts again"
        elif source == CLI_SOURCE:
            back = "/auto auto for this session, or start xun without `--set auto_compact.mode=off`"
        else:
            back = (
                f'/auto auto for this session, or set auto_compact.mode = "auto" or "ask" where it is set ({source}), '
                "e.g. `xun config set auto_compact.mode auto`"
            )
        now, threshold = self.agent.request_tokens(), self.agent.threshold
        await self.chat.add_notice(
            "warning",
            f"the context is over the threshold ({tokens(now)} / {tokens(threshold)}, {percent(now, threshold)}%) "
            "and nothing compacts it: "
            f'automatic summaries are off (auto_compact.mode = "off", {source}). {self.key_of("compact")} summarises '
            f"now and {self.key_of('reclaim')} reclaims old tool results; to turn automatic summaries back on, {back}.",
        )

    async def _say_if_still_over(self, kept: int) -> None:
        """A manual summary that leaves the context over the threshold: what is left, why, and only what
        would help with what is there (never F6 with no tool result to reclaim, nor /compact FOCUS when a
        single kept reply is the cause)."""
        from xun.compact.breakdown import reclaim_preview
        from xun.context.messages import UserMessage, message_length

        now, threshold = self.agent.request_tokens(), self.agent.threshold
        if now <= threshold:
            return
        conversation = self.conversation
        messages = conversation.messages
        sizes = [round(message_length(msg) * conversation.tokens_per_char) for msg in messages[1:]]
        largest = max(sizes, default=0)
        why = (
            f"the {counted(kept, 'message')} it kept hold {tokens(sum(sizes))}, one of them {tokens(largest)}"
            if sizes
            else "what is left is the system prompt and the tools"
        )
        helps: list[str] = []
        reclaim = reclaim_preview(conversation, self.session.config.auto_compact.toolcall_keep_max)
        if reclaim.count:
            helps.append(f"{self.key_of('reclaim')} reclaims {reclaim.what} (about {tokens(reclaim.tokens_saved)})")
        if sizes and now - largest <= threshold:  # that one message alone keeps it over
            index = sizes.index(largest) + 1
            big = messages[index]
            last_prompt = max((i for i, msg in enumerate(messages) if isinstance(msg, UserMessage)), default=0)
            role = "prompt" if isinstance(big, UserMessage) else getattr(big, "role", "message")
            if index == last_prompt:
                what, remedy = "the last prompt", "/revise takes it back into the input to shorten it"
            elif index > last_prompt and role == "assistant":
                what, remedy = (
                    "the last reply",
                    "/retry asks for it again and /revise takes its prompt back to edit (both drop it)",
                )
            elif role == "tool":
                what, remedy = (
                    f"tool result #{index}",
                    f"{self.key_of('reclaim')} reclaims it with a smaller "
                    "auto_compact.toolcall_keep_max (it keeps the newest results)",
                )
            else:
                what, remedy = f"message #{index} ({role})", "/clear starts over (the compaction log stays)"
            why += f"; without {what} ({tokens(largest)}) it would be under"
            helps.append(remedy)
        elif sizes:
            helps.append("a smaller auto_compact.summary_keep_max keeps fewer messages")
        helps.append("/context shows what fills it")
        await self.chat.add_notice(
            "warning",
            f"after the summary the context is still over the threshold: {tokens(now)} / {tokens(threshold)} "
            f"({percent(now, threshold)}%): {why}. What helps: {'; '.join(helps)}.",
        )

    async def on_turn_ended(self, message: m.TurnEnded) -> None:
        from xun.context.messages import RawOpenAIMessage, UserMessage

        if message.status in ("cancelled", "error"):
            self._queue_held = True
        if message.status == "error":  # a failed attempt's text, never a reply (it stayed, looking like one)
            await self.chat.discard_reply()
        if message.status == "cancelled":
            if message.restored_prompt is not None:
                await self.chat.remove_from_last_user(inclusive=True)
                if not self.prompt.text.strip():
                    self.prompt.set_prompt(as_typed(message.restored_prompt))
                    self._given_back = "cancelled"
                    await self.chat.add_notice("cancelled", "cancelled; the prompt is back in the input")
                else:  # never replace what the user typed meanwhile; the prompt stays in the input's history
                    await self.chat.add_notice(
                        "cancelled",
                        f"cancelled; the prompt ({one_line(message.restored_prompt, 60)}) is no longer "
                        "in the session and the input holds new text, so it was not put back: Up brings it back",
                    )
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
                self.prompt.set_prompt(as_typed(message.restored_prompt))
            await self.chat.add_notice(
                "error", f"{message.error}. The prompt is back in the input, and not in the session."
            )
        elif message.status == "error":
            messages = self.conversation.messages
            last = messages[-1] if messages else None
            if isinstance(last, UserMessage):  # the prompt got nothing at all: offer it again
                self._unanswered = last
                waiting = ""
                if not self.prompt.text.strip():
                    self.prompt.set_prompt(as_typed(last.text))
                    self._given_back = "failed"
                    if self.queued_prompts:
                        waiting = (
                            f"; {counted(len(self.queued_prompts), 'queued prompt')} typed after it will go out "
                            "once it is answered (Esc takes the queued prompts back into the input)"
                        )
                await self.chat.add_notice(
                    "info",
                    "the prompt is kept in the session and is back in the input: Enter sends it again "
                    f"(in place of the unanswered one), or /retry{waiting}",
                )

    async def on_agent_work_done(self, message: m.AgentWorkDone) -> None:
        await self.chat.hide_waiting()
        if self.chat.reply is not None:
            await self.chat.end_reply(self.chat.reply.text, "")
        for screen in list(self._open_asks):
            self._close_ask(screen)
        divider, self._pending_divider = self._pending_divider, None
        if divider is not None and divider.is_attached and divider.state == "running":
            divider.set_text("summary cancelled; nothing changed", "cancelled")
        self.gauge.reset_stream()
        self._set_busy(None)
        self._refresh_gauge()  # idle now: the warning of a full context may be due (`_warn_if_nearly_full`)
        for screen in self.screen_stack:  # an open recall screen re-checks what it may restore
            changed = getattr(screen, "context_changed", None)
            if callable(changed):
                changed(message.kind)
        self.finished_work += 1
        self.save_session()
        held, self._queue_held = self._queue_held, False
        given, self._given_back = self._given_back, None
        if held and given == "failed" and self.queued_prompts:
            self._queue_waits = True  # in the order typed: the failed prompt (in the input) first
        elif held:
            await self.take_back_queued(after_input=given == "cancelled")
        elif not self._queue_waits:
            await self.send_queued()

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
        self._refresh_chat_footer(count, summaries)
        self._warn_if_nearly_full()

    def _refresh_chat_footer(self, count: int | None = None, summaries: int | None = None) -> None:
        """The gauge in short under the chat (for when the side panel is hidden): kept current through a
        turn, not only after it (it said "0 messages" while the first turn ran)."""
        count = len(self.conversation.messages) if count is None else count
        summaries = self._summaries_in_context() if summaries is None else summaries
        gauge = self.gauge
        self.chat.border_subtitle = (
            f"{count:,} message{'s' if count != 1 else ''} in the context"
            + (f" · {summaries} summar{'ies' if summaries != 1 else 'y'}" if summaries else "")
            + (f" · {percent(gauge.now, gauge.threshold)}% of the threshold")
        )

    def _summaries_in_context(self) -> int:
        """Summaries the model still sees: none after /clear (the log and the offloads stay as history)."""
        from xun.context.messages import SystemPrompt

        messages = self.conversation.messages
        first = messages[0] if len(messages) else None
        compressed = isinstance(first, SystemPrompt) and first.is_summary
        return len(self.conversation.summarizations) or 1 if compressed else 0

    def _warn_if_nearly_full(self) -> None:
        """Once per session: a warning when the context passes FULL_WARNING of the threshold, given when the
        work is over: during a turn or a compaction, a compaction often brings it back under at once (a big
        paste summarised before it is sent), and the toast must not stand beside a gauge saying "calm".
        One that no longer holds (F5 brought the context back under) is withdrawn."""
        gauge = self.gauge
        session = self.conversation.conversation_id
        now = max(gauge.reported or 0, gauge.estimate)
        if now < FULL_WARNING * gauge.threshold:
            if self._full_warning is not None:
                self._withdraw_toast(self._full_warning)  # (one still queued is not shown: `_on_notify`)
                self._full_warning = None
            return
        if session in self._warned_full or self.busy is not None:
            return
        self._warned_full.add(session)
        over = now >= gauge.threshold
        # no figure here: the gauge has it, and a toast's figure is stale a turn later; a narrow screen (or
        # F4) hides the side panel, and then the toast names the key that shows the gauge
        where = (
            "the gauge shows where it is"
            if gauge.region.area
            else f"{self.key_of('toggle_side')} shows the gauge, with where it is"
        )
        title = "the context is past the threshold" if over else "the context is nearly full"
        self.notify(
            ("The context is past the threshold" if over else f"The context passed {FULL_WARNING:.0%} of the threshold")
            + f" ({where}). {self.key_of('compact')} summarises now, {self.key_of('reclaim')} "
            f"reclaims old tool results, {self.key_of('preview')} previews what they would do.",
            title=title,
            severity="warning",
            timeout=10,
        )
        self._full_warning = title

    def _set_busy(self, busy: str | None, status: str | None = None) -> None:
        self.busy = busy
        self._work_started = False  # the worker about to start sets it on its first step
        self.header.status = status or ("ready" if busy is None else busy)
        self.refresh_bindings()

    def _mark_summarised_results(self) -> None:
        """Reclaimed results (and call arguments) whose placeholder a summary took out of the context can no
        longer be restored."""
        in_context = self.conversation.reclaimed_in_context()
        self.recoverable.set_summarised(i for i in self.recoverable.records if i not in in_context)

    def _close_ask(self, screen: ModalScreen[Any]) -> None:
        if screen in self._open_asks:
            self._open_asks.remove(screen)
        if screen.is_attached and self.screen is screen:
            screen.dismiss(None)

    def on_confirmation_asked(self, message: m.ConfirmationAsked) -> None:
        from xun.agent.tools import Decision
        from xun.tui.screens.confirm import ConfirmScreen

        answer = message.answer
        screen = ConfirmScreen(message.request)

        def answered(decision: Decision | None) -> None:
            if screen in self._open_asks:
                self._open_asks.remove(screen)
            if not answer.done():
                answer.set_result(decision if isinstance(decision, Decision) else Decision.DENY)
            if decision is Decision.ALLOW_SESSION:  # later calls run unasked: the chat says since when
                self.call_later(
                    self.chat.add_notice,
                    "warning",
                    f"{message.request.tool} is allowed without "
                    "asking for the rest of this session (restart xun to be asked again)",
                )
            self._show_typed_aside(screen, "the confirmation")
            if screen.stop_turn:
                self.action_cancel_turn()

        self._open_asks.append(screen)
        answer.add_done_callback(lambda _f: self._close_ask(screen))
        self.header.status = "waiting for you"
        self.push_screen(screen, answered)

    def _show_typed_aside(self, screen: GuardedQuestion[Any], what: str) -> None:
        """A sentence typed while a question took no answers was kept out of the prompt behind it, where it
        would have been sent with the next prompt; once the question closes, it goes on into the prompt, not
        sent, after what the prompt holds (typing through the moment the question opened left its first
        letters there). Not a notice in the chat, which the reply that follows would bury."""
        text = screen.aside_text
        if not text or self.quitting:
            return
        prompt = self.prompt
        if prompt.read_only:
            self.call_later(
                self.chat.add_notice, "info", f"typed while {what} was open, kept out of the prompt: {text}"
            )
            return
        prompt.set_prompt(prompt.text + text)
        self.notify(f"What you typed while {what} was open is in the prompt, not sent.", title="typed ahead")

    def _why_summary_now(self) -> str:
        """What is true when the policy asks: it asks after reclaiming old tool results, so the context may
        be back under the threshold yet above what a summary aims for (ESCALATION_RATIO of it)."""
        from xun.compact.policy import ESCALATION_RATIO

        now, threshold = self.agent.request_tokens(), self.agent.threshold
        figures = f"{tokens(now)} / {tokens(threshold)}"
        if now > threshold:
            return f"The context is over the threshold ({figures})."
        return (
            f"The context passed the threshold; with old tool results reclaimed it is at {figures}, still above "
            f"the {tokens(int(threshold * ESCALATION_RATIO))} ({ESCALATION_RATIO:.0%} of the threshold) "
            "that automatic compaction brings it under."
        )

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
        keep_text = (
            "" if plan.nothing_to_condense else f"{plan.condensed_count} messages summarised, {len(plan.kept)} kept"
        )
        screen = ConsentScreen(
            self._why_summary_now(), settings.ask_timeout, keep_text=keep_text, countdown=self.presentation.countdown
        )

        def answered(choice: str | None) -> None:
            if screen in self._open_asks:
                self._open_asks.remove(screen)
            self._show_typed_aside(screen, "the question")
            self._waiting_for_you(None)
            if answer.done():
                return
            if choice == "off":
                self.session.config.set_here("auto_compact.mode", "off", "chosen in the app (this session only)")
                self.notify(
                    'Automatic summaries are off for this session (auto_compact.mode = "off"); '
                    f"{self.key_of('compact')} still summarises, /auto ask asks again.",
                    title="ask mode",
                )
            answer.set_result(choice == "now")
            self._consent_declined = choice != "now"
            self._consent_granted = choice == "now"

        self._open_asks.append(screen)
        answer.add_done_callback(lambda _f: self._close_ask(screen))
        self._waiting_for_you("waiting for you: summarise the conversation first?")
        self.push_screen(screen, answered)  # the question and its countdown are on the screen (no toast to go stale)

    def _waiting_for_you(self, question: str | None) -> None:
        """While ask mode's question is open the model has not got the prompt: the header and the chat's
        waiting line say xun waits for the user (they said "thinking… the model has the prompt"); None,
        once answered, back to thinking (a summary, when chosen, then says so)."""
        if question:
            self.header.status = "waiting for you"
        elif self.header.status == "waiting for you":  # (not over "summarising…" if the summary started first)
            self.header.status = "thinking…"
        if self.chat.waiting is not None:
            self.chat.waiting.hold(question)
