"""The recoverable results list and the inspector: filter, open, copy, save, restore."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from textual.content import Content
from textual.widgets import Input, Label, Static

from xun.context.messages import RawOpenAIMessage
from xun.tui.app import XunApp
from xun.tui.format import tokens
from xun.tui.screens.inspector import InspectorScreen, detect_language, recall_query
from xun.tui.screens.recall import RecallScreen
from xun.tui.widgets.tool_block import ToolBlock

from .helpers import finish, turn, wait_until, words_cut

DATA = {"name": "xun", "items": [{"id": i, "label": f"item number {i}"} for i in range(30)]}
CODE = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(20))


async def reclaimed_app(pilot, app: XunApp) -> None:
    for name in ("data.json", "code.py", "notes.txt"):
        await turn(pilot, f"read {name}")
    await finish(pilot, lambda: pilot.press("f6"))


def prepare(folder: Path) -> None:
    (folder / "data.json").write_text(json.dumps(DATA, indent=2))
    (folder / "code.py").write_text(CODE)
    (folder / "notes.txt").write_text("the last file, kept\n" * 20)


def tool_content(app: XunApp, call_id: str) -> str:
    for message in app.conversation.messages:
        if isinstance(message, RawOpenAIMessage) and message.raw.get("tool_call_id") == call_id:
            return message.raw["content"]
    raise AssertionError(call_id)


async def open_row(pilot, app: XunApp, tool_name: str, arguments_word: str) -> InspectorScreen:
    await pilot.press("f8")
    assert app.main.recoverable.table.has_focus
    for char in arguments_word:
        await pilot.press(char)
    assert len(app.main.recoverable.shown) == 1
    assert app.conversation.reclaimed_results[app.main.recoverable.shown[0]].tool_name == tool_name
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, InspectorScreen), what="the inspector")
    screen = app.screen
    assert isinstance(screen, InspectorScreen)
    return screen


async def test_typing_filters_the_list(offline_server, session_factory, tmp_path: Path):
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        await reclaimed_app(pilot, app)
        assert len(app.main.recoverable.shown) == 2
        await pilot.press("f8")
        await pilot.press("c", "o", "d", "e")
        assert app.main.recoverable.filter_text == "code"
        assert len(app.main.recoverable.shown) == 1
        assert app.main.recoverable.border_subtitle.startswith("1 of 2 shown · 2 results · ")
        await pilot.press("backspace", "backspace", "backspace", "backspace", "x", "y", "z")
        assert app.main.recoverable.shown == []
        await pilot.press("escape")
        assert app.main.recoverable.filter_text == "" and len(app.main.recoverable.shown) == 2
        assert app.screen is app.screen_stack[0]


async def test_a_paste_into_the_list_filters_it(offline_server, session_factory, tmp_path: Path):
    """Trial G #7: at 80x24, F8 then a paste: the filter stayed empty and the pasted text went nowhere."""
    from textual import events

    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(80, 24)) as pilot:
        await reclaimed_app(pilot, app)
        await pilot.press("f8")
        assert app.main.recoverable.table.has_focus
        app.post_message(events.Paste("co\x1b[31m"))  # as the terminal sends it: to the app, on to the focused pane
        await wait_until(pilot, lambda: app.main.recoverable.filter_text == "co[31m", what="the paste in the filter")
        app.post_message(events.Paste("\nde\r\nsecond line"))
        await wait_until(pilot, lambda: app.main.recoverable.filter_text == "co[31mde", what="its first line")
        assert app.main.recoverable.table.has_focus and app.main.prompt.text == ""
        await pilot.press("escape")
        assert app.main.recoverable.filter_text == ""


