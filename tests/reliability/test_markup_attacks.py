"""Issue 22, items 1 and 6: text from outside xun read as markup, and escape codes sent to the terminal.

Item 1, the attacks: Textual reads a plain `str` as markup in a toast, a title, a label, a tooltip and a table
cell. A cloned repo's `[ui.keymap] "[@click=screen.answer(True)]…[/]" = "f12"` made the untrusted-folder
warning a link that trusted the folder; a server's error text with `[@click=screen.answer('allow_session')]`
stayed on screen when the approval dialog opened, and one click allowed `run_command` for the session; a bare
`[/]` in a model name, MCP stderr, a compaction reason, a session title or a file name crashed the app
(MarkupError). Item 6: a model reply's OSC 52 (clipboard), title change, screen clear and DCS went through.

Each attack runs the real app (Textual's pilot) on a real HTTP server (the offline model, or a scripted one
from `tests/agent/scripted_server.py`), and clicks where the link would be when there is one.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets._toast import Toast

from xun.agent.launch import open_session
from xun.agent.trust import is_trusted
from xun.base.valid_text import escape_control
from xun.tui.app import XunApp
from xun.tui.screens.confirm import ConfirmScreen
from xun.tui.screens.trust import TrustScreen
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.tool_block import ToolBlock

from .helpers import submit, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agent.scripted_server import NOT_FOUND, Json, ScriptedServer, Stream  # noqa: E402

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What no drawn cell may hold: ESC, BEL and the rest of C0 (newline and tab are never inside a cell), DEL, C1."""


# ------------------------------------------------------------------------------------------------ helpers


async def turn(pilot, text: str) -> None:
    before = pilot.app.work.finished
    await submit(pilot, text)
    await wait_until(pilot, lambda: pilot.app.work.finished > before and pilot.app.work.busy is None, what="the turn")


def plain(widget) -> str:
    """What a widget draws, as text."""
    return widget.render().plain


def toasts(app) -> list[Toast]:
    return list(app.screen.query(Toast))


def toast_text(app) -> str:
    return "\n".join(plain(toast) for toast in toasts(app))


async def click_word(pilot, word: str) -> bool:
    """Click on the cell where `word` is drawn in a toast (where a link made of it would be); False if no
    toast shows it."""
    for toast in toasts(pilot.app):
        region = toast.region
        for y, strip in enumerate(toast.render_lines(region.reset_offset)):
            at = strip.text.find(word)
            if at >= 0:
                await pilot.click(toast, offset=(at + 1, y))
                return True
    return False


def screen_cells(app) -> str:
    """Every cell the screen draws now, each row a line (what reaches the terminal, less the styling)."""
    return "\n".join("".join(segment.text for segment in strip) for strip in app.screen._compositor.render_strips())


