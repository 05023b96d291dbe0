"""The prompt line: a typed prompt goes to the agent, a slash command (`xun.tui.commands`) to its action;
the commands that exist only as slash commands (/tokens, /retry, /revise, /clear, /render, /name, /auto)
are here."""

from __future__ import annotations

from typing import Any

from xun.context.usage import usage_totals_line
from xun.tui.commands import UnknownCommand, as_typed, parse
from xun.tui.format import NO_SERVER_COUNT, counted, percent, tokens
from xun.tui.widgets.tool_block import call_subject


class SlashCommands:
    """Prompts and slash commands, as typed (`app.commands`)."""

    def __init__(self, app: Any) -> None:
        # (the `XunApp`: not imported, which would make an import circle)
        self._app = app
        self.typed: str | None = None
        """The slash command being run, as typed: one that has to wait goes back into the input."""
        self._drop_warned: tuple[int, int] | None = None
        """The conversation (last message, length) a /retry or /revise warned about: a second one there drops it."""

    async def submit(self, text: str) -> None:
        """A prompt or a slash command, as typed."""
        app = self._app
        try:
            command = parse(text)
        except UnknownCommand as exc:
            app.notify(str(exc), severity="warning")
            app.main.prompt.set_prompt(text)
            return
        if command is None:
            await app.send_prompt(text[1:] if text.startswith("//") else text)
            return
        self.typed = text
        notice = app.main.chat.last_notice
        try:
            await self.run_command(command.name, command.argument)
        finally:
            self.typed = None
        latest = app.main.chat.last_notice
        if latest is not None and latest is not notice and latest.is_attached:
            app.main.chat.anchor()  # its answer in view, as a sent prompt's is: scrolled up, it came out of sight

    def _give_command_back(self) -> None:
        """A command refused for its argument goes back into the input, to be corrected rather than typed
        again, as an unknown command stays there."""
        app = self._app
        if self.typed is not None and not app.main.prompt.text.strip():
            app.main.prompt.set_prompt(self.typed)

    async def run_command(self, name: str, argument: str) -> None:
        app = self._app
        if name in ("/compact", "/offload"):
            first, _, rest = argument.partition(" ")
            if name == "/compact" and first.lower() in ("toolcall", "preview") and rest.strip():
                # never read the extra words as a summary's focus: say so, and keep the text
                app.notify(
                    f"/compact {first.lower()} takes nothing after it; a summary's focus may not start "
                    f"with '{first}' (reword it)",
                    severity="warning",
                )
                app.main.prompt.set_prompt(f"{name} {argument}")
            elif name == "/compact" and argument.lower() == "toolcall":
                app.action_reclaim()
            elif name == "/compact" and argument.lower() == "preview":
                app.action_preview()
            else:
                app.action_compact(argument or None)
        elif name == "/history":
            app.action_history()
        elif name == "/recall":
            app.action_recall(argument)
        elif name == "/context":
            app.action_context()
        elif name == "/render":
            from xun.tui.export import ExportError, render_transcript

            try:
                path = render_transcript(app.conversation, argument, app.workdir)
            except ExportError as exc:
                app.notify(str(exc), severity="error")
                self._give_command_back()
                return
            await app.main.chat.add_notice("info", f"transcript written to {app.shown_path(str(path))}")
        elif name == "/retry":
            await self.retry()
        elif name == "/revise":
            await self.revise(argument)
        elif name == "/clear":
            await self.clear_session()
        elif name == "/auto":
            await self.set_auto_mode(argument.strip().lower())
        elif name == "/tokens":
            await self.show_tokens()
        elif name == "/mcp":
            app.action_mcp()
        elif name == "/sessions":
            await app.action_sessions()
        elif name == "/name":
            title = " ".join(argument.split())
            if not title:
                app.notify(
                    f"this session is called {app.conversation.session_title() or '(nothing yet)'}; "
                    "/name TITLE names it",
                    severity="warning",
                )
                return
            app.conversation.title = title[:80]
            await app.main.chat.add_notice("info", f"this session is now called {title[:80]!r}")
            app.save_session()
        elif name == "/config":
            app.action_config()
        elif name == "/help":
            app.action_help()
        elif name == "/quit":
            app.action_quit_saving()

    async def set_auto_mode(self, mode: str) -> None:
        """/auto: what `auto_compact.mode` is and where it came from, or a new one for this session (ask mode's
        "off for this session" had no way back short of quitting)."""
        app = self._app
        config = app.session.config
        if not mode:
            await app.main.chat.add_notice(
                "info",
                f"automatic summaries: {config.auto_compact.mode} (auto_compact.mode, "
                f"{config.source_of('auto_compact.mode')}); /auto auto, ask or off changes it "
                "for this session",
            )
            return
        if mode not in ("auto", "ask", "off"):
            app.notify(f"/auto {mode}: give auto, ask or off", severity="warning")
            self._give_command_back()
            return
        config.set_here("auto_compact.mode", mode, "chosen in the app (this session only)")
        app.main.summaries_off_said_again(app.conversation.conversation_id)  # off again later: said again
        policy = app.agent.compactor
        if mode != "off" and getattr(policy, "paused", False):
            policy.resume()  # the user's word: no need to wait out a pause after failures
        what = {
            "auto": "run when the context passes the threshold",
            "ask": "are asked for first",
            "off": f"are off ({app.key_of('compact')} still summarises)",
        }[mode]
        await app.main.chat.add_notice(
            "info", f"automatic summaries {what}, for this session (auto_compact.mode = {mode!r})"
        )

    async def show_tokens(self) -> None:
        app = self._app
        c = app.conversation
        config = app.session.config
        threshold = app.agent.threshold
        window = app.agent.window
        source = "auto_compact.token_threshold"
        if window.tokens is not None and threshold < config.auto_compact.token_threshold:
            source = f"{config.auto_compact.threshold_ratio:g} of the window"
        archive = c.reclaimed_results
        estimate = app.agent.request_tokens()
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
                f"{counted(app.main.summaries_in_context(), 'summary', 'summaries')}"
                f" · {c.tokens_per_char:.3f} tokens per char"
            ),
            usage_totals_line(c.usage_totals, app.agent.session_cost()),
        ]
        await app.main.chat.add_notice("info", "\n  ".join(lines))

    async def retry(self) -> None:
        app = self._app
        from xun.context.messages import UserMessage

        if not app.may_start("/retry"):
            return
        if not any(isinstance(msg, UserMessage) for msg in app.conversation.messages):
            await app.main.chat.add_notice("warning", "/retry: there is no prompt to send again")
            return
        if await self._warned_before_dropping("/retry", "the last reply"):
            return
        await app.settle_save()
        unanswered = app.work.unanswered
        if unanswered is not None and app.main.prompt.text == unanswered.text:
            app.main.prompt.clear()  # /retry sends the failed prompt: the copy in the input would send it twice
        app.conversation.pop_from_last_user_message(inclusive=False)
        await app.main.chat.remove_from_last_user(inclusive=False)
        app.main.refresh_gauge()
        app.start_turn(None)

    async def _warned_before_dropping(self, command: str, what: str) -> bool:
        """Whether `command` must wait: the reply it drops made tool calls that may have changed things, not yet
        named. It names them once; the same command (or the other) again on the same record goes ahead."""
        app = self._app
        state = (id(app.conversation.messages[-1]), len(app.conversation.messages))
        ran = self._calls_that_acted()
        if ran and self._drop_warned != state:  # what they did stays: say so before the record of it goes
            self._drop_warned = state
            await app.main.chat.add_notice(
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
        app = self._app
        from xun.agent.tool_calls import CANCELLED_TOOL_RESULT
        from xun.context.messages import RawOpenAIMessage, UserMessage

        results: dict[str, str] = {}
        calls: list[tuple[str, str, str]] = []
        for message in reversed(app.conversation.messages):
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
            tool, result = app.agent.toolbox.get(name), results.get(call_id, "")
            if tool is None or not tool.needs_confirmation:
                continue
            if result == CANCELLED_TOOL_RESULT or "nothing was done" in result.lower():  # refused, or never started
                continue
            acted.append(f"{name} {call_subject(arguments)}".strip())
        return acted

    async def revise(self, text: str = "") -> None:
        app = self._app
        if not app.may_start("/revise"):
            return
        if await self._warned_before_dropping("/revise", "the last prompt and its reply"):
            if text.strip():  # what was typed stays, to send with a second Enter
                app.main.prompt.set_prompt(f"/revise {text.strip()}")
            return
        await app.settle_save()
        popped = app.conversation.pop_from_last_user_message(inclusive=True)
        if not popped:
            await app.main.chat.add_notice("warning", "/revise: there is no prompt to revise")
            return
        await app.main.chat.remove_from_last_user(inclusive=True)
        app.main.refresh_gauge()
        offload_path, warning = app.conversation.offload_taken_back(popped)
        where = f"the offload log {app.shown_path(offload_path)}" if offload_path else "the session file"
        await app.main.chat.add_notice(
            "warning" if warning else "info",
            warning
            or f"/revise took the last prompt and its reply out of the context; they are in {where} (F9 finds them)",
        )
        old = getattr(popped[0], "text", "")
        if text.strip():
            await app.send_prompt(text.strip())
        else:
            app.main.prompt.set_prompt(as_typed(old))
            app.main.prompt.focus()

    async def clear_session(self) -> None:
        app = self._app
        if not app.may_start("/clear"):
            return
        await app.settle_save()
        count, offload_path, warning = await app.conversation.aclear()
        app.agent.toolbox.forget_permissions()  # "allow for this session" ends with a fresh start
        await app.main.chat.clear()
        app.main.recoverable.load([])
        app.main.gauge.context_replaced()
        app.main.usage_reset()
        app.main.refresh_gauge()
        app.main.gauge.set_history([])
        if not count:
            gone = ""
        elif offload_path:
            gone = (
                f"; the {count} messages it took out are in the offload log {app.shown_path(offload_path)} "
                f"({app.key_of('recall')} finds them)"
            )
        else:
            gone = f"; the {count} messages it took out are kept in the session file"
        await app.main.chat.add_notice(
            "info", f"cleared: a fresh start in this session (the compaction log stays){gone}"
        )
        if warning:
            await app.main.chat.add_notice("warning", warning)
        app.save_session()