async def test_the_inspector_shows_the_original_highlighted(offline_server, session_factory, tmp_path: Path):
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        await reclaimed_app(pilot, app)
        screen = await open_row(pilot, app, "read_file", "data")
        call_id = screen.record.tool_call_id
        assert screen.original == app.conversation.reclaimed_original(call_id)
        assert '"item number 29"' in screen.original
        assert tool_content(app, call_id).startswith("[Compacted, ID: ")
        assert screen.language == "json"
        shown = screen.query_one("#inspector-text", Static).render()
        assert isinstance(shown, Content) and shown.plain == screen.original.expandtabs(4)
        assert len({span.style for span in shown.spans}) > 2, "highlighted: keys, strings and numbers differ"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, InspectorScreen))

        assert app.main.prompt.has_focus, "closing the inspector gives the keyboard back to the prompt"
        await pilot.press("f8", "escape")  # back in the list: Esc clears the filter and leaves it
        screen = await open_row(pilot, app, "read_file", "code")
        assert screen.language == "python"


async def test_copy_and_save(offline_server, session_factory, tmp_path: Path):
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        await reclaimed_app(pilot, app)
        screen = await open_row(pilot, app, "read_file", "code")
        await pilot.press("c")
        assert app.clipboard == screen.original
        status = str(screen.query_one("#inspector-status").render())
        assert "s saves the text to a file" in status and "copied" not in status, "no claim the terminal cannot back"
        await pilot.press("s")
        path_input = screen.query_one("#inspector-save-path", Input)
        assert path_input.has_focus
        assert path_input.value.endswith(".py") and path_input.value.startswith(".xun/exports/read_file-")
        path_input.value = "saved/original.py"
        await pilot.press("enter")
        saved = tmp_path / "saved" / "original.py"
        assert screen.original.startswith("[code.py: lines 1-") and "\t" in screen.original
        assert saved.read_text() == CODE, "the file's own content, not the numbered view"
        assert screen.saved_to == saved
        assert "saved" in str(screen.query_one("#inspector-status").render())
        assert isinstance(app.screen, InspectorScreen), "saving keeps the inspector open"
        await pilot.press("s")  # saved again: the file 0600 and the folders made 0700, like .xun (issue 25.12)
        suggested = tmp_path / screen.query_one("#inspector-save-path", Input).value
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.saved_to == suggested, what="the second save")
        assert stat.S_IMODE(suggested.stat().st_mode) == 0o600
        assert stat.S_IMODE(suggested.parent.stat().st_mode) == 0o700


async def test_restore_puts_the_original_back(offline_server, session_factory, tmp_path: Path):
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        await reclaimed_app(pilot, app)
        before = app.main.gauge.now
        screen = await open_row(pilot, app, "read_file", "data")
        call_id, original = screen.record.tool_call_id, screen.original
        await finish(pilot, lambda: pilot.press("r"))

        assert not isinstance(app.screen, InspectorScreen)
        assert tool_content(app, call_id) == original
        assert call_id not in app.conversation.reclaimed_results
        assert call_id not in app.main.recoverable.records
        entry = app.main.log_pane.entries[-1]
        assert entry.kind == "restore" and entry.count.endswith(call_id[-8:])
        assert f"{tokens(entry.tokens_after - entry.tokens_before)} restored" in app.main.log_pane.border_subtitle, (
            "the log's footer counts what came back, not only what was freed"
        )
        assert app.main.gauge.now > before
        block = app.main.chat.tool_block(call_id)
        assert isinstance(block, ToolBlock) and block.restored and "restored" in block.title


async def test_a_restore_that_goes_over_the_threshold_says_so(offline_server, session_factory, tmp_path: Path):
    """Trial F #17: a restore took the context to 115% of the threshold with no word, and the next prompt
    compacted it again; it says so, naming the figures (the restore is done all the same)."""
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44), notifications=True) as pilot:
        await reclaimed_app(pilot, app)
        before = app.agent.request_tokens()
        app.session.config.set_here("auto_compact.token_threshold", before + 10, "the test")
        screen = await open_row(pilot, app, "read_file", "data")
        call_id = screen.record.tool_call_id
        await finish(pilot, lambda: pilot.press("r"))
        assert call_id not in app.conversation.reclaimed_results, "restored"
        now = app.agent.request_tokens()
        said = [n.message for n in app._notifications if "over the threshold" in n.message]
        assert said == [
            f"The restore put the context over the threshold ({tokens(now)} / {tokens(before + 10)}): "
            "the next model call will compact it again (a reclaim or a summary)."
        ], said


