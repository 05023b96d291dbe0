"""Compaction from the keyboard and from the engine: F6 reclaims, F5 summarises, the log, the list and
the gauge follow; automatic compaction inside a turn shows the same way."""

from __future__ import annotations

from pathlib import Path

from xun.tui import messages as m
from xun.tui.app import XunApp
from xun.tui.widgets.compaction_log import WHAT_MIN
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock

from .helpers import finish, of_type, submit, turn, wait_until

BIG = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(40))


def write_files(folder: Path, count: int = 3) -> list[str]:
    names = []
    for i in range(count):
        name = f"part{i}.txt"
        (folder / name).write_text(f"file {i}\n" + BIG)
        names.append(name)
    return names


async def read_all(pilot, names: list[str]) -> None:
    for name in names:
        await turn(pilot, f"read {name}")


async def test_f6_reclaims_and_the_log_list_and_blocks_follow(offline_server, session_factory, tmp_path: Path):
    names = write_files(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    seen: list = []
    async with app.run_test(size=(140, 44), message_hook=seen.append) as pilot:
        await read_all(pilot, names)
        before = app.main.gauge.now
        assert not app.main.log_pane.entries and not app.main.recoverable.shown

        await finish(pilot, lambda: pilot.press("f6"))

        reclaimed = of_type(seen, m.CompactionRecorded)[-1].event
        assert reclaimed.count == 2 and reclaimed.trigger == "manual"
        entry = app.main.log_pane.entries[-1]
        assert entry.kind == "reclaim" and entry.count == "2 results" and entry.trigger == "manual"
        assert set(app.main.recoverable.shown) == set(reclaimed.ids)
        assert app.main.recoverable.border_subtitle.startswith("2 results · ")
        blocks = {b.call_id: b for b in app.main.chat.query(ToolBlock)}
        assert all(blocks[i].reclaimed and "reclaimed" in blocks[i].title for i in reclaimed.ids)
        kept = [b for b in blocks.values() if b.call_id not in reclaimed.ids]
        assert len(kept) == 1 and not kept[0].reclaimed
        assert app.main.gauge.now < before, "the estimate drops by what was reclaimed"
        assert app.main.gauge.history[-1] < app.main.gauge.history[-2]
        assert app.main.log_pane.border_subtitle.startswith("1 event")


async def test_compact_toolcall_is_the_same_as_f6(offline_server, session_factory, tmp_path: Path):
    names = write_files(tmp_path, 2)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(120, 40)) as pilot:
        await read_all(pilot, names)
        await finish(pilot, lambda: submit(pilot, "/compact toolcall"))
        assert app.main.log_pane.entries[-1].kind == "reclaim"
        assert len(app.main.recoverable.shown) == 1
        assert not app.conversation.summarizations


async def test_compact_toolcall_with_more_words_asks_to_reword_and_keeps_the_text(
    offline_server, session_factory, tmp_path: Path
):
    """Trial D: "/compact toolcall extra" ran a whole summary with "toolcall extra" as its focus, unsaid."""
    names = write_files(tmp_path, 2)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await read_all(pilot, names)
        await submit(pilot, "/compact toolcall extra")
        await pilot.pause()
        assert [n.message for n in app._notifications][-1].startswith("/compact toolcall takes nothing after it")
        assert app.main.prompt.text == "/compact toolcall extra"
        assert not app.conversation.summarizations and not app.main.log_pane.entries


