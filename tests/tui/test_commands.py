"""Slash commands, the help screen, the command palette, the keymap and quitting."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, RichLog

from xun.base.paths import styles_dir
from xun.context.messages import UserMessage
from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.commands import SLASH_COMMANDS
from xun.tui.format import tokens
from xun.tui.screens.config import ConfigScreen
from xun.tui.screens.help import HelpScreen
from xun.tui.screens.model_view import ModelViewScreen
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.notice_block import NoticeBlock
from xun.tui.widgets.user_block import UserBlock

from .helpers import finish, of_type, submit, turn, wait_until


def user_texts(app: XunApp) -> list[str]:
    return [msg.text for msg in app.conversation.messages if isinstance(msg, UserMessage)]


async def run_from_the_palette(pilot, app: XunApp, typed: str, title: str) -> None:
    """Ctrl+P, type, and Enter on the entry whose title starts with `title`."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")
    await pilot.press(*typed)
    options = lambda: [str(option.prompt) for option in app.screen.query_one(CommandList).options]  # noqa: E731
    await wait_until(pilot, lambda: any(o.startswith(title) for o in options()), what=f"the {title} entry")
    await pilot.press("enter")


async def test_retry_sends_the_last_prompt_again(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await turn(pilot, "hello")
        first_reply = len(app.conversation.messages)
        await finish(pilot, lambda: submit(pilot, "/retry"))
        assert user_texts(app) == ["hello"]
        assert len(app.conversation.messages) == first_reply
        assert [b.text for b in app.main.chat.query(UserBlock)] == ["hello"]
        assert len(app.main.chat.query(AssistantBlock)) == 1
        assert [t.prompt for t in of_type(seen, m.TurnBegan)] == ["hello", "hello"]


async def test_retry_with_nothing_to_retry(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/retry")
        await wait_until(pilot, lambda: app.main.chat.query(NoticeBlock))
        assert "no prompt to send again" in app.main.chat.query_one(NoticeBlock).text
        assert app.work.finished == 0


async def test_revise_with_text_replaces_the_prompt(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "first try")
        await finish(pilot, lambda: submit(pilot, "/revise second try"))
        assert user_texts(app) == ["second try"]
        assert [b.text for b in app.main.chat.query(UserBlock)] == ["second try"]
        assert "second try" in app.main.chat.query(AssistantBlock).last().text


async def test_revise_alone_takes_the_prompt_back_for_editing(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "one")
        await turn(pilot, "two, with a typo")
        await submit(pilot, "/revise")
        await wait_until(pilot, lambda: app.main.prompt.text == "two, with a typo")
        assert user_texts(app) == ["one"]
        assert [b.text for b in app.main.chat.query(UserBlock)] == ["one"]
        assert len(app.main.chat.query(AssistantBlock)) == 1
        assert app.main.prompt.has_focus
        # not sent after all (trial F #27): the turn taken back is in the offload log, where recall finds it
        notice = app.main.chat.query(NoticeBlock).last().text
        assert "out of the context" in notice and "F9 finds them" in notice, notice
        [log] = (app.workdir / ".xun" / "conversation_history").glob("*.md")
        assert "two, with a typo" in log.read_text()
        hits = app.conversation.recall_index.search("typo")
        assert any("two, with a typo" in hit.snippet or hit.role == "user" for hit in hits), hits


async def test_revise_keeps_the_slash_escape_of_a_prompt_that_starts_with_a_slash(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "//etc/hosts is a path")
        assert user_texts(app) == ["/etc/hosts is a path"]
        await submit(pilot, "/revise")
        await wait_until(pilot, lambda: app.main.prompt.text == "//etc/hosts is a path", what="the prompt, escaped")
        await finish(pilot, lambda: pilot.press("enter"))
        assert user_texts(app) == ["/etc/hosts is a path"], "sent again as a prompt, not an unknown command"


async def test_clear_starts_over_and_keeps_the_log(offline_server, session_factory, tmp_path: Path):
    (tmp_path / "a.txt").write_text("alpha\n" * 100)
    (tmp_path / "b.txt").write_text("beta\n" * 100)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "read a.txt")
        await turn(pilot, "read b.txt")
        await finish(pilot, lambda: pilot.press("f6"))
        assert app.main.recoverable.shown
        await submit(pilot, "/clear")
        await wait_until(pilot, lambda: not app.main.chat.query(UserBlock))
        assert not app.conversation.messages
        assert not app.main.recoverable.shown
        assert len(app.main.log_pane.entries) == 1
        assert "cleared" in app.main.chat.query_one(NoticeBlock).text
        # the next request carries nothing but the tool definitions
        assert (
            app.main.gauge.now
            == app.agent.request_tokens()
            == round(app.agent._schema_chars() * app.conversation.tokens_per_char)
        )
        assert app.main.gauge.reported is None


async def test_tokens_history_config_and_help(offline_server, session_factory):
    app = XunApp(session_factory(offline_server, "ui.keymap.reclaim=f7"))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "hello")
        await submit(pilot, "/tokens")
        await wait_until(pilot, lambda: app.main.chat.query(NoticeBlock))
        text = app.main.chat.query(NoticeBlock).last().text
        assert f"reported {tokens(app.conversation.total_tokens)} (last model call)" in text
        assert "threshold 192k" in text and "window unknown" in text

        await submit(pilot, "/history")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelViewScreen))
        assert len(app.screen.records) == len(app.conversation.messages)
        assert [r["role"] for r in app.screen.records] == [msg.role for msg in app.conversation.messages]
        assert app.screen.query_one(RichLog).lines
        await pilot.press("escape")

        await submit(pilot, "/config")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen))
        keys = [item.key for item in app.screen.items]
        assert "model.name" in keys and "ui.keymap" in keys
        assert app.screen.query_one(DataTable).row_count == len(keys)
        await pilot.press("escape")

        await submit(pilot, "/help")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        rows = [row for _title, section in app.screen.sections for row in section]
        usages = {key for key, _ in rows}
        assert {c.usage for c in SLASH_COMMANDS} <= usages
        assert {"F1", "F5", "F7", "F8", "Esc", "Ctrl+Q"} <= usages, "the help shows the remapped F7"
        assert "F6" not in usages
        await pilot.press("escape")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)


