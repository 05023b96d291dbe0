"""The app at the sizes people use (160x48, 80x24, 60x20): nothing it says is cut off (issue 25.11 and a
newcomer's trial)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.screens.inspector import InspectorScreen
from xun.tui.widgets.key_bar import KeyBar

from .helpers import finish, submit, turn, wait_until, words_cut
from .test_inspector import prepare, reclaimed_app

SIZES = [(160, 48), (80, 24), (60, 20)]


async def open_modal(pilot, app: XunApp, command: str) -> None:
    await submit(pilot, command)
    await wait_until(pilot, lambda: app.screen is not app.screen_stack[0], what=command)
    await pilot.pause(0.1)


@pytest.mark.parametrize("size", SIZES)
async def test_a_modal_s_sentences_wrap_whole(offline_server, session_factory, tmp_path: Path, size):
    """`/mcp`'s "…add [mcp.servers.NAME] to the user co", the inspector's "…or find it with": a Label is as
    wide as its text unless told otherwise, and the box cut it off without an ellipsis."""
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1", "auto_compact.summary_keep_max=2"))
    async with app.run_test(size=size) as pilot:
        for command in ("/mcp", "/sessions"):  # no MCP server, no saved session yet: each says what to do
            await open_modal(pilot, app, command)
            assert words_cut(app.screen) == [], f"{command} at {size}"
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.screen_stack[0])
        await reclaimed_app(pilot, app)
        await finish(pilot, lambda: pilot.press("f5"))  # summarised since: the inspector says why no restore
        call_id = next(iter(app.conversation.reclaimed_results))
        app.post_message(m.OpenInspector(call_id))
        await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen), what="the inspector")
        for key in ("r", "c"):
            await pilot.press(key)
            await pilot.pause(0.1)
            assert words_cut(app.screen) == [], f"the inspector after {key} at {size}"


def key_bar_text(app: XunApp) -> tuple[list[str], bool]:
    """The keys on the bar ("f1 Help", …) and whether each is whole inside it."""
    from textual.widgets._footer import FooterKey

    bar = app.query_one(KeyBar)
    keys = [key for key in bar.query(FooterKey) if key.display]
    whole = all(bar.region.x <= key.region.x and key.region.right <= bar.region.right for key in keys)
    return [f"{key.key_display} {key.description}" for key in keys], whole


@pytest.mark.parametrize("size", SIZES)
async def test_the_key_bar_shows_whole_keys_the_most_needed_first(offline_server_factory, session_factory, size):
    """At 60x20 it ended in "f8 Resul" and Ctrl+Q was off the screen."""
    server = offline_server_factory(faults="slow:0.5@1")
    app = XunApp(session_factory(server))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        shown, whole = key_bar_text(app)
        assert whole, shown
        assert shown[0] == "f1 Help" and shown[-1] == "^q Quit", shown
        if size[0] >= 80:
            assert len(shown) == 8, "every key fits from 80 columns"
        await submit(pilot, "hello")  # a turn adds Esc Cancel
        await wait_until(pilot, lambda: "esc Cancel" in key_bar_text(app)[0], what="the cancel key")
        shown, whole = key_bar_text(app)
        assert whole and shown[0] == "f1 Help" and shown[-1] == "^q Quit", shown


async def test_the_key_bar_follows_a_resize(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert len(key_bar_text(app)[0]) == 8
        await pilot.resize_terminal(60, 20)
        await wait_until(pilot, lambda: len(key_bar_text(app)[0]) < 8, what="keys left out")
        shown, whole = key_bar_text(app)
        assert whole and "^q Quit" in shown, shown
        await pilot.resize_terminal(120, 40)
        await wait_until(pilot, lambda: len(key_bar_text(app)[0]) == 8, what="every key back")


async def test_no_toast_covers_a_question(offline_server, session_factory, tmp_path: Path):
    """At 60x20 the "context is nearly full" toast lay over ask mode's question, hiding an answer and its keys
    (a newcomer's trial), and a toast hid half of F1, F7 and F9: the toasts wait while a question is open and
    show, whole, once it is answered; a dialog opened to be read waits out those already up."""
    from textual.widgets._toast import Toast

    from xun.tui.screens.consent import ConsentScreen

    from .test_compaction import write_files

    names = write_files(tmp_path)
    app = XunApp(
        session_factory(
            offline_server,
            "auto_compact.mode=ask",
            "auto_compact.token_threshold=1500",
            "auto_compact.summary_keep_max=4",
            "auto_compact.policy=seed",
        )
    )
    async with app.run_test(size=(60, 20), notifications=True) as pilot:
        await submit(pilot, "hello")
        await wait_until(pilot, lambda: app.work.finished == 1, what="the first turn")
        app.notify("a toast from before the question")
        await submit(pilot, f"read {names[0]}")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question")
        question = app.screen
        app.notify("a toast while the question is open")
        await wait_until(pilot, lambda: question.armed, what="the question to take answers")
        await pilot.pause(0.2)
        assert [toast for toast in question.query(Toast) if toast.region.area] == []  # none on screen
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.screen_stack[0], what="the question to close")
        await pilot.pause(0.3)
        shown = " ".join(str(toast.render()) for toast in app.screen.query(Toast) if toast.region.area)
        assert "a toast while the question is open" in shown and "a toast from before the question" in shown

        # a dialog opened to be read (F1, F7, F9) is not covered by the toasts already up; its own show
        await pilot.press("f1")
        await wait_until(pilot, lambda: app.screen is not app.screen_stack[0], what="the help")
        await pilot.pause(0.3)
        assert [toast for toast in app.screen.query(Toast) if toast.region.area] == []
        app.notify("a toast about the help")
        await pilot.pause(0.3)
        shown = " ".join(str(toast.render()) for toast in app.screen.query(Toast) if toast.region.area)
        assert shown == "a toast about the help", shown
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.screen_stack[0], what="the help to close")
        await pilot.pause(0.3)
        shown = " ".join(str(toast.render()) for toast in app.screen.query(Toast) if toast.region.area)
        assert "a toast while the question is open" in shown and "a toast about the help" in shown


@pytest.mark.parametrize("size", [(160, 48), (60, 20)])
async def test_the_side_panel_gives_its_lists_room(offline_server, session_factory, tmp_path: Path, size):
    """At 160 columns the panel stayed 64 wide and every log row was cut; at 60x20, F8 showed one recoverable
    result under the whole gauge (a newcomer's trial). Now the panel takes half a wide screen, and a list
    with the keyboard on a short screen gets the rows while the gauge keeps its figures and its bar."""
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=size) as pilot:
        await reclaimed_app(pilot, app)
        await pilot.press("f8")
        await wait_until(pilot, lambda: app.main.recoverable.table.has_focus, what="the list")
        await pilot.pause(0.2)
        table = app.main.recoverable.table
        assert table.row_count == 2
        visible_rows = table.content_region.height - 1  # (its header row)
        assert visible_rows >= 4, f"{visible_rows} rows on screen at {size}"
        assert "gauge-figures" in {w.id for w in app.query("#gauge-figures") if w.region.area}
        assert app.query_one("ContextBar").region.area
        if size[0] >= 140:
            assert app.query_one("#side").size.width == size[0] // 2
            log = app.main.log_pane
            what = str(log.get_cell("0", "what")) if log.row_count else ""
            assert what and not what.endswith("…"), what


@pytest.mark.parametrize("size", SIZES)
async def test_the_sessions_table_fits_its_box(offline_server, session_factory, tmp_path: Path, size):
    """At 80 columns /sessions cut "reclaimed" to "recla" and its id column was off-screen, with no sign of
    either: the columns that fit stay whole (the least telling go first) and a long title ends in "…"."""
    from textual.widgets import DataTable

    from .test_sessions import saved_session

    saved_session(tmp_path, "older-session", "a long prompt that names everything it wants " * 3)
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=size) as pilot:
        await submit(pilot, "/sessions")
        await wait_until(pilot, lambda: app.screen is not app.screen_stack[0], what="/sessions")
        await pilot.pause(0.2)
        table = app.screen.query_one(DataTable)
        keys = [column.key.value for column in table.ordered_columns]
        assert {"", "session", "title", "updated"} <= set(keys)
        assert table.virtual_size.width <= table.content_region.width, (keys, table.virtual_size, table.content_region)
        title = str(table.get_cell("older-session", "title"))
        assert title.endswith("…") or title.startswith("a long prompt") and len(title) > 100


async def test_at_60_columns_the_read_only_mark_outlasts_the_model_and_its_badge(tmp_path: Path):
    """Newcomer trial D, finding 14: `xun --resume X --read-only` at 60x20 showed "xun  xun-offline
    offline demo model  921ed5a5…  ready": the only lasting sign that nothing is saved was cut away."""
    from xun.agent.launch import open_session
    from xun.context.sessions import SessionStore

    store = SessionStore(tmp_path)
    conversation = store.new()
    conversation.add_user_message("hello")
    conversation.add_agent_message({"role": "assistant", "content": "hi"})
    store.save(conversation)
    session = open_session(tmp_path, offline=True, resume=conversation.conversation_id, read_only=True, environ={})
    try:
        app = XunApp(session)
        async with app.run_test(size=(60, 20)) as pilot:
            await wait_until(pilot, lambda: app.main.header.read_only, what="the read-only session")
            for size in ((60, 20), (48, 20), (80, 24)):
                await pilot.resize_terminal(*size)
                await pilot.pause()
                await pilot.pause()
                label = app.main.header.query_one("#session-id")
                text = str(label.render())
                assert text.endswith("read-only") and label.content_region.width >= len(text), (size, text)
                if size == (80, 24):
                    assert "offline demo model" in str(app.main.header.query_one("#provider").render())
    finally:
        session.close()


@pytest.mark.parametrize("small", [(20, 6), (30, 10), (10, 4)])
async def test_a_terminal_grown_back_from_a_tiny_size_keeps_the_app_running(offline_server, session_factory, small):
    """Trial F #35: 120x40 → 20x6 → 120x40 with the prompt empty killed the app ("range() arg 3 must not be
    zero"): Textual wrapped the prompt's placeholder at width 0."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot, lambda: app.session is not None and app.main.header.status == "ready", what="the session"
        )
        for size in (small, (120, 40), small, (160, 48)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.3)
            assert app.is_running and app.return_code is None, size
        await turn(pilot, "hello")


async def test_at_60_columns_the_status_shows_whole_and_the_badge_gives_way(tmp_path: Path):
    """Trial F #7, G #16: at 60x20 the status read "running run_com" (cut mid-word, no "…") beside
    "offline demo model"; the badge and the session id give way first, and a status still too long ends in "…"."""
    from xun.agent.launch import open_session

    session = open_session(tmp_path, offline=True, environ={})
    app = XunApp(session)
    async with app.run_test(size=(60, 20)) as pilot:
        await wait_until(
            pilot, lambda: app.session is not None and app.main.header.status == "ready", what="the session"
        )
        header = app.main.header
        label = header.query_one("#status")
        for status, whole in (
            ("running run_command", True),
            ("ready", True),
            ("running run_command · step 12 of a long loop in the folder", False),
        ):
            header.status = status
            await pilot.pause()
            await pilot.pause()
            shown = label.render_line(0).text.strip()
            assert label.region.right <= header.content_region.right, (status, label.region)
            if whole:
                assert shown == status and label.content_region.width >= len(status), (status, shown)
                assert str(header.query_one("#session-id").render()) == app.conversation.conversation_id[:8]
            else:
                assert shown.endswith("…") and shown[:-1] in status and len(shown) > 20, shown
        header.status = "ready"
        await pilot.pause()
        await pilot.pause()
        assert header.query_one("#provider").display, "room for the badge when ready"
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        await pilot.pause()
        assert "offline demo model" in str(header.query_one("#provider").render())
        assert app.conversation.conversation_id in str(header.query_one("#session-id").render())
    session.close()
