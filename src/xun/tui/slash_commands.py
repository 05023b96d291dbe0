"""The prompt line: a typed prompt goes to the agent, a slash command (`xun.tui.commands`) to its action;
the commands that exist only as slash commands (/tokens, /retry, /revise, /clear, /render, /name) are
here."""

from __future__ import annotations

from xun.context.usage import usage_totals_line
from xun.tui.commands import UnknownCommand, as_typed, parse
from xun.tui.format import NO_SERVER_COUNT, counted, one_line, percent, tokens
from xun.tui.widgets.tool_block import call_subject


class SlashCommands:
    """Prompts and slash commands, as typed (mixed into `XunApp`)."""

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
        self._command_typed = text
        notice = self.chat.last_notice
        try:
            await self.run_command(command.name, command.argument)
        finally:
            self._command_typed = None
        latest = self.chat.last_notice
        if latest is not None and latest is not notice and latest.is_attached:
            self.chat.anchor()  # its answer in view, as a sent prompt's is: scrolled up, it came out of sight

    def _give_command_back(self) -> None:
        """A command refused for its argument goes back into the input, to be corrected rather than typed
        again, as an unknown command stays there."""
        if self._command_typed is not None and not self.prompt.text.strip():
            self.prompt.set_prompt(self._command_typed)

    async def run_command(self, name: str, argument: str) -> None:
        if name in ("/compact", "/offload"):
            first, _, rest = argument.partition(" ")
            if name == "/compact" and first.lower() in ("toolcall", "preview") and rest.strip():
                # never read the extra words as a summary's focus: say so, and keep the text
                self.notify(
                    f"/compact {first.lower()} takes nothing after it; a summary's focus may not start "
                    f"with '{first}' (reword it)",
                    severity="warning",
                )
                self.prompt.set_prompt(f"{name} {argument}")
            elif name == "/compact" and argument.lower() == "toolcall":
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
                self._give_command_back()
                return
            await self.chat.add_notice("info", f"transcript written to {self.shown_path(str(path))}")
        elif name == "/retry":
            await self.action_retry()
        elif name == "/revise":
            await self.action_revise(argument)
        elif name == "/clear":
            await self.action_clear()
        elif name == "/auto":
            await self.set_auto_mode(argument.strip().lower())
        elif name == "/tokens":
            await self.action_tokens()
        elif name == "/mcp":
            self.action_mcp()
        elif name == "/sessions":
            await self.action_sessions()
        elif name == "/name":
            title = " ".join(argument.split())
            if not title:
                self.notify(
                    f"this session is called {self.conversation.session_title() or '(nothing yet)'}; "
                    "/name TITLE names it",
                    severity="warning",
                )
                return
            self.conversation.title = title[:80]
            await self.chat.add_notice("info", f"this session is now called {title[:80]!r}")
            self.save_session()
        elif name == "/config":
            self.action_config()
        elif name == "/help":
            self.action_help()
        elif name == "/quit":
            self.action_quit_saving()

    async def set_auto_mode(self, mode: str) -> None:
        """/auto: what `auto_compact.mode` is and where it came from, or a new one for this session (ask mode's
        "off for this session" had no way back short of quitting)."""
        config = self.session.config
        if not mode:
            await self.chat.add_notice(
                "info",
                f"automatic summaries: {config.auto_compact.mode} (auto_compact.mode, "
                f"{config.source_of('auto_compact.mode')}); /auto auto, ask or off changes it "
                "for this session",
            )
            return
        if mode not in ("auto", "ask", "off"):
            self.notify(f"/auto {mode}: give auto, ask or off", severity="warning")
            self._give_command_back()
            return
        config.set_here("auto_compact.mode", mode, "chosen in the app (this session only)")
        self._told_summaries_off.discard(self.conversation.conversation_id)  # off again later: said again
        policy = self.agent.compactor
        if mode != "off" and getattr(policy, "paused", False):
            policy.resume()  # the user's word: no need to wait out a pause after failures
        what = {
            "auto": "run when the context passes the threshold",
            "ask": "are asked for first",
            "off": f"are off ({self.key_of('compact')} still summarises)",
        }[mode]
        await self.chat.add_notice(
            "info", f"automatic summaries {what}, for this session (auto_compact.mode = {mode!r})"
        )

    async def send_prompt(self, text: str) -> None:
        if self.busy is not None or (self.queued_prompts and not self._queue_waits):  # typed ahead: it waits its turn
            lines = len(text.splitlines())  # a queued paste shows as one line, never in full
            shown = one_line(text, 200) + (f" ({lines:,} lines)" if lines > 1 else "")
            notice = await self.chat.add_notice(
                "info", f"queued: {shown} (goes out when the turn is over; Esc takes the queued prompts back)"
            )
            self.queued_prompts.append((text, notice))
            return
        unanswered, self._unanswered = self._unanswered, None
        messages = self.conversation.messages
        if unanswered is not None and messages and messages[-1] is unanswered:
            self.conversation.pop_last_message_if_user()
            self.chat.mark_replaced(unanswered.text)
        await self.chat.add_user(text)
        self._start_turn(text)

    async def send_queued(self) -> None:
        """After a turn that ended well: the oldest queued prompt goes out (the next when that one is over)."""
        if not self.queued_prompts or self.busy is not None or self.quitting:
            return
        text, notice = self.queued_prompts.pop(0)
        await notice.remove()
        waiting, self.queued_prompts = self.queued_prompts, []
        await self.send_prompt(text)
        self.queued_prompts = waiting

    async def take_back_queued(self, after_input: bool = False) -> None:
        """Esc, or a turn that failed: the queued prompts go back into the input, before what is typed there
        (typed later), or after it when it is the prompt the ending turn gave back (`after_input`)."""
        self._queue_waits = False
        if not self.queued_prompts:
            return
        queued, self.queued_prompts = self.queued_prompts, []
        for _, notice in queued:
            await notice.remove()
        typed = self.prompt.text
        typed_lines = [typed] if typed.strip() else []
        queued_lines = [as_typed(text) for text, _ in queued]
        self.prompt.set_prompt("\n".join(typed_lines + queued_lines if after_input else queued_lines + typed_lines))
        await self.chat.add_notice("info", f"{counted(len(queued), 'queued prompt')} back in the input, not sent")

    def _start_turn(self, prompt: str | None) -> None:
        self._queue_waits = False  # the waiting queue goes out after this turn
        self._set_busy("turn", "thinking…")
        self._turn_prompt = prompt
        self.call_later(self.chat.show_waiting)  # before the turn's first event, which hides it
        self.run_turn(prompt)

    async def action_tokens(self) -> None:
        c = self.conversation
        config = self.session.config
        threshold = self.agent.threshold
        window = self.agent.window
        source = "auto_compact.token_threshold"
        if window.tokens is not None and threshold < config.auto_compact.token_threshold:
            source = f"{config.auto_compact.threshold_ratio:g} of the window"
        archive = c.reclaimed_results
        estimate = self.agent.request_tokens()
        reported = (
            f"reported {tokens(c.total_tokens)} (last model call)" if c.total_tokens is not None else NO_SERVER_COUNT
        )
        lines = [
            f"{reported} · estimate {tokens(estimate)} now (the next request)",
            (
                f"threshold {tokens(threshold)} ({source}) · {window.describe()}"
                f" · {percent(estimate, threshold)}% of the threshold"
            ),
            (
                f"{counted(len(c.messages), 'message')} · {counted(len(archive), 'reclaimed result')} · "
                f"{counted(self._summaries_in_context(), 'summary', 'summaries')}"
                f" · {c.tokens_per_char:.3f} tokens per char"
            ),
            usage_totals_line(c.usage_totals, self.agent.session_cost()),
        ]
        await self.chat.add_notice("info", "\n  ".join(lines))

    async def action_retry(self) -> None:
        from xun.context.messages import UserMessage

        if not self._may_start("/retry"):
            return
        if not any(isinstance(msg, UserMessage) for msg in self.conversation.messages):
            await self.chat.add_notice("warning", "/retry: there is no prompt to send again")
            return
        if await self._warned_before_dropping("/retry", "the last reply"):
            return
        await self._settle_save()
        if self._unanswered is not None and self.prompt.text == self._unanswered.text:
            self.prompt.clear()  # /retry sends the failed prompt: the copy in the input would send it twice
        self.conversation.pop_from_last_user_message(inclusive=False)
        await self.chat.remove_from_last_user(inclusive=False)
        self._refresh_gauge()
        self._start_turn(None)

    async def _warned_before_dropping(self, command: str, what: str) -> bool:
        """Whether `command` must wait: the reply it drops made tool calls that may have changed things, not yet
        named. It names them once; the same command (or the other) again on the same record goes ahead."""
        state = (id(self.conversation.messages[-1]), len(self.conversation.messages))
        ran = self._calls_that_acted()
        if ran and self._drop_warned != state:  # what they did stays: say so before the record of it goes
            self._drop_warned = state
            await self.chat.add_notice(
                "warning",
                f"{command} drops {what}, and in it {counted(len(ran), 'tool call')} that may have "
                f"changed things: {'; '.join(ran)}. What they did stays (files written, commands run), and the "
                f"new reply will not know of it. {command} again to drop it anyway.",
            )
            return True
        self._drop_warned = None
        return False

    def _calls_that_acted(self) -> list[str]:
        """The tool calls since the last prompt that ask for a confirmation (they write or run things) and
        were not refused or stopped before they ran, as `write_file code.py`."""
        from xun.agent.tool_calls import CANCELLED_TOOL_RESULT
        from xun.context.messages import RawOpenAIMessage, UserMessage

        results: dict[str, str] = {}
        calls: list[tuple[str, str, str]] = []
        for message in reversed(self.conversation.messages):
            if isinstance(message, UserMessage):
                break
            if type(message) is RawOpenAIMessage and message.role == "tool":
                results[str(message.raw.get("tool_call_id", ""))] = str(message.raw.get("content", ""))
            elif type(message) is RawOpenAIMessage and message.role == "assistant":
                for call in reversed(message.raw.get("tool_calls") or ()):
                    function = call.get("function") or {}
                    calls.append(
                        (str(call.get("id", "")), str(function.get("name", "")), str(function.get("arguments", "")))
                    )
        acted = []
        for call_id, name, arguments in reversed(calls):
            tool, result = self.agent.toolbox.get(name), results.get(call_id, "")
            if tool is None or not tool.needs_confirmation:
                continue
            if result == CANCELLED_TOOL_RESULT or "nothing was done" in result.lower():  # refused, or never started
                continue
            acted.append(f"{name} {call_subject(arguments)}".strip())
        return acted

    async def action_revise(self, text: str = "") -> None:
        if not self._may_start("/revise"):
            return
        if await self._warned_before_dropping("/revise", "the last prompt and its reply"):
            if text.strip():  # what was typed stays, to send with a second Enter
                self.prompt.set_prompt(f"/revise {text.strip()}")
            return
        await self._settle_save()
        popped = self.conversation.pop_from_last_user_message(inclusive=True)
        if not popped:
            await self.chat.add_notice("warning", "/revise: there is no prompt to revise")
            return
        await self.chat.remove_from_last_user(inclusive=True)
        self._refresh_gauge()
        offload_path, warning = self.conversation.offload_taken_back(popped)
        where = f"the offload log {self.shown_path(offload_path)}" if offload_path else "the session file"
        await self.chat.add_notice(
            "warning" if warning else "info",
            warning
            or f"/revise took the last prompt and its reply out of the context; they are in {where} (F9 finds them)",
        )
        old = getattr(popped[0], "text", "")
        if text.strip():
            await self.send_prompt(text.strip())
        else:
            self.prompt.set_prompt(as_typed(old))
            self.prompt.focus()

    async def action_clear(self) -> None:
        if not self._may_start("/clear"):
            return
        await self._settle_save()
        count, offload_path, warning = await self.conversation.aclear()
        self.agent.toolbox.forget_permissions()  # "allow for this session" ends with a fresh start
        await self.chat.clear()
        self.recoverable.load([])
        self.gauge.context_replaced()
        self._last_call = None
        self._count_usage(None)
        self._refresh_gauge()
        self.gauge.set_history([])
        if not count:
            gone = ""
        elif offload_path:
            gone = (
                f"; the {count} messages it took out are in the offload log {self.shown_path(offload_path)} "
                f"({self.key_of('recall')} finds them)"
            )
        else:
            gone = f"; the {count} messages it took out are kept in the session file"
        await self.chat.add_notice("info", f"cleared: a fresh start in this session (the compaction log stays){gone}")
        if warning:
            await self.chat.add_notice("warning", warning)
        self.save_session()