async def test_the_modal_style_sheet_is_read_when_the_first_modal_opens(offline_server, session_factory):
    """Not before the first frame (its parsing cost the frame several ms), and then it styles every modal."""
    modals = str(styles_dir() / "modals.tcss")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not app.stylesheet.has_source(modals, "")
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        box = app.screen.query_one("#help-box")
        assert app.stylesheet.has_source(modals, "")
        assert box.styles.border_top[0] == "round" and box.outer_size.width == 108, (
            "90% of 120 columns, in a round border"
        )
        await pilot.press("escape")
        await submit(pilot, "/history")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelViewScreen))
        assert app.screen.query_one("#history-box").styles.border_top[0] == "round", "the next modal too"


async def test_history_shows_tool_calls_and_their_results(offline_server, session_factory, tmp_path: Path):
    (tmp_path / "a.txt").write_text("alpha\tbeta\n")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "read a.txt")
        records = app.history_records()
        call = next(r for r in records if r["role"] == "assistant" and "→ calls read_file" in r["content"])
        call_id = call["content"].rsplit("(id ", 1)[1].rstrip(")")
        result = next(r for r in records if r["role"] == "tool")
        assert result["content"].startswith(f"(result of {call_id})\n")
        assert "alpha   beta" in result["content"] and "\t" not in result["content"]


async def test_history_shows_the_summary_whole(offline_server, session_factory, tmp_path: Path):
    """Newcomer trial (issue 25, finding 16): /history cut the system message at 1,000 characters, so
    the summary's pending_tasks (what a user checks after a compaction) were hidden behind "(truncated)"."""

    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await turn(pilot, "hello")
        facts = "\n".join(f"- `run_command` `echo {n} >> steps.txt` ran" for n in range(60))
        summary = (
            f"## overview\n- appending numbers\n\n## key_facts\n{facts}\n\n## pending_tasks\n- append 61 to 300 "
            "(PENDING-MARK)"
        )
        app.conversation.set_system_message_content(summary, is_compressed=True)
        await submit(pilot, "/history")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelViewScreen))
        log = app.screen.query_one("#history-log")
        await wait_until(pilot, lambda: log.lines)
        shown = "\n".join(line.text for line in log.lines)
        assert "PENDING-MARK" in shown and "echo 59 >> steps.txt" in shown
        assert "(truncated)" not in shown