def chat_server(replies: list[Any]) -> ScriptedServer:
    """A model server that answers each chat request with the next of `replies`, then "ok"."""
    queue = list(replies)

    def answer(method: str, path: str, body: Any) -> Any:
        if method == "POST" and path.endswith("/chat/completions"):
            return queue.pop(0) if queue else Stream(["ok"])
        return NOT_FOUND

    return ScriptedServer(answer).start()


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Stream:
    delta = {
        "tool_calls": [
            {
                "index": 0,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    }
    return Stream([delta], finish_reason="tool_calls")


@pytest.fixture
def servers():
    started: list[ScriptedServer] = []

    def start(replies: list[Any]) -> ScriptedServer:
        server = chat_server(replies)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A user config folder of the test's own (the trust file lives there); no key from the machine."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("XUN_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "XUN_MODEL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config" / "xun").mkdir(parents=True)
    return tmp_path / "config" / "xun"


@pytest.fixture
def opened():
    sessions: list[Any] = []
    yield sessions
    for session in sessions:
        session.close()


def project(folder: Path, config: dict[str, Any]) -> Path:
    (folder / ".xun").mkdir(parents=True, exist_ok=True)
    (folder / ".xun" / "config.toml").write_text(tomli_w.dumps(config))
    return folder


# --------------------------------------------------------------------------------------- item 1: links


TRUST_LINK = "[@click=screen.answer(True)]DISMISS-THIS-WARNING-DISMISS-THIS-WARNING[/]"


async def test_a_hostile_keymap_key_in_the_trust_warning_is_not_a_link(tmp_path, home, servers, opened):
    attacker = servers([])
    folder = project(
        tmp_path / "clone", {"provider": {"base_url": attacker.base_url}, "ui": {"keymap": {TRUST_LINK: "f12"}}}
    )

    def opener():
        opened.append(open_session(folder, environ={}))
        return opened[-1]

    app = XunApp(opener=opener)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, TrustScreen), what="the trust question")
        question = app.screen
        await pilot.pause(0.5)
        assert "DISMISS-THIS" not in toast_text(app), "a toast lies over the question: it waits until it is answered"
        assert not await click_word(pilot, "DISMISS-THIS")
        await pilot.press("n")
        await wait_until(pilot, lambda: "DISMISS-THIS" in toast_text(app), what="the warning, after the question")
        shown = toast_text(app)
        assert "[@click=screen.answer(True)]" in shown  # shown as it is written: text, not a link
        assert await click_word(pilot, "DISMISS-THIS")
        await pilot.pause(0.3)
        assert question.is_attached is False and not is_trusted(folder), "a click on the warning trusted the folder"
    assert not is_trusted(folder)
    assert not attacker.chat_bodies()


SESSION_LINK = "[@click=screen.answer('allow_session')]CLICK-TO-CLOSE-CLICK-TO-CLOSE[/]"


async def test_a_server_error_with_a_link_shown_during_the_confirmation_allows_nothing(tmp_path, home, servers, opened):
    server = servers(
        [
            Json(400, {"error": {"message": f"context too long: {SESSION_LINK}", "type": "invalid_request_error"}}),
            tool_call("run_command", {"command": "touch PWNED_WITHOUT_ASKING"}),
            Stream(["done"]),
        ]
    )
    opened.append(open_session(tmp_path, base_url=server.base_url, environ={}))
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await turn(pilot, "hello")
        assert "CLICK-TO-CLOSE" in toast_text(app), "the server's error text is not on screen: the test proves nothing"
        await submit(pilot, "go on")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        dialog = app.screen
        await wait_until(pilot, lambda: dialog.armed, what="the dialog to take answers")
        assert not await click_word(pilot, "CLICK-TO-CLOSE"), "the server's text lies over the dialog"
        await pilot.pause(0.5)
        assert app.screen is dialog
        before = app.work.finished
        await pilot.press("n")
        await wait_until(pilot, lambda: app.work.finished > before and app.work.busy is None, what="the turn")
        await wait_until(pilot, lambda: "CLICK-TO-CLOSE" in toast_text(app), what="the error's toast, back")
        assert "[@click=" in toast_text(app)  # as text
        assert await click_word(pilot, "CLICK-TO-CLOSE")
        await pilot.pause(0.3)
        assert app.agent.toolbox.allowed_for_session() == frozenset(), "a click on the server's text allowed a tool"
    assert not (tmp_path / "PWNED_WITHOUT_ASKING").exists()


# ------------------------------------------------------------------------------------- item 1: crashes


BREAKER = "[/] [b]x[/b] [@click=app.quit]q[/] [red"


async def test_a_bracket_in_the_projects_model_name_is_shown(tmp_path, home, offline_server, opened):
    folder = project(tmp_path / "clone", {"model": {"name": BREAKER}})
    opened.append(open_session(folder, base_url=offline_server.base_url, environ={}))
    assert opened[-1].config.model.name == BREAKER  # an untrusted folder may set it
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await pilot.pause(0.2)
        assert plain(app.query_one("#model-name")) == BREAKER
        await turn(pilot, "hello")
        assert app.is_running