async def test_f5_summarises_with_a_divider_a_log_row_and_a_drop(offline_server, session_factory, tmp_path: Path):
    names = write_files(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.summary_keep_max=4"))
    app.conversation.conversation_id = "summary-test"
    seen: list = []
    async with app.run_test(size=(140, 44), message_hook=seen.append) as pilot:
        await read_all(pilot, names)
        before = app.main.gauge.now

        await finish(pilot, lambda: pilot.press("f5"))

        finished = [e.event for e in of_type(seen, m.CompactionRecorded)][-1]
        assert finished.type == "summary_finished" and finished.trigger == "manual"
        divider = app.main.chat.query(SummaryDivider).last()
        assert divider.state == "done"
        assert (
            f"{finished.condensed} messages summarised, offloaded to .xun/conversation_history/summary-test.md"
            in divider.text
        )
        entry = app.main.log_pane.entries[-1]
        assert entry.kind == "summary" and entry.offload == ".xun/conversation_history/summary-test.md"
        assert (Path(app.workdir) / entry.offload).is_file()
        assert app.main.gauge.now < before
        assert app.main.gauge.reported is None, "no reported count since the summary"
        assert (
            app.main.gauge.detail_text().startswith("estimate ")
            and "no server count since the summary" in app.main.gauge.detail_text()
        )
        assert app.main.gauge.history[-1] < before
        assert of_type(seen, m.SummaryBegan)
        app.main.log_pane.focus()  # g on its row: the chat at the divider made while the app ran
        await pilot.press("g")
        await wait_until(pilot, lambda: app.main.chat.selected is divider, what="the divider shown")


async def test_compact_with_a_focus_and_offload(offline_server, session_factory, tmp_path: Path):
    names = write_files(tmp_path)
    app = XunApp(session_factory(offline_server, "auto_compact.summary_keep_max=2"))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await read_all(pilot, names[:2])
        await finish(pilot, lambda: submit(pilot, "/compact keep part1.txt"))
        began = of_type(seen, m.SummaryBegan)[-1].event
        assert began.focus == "keep part1.txt"
        assert "focus: keep part1.txt" in app.main.chat.query(SummaryDivider).first().text
        assert len(app.conversation.summarizations) == 1
        await read_all(pilot, names[2:])
        await finish(pilot, lambda: submit(pilot, "/offload"))
        assert [e.kind for e in app.main.log_pane.entries].count("summary") == 2


async def test_a_second_manual_compaction_waits_for_the_first(offline_server_factory, session_factory, tmp_path: Path):
    server = offline_server_factory(faults="slow:0.05@5")  # requests 1-4 are the two turns; 5 is the summary
    names = write_files(tmp_path, 2)
    app = XunApp(session_factory(server, "auto_compact.summary_keep_max=2"))
    seen: list = []
    async with app.run_test(size=(120, 40), notifications=True, message_hook=seen.append) as pilot:
        await read_all(pilot, names)
        await pilot.press("f5")
        assert app.work.busy == "compact"
        await pilot.press("f5", "f6")
        assert sum(1 for w in app.workers if w.group == "compaction") == 1
        assert any("has to wait" in n.message for n in app._notifications)
        await finish(pilot, lambda: None)
        assert len(of_type(seen, m.SummaryBegan)) == 1


async def test_a_command_that_has_to_wait_stays_in_the_input(offline_server_factory, session_factory, tmp_path: Path):
    """/clear (or /compact) typed while a turn runs is not run and not lost: it waits in the input, and says so."""
    server = offline_server_factory(faults="slow:0.2@1")
    app = XunApp(session_factory(server))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await submit(pilot, "a slow question")
        await wait_until(pilot, lambda: app.work.busy == "turn", what="the turn")
        await submit(pilot, "/clear")
        assert app.main.prompt.text == "/clear"
        assert any("/clear is back in the input" in n.message for n in app._notifications)
        await finish(pilot, lambda: None)
        assert len(app.conversation.messages) > 1, "/clear did not run meanwhile"
        assert app.main.prompt.text == "/clear"
        app.main.prompt.focus()
        await pilot.press("enter")  # sent again once the turn is over: it runs
        await wait_until(pilot, lambda: len(app.conversation.messages) <= 1, what="/clear")
        assert app.main.prompt.text == ""


async def test_automatic_compaction_inside_a_turn_shows_in_the_log(offline_server, session_factory, tmp_path: Path):
    names = write_files(tmp_path, 5)
    app = XunApp(
        session_factory(offline_server, "auto_compact.token_threshold=1500", "auto_compact.summary_keep_max=4")
    )
    async with app.run_test(size=(140, 44)) as pilot:
        await read_all(pilot, names)
        kinds = [(e.kind, e.trigger) for e in app.main.log_pane.entries]
        # reclaims first; a summary once they have run auto_compact.escalation_rounds times
        assert ("reclaim", "auto") in kinds and ("summary", "auto") in kinds
        assert kinds.index(("reclaim", "auto")) < kinds.index(("summary", "auto"))
        assert app.main.chat.query(SummaryDivider)
        assert app.main.gauge.threshold == 1500
        # each row fits the pane at any width: "what" takes what the other columns leave, cut with an ellipsis
        log = app.main.log_pane
        for width in (140, 200, 100):
            await pilot.resize_terminal(width, 44)
            await pilot.pause()
            if width == 100:  # a pane too narrow for all four: "what" keeps its least width, the table scrolls
                assert log.columns["what"].width == WHAT_MIN
                continue
            assert 0 < log.virtual_size.width <= log.content_region.width, (width, log.virtual_size)
            cells = [str(log.get_cell(str(i), "what")) for i in range(log.row_count)]
            assert [e.what[:5] for e in log.entries] == [cell[:5] for cell in cells], "rows and entries agree"
        assert log.row_count == len(log.entries) and log.cursor_row == log.row_count - 1


async def test_ask_mode_asks_before_an_automatic_summary(offline_server, session_factory, tmp_path: Path):
    from xun.tui.screens.consent import ConsentScreen

    names = write_files(tmp_path)
    # the seed's policy keeps the newest 12 results when it reclaims, so each time it is over the threshold it
    # asks for a summary (the cache-aware one would reclaim the finished turn's result first)
    app = XunApp(
        session_factory(
            offline_server,
            "auto_compact.mode=ask",
            "auto_compact.token_threshold=1500",
            "auto_compact.summary_keep_max=4",
            "auto_compact.policy=seed",
        )
    )
    async with app.run_test(size=(140, 44)) as pilot:
        await turn(pilot, "hello")
        await submit(pilot, f"read {names[0]}")  # its tool result puts the next call over the threshold
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question")
        await wait_until(pilot, lambda: app.screen.armed, what="the question to take answers")
        assert app.agent.request_tokens() > 1500
        await pilot.press("n")
        await wait_until(pilot, lambda: app.work.finished == 2, what="the turn")
        assert ("skipped", "auto") in [(e.kind, e.trigger) for e in app.main.log_pane.entries]
        assert not app.conversation.summarizations

        await submit(pilot, "hello")
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question again")
        await wait_until(pilot, lambda: app.screen.armed, what="the question to take answers")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.work.finished == 3, what="the turn")
        assert ("summary", "auto") in [(e.kind, e.trigger) for e in app.main.log_pane.entries]
        assert app.main.chat.query(SummaryDivider).last().state == "done"


