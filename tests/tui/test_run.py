"""`xun.tui.run(session)`, what plain `xun` calls, and what the header says about the model."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import pytest

from xun.agent.launch import open_session
from xun.tui import run
from xun.tui.app import XunApp
from xun.tui.heap import FULL_COLLECTION_CAP
from xun.tui.widgets.welcome_block import WelcomeBlock

from .helpers import every_block, submit, turn, wait_until


def test_run_returns_zero_after_a_quit_and_saves(offline_server, tmp_path: Path, capsys):
    session = open_session(tmp_path, base_url=offline_server.base_url, environ={})
    seen: dict[str, object] = {}

    async def drive(pilot) -> None:
        await turn(pilot, "hello from run")
        seen["reply"] = pilot.app.agent.last_reply()
        await pilot.press("ctrl+q")

    try:
        code = run(session, headless=True, size=(100, 30), auto_pilot=drive)
    finally:
        session.close()
    assert code == 0
    assert "hello from run" in str(seen["reply"])
    saved = session.store.load(session.conversation.conversation_id)
    assert [m.role for m in saved.messages][-2:] == ["user", "assistant"]
    ident = session.conversation.conversation_id
    hint = (
        f"continue it with: xun --workdir {tmp_path} --resume {ident}"  # (the session's folder is not the current one)
    )
    assert hint in capsys.readouterr().err, "on quit, how to come back"


def test_importing_the_package_does_not_import_textual():
    import subprocess

    code = "import sys, xun.tui; print('textual' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


async def test_the_offline_demo_model_has_a_badge(tmp_path: Path):
    with open_session(tmp_path, offline=True, environ={}) as session:
        app = XunApp(session)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            badge = app.query_one("#provider")
            assert badge.has_class("badge") and "offline demo model" in str(badge.render())
            assert "xun-offline" in str(app.query_one("#model-name").render())
            assert "scripted, not an LLM" in app.query_one("#welcome").text


async def test_another_server_shows_its_address(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        provider = app.query_one("#provider")
        assert not provider.has_class("badge")
        assert offline_server.base_url in str(provider.render())
        assert app.main.header.status == "ready"
        await turn(pilot, "hello")
        await wait_until(pilot, lambda: app.main.header.status == "ready")


# ------------------------------------------------------------------- first frame, then the session


def test_importing_the_app_leaves_the_engine_heavyweights_for_later():
    """The first frame needs Textual and the widgets; the engine (events, conversation, settings with
    pydantic, the toolbox, the agent, the recall index, the offline server) loads with the session, after
    it, and Markdown with the first reply."""
    import subprocess

    code = (
        "import sys, xun.tui.app; print(sorted(m for m in ('pydantic', 'openai', 'sqlite3', 'markdown_it', "
        "'xun.base.events', 'xun.context.conversation', 'xun.agent.config', 'xun.agent.tools', 'xun.agent.loop', "
        "'xun.agent.launch', 'xun.context.recall', "
        "'xun.offline') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


async def test_the_app_draws_before_the_session_opens_and_sends_an_early_prompt(offline_server, tmp_path: Path):
    gate = threading.Event()
    opened: list[object] = []

    def opener():
        assert gate.wait(15), "the test never let the session open"
        session = open_session(tmp_path, base_url=offline_server.base_url, environ={})
        opened.append(session)
        return session

    app = XunApp(opener=opener)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            assert app.session is None and app.main.header.status.startswith("opening the session")
            figures = str(app.query_one("#gauge-figures").render())
            assert "0 / 1" not in figures and "(0%)" not in figures and "opening" in figures, figures
            assert not app.query(WelcomeBlock)
            assert app.check_action("compact", ()) is False and app.check_action("help", ()) is True
            await pilot.press("f5")  # disabled until the session is open: nothing starts
            assert app.work.busy is None
            await submit(pilot, "hello before the session")
            assert app.session is None  # kept until the session is open
            gate.set()
            await wait_until(pilot, lambda: app.work.finished >= 1, what="the early prompt's turn")
            assert app.session is opened[0] and app.opened_session is opened[0]
            assert app.main.header.status == "ready"
            assert "offline" not in str(app.query_one("#provider").render())
            assert "hello before the session" in app.agent.conversation.messages[-2].text
            assert app.agent.last_reply()
            await pilot.press("ctrl+q")
    finally:
        for session in opened:
            session.close()  # type: ignore[attr-defined]


async def test_a_resumed_transcript_is_shown_while_the_rest_of_the_session_opens(offline_server, tmp_path: Path):
    """`xun --resume` shows the transcript as soon as the conversation is read, then mounts nothing twice."""
    from xun.agent.opener import SessionOpener
    from xun.compact.summary import compact_conversation
    from xun.tui.widgets.summary_divider import SummaryDivider
    from xun.tui.widgets.user_block import UserBlock

    with open_session(tmp_path, base_url=offline_server.base_url, environ={}) as first:
        (tmp_path / "notes.txt").write_text("".join(f"line {i} of the notes\n" for i in range(200)))
        for n in range(3):
            await first.agent.run(f"question {n}: read notes.txt")
        assert (await compact_conversation(first.agent, keep_recent=2, trigger="manual")).compacted
        await first.agent.run("question 3")
        first.save()
        ident = first.conversation.conversation_id
    gate = threading.Event()

    class GatedOpener(SessionOpener):
        def __call__(self):
            assert gate.wait(15), "the test never let the session open"
            return super().__call__()

    app = XunApp(opener=GatedOpener(tmp_path, resume=ident, base_url=offline_server.base_url, environ={}))
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_until(pilot, lambda: app.main.chat.query(UserBlock), what="the transcript")
            assert app.session is None and app.main.header.status.startswith("opening the session")
            figures = str(app.query_one("#gauge-figures").render())
            assert "0 / 1" not in figures and "(0%)" not in figures and "opening" in figures, figures
            shown = [b.text[:10] for b in app.main.chat.query(UserBlock)]
            assert shown[-2:] == ["question 2", "question 3"] and "question 1" in shown, shown
            [divider] = app.main.chat.query(SummaryDivider)
            assert str(tmp_path / ".xun") not in str(divider.render()), "the offload log's path, shown relative"
            assert app.main.chat.query(".-summarised"), "the summarised turns, from the offload log"
            blocks = list(app.main.chat.children)
            await submit(pilot, "asked while it opens")
            gate.set()
            await wait_until(pilot, lambda: app.work.finished >= 1, what="the early prompt's turn")
            assert app.main.header.status == "ready" and app.conversation.conversation_id == ident
            assert list(app.main.chat.children)[: len(blocks)] == blocks, "the transcript was not mounted again"
            assert "asked while it opens" in app.conversation.messages[-2].text
            await pilot.press("ctrl+q")
    finally:
        if app.opened_session is not None:
            app.opened_session.close()


async def test_the_rest_of_a_resumed_session_opens_after_the_transcripts_frame(offline_server, tmp_path: Path):
    """The opening thread's heavy part (the SDK's imports, the settings, the agent) waits until the frame
    that shows the resumed transcript is drawn: run beside it, it took the interpreter's lock from that
    frame half the time (a 50,000-message resume, tests/benchmarks/bench_first_frame.py)."""
    from xun.agent.opener import SessionOpener
    from xun.tui.widgets.user_block import UserBlock

    with open_session(tmp_path, base_url=offline_server.base_url, environ={}) as first:
        await first.agent.run("question 0")
        first.save()
        ident = first.conversation.conversation_id
    seen: list[tuple[int, int]] = []

    class WatchingOpener(SessionOpener):
        def __call__(self):
            seen.append((len(app.main.chat.query(UserBlock)), frames[0]))
            return super().__call__()

    app = XunApp(opener=WatchingOpener(tmp_path, resume=ident, base_url=offline_server.base_url, environ={}))
    frames = [0]
    real_display = app._display

    def display(screen, renderable):
        real_display(screen, renderable)
        if renderable is not None and app.main.chat.query(UserBlock):
            frames[0] += 1

    app._display = display
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_until(pilot, lambda: app.session is not None, what="the session")
            [(blocks, frames_drawn)] = seen
            assert blocks == 1 and frames_drawn >= 1, seen
            await pilot.press("ctrl+q")
    finally:
        if app.opened_session is not None:
            app.opened_session.close()


async def test_a_long_resumed_session_shows_its_newest_turns_before_the_whole_is_read(offline_server, tmp_path: Path):
    """The newest turns of a long session are read from the end of its file and shown first; the whole session,
    parsed after their frame, joins them without mounting them again, and scrolling up reaches its first prompt."""
    from xun.agent.opener import SessionOpener
    from xun.tui import messages as m
    from xun.tui.widgets.chat_view import EarlierMarker
    from xun.tui.widgets.user_block import UserBlock

    from .test_sessions import big_session

    ident = big_session(tmp_path, rounds=40)  # 160 messages
    shown_first: list[list[str]] = []

    class WatchingOpener(SessionOpener):
        def conversation(self, peek=None):
            def watched(text: str) -> None:
                peek(text)  # posts the newest turns and waits for their frame
                shown_first.append([block.text for block in app.main.chat.query(UserBlock)])

            return super().conversation(peek=watched if peek is not None else None)

    posted: list[object] = []
    app = XunApp(opener=WatchingOpener(tmp_path, resume=ident, base_url=offline_server.base_url, environ={}))
    try:
        async with app.run_test(size=(120, 30), message_hook=posted.append) as pilot:
            await wait_until(pilot, lambda: app.session is not None, what="the session")
            [first] = shown_first
            assert first and first[-1] == "question 39: read src/file39.py", first
            assert "question 0: read src/file0.py" not in first, "only the newest turns, before the whole is read"
            kinds = [type(message) for message in posted if isinstance(message, (m.NewestTurns, m.TranscriptLoaded))]
            assert kinds == [m.NewestTurns, m.TranscriptLoaded], kinds
            [newest] = [message for message in posted if isinstance(message, m.NewestTurns)]
            assert newest.items[-1].index == 159, "numbered as in the whole session"
            newest_block = app.main.chat.query(UserBlock).last()
            chat = app.main.chat
            await pilot.pause()
            assert chat.query(UserBlock).last() is newest_block, "the newest turns were not mounted again"
            while chat.query(EarlierMarker):
                older = chat.older_count
                chat.scroll_to(y=0, animate=False, immediate=True)
                await wait_until(pilot, lambda older=older: chat.older_count != older, what="an older page")
                chat.scroll_to(y=chat.max_scroll_y // 2, animate=False, immediate=True)
                await pilot.pause()
            assert chat.query(UserBlock).first().text == "question 0: read src/file0.py"
            prompts = [block.text for block in await every_block(pilot, chat) if isinstance(block, UserBlock)]
            assert prompts == [f"question {i}: read src/file{i}.py" for i in range(40)], "every turn, once"
            await pilot.press("ctrl+q")
    finally:
        if app.opened_session is not None:
            app.opened_session.close()


def test_run_opens_the_session_it_is_given_a_way_to_open_and_closes_it(tmp_path: Path):
    opened = []

    def opener():
        session = open_session(tmp_path, offline=True, environ={})
        opened.append(session)
        return session

    async def drive(pilot) -> None:
        await wait_until(pilot, lambda: pilot.app.session is not None)
        await turn(pilot, "hello")
        await pilot.press("ctrl+q")

    assert run(opener, headless=True, size=(100, 30), auto_pilot=drive) == 0
    [session] = opened
    assert session.offline_server is None  # closed: the demo model's server is stopped
    assert [m.role for m in session.store.load(session.conversation.conversation_id).messages][-2:] == [
        "user",
        "assistant",
    ]


def test_a_session_that_cannot_be_opened_ends_the_app_and_is_raised(tmp_path: Path):
    from xun.agent.config import ConfigError

    (tmp_path / ".xun").mkdir()
    (tmp_path / ".xun" / "config.toml").write_text('[auto_compact]\ntoken_threshold = "lots"\n')
    with pytest.raises(ConfigError, match="auto_compact.token_threshold"):
        run(lambda: open_session(tmp_path, offline=True, environ={}), headless=True, size=(100, 30))
    assert gc.isenabled(), "the collector paused for the start runs again although no session showed"


def test_the_collector_is_paused_until_the_session_shows_then_runs_on_a_frozen_heap(tmp_path: Path):
    """The start makes objects that live as long as the app: the collector waits, then the app collects once
    and freezes them (a full collection while a reply streams would otherwise walk all of them)."""
    seen: dict[str, object] = {}

    def opener():
        seen["collecting_while_opening"] = gc.isenabled()
        return open_session(tmp_path, offline=True, environ={})

    async def drive(pilot) -> None:
        await wait_until(pilot, lambda: pilot.app.session is not None and pilot.app.main.header.status == "ready")
        await wait_until(pilot, lambda: gc.isenabled())
        seen["frozen"] = gc.get_freeze_count()
        seen["threshold"] = gc.get_threshold()
        await pilot.press("ctrl+q")

    assert gc.isenabled()
    before = gc.get_threshold()
    assert run(opener, headless=True, size=(100, 30), auto_pilot=drive) == 0
    assert seen["collecting_while_opening"] is False
    assert seen["frozen"] > 10_000, "what the start made was frozen when the collector resumed"
    assert seen["threshold"] == (*before[:2], FULL_COLLECTION_CAP), "the collector's own full collections are rare"
    assert gc.isenabled() and gc.get_freeze_count() == 0, "the app unfroze its heap on the way out"
    assert gc.get_threshold() == before, "and put the collector's thresholds back"


def test_a_resumed_session_s_reclaimed_results_are_frozen_with_the_start(tmp_path: Path):
    """The archive of reclaimed originals is parsed after the first frame, for the recoverable list, and lives
    as long as the session: it is frozen with what the start made, so that no full collection walks its
    thousands of records (one at every second or so while the app is in use)."""
    from xun.context.reclaimed import ReclaimedToolResult
    from xun.context.sessions import SessionStore

    from .long_sessions import add_round

    store = SessionStore(tmp_path)
    conversation = store.new()
    for i in range(300):
        add_round(conversation, i)
    conversation.reclaim_tool_results(keep_max=2, write_index=False)
    store.save(conversation)
    seen: dict[str, int] = {}

    async def drive(pilot) -> None:
        await wait_until(pilot, lambda: pilot.app.session is not None and pilot.app.main.header.status == "ready")
        await wait_until(pilot, lambda: gc.isenabled() and len(pilot.app.main.recoverable.records) == 298)
        seen["tracked"] = sum(isinstance(o, ReclaimedToolResult) for o in gc.get_objects())
        seen["records"] = len(pilot.app.main.recoverable.records)
        await pilot.press("ctrl+q")

    opener = lambda: open_session(tmp_path, offline=True, resume=conversation.conversation_id, environ={})  # noqa: E731
    assert run(opener, headless=True, size=(100, 30), auto_pilot=drive) == 0
    assert seen == {"tracked": 0, "records": 298}, "the records are out of the collector's reach"


@pytest.mark.parametrize("how", ["never used", "cleared"])
async def test_resuming_a_session_with_no_message_opens_it(offline_server, tmp_path: Path, how):
    """Trial G #32: `xun`, Ctrl+Q, `xun --resume` (or /clear, quit, resume) crashed with a traceback: the empty
    transcript asked for the welcome before the session was open."""
    from xun.agent.opener import SessionOpener

    with open_session(tmp_path, base_url=offline_server.base_url, environ={}) as first:
        if how == "cleared":
            await first.agent.run("hello")
            first.conversation.clear()
        first.conversation.compaction_log.append({"type": "compaction_skipped", "reason": "x", "trigger": "manual"})
        first.save()
        ident = first.conversation.conversation_id
    app = XunApp(opener=SessionOpener(tmp_path, resume=ident, base_url=offline_server.base_url, environ={}))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(
                pilot, lambda: app.session is not None and app.main.header.status == "ready", what="the session"
            )
            assert app.main.chat.query(WelcomeBlock)
            await turn(pilot, "hello again")
            await pilot.press("ctrl+q")
        assert app.open_error is None and app.return_code == 0
    finally:
        if app.opened_session is not None:
            app.opened_session.close()
