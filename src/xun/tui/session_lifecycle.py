"""The session's life in the app: opening it after the first frame (and asking to trust the folder),
showing it in every pane, asking the server for its window, the MCP servers, saving in a thread,
switching sessions, and quitting with the session saved."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from xun.base.errors import SessionFormatError, SessionLocked
from xun.base.valid_text import escape_control
from xun.tui import messages as m
from xun.tui.heap import CHECK_SECONDS
from xun.tui.transcript import transcript
from xun.tui.widgets.prompt_input import PASTE_CHARS, PASTE_LINES

if TYPE_CHECKING:
    from xun.agent.launch import Session


QUIT_AGAIN_WITHIN = 2.0
"""Seconds within which a second Ctrl+C quits."""
TRANSCRIPT_FRAME_WAIT = 2.0
"""Seconds the opening thread waits at most for the frame that shows a resumed transcript."""
NEWEST_MESSAGES = 64
"""How many of a resumed session's newest messages are shown before the whole session is read."""


class SessionLifecycle:
    """Opening, showing, saving, switching and closing the session (mixed into `XunApp`)."""

    @work(thread=True, group="open", exit_on_error=False)
    def _open_session(self) -> None:
        """Settings, model server, conversation and agent, off the event loop (after the first frame); a
        `SessionOpener` reads a resumed conversation first, and its transcript is shown while the rest loads."""
        from xun.agent.opener import SessionOpener

        assert self._opener is not None
        if isinstance(self._opener, SessionOpener) and self._opener.resume is not None and self.session is None:
            self.call_later(self._import_reply_renderer)  # on the event loop, beside the read below
        try:
            if (
                isinstance(self._opener, SessionOpener)
                and (conversation := self._opener.conversation(peek=self._show_newest)) is not None
            ):
                drawn = threading.Event()
                self.post_message(m.TranscriptLoaded(conversation, transcript(conversation).items, drawn))
                # the rest (the SDK's imports, the settings) waits for the transcript's frame: run beside it, it
                # took the interpreter's lock from that frame's mounting and layout half the time
                drawn.wait(TRANSCRIPT_FRAME_WAIT)
            session = self._opener()
        except Exception as exc:  # noqa: BLE001 - the app exits and `run()` raises it, as the command line would
            self.post_message(m.SessionOpenFailed(exc))
            return
        self.opened_session = session
        self.post_message(m.SessionOpened(session))

    def _import_reply_renderer(self) -> None:
        """Rich's Markdown, which draws a resumed transcript's replies (30 ms to import), imported on the event
        loop while the opening thread reads the session (its reads leave the interpreter's lock free), not
        after, when the newest turns are mounted."""
        import rich.markdown  # noqa: F401

    def _show_newest(self, path: Path) -> None:
        """In the opening thread, given a resumed session's file: its newest turns, read from the end of its
        messages (`read_newest_messages`), are shown before the whole is read, which waits for their frame."""
        from xun.context.conversation import read_newest_messages
        from xun.tui.transcript import message_items

        newest = read_newest_messages(path, NEWEST_MESSAGES)
        if newest is None or newest[1] <= len(newest[2]) or self.session is not None:
            return  # another layout, or a short session (the whole comes as fast), or a reopening
        ident, total, messages = newest
        items = message_items(messages, total - len(messages))
        if items:
            drawn = threading.Event()
            self.post_message(m.NewestTurns(ident, items, drawn))
            drawn.wait(TRANSCRIPT_FRAME_WAIT)

    async def on_newest_turns(self, message: m.NewestTurns) -> None:
        """A resumed session's newest turns, shown while the rest of it is read."""
        try:
            if self.session is not None:
                return
            self.main.header.set_session(message.conversation_id)
            await self.main.chat.show_transcript(message.items)
            self._newest_shown = message.items
        finally:
            self.call_after_refresh(message.drawn.set)

    async def on_transcript_loaded(self, message: m.TranscriptLoaded) -> None:
        """The chat shows the resumed transcript before the session is ready (prompts typed meanwhile wait).
        When its newest turns show already (`NewestTurns`), the older ones join them above."""
        try:
            if self.session is not None:
                return  # a reopening (after a trust answer): the session's conversation is shown already
            self.main.header.set_session(message.conversation.conversation_id)
            shown, self._newest_shown = self._newest_shown, None
            if shown and message.items[-len(shown) :] == shown:
                await self.main.chat.add_older(message.items[: -len(shown)])
            else:
                await self.main.chat.show_transcript(message.items)
            self._transcript_shown = message.conversation
        finally:
            self.call_after_refresh(message.drawn.set)

    async def on_session_opened(self, message: m.SessionOpened) -> None:
        self._attach(message.session)
        with self.batch_update():  # one layout and one frame for the header, the transcript and the panes
            await self._show_session()
        self.refresh_bindings()
        if message.session.config.withheld:
            self._ask_trust(message.session)
        if self._early_prompt is not None:
            text, self._early_prompt = self._early_prompt, None
            await self.commands.submit(text)

    def _ask_trust(self, session: Session) -> None:
        """The folder's config set keys that need trust: ask; a yes is remembered and the session reopened
        with them (nothing has happened in it yet)."""
        from xun.agent.trust import describe_withheld, folder_key, trust_folder
        from xun.tui.screens.trust import TrustScreen

        folder = session.agent.workdir
        self.notify(describe_withheld(session.config.withheld, folder), severity="warning", timeout=10)

        def answered(trusted: bool | None) -> None:
            if not trusted:
                return
            trust_folder(folder)
            if self._opener is None or self.work.busy or self.work.finished:
                self.notify("trusted; the folder's settings apply when xun starts next", timeout=10)
                return
            session.close()
            self.main.header.status = "opening the session…"
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
        for warning in session.config.keymap_warnings:
            self.notify(warning, title="ui.keymap", severity="warning", timeout=10, markup=False)
        self.main.header.show_model(
            model=session.config.model.name, provider=session.describe_provider(), offline=session.offline
        )
        await self.show_conversation()
        if session.read_only:
            await self.main.chat.add_notice(
                "warning",
                "opened read-only (--read-only): you can go on here, but nothing "
                "of it is saved; another xun may be writing this session",
            )
        await self._offer_unanswered()
        self.main.chat.anchor()  # what the resume says (a turn cut off, a draft back) is in view, below the transcript
        self.main.header.status = "ready"
        self.main.call_after_refresh(self._freeze_heap)  # queued behind the main screen's: `_freeze_heap`
        self.call_after_refresh(self.discover_window)
        if session.mcp:
            self.start_mcp_servers()

    def _keep_draft(self) -> None:
        """At quit, what was typed and not sent goes with the session, for the resume to put back: the
        prompt's text, the prompts queued behind the turn, and the prompt of a turn cut off before it was
        in the context (ask mode's question stood open). Nothing typed is lost at a quit."""
        from xun.context.messages import UserMessage
        from xun.tui.commands import as_typed

        parts: list[str] = []
        prompt = self.work.turn_prompt
        messages = self.conversation.messages
        if (
            prompt
            and self.work.busy == "turn"
            and not any(isinstance(message, UserMessage) and message.text == prompt for message in messages[-50:])
        ):
            parts.append(as_typed(prompt))  # (unless the turn's end, handled first, put it back in the input)
        parts += [as_typed(text) for text, _notice in self.work.queued]
        parts.append(self.main.prompt.expanded(self.main.prompt.text))
        kept = [part.strip("\n") for part in parts if part.strip()]
        self.conversation.draft = "\n\n".join(dict.fromkeys(kept))

    async def _offer_unanswered(self) -> None:
        """A session whose last prompt got no answer (the server was down, xun quit before the reply): as
        when the turn failed, the prompt goes back into the input and sending it replaces the unanswered
        one, instead of a second prompt after it. Not over what was typed while it opened.
        What the prompt held at quit (`Conversation.draft`) comes back the same way, and a turn cut off
        between its tool calls and its reply is said to be."""
        from xun.context.messages import UserMessage
        from xun.tui.commands import as_typed

        conversation = self.conversation
        messages = conversation.messages
        last = messages[-1] if len(messages) else None
        draft, conversation.draft = conversation.draft, ""
        if isinstance(last, UserMessage) and draft == as_typed(last.text):
            draft = ""  # the unanswered prompt given back to the input before the quit: offered as such, below
        typed = self._early_prompt is not None or self.main.prompt.text.strip()
        if last is not None and last.role == "tool":  # a turn cut off between its tool calls and its reply
            await self.main.chat.add_notice(
                "warning",
                "the last turn stopped before the model's reply (xun quit or was "
                "stopped during it): to go on from there, send its prompt again (Up brings it "
                "back) or ask the model to continue",
            )
        if draft and typed and len(draft) < PASTE_CHARS and draft.count("\n") < PASTE_LINES:
            await self.main.chat.add_notice(
                "info", f"what the prompt held when xun quit (not put back: you typed meanwhile): {draft}"
            )
        elif draft:
            folded = self.main.prompt.put_back(draft)
            where = "after what you typed meanwhile" if typed else "in the input"
            said = (
                f"is back {where}, not sent"
                if folded is None
                else (f"is back {where}, not sent, folded as {folded} (Enter sends all of it)")
            )
            await self.main.chat.add_notice("info", f"what the prompt held when xun quit {said}")
        if draft or typed or not isinstance(last, UserMessage):
            return
        self.work.fail_unanswered(last)
        self.main.prompt.set_prompt(as_typed(last.text))
        await self.main.chat.add_notice(
            "info",
            "the last prompt was never answered; it is back in the input: Enter sends "
            "it again (in place of the unanswered one), or /retry",
        )

    @work(group="window", exit_on_error=False)
    async def discover_window(self) -> None:
        """Ask the server for its window after the frame that shows the session (never before: the first
        prompt need not wait for it), then show the figure and where it came from."""
        await self.agent.start_discovery()
        self.main.refresh_gauge()

    async def show_conversation(self) -> None:
        """Fill every pane from the conversation (start, resume, session switch)."""
        shown, self._transcript_shown = self._transcript_shown, None
        await self.main.show_conversation(self.conversation, read_only=self.session.read_only, shown=shown)

    def save_session(self) -> None:
        """Save in a thread worker (after each turn and each manual compaction)."""
        if self._nothing_to_save():
            return
        self._save_worker()

    @work(thread=True, group="save", exit_on_error=False)
    def _save_worker(self) -> None:
        try:
            path = self.save_now()
        except (OSError, SessionFormatError) as exc:  # (the file changed under the session: its archive is named)
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
        self.saved = path is not None  # read-only: nothing written
        self.last_saved_path = path
        return path

    async def settle_save(self) -> None:
        """Wait for a save in progress: nothing may change the conversation while it is written."""
        for worker in list(self.workers):
            if worker.group == "save" and worker.is_running:
                with contextlib.suppress(Exception):  # a failed save was reported by the worker itself
                    await worker.wait()

    def _freeze_heap(self) -> None:
        """Once the session is shown, the heap is frozen (`HeapKeeper.freeze`) and the collector, paused while the
        app started (`xun.tui.run`), runs again, its full collections at quiet moments. It runs after what the
        main screen does after the first frame (queued there before it): a resumed session's archive of
        reclaimed originals, parsed then for the recoverable list (a record each, thousands in a long session),
        is frozen too. The SDK is not made here: its import takes a second on the event loop; it is imported in
        a thread."""
        if not self.heap.frozen:
            self.set_interval(CHECK_SECONDS, self.heap.collect_if_quiet, name="full collections when quiet")
        self.heap.freeze()

    async def on_unmount(self) -> None:
        """The HTTP client belongs to this app's event loop: close it, so a later app on the same session
        (or the session's next user) builds its own instead of one tied to a closed loop."""
        self.heap.release()
        if self.session is None:
            return
        await self.stop_mcp_servers()
        with contextlib.suppress(Exception):  # closing a client that already failed must not stop the exit
            await self.agent.aclose()

    def on_session_saved(self, message: m.SessionSaved) -> None:
        if message.error:
            self.notify(f"could not save the session: {message.error}", severity="error")

    async def on_switch_session(self, message: m.SwitchSession) -> None:
        if not self.may_start("switching sessions"):
            return
        await self.settle_save()
        store = self.session.store
        old_id = self.agent.conversation.conversation_id
        new_id = message.conversation_id
        locking = not self.session.read_only and new_id != old_id
        try:
            await asyncio.to_thread(self.save_now)
            if locking:  # like --resume: the lock before the read, so no other process writes it meanwhile
                await asyncio.to_thread(store.lock, new_id)
            try:
                conversation = await asyncio.to_thread(store.load, new_id)
            except BaseException:
                if locking:
                    store.unlock(new_id)
                raise
        except SessionLocked as exc:  # the command-line advice (--fork, --read-only) is no use in here
            self.notify(
                f"session {new_id} is open in another xun "
                f"({escape_control(exc.holder, keep_newlines=False) or 'its process is not named'}), which "
                "alone may save it; you stay in this session. Switch to it once that xun has ended, or "
                f"from a shell `xun --resume {new_id} --fork` continues a copy of it",
                severity="error",
                markup=False,
            )
            return
        except Exception as exc:  # noqa: BLE001 - unreadable file, bad id: say so and stay
            self.notify(f"could not open session {new_id}: {exc}", severity="error", markup=False)
            return
        if locking:
            store.unlock(old_id)  # another process may now resume the session left
        self.agent.toolbox.forget_permissions()  # "allow for this session" ends with the session
        if self.work.waits:  # prompts queued behind a failed one were meant for the session left
            await self.take_back_queued(after_input=True)
        self.agent.conversation = conversation
        await self.show_conversation()
        await self.main.chat.add_notice("info", f"switched to session {conversation.conversation_id}")

    @work(group="mcp", exit_on_error=False)
    async def start_mcp_servers(self) -> None:
        """After the first frame: the SDK is imported in a thread (a second of work), then every server
        starts on this loop, where the turns call their tools; each change of state is a message."""
        from xun.agent.tools.mcp import preload

        names = [name for name, server in self.session.mcp.servers.items() if server.state != "disabled"]
        if names:
            self.post_message(m.Notice("info", f"MCP: starting {', '.join(names)} (/mcp shows their state)"))
        await asyncio.to_thread(preload)
        await self.session.mcp.start()

    @work(group="mcp", exit_on_error=False)
    async def restart_mcp_server(self, name: str) -> None:
        from xun.agent.tools.mcp import preload

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
            await self.main.chat.add_notice("info", f"MCP server {event.name}: ready with {count} (/mcp lists them)")
        elif event.state == "failed":
            text = f"MCP server {event.name} failed: {event.reason}"
            await self.main.chat.add_notice("warning", text + " (/mcp restarts it)")
            self.notify(text, title="MCP server failed", severity="warning", timeout=8)
        for screen in self.screen_stack:
            if isinstance(screen, McpScreen):
                screen.refresh_servers()

    def action_quit_twice(self) -> None:
        """The second Ctrl+C within QUIT_AGAIN_WITHIN quits, unless something was typed between the two
        (the words would go with the app); then it asks again."""
        now = time.monotonic()
        first, second = self._ctrl_c_keys
        typed_between = first < self._other_key_at < second
        if now - self._last_ctrl_c <= QUIT_AGAIN_WITHIN and not typed_between:
            self.action_quit_saving()
            return
        self._last_ctrl_c = now
        self.notify("Press Ctrl+C again to quit (the session is saved).", title="Quit?", timeout=QUIT_AGAIN_WITHIN)

    def action_quit_saving(self) -> None:
        if self.quitting:
            return
        self.quitting = True
        self._quit_worker()

    @work(group="quit", exit_on_error=False)
    async def _quit_worker(self) -> None:
        """Cancel the running work and wait until it has wound down, in a worker: meanwhile the app goes on
        handling the events the cancelled turn still posts (a notice, the end of the turn), while every
        widget is still mounted. Then save and exit."""
        running = [w for w in self.workers if w.group in ("agent", "compaction") and w.is_running]
        self.workers.cancel_group(self, "agent")
        self.workers.cancel_group(self, "compaction")
        for worker in running:
            with contextlib.suppress(Exception):
                await worker.wait()
        await self.settle_save()
        self._keep_draft()
        try:
            await asyncio.to_thread(self.save_now)
        except (OSError, SessionFormatError) as exc:
            self.notify(f"could not save the session: {exc}", severity="error")
        # through the queue: the events the cancelled work posted are handled first (once `exit` is
        # called no widget may be mounted, and a notice they add would fail the quit)
        self.call_later(self.exit, 0)