async def test_a_result_summarised_away_can_be_read_but_not_restored(offline_server, session_factory, tmp_path: Path):
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1", "auto_compact.summary_keep_max=2"))
    async with app.run_test(size=(140, 44)) as pilot:
        await reclaimed_app(pilot, app)
        await finish(pilot, lambda: pilot.press("f5"))
        assert app.conversation.summarizations
        screen = await open_row(pilot, app, "read_file", "data")
        call_id = screen.record.tool_call_id
        footer = app.main.recoverable.border_subtitle
        assert footer.startswith(f"1 of {len(app.main.recoverable.records)} shown · "), footer  # it said "1 of 0 items"
        assert "summarised (read only)" in footer, footer
        assert not screen.restorable
        assert not screen.query("#restore"), "no Restore that cannot work (issue 25, a newcomer's trial)"
        assert "f find in history" in screen.query_one("#inspector-box").border_subtitle
        await pilot.press("r")
        assert isinstance(app.screen, InspectorScreen)
        status = str(screen.query_one("#inspector-status", Label).render())
        assert "cannot restore" in status and "press f to find it" in status
        assert words_cut(screen) == [], "the reason is shown whole"
        await pilot.click("#find")  # what works instead: the history, searched for this call
        await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="the recall screen")
        recall = app.screen
        assert recall.query_one("#recall-query", Input).value == "data.json"
        await wait_until(pilot, lambda: recall.searches >= 1, what="the results")
        assert any(hit.tool_call_id == call_id for hit in recall.hits), "the result itself is found"
        assert any(hit.source == "offload" for hit in recall.hits), "and the summarised turn that made the call"


def test_language_detection():
    assert detect_language("run_command", '{"command": "ls"}', '{"a": 1}') == "json"
    assert detect_language("read_file", '{"path": "x.py"}', "[x.py: lines 1-2]\n 1\timport os") == "python"
    assert detect_language("read_file", '{"path": "notes.unknownext"}', "plain") is None
    assert detect_language("search_text", '{"pattern": "x"}', "{not json") is None


def call_arguments(app: XunApp, call_id: str) -> str:
    for message in app.conversation.messages:
        if isinstance(message, RawOpenAIMessage):
            for call in message.raw.get("tool_calls") or ():
                if call["id"] == call_id:
                    return call["function"]["arguments"]
    raise AssertionError(call_id)


