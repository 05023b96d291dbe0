"""What the keys and the palette do: summarise, reclaim, preview, recall, the context breakdown, the
panes and the focus, the screens (history, settings, sessions, MCP, inspector); sending prompts (and
queueing them behind running work, in `app.work`), and the workers that run the agent's work off the
event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import sys
from typing import TYPE_CHECKING

from textual import work
from textual.screen import ModalScreen

from xun.tui import messages as m
from xun.tui.commands import as_typed
from xun.tui.format import counted, one_line, tokens


if TYPE_CHECKING:
    from xun.compact.breakdown import ReclaimPreview
    from xun.context.conversation import CompactionPlan
    from xun.tui.screens.preview import PreviewFigures


class AppActions:
    """The actions behind the keys and the palette, and the workers they start (mixed into `XunApp`)."""

    def action_help(self) -> None:
        from xun.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))

    def action_save_screenshot(self) -> None:
        """The palette's Screenshot: the screen as SVG in .xun/exports/, and a toast that says where (or why not)."""
        import time

        from xun.tui.export import save_screenshot

        try:
            path = save_screenshot(self.export_screenshot(), self.workdir, time.time())
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            self.notify(
                f"could not save the screenshot in {self.workdir / '.xun' / 'exports'}: {exc.strerror or exc}{where}",
                title="Screenshot",
                severity="error",
                timeout=10,
            )
            return
        self.notify(f"saved to {self.shown_path(str(path))}", title="Screenshot", timeout=8)

    def action_compact(self, focus: str | None = None) -> None:
        if not self.may_start("a summary"):
            return
        self._set_busy("compact", "summarising…")
        self.compact_now(focus or None)

    def action_reclaim(self) -> None:
        if not self.may_start("a reclaim"):
            return
        self._set_busy("reclaim", "reclaiming…")
        self.reclaim_now()

    def action_focus_recoverable(self) -> None:
        if not self.main.recoverable.records:  # (an empty list said nothing)
            self.notify(
                f"No reclaimed tool results yet: {self.key_of('reclaim')} (or an automatic reclaim) "
                "replaces old ones with placeholders; they are listed here to read or restore. Esc goes "
                "back to the prompt."
            )
        if self.main.layout_is("narrow"):
            self.main.set_layout(side_shown=True)  # the panel takes the chat's place until Esc or F4
        self.main.recoverable.focus_table()

    def preview_figures(self) -> tuple[PreviewFigures, CompactionPlan, ReclaimPreview]:
        """What a summary (F5), a reclaim (F6) and the automatic policy would do now: F7 and /context show it."""
        from xun.compact.breakdown import first_tool_result, reclaim_preview, tokens_from
        from xun.compact.policy import AutoCompactor
        from xun.tui.screens.preview import PreviewFigures

        c = self.conversation
        settings = self.session.config.auto_compact
        plan = c.plan_compaction(settings.summary_keep_max)
        reclaim = reclaim_preview(c, settings.toolcall_keep_max)
        now = self.agent.request_tokens()
        condensed = plan.estimated_length_before - plan.estimated_length_after
        first = first_tool_result(c, reclaim.ids)
        policy = self.agent.compactor
        automatic = (
            reclaim_preview(c, policy.first_keep(self.agent, policy.toolcall_keep_max))
            if isinstance(policy, AutoCompactor) and policy.needs_compaction(self.agent)
            else None
        )
        figures = PreviewFigures(
            tokens_now=now,
            tokens_after=max(now - round(condensed * c.tokens_per_char), 0),
            reported=c.total_tokens,
            threshold=self.agent.threshold,
            condensed=plan.condensed_count,
            kept=len(plan.kept),
            nothing_to_condense=plan.nothing_to_condense,
            keep_recent=settings.summary_keep_max,
            reclaim=reclaim,
            reclaim_cache_miss=tokens_from(c, first) - reclaim.tokens_saved if first is not None else None,
            automatic=automatic,
        )
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
        index = self.conversation.recall_index or self.session.store.recall_index
        self.push_screen(
            RecallScreen(
                index,
                session=self.conversation.conversation_id,
                query=query,
                clock=self.presentation.clock,
                restorable=self.restore_state,
                cursor_blink=self.presentation.cursor_blink,
            )
        )

    def restore_state(self, session: str, call_id: str) -> tuple[bool, str]:
        """Whether a reclaimed result found in the history can be restored into this context now, and why not."""
        if session != self.conversation.conversation_id:
            return False, f"it belongs to session {session}; switch to it (/sessions) to restore it"
        if call_id not in self.conversation.reclaimed_results:
            return False, "it is not reclaimed now (restored already, or the session was cleared)"
        if not self._restorable(call_id):
            return False, "it was summarised away after it was reclaimed: read it here, or run the tool again"
        return True, ""

    def action_context(self) -> None:
        from xun.compact.breakdown import context_breakdown
        from xun.tui.screens.breakdown import BreakdownScreen
        from xun.tui.screens.preview import outlook_line

        if isinstance(self.screen, BreakdownScreen):
            return
        definitions = self.agent.toolbox.definition_chars()
        self.agent.request_tokens()  # prices the tool definitions afresh when no server count holds them
        window = self.agent.window
        breakdown = context_breakdown(
            self.conversation,
            threshold=self.agent.threshold,
            window=window.tokens,
            window_source=window.source if window.known else None,
            tool_definitions=definitions if len(definitions) > 1 else None,
        )

        def chosen(index: int | None) -> None:
            if index is not None:
                self.main.run_worker(self.main.jump_to_message(index), group="jump", exclusive=True)

        self.push_screen(BreakdownScreen(breakdown, outlook_line(self.preview_figures()[0], self.key_of)), chosen)

    def on_open_breakdown(self, message: m.OpenBreakdown) -> None:
        message.stop()
        if self.session is not None and not isinstance(self.screen, ModalScreen):
            self.action_context()

    def action_cancel_turn(self) -> None:
        cancelled = self.work.cancel()
        if cancelled is None:
            if self.work.waits:  # the queue waiting for a failed prompt: Esc takes it back, after that prompt
                self.call_later(self.take_back_queued, True)
            return
        kind, started, turn_prompt = cancelled
        self.workers.cancel_group(self, "agent")
        self.workers.cancel_group(self, "compaction")
        if not started:  # cancelled before its first step (Enter and Esc in one burst of keys): the worker
            # never runs, so nothing in it will give the prompt back or say the work is over
            if kind == "turn" and turn_prompt is not None:
                self.post_message(m.TurnEnded("cancelled", restored_prompt=turn_prompt))
            self.post_message(m.AgentWorkDone(kind))
        self.action_focus_prompt()

    def action_chat_page(self, direction: int) -> None:
        """PageUp and PageDown where the focused pane has no use for them (the prompt): the chat scrolls, and
        the typing stays where it is."""
        self.main.chat.page(direction)

    def action_focus_prompt(self) -> None:
        """Esc from anywhere on the main screen: the keyboard goes back to the prompt, and the keys panel
        (Ctrl+P, "Keys"), docked beside the chat, closes (only the palette closed it)."""
        self.action_hide_help_panel()
        self.main.chat.select(None)
        if self.main.layout_is("narrow"):
            self.main.set_layout(side_shown=False)
        self.main.prompt.focus()

    def action_toggle_side(self) -> None:
        """Wide: hide or show the side panel beside the chat. Narrow: switch between the chat and the panel."""
        if self.main.layout_is("narrow"):
            self.main.set_layout(side_shown=not self.main.layout_is("side_shown"))
            if self.main.layout_is("side_shown"):
                self.main.gauge.focus()
            else:
                self.main.prompt.focus()
        else:
            self.main.set_layout(side_hidden=not self.main.layout_is("side_hidden"))
            if self.main.layout_is("side_hidden") and not self.main.prompt.has_focus:
                self.main.prompt.focus()

    def action_mcp(self) -> None:
        from xun.tui.screens.mcp import McpScreen

        if self.session is None or self.session.mcp is None or isinstance(self.screen, McpScreen):
            return
        self.push_screen(McpScreen(self.session.mcp, self.conversation.tokens_per_char, self.restart_mcp_server))

    def action_history(self) -> None:
        from xun.tui.screens.model_view import ModelViewScreen

        records = self.history_records()
        subtitle = f"~{tokens(self.agent.request_tokens())} tokens · esc close"
        self.push_screen(ModelViewScreen(records, subtitle))

    def history_records(self) -> list[dict[str, str]]:
        """What the model is sent, one record per message: the text (cut at 1,000 characters, but the
        system message with the summary whole; tabs expanded), the tool calls of assistant messages, and
        the call id of each tool result."""
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

    def action_config(self) -> None:
        from xun.agent.config import describe_config
        from xun.tui.screens.config import ConfigScreen

        items = describe_config(self.session.config)
        window = self.agent.window
        if window.known and window.kind != "config":  # unset, but known: say the figure in use and whence
            items = [
                dataclasses.replace(item, value=window.tokens, source=window.source)
                if item.key == "model.context_window"
                else item
                for item in items
            ]
        self.push_screen(ConfigScreen(items))

    async def action_sessions(self) -> None:
        from xun.tui.screens.sessions import SessionsScreen

        def chosen(conversation_id: str | None) -> None:
            if conversation_id and conversation_id != self.conversation.conversation_id:
                self.post_message(m.SwitchSession(conversation_id))

        store = self.session.store

        def listed() -> tuple[list, list, dict[str, str]]:  # reads every session's head and lock: off the loop
            infos, unreadable = store.scan()
            held = {info.conversation_id: store.held_elsewhere(info.conversation_id) for info in infos}
            return infos, unreadable, {ident: holder for ident, holder in held.items() if holder is not None}

        infos, unreadable, elsewhere = await asyncio.to_thread(listed)
        # this session's file may be older than what the app holds (e.g. after /revise): its row shows the live figures
        current = self.conversation
        infos = [
            dataclasses.replace(info, messages=len(current.messages), tokens=self.agent.request_tokens())
            if info.conversation_id == current.conversation_id
            else info
            for info in infos
        ]
        self.push_screen(
            SessionsScreen(infos, self.conversation.conversation_id, self.presentation.moment, elsewhere, unreadable),
            chosen,
        )

    # ------------------------------------------------------------------------ prompts and work

    async def send_prompt(self, text: str, *, from_queue: bool = False) -> None:
        if not from_queue and self.work.must_queue():  # typed ahead: it waits its turn
            lines = len(text.splitlines())  # a queued paste shows as one line, never in full
            shown = one_line(text, 200) + (f" ({lines:,} lines)" if lines > 1 else "")
            notice = await self.main.chat.add_notice(
                "info", f"queued: {shown} (goes out when the turn is over; Esc takes the queued prompts back)"
            )
            self.work.add(text, notice)
            return
        unanswered = self.work.take_unanswered()
        messages = self.conversation.messages
        if unanswered is not None and messages and messages[-1] is unanswered:
            self.conversation.pop_last_message_if_user()
            self.main.chat.mark_replaced(unanswered.text)
        await self.main.chat.add_user(text)
        self.start_turn(text)

    async def send_queued(self) -> None:
        """After a turn that ended well: the oldest queued prompt goes out (the next when that one is over)."""
        if self.quitting:
            return
        out = self.work.next_out()
        if out is None:
            return
        text, notice = out
        await notice.remove()
        await self.send_prompt(text, from_queue=True)

    async def take_back_queued(self, after_input: bool = False) -> None:
        """Esc, or a turn that failed: the queued prompts go back into the input, before what is typed there
        (typed later), or after it when it is the prompt the ending turn gave back (`after_input`)."""
        queued = self.work.take_back()
        if not queued:
            return
        for _, notice in queued:
            await notice.remove()
        typed = self.main.prompt.text
        typed_lines = [typed] if typed.strip() else []
        queued_lines = [as_typed(text) for text, _ in queued]
        self.main.prompt.set_prompt(
            "\n".join(typed_lines + queued_lines if after_input else queued_lines + typed_lines)
        )
        await self.main.chat.add_notice("info", f"{counted(len(queued), 'queued prompt')} back in the input, not sent")

    def start_turn(self, prompt: str | None) -> None:
        self.work.start_turn(prompt)  # (a waiting queue goes out after this turn)
        self.show_busy("thinking…")
        self.call_later(self.main.chat.show_waiting)  # before the turn's first event, which hides it
        self.run_turn(prompt)

    async def on_agent_work_done(self, message: m.AgentWorkDone) -> None:
        """The work is over: the screen shows it, questions still open close, the session is saved, and the
        queued prompts go out, wait, or come back into the input (`WorkQueue.finish` says which)."""
        await self.main.work_over()
        self.questions.close_all()
        outcome = self.work.finish()
        self.show_busy()
        self.main.refresh_gauge()  # idle now: the warning of a full context may be due
        for screen in self.screen_stack:  # an open recall screen re-checks what it may restore
            changed = getattr(screen, "context_changed", None)
            if callable(changed):
                changed(message.kind)
        self.save_session()
        if outcome in ("take_back", "take_back_after_input"):
            await self.take_back_queued(after_input=outcome == "take_back_after_input")
        elif outcome == "send":
            await self.send_queued()

    def _set_busy(self, busy: str, status: str) -> None:
        self.work.start(busy)  # the worker about to start says when it takes its first step
        self.show_busy(status)

    def show_busy(self, status: str | None = None) -> None:
        """The header says what runs, and the keys that depend on it are enabled or not."""
        busy = self.work.busy
        self.main.header.status = status or ("ready" if busy is None else busy)
        self.refresh_bindings()

    def may_start(self, what: str) -> bool:
        if self.work.busy is None:
            return True
        doing = self.work.doing()
        typed, back, prompt = self.commands.typed, "", self.main.prompt
        if typed is not None and not prompt.text.strip():  # a slash command is not lost: it waits in the input
            prompt.set_prompt(typed)
            back = f" {typed.split()[0]} is back in the input: send it again when that is over."
        self.notify(f"{what} has to wait: {doing} (Esc cancels it).{back}", severity="warning")
        return False

    @staticmethod
    async def _sdk_imported() -> None:
        """The first model call imports the SDK (a second, several on a busy machine): in a thread, so the
        loop goes on drawing (the prompt just sent, "thinking…") instead of freezing until it is in."""
        if "openai" not in sys.modules:
            await asyncio.to_thread(importlib.import_module, "openai")

    @work(exclusive=True, group="agent", exit_on_error=False)
    async def run_turn(self, prompt: str | None) -> None:
        self.work.began()
        try:
            await self.settle_save()
            await self._sdk_imported()
            if prompt is None:
                await self.agent.execute()
            else:
                await self.agent.run(prompt)
        finally:
            self.post_message(m.AgentWorkDone("turn"))

    @work(group="compaction", exit_on_error=False)
    async def compact_now(self, focus: str | None) -> None:
        from xun.compact.summary import compact_conversation

        self.work.began()
        try:
            await self.settle_save()
            await self._sdk_imported()
            await compact_conversation(
                self.agent,
                keep_recent=self.session.config.auto_compact.summary_keep_max,
                instructions=focus,
                trigger="manual",
            )
        finally:
            self.post_message(m.AgentWorkDone("compact"))

    @work(group="compaction", exit_on_error=False)
    async def reclaim_now(self) -> None:
        self.work.began()
        try:
            await self.settle_save()
            await self.agent.reclaim_tool_results(trigger="manual")
        finally:
            self.post_message(m.AgentWorkDone("reclaim"))

    @work(group="compaction", exit_on_error=False)
    async def restore_now(self, tool_call_id: str) -> None:
        self.work.began()
        try:
            await self.settle_save()
            try:
                await self.agent.restore_tool_result(tool_call_id)
            except (KeyError, ValueError) as exc:
                self.post_message(
                    m.Notice("error", f"could not restore {tool_call_id}: {exc.args[0] if exc.args else exc}")
                )
        finally:
            self.post_message(m.AgentWorkDone("restore"))

    def on_open_inspector(self, message: m.OpenInspector) -> None:
        from xun.tui.screens.inspector import InspectorScreen, recall_query

        call_id = message.tool_call_id
        archive = self.conversation.reclaimed_results
        original = self.conversation.reclaimed_original(call_id)
        if call_id not in archive or original is None:
            self.notify(f"{call_id} is no longer reclaimed", severity="warning")
            self.main.recoverable.discard(call_id)
            return
        record = archive[call_id]

        def closed(result: str | None) -> None:
            if result == "restore":
                self.post_message(m.RestoreRequested(call_id))
            elif result == "recall":
                self.action_recall(recall_query(record, original))
            elif result == "chat":
                self.main.show_call_in_chat(call_id)

        self.push_screen(
            InspectorScreen(
                record,
                original,
                workdir=self.workdir,
                when=self.presentation.clock(record.reclaimed_at) if record.reclaimed_at else "earlier",
                restorable=self._restorable(call_id),
            ),
            closed,
        )

    def _restorable(self, call_id: str) -> bool:
        return call_id in self.conversation.reclaimed_in_context()

    def on_show_in_chat(self, message: m.ShowInChat) -> None:
        if message.tool_call_id:
            self.main.show_call_in_chat(message.tool_call_id)
        elif message.summary is not None:
            self.main.show_summary_in_chat(message.summary)
        else:
            self.main.show_said_in_chat(message.speaker, message.text)

    def on_restore_requested(self, message: m.RestoreRequested) -> None:
        if not self.may_start("a restore"):
            return
        self._set_busy("restore", "restoring…")
        self.restore_now(message.tool_call_id)