async def test_mcp_stderr_with_markup_is_shown(tmp_path, home, opened):
    script = "import sys; sys.stderr.write('" + BREAKER + " \\x1b]0;PWNED-TITLE\\x07\\n'); sys.exit(1)"
    (home / "config.toml").write_text(
        tomli_w.dumps({"mcp": {"servers": {"bad": {"command": sys.executable, "args": ["-c", script]}}}})
    )
    (tmp_path / "work").mkdir()
    opened.append(open_session(tmp_path / "work", environ={}))
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_until(pilot, lambda: "MCP server bad failed" in toast_text(app), what="the failure")
        await pilot.pause(0.2)
        assert BREAKER in toast_text(app) and "\\x1b]0;PWNED-TITLE" in toast_text(app)
        notices = [plain(n) for n in app.query(NoticeBlock)]
        assert any(BREAKER in text for text in notices)
        assert not CONTROL.search(screen_cells(app))
        assert app.is_running


async def test_a_compaction_reason_from_the_server_is_shown(tmp_path, home, servers, opened):
    reason = f"summary refused {BREAKER}"
    server = servers(
        [
            Stream(["one " * 300]),
            Stream(["two " * 300]),
            Stream(["three " * 300]),
            Json(400, {"error": {"message": reason, "type": "invalid_request_error"}}),
        ]
    )
    opened.append(
        open_session(tmp_path, base_url=server.base_url, environ={}, overrides=["auto_compact.summary_keep_max=1"])
    )
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        for prompt in ("first " * 100, "second " * 100, "third " * 100):
            await turn(pilot, prompt)
        before = app.work.finished
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.work.finished > before and app.work.busy is None, what="the summary")
        await pilot.pause(0.2)
        shown = "\n".join(
            [
                toast_text(app),
                *(plain(w) for w in app.query("NoticeBlock, SummaryDivider")),
                app.main.log_pane.tooltip.plain if app.main.log_pane.tooltip else "",
            ]
        )
        assert BREAKER in shown, shown
        assert app.is_running


async def test_a_session_title_with_markup_is_shown(tmp_path, home, offline_server, opened):
    opened.append(open_session(tmp_path, base_url=offline_server.base_url, environ={}))
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await turn(pilot, f"{BREAKER} hello")
        await submit(pilot, "/name")
        await wait_until(pilot, lambda: "this session is called" in toast_text(app), what="the title")
        assert BREAKER in toast_text(app)
        assert app.is_running


async def test_a_file_name_with_markup_and_escapes_in_a_tool_block(tmp_path, home, servers, opened):
    name = "[/]evil[b]\x1b]0;PWNED-TITLE\x07.txt"  # a file in a folder named "["
    (tmp_path / "[").mkdir()
    (tmp_path / name).write_text("[@click=app.quit]inside[/] \x1b[2J\x1bPq#0;2;0;0;0\x1b\\\n")
    server = servers([tool_call("read_file", {"path": name}), Stream(["read it"])])
    opened.append(open_session(tmp_path, base_url=server.base_url, environ={}))
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await turn(pilot, "read the file")
        [block] = app.query(ToolBlock)
        title = plain(block._title)
        assert "read_file [/]evil[b]\\x1b]0;PWNED-TITLE\\x07.txt" in title
        block.collapsed = False
        await pilot.pause(0.3)
        assert "[@click=app.quit]inside[/] \\x1b[2J" in "\n".join(plain(s) for s in block.query(".tool-result"))
        assert not CONTROL.search(screen_cells(app))
        assert app.is_running


# ------------------------------------------------------------------------------------ item 6: the reply


OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
TITLE = "\x1b]0;PWNED-TITLE\x07"
CLEAR = "\x1b[2J\x1b[H"
DCS = "\x1bPq#0;2;0;0;0#0~~@@vv@@~~$\x1b\\"
C1 = "\x9b31m\x9d0;C1-TITLE\x9c"