async def test_reclaimed_call_arguments_are_listed_inspected_and_restored(
    offline_server, session_factory, tmp_path: Path
):
    texts = {name: " ".join(f"{name}-word-{i}" for i in range(70)) for name in ("alpha", "beta", "gamma")}
    app = XunApp(session_factory(offline_server, "auto_confirm=true", "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        for name, text in texts.items():
            await turn(pilot, f"write `{text}` to {name}.txt")
        assert (tmp_path / "gamma.txt").read_text() == texts["gamma"]
        await finish(pilot, lambda: pilot.press("f6"))
        archive = app.conversation.reclaimed_results
        keys = [key for key in archive if archive[key].kind == "arguments"]
        assert len(keys) == 2, "the two older write_file calls' arguments (the newest round is kept)"
        assert set(keys) <= set(app.main.recoverable.records)
        rows = {key: app.main.recoverable.table.get_row(key) for key in keys}
        assert all(str(row[0]) == "write_file args" for row in rows.values()), "the list marks them as arguments"
        assert app.main.log_pane.entries[-1].count == "2 call args"

        screen = await open_row(pilot, app, "write_file", "args alpha")
        key = screen.record.tool_call_id
        call_id = key.removesuffix(":arguments")
        assert json.loads(screen.original) == {"path": "alpha.txt", "content": texts["alpha"]}
        assert json.loads(call_arguments(app, call_id))["content"].endswith(
            f"[Compacted, ID: {key}. {len(texts['alpha']):,} chars]"
        )
        assert "write_file call arguments" in screen.query_one("#inspector-box").border_title
        assert "the arguments of this call" in str(screen.query_one("#inspector-summary").render())
        assert screen.language == "json" and screen.restorable
        before = app.main.gauge.now
        await finish(pilot, lambda: pilot.press("r"))

        assert not isinstance(app.screen, InspectorScreen)
        assert call_arguments(app, call_id) == screen.original, "the original arguments are back in the call"
        assert key not in app.conversation.reclaimed_results and key not in app.main.recoverable.records
        assert app.main.log_pane.entries[-1].kind == "restore"
        assert app.main.log_pane.entries[-1].count == f"id …{call_id[-8:]} args"
        assert app.main.gauge.now > before


async def test_saving_over_an_existing_file_asks_first(offline_server, session_factory, tmp_path: Path):
    """A newcomer's trial: `s`, a name of a file in the workspace, Enter: the file was replaced unasked."""
    prepare(tmp_path)
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(60, 20)) as pilot:
        await reclaimed_app(pilot, app)
        screen = await open_row(pilot, app, "read_file", "code")
        await pilot.press("s")
        screen.query_one("#inspector-save-path", Input).value = "a.txt"
        await pilot.press("enter")
        assert (tmp_path / "a.txt").read_text() == "alpha\nbeta\n"
        assert screen.saved_to is None
        assert "exists: Enter again replaces it" in str(screen.query_one("#inspector-status").render())
        await pilot.press("enter")
        assert (tmp_path / "a.txt").read_text() == CODE
        assert screen.saved_to == tmp_path / "a.txt"


async def test_f8_starts_at_the_newest_row(offline_server, session_factory, tmp_path: Path):
    """A newcomer's trial: F8 put the cursor on the oldest (last) row, where Down does nothing."""
    prepare(tmp_path)
    for i in range(3):
        (tmp_path / f"more{i}.txt").write_text(f"more {i}\n" * 40)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(60, 20)) as pilot:
        await reclaimed_app(pilot, app)
        await pilot.press("f8", "down", "escape")  # the cursor on the older row
        for i in range(3):  # newer rows come in above it
            await turn(pilot, f"read more{i}.txt")
            await finish(pilot, lambda: pilot.press("f6"))
        assert len(app.main.recoverable.shown) >= 4
        await pilot.press("f8")
        assert app.main.recoverable.table.has_focus
        assert app.main.recoverable.selected_id == app.main.recoverable.shown[0]


def test_f_on_reclaimed_arguments_searches_for_their_path():
    """Trial D: `f` on reclaimed write_file arguments searched F9 for "write_file" alone (the record holds a cut
    preview of the arguments, not JSON): 50+ matches from every session. It searches for the path now."""
    from xun.context.conversation import Conversation

    c = Conversation()
    c.add_user_message("write the files")
    for i in range(4):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": json.dumps({"path": f"out/step{i}.txt", "content": "x" * 3_000}),
            },
        }
        c.add_agent_message({"role": "assistant", "content": None, "tool_calls": [call]})
        c.add_tool_result(f"call_{i}", "wrote 3,000 characters")
    c.reclaim_tool_results(keep_max=1)
    record = c.reclaimed_results["call_1:arguments"]
    assert recall_query(record, c.reclaimed_original("call_1:arguments")) == "out/step1.txt"


async def test_the_sparkline_label_counts_the_model_calls_apart_from_compactions(
    offline_server, session_factory, tmp_path: Path
):
    """Trial F #10: a reclaim and a restore add points, and the label said "the last 8 model calls" over 6 calls."""
    prepare(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        await reclaimed_app(pilot, app)
        await open_row(pilot, app, "read_file", "data")
        await finish(pilot, lambda: pilot.press("r"))
        calls = app.conversation.usage_totals["calls"]
        label = str(app.main.gauge.query_one("#gauge-history-label").render())
        assert f"the last {calls} model calls, 1 compaction, 1 restore · " in label, label
        assert f"{calls} model calls, 1 compaction, 1 restore" in str(
            app.main.gauge.query_one("#gauge-history").tooltip
        )