async def test_render_writes_markdown_and_html(offline_server, session_factory, tmp_path: Path):
    (tmp_path / "a.txt").write_text("<b>not markup</b>\n")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await turn(pilot, "read a.txt")
        (tmp_path / "out").mkdir()  # /render makes no folder (issue 13): a missing one is an error
        await submit(pilot, "/render out/chat.md")
        await wait_until(pilot, lambda: (tmp_path / "out" / "chat.md").exists())
        markdown = (tmp_path / "out" / "chat.md").read_text()
        assert "## You" in markdown and "> read a.txt" in markdown and "### Tool `read_file`" in markdown
        assert "<b>not markup</b>" in markdown
        await submit(pilot, "/render chat.html")
        await wait_until(pilot, lambda: (tmp_path / "chat.html").exists())
        page = (tmp_path / "chat.html").read_text()
        assert page.startswith("<!doctype html>") and "&lt;b&gt;not markup&lt;/b&gt;" in page
        assert "<b>not markup</b>" not in page
        await submit(pilot, "/render notes.txt")
        await pilot.pause()
        assert any(".html or .md" in n.message for n in app._notifications)
        assert "transcript written to chat.html" in app.main.chat.query(NoticeBlock).last().text
        assert app.main.prompt.text == "/render notes.txt", "refused, it is back to be corrected (trial G #47)"
        app.main.prompt.set_prompt("")
        await submit(pilot, "/auto maybe")
        await pilot.pause()
        assert app.main.prompt.text == "/auto maybe"


async def test_the_keymap_remaps_a_binding(offline_server, session_factory, tmp_path: Path):
    (tmp_path / "a.txt").write_text("alpha\n" * 100)
    (tmp_path / "b.txt").write_text("beta\n" * 100)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1", "ui.keymap.reclaim=f7"))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "read a.txt")
        await turn(pilot, "read b.txt")
        await pilot.press("f6")
        await pilot.pause()
        assert app.work.busy is None and not app.main.log_pane.entries
        await finish(pilot, lambda: pilot.press("f7"))
        assert app.main.log_pane.entries[-1].kind == "reclaim"


