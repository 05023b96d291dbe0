"""What the engine asks the user: a confirmation before a tool that writes or runs things, and, in ask mode,
consent to an automatic summary. Each question is a dialog over the main screen; the engine waits on a
future the answer sets (`EventBridge.confirm`, `EventBridge.consent`).

The app owns one `EngineQuestions` (`app.questions`): the dialogs open now and the answers that hold for
the rest of the turn are its state alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xun.tui import messages as m
from xun.tui.format import tokens

if TYPE_CHECKING:
    from textual.screen import ModalScreen

    from xun.tui.screens.guarded import GuardedQuestion


class EngineQuestions:
    """The engine's questions, asked as dialogs (`app.questions`)."""

    def __init__(self, app: Any) -> None:
        # (the `XunApp`: not imported, which would make an import circle)
        self._app = app
        self.open: list[ModalScreen[Any]] = []
        """The questions on screen now: closed unanswered when the engine stops waiting or the work ends."""
        self._declined = False
        """"Not now" to an automatic summary holds for the rest of the turn (the engine asks before every call)."""
        self._granted = False
        """So does "run now": a summary that was not enough may be followed by another without asking again."""

    def turn_began(self) -> None:
        """A new turn asks afresh."""
        self._declined = False
        self._granted = False

    def close(self, screen: ModalScreen[Any]) -> None:
        """Close a question nobody answers any more (the engine stopped waiting, or the work is over)."""
        if screen in self.open:
            self.open.remove(screen)
        if screen.is_attached and self._app.screen is screen:
            screen.dismiss(None)

    def close_all(self) -> None:
        for screen in list(self.open):
            self.close(screen)

    def confirm(self, message: m.ConfirmationAsked) -> None:
        """Allow a tool call once, for the session, or deny it (Esc denies and stops the turn)."""
        from xun.agent.tools import Decision
        from xun.tui.screens.confirm import ConfirmScreen

        app = self._app
        answer = message.answer
        screen = ConfirmScreen(message.request)

        def answered(decision: Decision | None) -> None:
            if screen in self.open:
                self.open.remove(screen)
            if not answer.done():
                answer.set_result(decision if isinstance(decision, Decision) else Decision.DENY)
            if decision is Decision.ALLOW_SESSION:  # later calls run unasked: the chat says since when
                app.call_later(
                    app.main.chat.add_notice,
                    "warning",
                    f"{message.request.tool} is allowed without "
                    "asking for the rest of this session (restart xun to be asked again)",
                )
            self._show_typed_aside(screen, "the confirmation")
            if screen.stop_turn:
                app.action_cancel_turn()

        self.open.append(screen)
        answer.add_done_callback(lambda _f: self.close(screen))
        app.main.header.status = "waiting for you"
        app.push_screen(screen, answered)

    def consent(self, message: m.ConsentAsked) -> None:
        """Ask mode: summarise now, not now (for this turn), or turn automatic summaries off for the session."""
        from xun.tui.screens.consent import ConsentScreen

        app = self._app
        answer = message.answer
        if answer.done():  # the agent stopped waiting before the question arrived
            return
        if self._declined or self._granted:
            answer.set_result(self._granted)
            return
        settings = app.session.config.auto_compact
        plan = app.conversation.plan_compaction(settings.summary_keep_max)
        keep_text = (
            "" if plan.nothing_to_condense else f"{plan.condensed_count} messages summarised, {len(plan.kept)} kept"
        )
        screen = ConsentScreen(
            self._why_summary_now(), settings.ask_timeout, keep_text=keep_text, countdown=app.presentation.countdown
        )

        def answered(choice: str | None) -> None:
            if screen in self.open:
                self.open.remove(screen)
            self._show_typed_aside(screen, "the question")
            app.main.waiting_for_you(None)
            if answer.done():
                return
            if choice == "off":
                app.session.config.set_here("auto_compact.mode", "off", "chosen in the app (this session only)")
                app.notify(
                    'Automatic summaries are off for this session (auto_compact.mode = "off"); '
                    f"{app.key_of('compact')} still summarises, /auto ask asks again.",
                    title="ask mode",
                )
            answer.set_result(choice == "now")
            self._declined = choice != "now"
            self._granted = choice == "now"

        self.open.append(screen)
        answer.add_done_callback(lambda _f: self.close(screen))
        app.main.waiting_for_you("waiting for you: summarise the conversation first?")
        app.push_screen(screen, answered)  # the question and its countdown are on the screen (no toast to go stale)

    def _why_summary_now(self) -> str:
        """What is true when the policy asks: it asks after reclaiming old tool results, so the context may
        be back under the threshold yet above what a summary aims for (ESCALATION_RATIO of it)."""
        from xun.compact.policy import ESCALATION_RATIO

        agent = self._app.agent
        now, threshold = agent.request_tokens(), agent.threshold
        figures = f"{tokens(now)} / {tokens(threshold)}"
        if now > threshold:
            return f"The context is over the threshold ({figures})."
        return (
            f"The context passed the threshold; with old tool results reclaimed it is at {figures}, still above "
            f"the {tokens(int(threshold * ESCALATION_RATIO))} ({ESCALATION_RATIO:.0%} of the threshold) "
            "that automatic compaction brings it under."
        )

    def _show_typed_aside(self, screen: GuardedQuestion[Any], what: str) -> None:
        """A sentence typed while a question took no answers was kept out of the prompt behind it, where it
        would have been sent with the next prompt; once the question closes, it goes on into the prompt, not
        sent, after what the prompt holds (typing through the moment the question opened left its first
        letters there). Not a notice in the chat, which the reply that follows would bury."""
        app = self._app
        text = screen.aside_text
        if not text or app.quitting:
            return
        prompt = app.main.prompt
        if prompt.read_only:
            app.call_later(
                app.main.chat.add_notice, "info", f"typed while {what} was open, kept out of the prompt: {text}"
            )
            return
        prompt.set_prompt(prompt.text + text)
        app.notify(f"What you typed while {what} was open is in the prompt, not sent.", title="typed ahead")