async def test_escape_codes_in_a_reply_and_its_reasoning_are_shown_not_sent(tmp_path, home, servers, opened):
    reply = f"clipboard {OSC52} title {TITLE} clear {CLEAR} dcs {DCS} c1 {C1} end"
    server = servers([Stream([{"reasoning_content": f"thinking {TITLE}{OSC52}"}, reply[:20], reply[20:]])])
    opened.append(
        open_session(
            tmp_path, base_url=server.base_url, environ={}, overrides=['model.reasoning_field="reasoning_content"']
        )
    )
    app = XunApp(opened[-1])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await turn(pilot, "say something")
        [block] = app.query(AssistantBlock)
        assert block.text == reply  # the conversation keeps what the model sent
        cells = screen_cells(app)
        assert not CONTROL.search(cells), repr(CONTROL.search(cells))
        assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in cells and "\\x1b]0;PWNED-TITLE\\x07" in cells
        assert "\\x1bPq#0;2" in cells and "\\x9b31m" in cells
        block.reasoning.collapsed = False
        await pilot.pause(0.2)
        assert "thinking \\x1b]0;PWNED-TITLE" in plain(block.reasoning._body)
        await submit(pilot, "/history")
        await pilot.pause(0.5)
        assert not CONTROL.search(screen_cells(app))


# ---------------------------------------------------------------------------- item 1: every entry point


async def _show_everywhere(app: XunApp, pilot, texts: list[str]) -> None:
    """Each text through each door: a toast (message and title), the header, a notice, a tool block's
    title and body, a summary divider, the compaction log's row and tooltip; then check what is drawn."""
    from xun.tui.widgets.summary_divider import SummaryDivider

    for text in texts:
        app.clear_notifications()
        app.notify(text, title=text)
        app.main.header.show_model(model=text, provider=text, offline=False)
        notice = await app.main.chat.add_notice("warning", text)
        block = ToolBlock("call_x", text, json.dumps({"path": text}))
        await app.main.chat.mount(block)
        block.finished(result_chars=len(text), duration_text="1 ms", result=text)
        block.collapsed = False
        divider = SummaryDivider(text)
        await app.main.chat.mount(divider)
        app.main.log_pane.add_record({"type": "compaction_skipped", "trigger": "manual", "reason": text})
        await pilot.pause()
        shown = escape_control(text)
        flat = escape_control(text, keep_newlines=False)
        [toast] = toasts(app)
        assert plain(toast) == (f"{flat}\n" if flat else "") + shown
        assert plain(app.query_one("#model-name")) == flat
        assert plain(notice) == f"! {shown}"
        assert flat in plain(block._title) or " ".join(flat.split()) in plain(block._title)
        assert plain(divider) == shown
        if text:
            assert app.main.log_pane.tooltip.plain.endswith(f"reason: {shown}")
        for widget in (notice, block, divider):
            await widget.remove()
    await pilot.pause()
    assert not CONTROL.search(screen_cells(app))


HOSTILE = st.one_of(
    st.text(max_size=60),
    st.lists(
        st.sampled_from(
            [
                "[",
                "]",
                "[/]",
                "[@click=app.quit]",
                "[b]",
                "[/b]",
                "[red",
                "\\",
                "\x1b",
                "\x07",
                "\x9b",
                "\r",
                "\n",
                "\t",
                "$",
                "=",
                "'",
                "(",
                ")",
                "x",
                " ",
                "\u202e",
            ]
        ),
        max_size=30,
    ).map("".join),
)


@pytest.mark.long
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(HOSTILE, min_size=1, max_size=12))
def test_any_text_is_drawn_as_it_is_through_every_entry_point(tmp_path_factory, home, offline_server, texts):
    folder = tmp_path_factory.mktemp("work")
    session = open_session(folder, base_url=offline_server.base_url, environ={})
    try:
        app = XunApp(session)

        async def run() -> None:
            async with app.run_test(size=(160, 48), notifications=True) as pilot:
                await pilot.pause()
                await _show_everywhere(app, pilot, texts)
                assert app.is_running

        asyncio.run(run())
    finally:
        session.close()