async def test_the_welcome_names_the_keys_of_the_keymap(offline_server, session_factory):
    """A newcomer's trial: with `reclaim = "f10"` and `compact = "ctrl+q"`, the welcome still said "F6 reclaim"
    and "Ctrl+Q save and quit", and Ctrl+Q as told there summarised."""
    from xun.tui.widgets.welcome_block import WelcomeBlock

    app = XunApp(session_factory(offline_server, "ui.keymap.reclaim=f10", "ui.keymap.compact=ctrl+q"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.main.chat.query(WelcomeBlock), what="the welcome")
        text = app.main.chat.query_one(WelcomeBlock).text
        assert "Ctrl+Q summarise · F10 reclaim · F7 preview" in text, text
        assert "Ctrl+Q save and quit" not in text and "Ctrl+P save and quit" in text, text


async def test_every_action_is_in_the_command_palette(offline_server, session_factory):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        titles = {command.title for command in app.get_system_commands(app.screen)}
        # ("Cancel the turn" only while something runs: tests/tui/test_quit_and_typing.py)
        for title in (
            "Compaction: summarise now",
            "Compaction: reclaim tool results",
            "Recoverable results",
            "History",
            "Sessions",
            "Settings",
            "Tokens",
            "Retry",
            "Revise",
            "Clear",
            "Render transcript",
            "Help",
            "Save and quit",
        ):
            assert title in titles
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")


async def test_render_from_the_palette_keeps_a_draft_in_the_prompts_history(offline_server, session_factory):
    """Trial G #28: Ctrl+P → "Render transcript" replaced an unsent draft with no way back."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.session is not None, what="the session")
        app.main.prompt.set_prompt("my important draft")
        [render] = [c for c in app.get_system_commands(app.screen) if c.title == "Render transcript"]
        render.callback()
        assert app.main.prompt.text == "/render transcript.html"
        app.main.prompt.focus()
        app.main.prompt.set_prompt("")
        await pilot.press("up")
        assert app.main.prompt.text == "my important draft"


async def test_searching_the_palette_for_comp_finds_every_compaction_action(offline_server, session_factory):
    """A newcomer who read about /compact typed "comp" and found only the preview."""
    from textual.command import CommandList

    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")
        await pilot.press(*"comp")
        shown = lambda: " | ".join(str(option.prompt) for option in app.screen.query_one(CommandList).options)  # noqa: E731
        await wait_until(
            pilot,
            lambda: "summarise" in shown() and "reclaim" in shown() and "preview" in shown(),
            what="the three compaction actions",
        )


async def test_the_palettes_screenshot_is_saved_in_xun_exports_and_says_where(
    offline_server, session_factory, tmp_path: Path
):
    """Trial F #31: Textual's "Screenshot" wrote to a Downloads folder that did not exist and said only
    "Failed to save screenshot"."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        assert [c.title for c in app.get_system_commands(app.screen)].count("Screenshot") == 1
        await run_from_the_palette(pilot, app, "screenshot", "Screenshot")
        exports = tmp_path / ".xun" / "exports"
        await wait_until(pilot, lambda: list(exports.glob("screenshot-*.svg")), what="the picture")
        [picture] = exports.glob("screenshot-*.svg")
        await wait_until(pilot, lambda: any(n.title == "Screenshot" for n in app._notifications), what="the toast")
        [toast] = [n for n in app._notifications if n.title == "Screenshot"]
        assert toast.message == f"saved to .xun/exports/{picture.name}" and toast.severity == "information"
        assert picture.read_text().startswith("<svg") and picture.stat().st_mode & 0o777 == 0o600
        assert exports.stat().st_mode & 0o777 == 0o700
        # a second one in the same second gets its own name; a folder that cannot be written says why
        app.action_save_screenshot()
        assert len(list(exports.glob("screenshot-*.svg"))) == 2
        for old in exports.iterdir():
            old.unlink()
        exports.rmdir()
        exports.write_text("not a folder")
        app.action_save_screenshot()
        await wait_until(pilot, lambda: any(n.severity == "error" for n in app._notifications), what="the error")
        failed = [n for n in app._notifications if n.severity == "error"]
        assert failed[-1].message.startswith(f"could not save the screenshot in {exports}: "), failed


async def test_esc_hides_the_keys_panel_the_palette_opened(offline_server, session_factory):
    """Newcomer trial D, finding 12: Ctrl+P, "Keys" docked Textual's keys panel beside the chat (squeezing it
    to 48 columns at 80x24) and Esc, "back to the prompt from anywhere", left it there."""
    from textual.widgets import HelpPanel

    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await run_from_the_palette(pilot, app, "keys", "Keys")
        await wait_until(pilot, lambda: bool(app.screen.query(HelpPanel)), what="the keys panel")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.screen.query(HelpPanel), what="the panel to close")
        assert app.main.prompt.has_focus
        assert "Esc hides them" in dict(dict(app.help_sections())["Keys"])["Ctrl+P"]


async def test_ctrl_q_saves_and_quits(offline_server, session_factory, tmp_path: Path):
    session = session_factory(offline_server)
    app = XunApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "hello")
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    saved = session.store.path_for(session.conversation.conversation_id)
    assert saved.exists()
    assert session.store.load(session.conversation.conversation_id).messages[-1].role == "assistant"


async def test_ctrl_c_twice_quits(offline_server, session_factory):
    session = session_factory(offline_server)
    app = XunApp(session)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await turn(pilot, "hello")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.return_code is None
        assert any("Ctrl+C again" in n.message for n in app._notifications)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    assert session.store.path_for(session.conversation.conversation_id).exists()