async def test_an_overflow_becomes_an_emergency_summary(offline_server_factory, session_factory, tmp_path: Path):
    server = offline_server_factory(context_window=3000)
    names = write_files(tmp_path, 4)
    # the app does not know the server's window, so the threshold never triggers: the server refuses first
    app = XunApp(session_factory(server, "auto_compact.summary_keep_max=4"))
    async with app.run_test(size=(140, 44)) as pilot:
        await read_all(pilot, names)
        kinds = [e.kind for e in app.main.log_pane.entries]
        assert "emergency" in kinds
        assert app.main.chat.query(SummaryDivider)
        assert any("too long" in n.text for n in app.main.chat.query("NoticeBlock"))


async def test_escape_cancels_a_summary_and_nothing_changes(offline_server_factory, session_factory, tmp_path: Path):
    server = offline_server_factory(faults="slow:0.2@5")  # requests 1-4 are the two turns; 5 is the summary
    names = write_files(tmp_path, 2)
    app = XunApp(session_factory(server, "auto_compact.summary_keep_max=2"))
    async with app.run_test(size=(120, 40)) as pilot:
        await read_all(pilot, names)
        messages = len(app.conversation.messages)
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.main.chat.query(SummaryDivider), what="the summary to start")
        assert app.work.busy == "compact" and app.check_action("cancel_turn", ()) is True
        await finish(pilot, lambda: pilot.press("escape"))
        divider = app.main.chat.query_one(SummaryDivider)
        assert divider.state == "cancelled" and "nothing changed" in divider.text
        assert len(app.conversation.messages) == messages and not app.conversation.summarizations
        assert not app.main.log_pane.entries
        await turn(pilot, "hello")  # the app goes on


async def test_an_engine_warning_is_a_toast_and_a_notice(offline_server, session_factory):
    """The circuit breaker's notice (automatic compaction paused after three failures, see
    tests/reliability/test_faults.py) is an engine warning: it must not scroll away unseen."""
    from xun.base import events
    from xun.tui.widgets.notice_block import NoticeBlock

    text = (
        "automatic compaction failed 3 times in a row: it pauses the model's summaries for the next 10 model "
        "calls, then tries again (each failure doubles the pause, up to 160); meanwhile reclaims go on, and a "
        "summary that is due is xun's own (extractive); a summary by hand (/compact, F5) asks the model, and "
        "ends the pause when it works"
    )
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 30)) as pilot:
        app.bridge(events.Warning(text))
        await wait_until(pilot, lambda: any(n.level == "warning" for n in app.main.chat.query(NoticeBlock)))
        assert any(n.severity == "warning" and n.message == text for n in app._notifications)


async def test_the_recoverable_list_keeps_every_column_on_screen(offline_server, session_factory, tmp_path: Path):
    """Issue 25: at 160 columns "summarised" was cut to "summaris" and the id column was off-screen. The
    arguments column gives way (with an ellipsis) so that "when" and the id stay whole."""
    names = [f"a_rather_long_folder_name/and_a_long_file_name_{i}.py" for i in range(3)]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("".join(f"line {j}\n" for j in range(60)))
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1", "auto_compact.summary_keep_max=2"))
    async with app.run_test(size=(160, 48)) as pilot:
        await read_all(pilot, names)
        await finish(pilot, lambda: pilot.press("f6"))
        await finish(pilot, lambda: pilot.press("f5"))
        assert app.main.recoverable.summarised, "a summary took a reclaimed result's placeholder out"
        await pilot.pause()
        table = app.main.recoverable.table
        assert 0 < table.virtual_size.width <= table.content_region.width, (table.virtual_size, table.content_region)
        whens = [str(table.get_cell(key, "when")) for key in app.main.recoverable.shown]
        assert "summarised" in whens