async def test_ctrl_c_with_a_selection_copies_as_f1_says(offline_server, session_factory):
    """Trial F #22: F1 said "Ctrl+C Quit (press twice)", but with text selected Ctrl+C copies it."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        assert (
            "Ctrl+C",
            "Copy the selection; with none, press twice to quit (the session is saved)",
        ) in dict(app.help_sections())["Keys"]
        await pilot.press(*"some text to copy")
        app.main.prompt.select_all()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == "some text to copy"
        assert not any("Ctrl+C again" in n.message for n in app._notifications)
        await pilot.press("end", "ctrl+c")  # nothing selected now
        await wait_until(pilot, lambda: any("Ctrl+C again" in n.message for n in app._notifications), what="Quit?")
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None, what="the second press to quit")


async def test_quit_command_and_an_empty_session_leaves_no_file(offline_server, session_factory):
    session = session_factory(offline_server)
    app = XunApp(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await submit(pilot, "/quit")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    assert not session.store.path_for(session.conversation.conversation_id).exists()
    assert session.store.list() == []


async def test_config_shows_a_long_value_whole_under_the_table(offline_server, session_factory):
    """Issue 25: /config values were cut with no ellipsis; the highlighted row's whole value is below the table."""
    long_value = "keep the file names, the error messages and every decision taken, " * 3
    app = XunApp(session_factory(offline_server, f"compression.instructions={long_value.strip()}"))
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "/config")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen))
        table = app.screen.query_one(DataTable)
        keys = [item.key for item in app.screen.items]
        table.move_cursor(row=keys.index("compression.instructions"))
        await pilot.pause()
        shown = str(app.screen.query_one("#config-description").render())
        assert long_value.strip() in shown.replace("\n", " ").replace("  ", " ") or long_value.strip() in shown, shown


async def test_config_cuts_what_does_not_fit_with_an_ellipsis(offline_server, session_factory):
    """A newcomer's trial: at 80 columns the "from" column showed "defaul" and "the of", cut by the box's
    edge with no sign of it. Every column fits the box, and a cut cell ends in "…"."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, "/config")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen))
        await pilot.pause(0.2)
        table = app.screen.query_one(DataTable)
        assert table.virtual_size.width <= table.content_region.width, (table.virtual_size, table.content_region)
        from xun.tui.format import one_line
        from xun.tui.screens.config import shown_value

        for item in app.screen.items:
            for column, whole in (("value", one_line(shown_value(item.value), 500)), ("from", item.source)):
                cell = str(table.get_cell(item.key, column))
                assert cell == whole or (cell.endswith("…") and whole.startswith(cell[:-1])), (cell, whole)
        assert str(table.get_cell("provider.api_key_env", "from")) == "default"


async def test_config_gives_the_from_column_the_room_the_values_leave(offline_server, session_factory, tmp_path: Path):
    """Newcomer trial D, finding 6: at 160x48 "from" was cut to "the offline demo server (no API …" with
    some 70 columns free beside it. Here the long source is the user's config file."""
    import os

    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "xun" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text("[auto_compact]\ntoken_threshold = 5000\n")
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 48)) as pilot:
        await submit(pilot, "/config")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen))
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        item = next(item for item in app.screen.items if item.key == "auto_compact.token_threshold")
        assert str(user_config) in item.source
        assert str(table.get_cell(item.key, "from")) == item.source
        assert table.virtual_size.width <= table.content_region.width, (table.virtual_size, table.content_region)


async def test_a_commands_answer_is_brought_into_view_when_the_chat_is_scrolled_up(offline_server, session_factory):
    """Trial F #12, G #9: scrolled up, /tokens, /name and /auto answered below the view and nothing seemed to
    happen; the chat goes to the end as it does for a sent prompt."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(60, 20)) as pilot:
        await turn(pilot, "write 300 tokens")
        for command in ("/tokens", "/name my trial session", "/auto"):
            app.main.chat.release_anchor()
            app.main.chat.scroll_home(animate=False, immediate=True)
            await wait_until(
                pilot, lambda: app.main.chat.scroll_y == 0 < app.main.chat.max_scroll_y, what="the chat scrolled up"
            )
            await submit(pilot, command)
            notice = app.main.chat.query(NoticeBlock).last()
            await wait_until(
                pilot, lambda: app.main.chat.scroll_y == app.main.chat.max_scroll_y > 0, what=f"{command}'s answer"
            )
            assert notice.region.height and notice.region.bottom <= app.main.chat.region.bottom, command
