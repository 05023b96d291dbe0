"""The app as a person uses it for a day (issue 14): the whole history on resume, dividers at the cut,
focus that always comes back to the prompt, and the other rough edges found by using it."""

from __future__ import annotations

from pathlib import Path

import pytest

from xun.tui.app import XunApp
from xun.tui.format import tokens
from xun.tui.screens.breakdown import BreakdownScreen
from xun.tui.screens.preview import PreviewScreen
from xun.tui.widgets.assistant_block import AssistantBlock
from xun.tui.widgets.summary_divider import SummaryDivider
from xun.tui.widgets.tool_block import ToolBlock
from xun.tui.widgets.user_block import UserBlock

from .helpers import every_block, finish, quit_app, submit, turn, wait_until

KEEP = ("auto_compact.summary_keep_max=4",)


def chat_rows(app: XunApp, arguments: bool = False, blocks: list | None = None) -> list[tuple[str, str, bool]]:
    """(kind, text, summarised) of each block in the chat (or of `blocks`), top to bottom (a tool's text: its
    name, or its arguments)."""
    rows = []
    for child in app.main.chat.children if blocks is None else blocks:
        dim = child.has_class("-summarised")
        if isinstance(child, UserBlock):
            rows.append(("user", child.text, dim))
        elif isinstance(child, SummaryDivider):
            rows.append(("divider", child.text, dim))
        elif isinstance(child, ToolBlock):
            rows.append(("tool", child.arguments if arguments else child.tool_name, dim))
        elif isinstance(child, AssistantBlock):
            rows.append(("assistant", child.text[:20], dim))
    return rows


async def two_summaries(pilot, tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" + "some words to read\n" * 30)
    for i in range(3):
        await turn(pilot, f"read f{i}.txt")
    await finish(pilot, lambda: pilot.press("f5"))
    for i in range(3, 6):
        await turn(pilot, f"read f{i}.txt")
    await finish(pilot, lambda: pilot.press("f5"))


async def test_the_divider_goes_at_the_cut_and_what_left_the_context_is_dimmed(
    offline_server, session_factory, tmp_path
):
    app = XunApp(session_factory(offline_server, *KEEP))
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            (tmp_path / f"f{i}.txt").write_text("words\n" * 40)
            await turn(pilot, f"read f{i}.txt")
        await finish(pilot, lambda: pilot.press("f5"))
        rows = chat_rows(app)
        cut = [i for i, row in enumerate(rows) if row[0] == "divider"]
        assert len(cut) == 1
        above, below = rows[: cut[0]], rows[cut[0] + 1 :]
        assert above and all(dim for _, _, dim in above), rows
        assert below and not any(dim for _, _, dim in below), rows
        # the kept turn (the last prompt and what followed) is below the divider, as F7 shows the cut
        assert below[0] == ("user", "read f2.txt", False)
        kept = app.conversation.summarizations[-1].kept_count
        assert f"{kept} kept" in rows[cut[0]][1]

        # /retry keeps the divider (the summary stays in the context)
        await finish(pilot, lambda: submit(pilot, "/retry"))
        assert [r for r in chat_rows(app) if r[0] == "divider"] == [rows[cut[0]]]
        assert " · 1 summary · " in app.main.chat.border_subtitle


async def test_resume_shows_the_whole_history_from_the_offload_log(offline_server, session_factory, tmp_path):
    first = session_factory(offline_server, *KEEP)
    app = XunApp(first)
    async with app.run_test(size=(140, 44)) as pilot:
        await two_summaries(pilot, tmp_path)
        live = [(kind, text) for kind, text, _ in chat_rows(app) if kind != "assistant"]
        await quit_app(pilot, app)
    first.close()  # one writer per session: the first lets go of it, as a process that quits does
    conversation_id = first.conversation.conversation_id
    assert sum(1 for kind, _ in live if kind == "divider") == 2

    again = XunApp(session_factory(offline_server, *KEEP, resume=conversation_id))
    async with again.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: again.main.chat.children, what="the transcript")
        blocks = await every_block(pilot, again.main.chat)  # Home, then down: summarised turns from the offload log
        rows = chat_rows(again, blocks=blocks)
        users = [text for kind, text, _ in rows if kind == "user"]
        assert users == [f"read f{i}.txt" for i in range(6)], rows
        dividers = [i for i, row in enumerate(rows) if row[0] == "divider"]
        assert len(dividers) == 2
        # everything above the last divider is out of the context and dimmed; below it, nothing is
        assert all(dim for kind, _, dim in rows[: dividers[-1]] if kind != "divider")
        assert not any(dim for _, _, dim in rows[dividers[-1] + 1 :])
        # the first summarised turns come before the first divider, the tool calls came back with them
        assert rows[0] == ("user", "read f0.txt", True)
        assert any(kind == "tool" and dim for kind, _, dim in rows[: dividers[0]])
        assert [(kind, text) for kind, text, _ in rows if kind != "assistant"] == live

        await submit(pilot, "/render whole.md")
        await wait_until(pilot, lambda: (tmp_path / "whole.md").exists())
    text = (tmp_path / "whole.md").read_text()
    for i in range(6):
        assert f"> read f{i}.txt" in text
    assert text.count("(summarised)") >= 3
    assert "\n\n---\n" in text and "\n---\n\n" in text
    body = text.split("## The current summary", 1)[1]
    assert "\n## " not in body, "the summary's own sections sit below the document's"


async def test_esc_always_brings_the_keyboard_back_to_the_prompt(offline_server, session_factory, tmp_path):
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("words\n" * 40)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            await turn(pilot, f"read f{i}.txt")
        await finish(pilot, lambda: pilot.press("f6"))
        # F8, Esc: typed text goes to the prompt, not the recoverable filter
        await pilot.press("f8")
        assert app.main.recoverable.table.has_focus
        await pilot.press("escape")
        assert app.main.prompt.has_focus
        await pilot.press("x", "y")
        assert app.main.prompt.text == "xy" and app.main.recoverable.filter_text == ""
        app.main.prompt.clear()
        # a filter typed in the list is cleared by Esc, which also leaves the list
        await pilot.press("f8", "r", "e")
        assert app.main.recoverable.filter_text == "re"
        await pilot.press("escape")
        assert app.main.recoverable.filter_text == "" and app.main.prompt.has_focus
        # the inspector opened from the list, then closed: the prompt again, whatever else was opened on top
        await pilot.press("f8", "enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "InspectorScreen")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.screen_stack[0])
        assert app.main.prompt.has_focus
        # Esc from the chat (or with nothing running) comes back too
        app.main.chat.focus()
        await pilot.press("escape")
        assert app.main.prompt.has_focus
        # Tab goes round a short, fixed ring: prompt, gauge, log, list, chat (the tool blocks are not stops)
        ring = []
        for _ in range(10):
            await pilot.press("tab")
            ring.append(app.focused.id)
            if app.main.prompt.has_focus:
                break
        assert ring == ["gauge", "compaction-log", "recoverable-table", "chat", "prompt"], ring
        # PageUp and PageDown from the prompt scroll the chat; the typing stays in the prompt
        app.main.prompt.load_text("half a thought")
        app.main.chat.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        bottom = app.main.chat.scroll_y
        assert bottom > 0
        await pilot.press("pageup")
        await wait_until(pilot, lambda: app.main.chat.scroll_y < bottom, what="the chat to scroll up")
        assert app.main.prompt.has_focus and app.main.prompt.text == "half a thought"
        await pilot.press("pagedown")
        await wait_until(pilot, lambda: app.main.chat.scroll_y == bottom, what="the chat to scroll back")


async def test_brackets_select_blocks_and_enter_opens_the_selected_tool_call(offline_server, session_factory, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n" * 5)
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(120, 40)) as pilot:
        await turn(pilot, "read a.txt")
        app.main.chat.focus()
        tool = app.main.chat.query(ToolBlock).first()
        for _ in range(6):
            await pilot.press("left_square_bracket")
            if app.main.chat.selected is tool:
                break
        assert app.main.chat.selected is tool and tool.has_class("-jump-target") and tool.collapsed
        await pilot.press("enter")
        assert not tool.collapsed
        await pilot.press("enter")
        assert tool.collapsed
        await pilot.press("right_square_bracket")
        assert app.main.chat.selected is not tool and not tool.has_class("-jump-target")
        await pilot.press("escape")
        assert app.main.prompt.has_focus and app.main.chat.selected is None


async def test_a_summarised_reclaimed_result_is_marked_and_r_says_why(offline_server, session_factory, tmp_path):
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" + "words to read\n" * 40)
    app = XunApp(
        session_factory(
            offline_server,
            "auto_compact.toolcall_keep_max=1",
            "auto_compact.summary_keep_max=2",
            "ui.keymap.recall=f12",
        )
    )
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            await turn(pilot, f"read f{i}.txt")
        await finish(pilot, lambda: pilot.press("f6"))
        reclaimed = set(app.main.recoverable.records)
        assert len(reclaimed) == 2 and not app.main.recoverable.summarised
        await finish(pilot, lambda: pilot.press("f5"))
        assert app.main.recoverable.summarised == reclaimed, "their placeholders left the context with the summary"
        # each count says what it counts (trial D, finding 3: "0 items · 0 tokens" beside two listed rows)
        assert app.main.recoverable.border_subtitle == "2 results: 0 restorable · 2 summarised (read only)"
        await pilot.press("f8", "f")
        assert (
            app.main.recoverable.border_subtitle == "2 of 2 shown · 2 results: 0 restorable · 2 summarised (read only)"
        )
        await pilot.press("backspace")
        await pilot.press("f8", "enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "InspectorScreen")
        screen = app.screen
        assert "summarised since (read only)" in str(screen.query_one("#inspector-summary").render())
        await pilot.press("r")
        status = str(screen.query_one("#inspector-status").render())
        assert "cannot restore: a summary took its placeholder out" in status
        assert "in the history (F12)" in status, status  # the key as remapped (trial D, finding 18)
        assert app.screen is screen


async def test_clear_leaves_no_stale_state(offline_server, session_factory, tmp_path):
    (tmp_path / "a.txt").write_text("words to read here, and more of them\n" * 80)  # enough for a summary to pay
    app = XunApp(session_factory(offline_server, *KEEP, "auto_compact.toolcall_keep_max=2"))
    async with app.run_test(size=(140, 44)) as pilot:
        for _ in range(3):
            await turn(pilot, "read a.txt")
        await finish(pilot, lambda: pilot.press("f6"))  # a reclaimed result the summary then takes away
        await finish(pilot, lambda: pilot.press("f5"))
        assert "1 summary" in app.main.chat.border_subtitle
        assert app.main.recoverable.summarised and "summarised (read only)" in app.main.recoverable.border_subtitle
        assert "since the summary" in app.main.gauge.detail_text()
        await submit(pilot, "/clear")
        await wait_until(pilot, lambda: not app.conversation.messages or len(app.conversation.messages) <= 1)
        # nothing but the tool definitions is left for the next request
        assert app.main.chat.border_subtitle.startswith("0 messages in the context · 1% of"), (
            app.main.chat.border_subtitle
        )
        assert app.history_records() == [], "no empty system message left behind (nor saved)"
        assert not app.main.recoverable.summarised and "summarised" not in app.main.recoverable.border_subtitle
        assert app.main.gauge.detail_text().endswith("no count from the server yet"), app.main.gauge.detail_text()
        assert "last call" not in app.main.gauge.usage_text, "the last call was made on the context /clear ended"
        await submit(pilot, "/tokens")
        await wait_until(pilot, lambda: "0 summaries" in str(app.main.chat.children[-1].render()))
        tokens_text = str(app.main.chat.children[-1].render())
        assert (
            "0 messages · 0 reclaimed results · 0 summaries" in tokens_text
            and "since the last summary" not in tokens_text
        )


def test_counts_read_as_english():
    """Issue 14's small ones: "1 lines", "1 reclaimed results", "all 0 messages are in the part a summary keeps"."""
    from xun.tui.format import counted
    from xun.tui.screens.preview import kept_whole

    assert [counted(n, "line") for n in (0, 1, 2, 2000)] == ["0 lines", "1 line", "2 lines", "2,000 lines"]
    assert counted(1, "summary", "summaries") == "1 summary" and counted(3, "summary", "summaries") == "3 summaries"
    assert kept_whole(0) == "there are no messages yet"
    assert kept_whole(1) == "the one message is in the part a summary keeps"
    assert kept_whole(4) == "all 4 messages are in the part a summary keeps"


async def test_a_tool_block_shows_the_run_time_not_the_time_spent_answering(offline_server, session_factory):
    import asyncio

    from xun.tui import messages as m
    from xun.tui.screens.confirm import ConfirmScreen

    from .helpers import of_type

    app = XunApp(session_factory(offline_server))
    seen: list = []
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await submit(pilot, "run `ls`")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await asyncio.sleep(0.6)  # the user reads the dialog
        await wait_until(pilot, lambda: app.screen.armed, what="the confirmation to take answers")
        await finish(pilot, lambda: pilot.press("y"))
        ended = of_type(seen, m.ToolCallEnded)[-1].event
        assert ended.duration < 0.6, ended.duration


async def test_after_turning_automatic_summaries_off_the_log_does_not_repeat_itself(
    offline_server, session_factory, tmp_path
):
    from xun.tui.screens.consent import ConsentScreen

    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" + "words to read here\n" * 120)
    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=2400", "auto_compact.mode=ask"))
    async with app.run_test(size=(140, 44), notifications=True) as pilot:
        await turn(pilot, "please remember: " + "the quick brown fox jumps " * 80)
        await submit(pilot, "read f0.txt and f1.txt")  # their results put the next call over the threshold
        await wait_until(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the question")
        await wait_until(pilot, lambda: app.screen.armed, what="the question to take answers")
        await pilot.press("o")
        await wait_until(pilot, lambda: app.work.busy is None and app.work.finished == 2, what="the turn")
        for i in (2, 3):
            await turn(pilot, f"read f{i}.txt")
        skipped = [e for e in app.main.log_pane.entries if e.kind == "skipped"]
        assert len(skipped) == 1 and "off" in skipped[0].reason, [e.line() for e in app.main.log_pane.entries]
        assert app.main.log_pane.unchanged >= 2
        assert not [n for n in app._notifications if "runs in" in n.message], "no toast to outlive the question"


async def test_the_header_keeps_the_session_id_s_useful_part_when_narrow(offline_server, session_factory):
    """Cut at its end, the id left only "session …" at 60 columns: narrower, it shortens to what
    `xun --resume` needs, and the tooltip has all of it."""
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        ident = app.conversation.conversation_id
        label = app.main.header.query_one("#session-id")
        shown = {}
        for width in (160, 80, 60):
            await pilot.resize_terminal(width, 24)
            await pilot.pause()
            shown[width] = str(label.render())
        assert shown == {160: f"session {ident}", 80: f"session {ident[:8]}", 60: ident[:8]}, shown
        assert label.tooltip == f"session {ident}"


async def test_narrow_terminals_switch_between_the_chat_and_the_side_panel(offline_server, session_factory, tmp_path):
    app = XunApp(session_factory(offline_server))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await turn(pilot, "hello")
        side, column = app.query_one("#side"), app.query_one("#chat-column")
        assert app.main.layout_is("narrow") and side.display is False
        assert side.region.width == 0 and column.region.width == 80, "the chat has the whole width"
        await pilot.press("f4")
        await pilot.pause()
        assert side.region.width == 80 and column.region.width == 0 and app.main.gauge.has_focus
        await pilot.press("escape")
        await pilot.pause()
        assert column.region.width == 80 and app.main.prompt.has_focus
        await pilot.press("f8")
        await pilot.pause()
        assert side.region.width == 80 and app.main.recoverable.table.has_focus
        assert any("No reclaimed tool results yet" in n.message for n in app._notifications), (
            "F8 on an empty list says so"
        )
        await pilot.press("f4")
        await pilot.pause()
        assert column.region.width == 80 and app.main.prompt.has_focus
        # wide: F4 hides and shows the panel beside the chat
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not app.main.layout_is("narrow") and 0 < side.region.width <= 80 <= column.region.width
        await pilot.press("f4")
        await pilot.pause()
        assert side.region.width == 0 and column.region.width == 160
        await pilot.press("f4")
        await pilot.pause()
        assert side.region.width > 0


async def test_sessions_have_titles_and_show_the_context_as_it_is_now(offline_server, session_factory, tmp_path):
    from xun.context.sessions import SessionStore
    from xun.tui.screens.sessions import SessionsScreen

    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("words to read\n" * 60)
    app = XunApp(session_factory(offline_server, "auto_compact.toolcall_keep_max=1"))
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            await turn(pilot, f"read f{i}.txt")
        await finish(pilot, lambda: pilot.press("f6"))
        await wait_until(pilot, lambda: app.saved)
        info = next(i for i in SessionStore(tmp_path).list() if i.conversation_id == app.conversation.conversation_id)
        assert info.title == "read f0.txt", "the first prompt"
        assert info.tokens == app.conversation.estimated_tokens() < app.conversation.total_tokens, "after the reclaim"
        await submit(pilot, "/name reading the parts")
        await wait_until(pilot, lambda: SessionStore(tmp_path).list()[0].title == "reading the parts")
        await submit(pilot, "/sessions")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        table = app.screen.query_one("DataTable")
        assert "reading the parts" in [str(cell) for cell in table.get_row_at(0)]


async def test_usage_of_the_last_call_the_session_and_its_cost_survive_a_resume(offline_server, session_factory):
    from xun.tui import messages as m

    from .helpers import of_type

    prices = ("pricing.xun-offline.input=2", "pricing.xun-offline.output=8")
    first = session_factory(offline_server, *prices, "model.name=xun-offline")
    app = XunApp(first)
    seen: list = []
    async with app.run_test(size=(140, 44), message_hook=seen.append) as pilot:
        await turn(pilot, "hello")
        await turn(pilot, "hello again")
        calls = [u.event for u in of_type(seen, m.ContextUsage) if u.after_model_call]
        totals = app.conversation.usage_totals
        assert totals["calls"] == len(calls) == 2
        assert totals["prompt"] == sum(c.prompt_tokens for c in calls) > 0
        assert totals["completion"] == sum(c.completion_tokens for c in calls) > 0
        text = app.main.gauge.usage_text
        last = calls[-1]
        assert text.startswith(f"last call {last.prompt_tokens:,} in · {last.completion_tokens:,} out"), text
        expected = (totals["prompt"] * 2 + totals["completion"] * 8) / 1e6
        assert f"${expected:,.4f}" in text and "(2 calls)" in text
        await quit_app(pilot, app)
    first.close()  # one writer per session: the first lets go of it, as a process that quits does
    again = XunApp(
        session_factory(offline_server, *prices, "model.name=xun-offline", resume=first.conversation.conversation_id)
    )
    async with again.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: again.main.gauge.usage_text)
        assert again.conversation.usage_totals == totals
        assert again.main.gauge.usage_text.startswith("session ") and f"${expected:,.4f}" in again.main.gauge.usage_text


async def test_the_cost_bills_cached_input_at_its_price_as_the_server_reported_it(
    offline_server_factory, session_factory, tmp_path
):
    """Over real HTTP, the offline server's prefix cache on: the cost under the gauge and in /tokens is
    uncached input x input + cached x cached_input + output x output, from the server's own figures; it
    survives a resume."""
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("".join(f"part {i} line {j}\n" for j in range(40)))
    server = offline_server_factory(cache_ttl=300)
    prices = (
        "pricing.xun-offline.input=2",
        "pricing.xun-offline.cached_input=0.5",
        "pricing.xun-offline.output=8",
        "model.name=xun-offline",
    )
    first = session_factory(server, *prices)
    app = XunApp(first)
    async with app.run_test(size=(140, 44)) as pilot:
        for i in range(3):
            await turn(pilot, f"read f{i}.txt")
        totals = app.conversation.usage_totals
        completion = totals["completion"]
        # the server's own record of every chat request (a calibration probe, if any, included in both)
        prompt, cached = sum(server.prompt_sizes), sum(server.cached_sizes)
        assert cached > 0 and totals["prompt"] == prompt and totals["cached_input"] == cached
        expected = ((prompt - cached) * 2 + cached * 0.5 + completion * 8) / 1e6
        assert f"${expected:,.4f}" in app.main.gauge.usage_text, app.main.gauge.usage_text
        assert f"({tokens(cached)} cached)" in app.main.gauge.usage_text
        await submit(pilot, "/tokens")
        await wait_until(pilot, lambda: f"cost ${expected:,.4f}" in str(app.main.chat.children[-1].render()))
        assert f"{prompt - cached:,} input uncached · {cached:,} cached" in str(app.main.chat.children[-1].render())
        await quit_app(pilot, app)
    first.close()
    again = XunApp(session_factory(server, *prices, resume=first.conversation.conversation_id))
    async with again.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: again.main.gauge.usage_text)
        assert again.conversation.usage_totals == totals and f"${expected:,.4f}" in again.main.gauge.usage_text


async def test_a_large_paste_is_one_line_in_the_input_and_sent_in_full(offline_server, session_factory):
    from textual import events

    from xun.tui import messages as m

    from .helpers import of_type

    app = XunApp(session_factory(offline_server))
    seen: list = []
    pasted = "".join(f"line {i}\n" for i in range(1024)).rstrip("\n")
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        app.main.prompt.focus()
        await pilot.press("s", "u", "m", "space")
        app.post_message(events.Paste(pasted))
        await pilot.pause()
        assert app.main.prompt.text == "sum [pasted 1,024 lines #1]"
        app.post_message(events.Paste("a small paste"))
        await pilot.pause()
        assert app.main.prompt.text.endswith("#1]a small paste")
        await finish(pilot, lambda: pilot.press("enter"))
        assert of_type(seen, m.PromptSubmitted)[-1].text == f"sum {pasted}a small paste"
        assert any(getattr(msg, "text", None) == f"sum {pasted}a small paste" for msg in app.conversation.messages)


@pytest.mark.long
async def test_a_low_threshold_reclaims_before_it_summarises_and_every_nothing_says_why(
    offline_server, session_factory, tmp_path
):
    """Item 13: with token_threshold=3000 and 12 turns that read files, tier 1 runs (the newest result of a
    finished turn is reclaimed rather than its whole turn summarised), every automatic summary says why a
    reclaim was not enough, every reclaim that replaced nothing says why, and F7's figures are what F6
    and the automatic policy then do."""
    for i in range(1, 13):
        (tmp_path / f"f{i}.txt").write_text(
            "".join(
                f"line {n} of file {i}: alpha beta gamma delta omega sigma beta gamma alpha omega\n" for n in range(60)
            )
        )
    app = XunApp(session_factory(offline_server, "auto_compact.token_threshold=3000"))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        for i in range(1, 13):
            await turn(pilot, f"read f{i}.txt")
        log = app.conversation.compaction_log
        summaries = [r for r in log if r["type"] == "summary_finished"]
        reclaims = [r for r in log if r["type"] == "tool_results_reclaimed"]
        first_summary = log.index(summaries[0]) if summaries else len(log)
        assert any(r["count"] for r in log[first_summary:] if r in reclaims), (
            "tier 1 runs after the first summary too, not a summary on every turn"
        )
        assert sum(1 for r in reclaims if r["count"]) > len(summaries)
        assert all(r["why"] for r in summaries if r["trigger"] == "auto"), summaries
        assert all(r["reason"] for r in reclaims if not r["count"]), reclaims
        # the log's rows and details say the same
        rows = [e for e in app.main.log_pane.entries if e.kind == "summary"]
        assert rows and all("reason: " in e.detail() for e in rows)
        if app.main.log_pane.unchanged:
            assert "changed nothing" in str(app.main.log_pane.tooltip) and ": " in app.main.log_pane.unchanged_detail()

        # F7 says what F6 would do now, and F6 then does exactly that (and says why when it is nothing)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview")
        f = app.screen.figures
        line = str(app.screen.query_one("#preview-reclaim").render())
        await pilot.press("escape")
        await finish(pilot, lambda: pilot.press("f6"))
        done = app.conversation.compaction_log[-1]
        assert done["type"] == "tool_results_reclaimed" and done["count"] == f.reclaim.count
        if not f.reclaim.count:
            assert f.reclaim.why_nothing in line and done["reason"] == f.reclaim.why_nothing
            assert any(f.reclaim.why_nothing in n.message for n in app._notifications)

        # /context says the same in a line
        await submit(pilot, "/context")
        await wait_until(pilot, lambda: isinstance(app.screen, BreakdownScreen), what="the breakdown")
        outlook = str(app.screen.query_one("#breakdown-outlook").render())
        reclaim = app.preview_figures()[0].reclaim
        assert (
            f"F6 would reclaim {reclaim.count} tool result" in outlook
            if reclaim.count
            else f"F6 would reclaim nothing ({reclaim.why_nothing})" in outlook
        ), outlook
        await pilot.press("escape")

        # F7's summary figures are F5's
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, PreviewScreen), what="the preview")
        f = app.screen.figures
        await pilot.press("escape")
        if not f.nothing_to_condense:
            await finish(pilot, lambda: pilot.press("f5"))
            last = app.conversation.summarizations[-1]
            assert (last.condensed_count, last.kept_count) == (f.condensed, f.kept)


@pytest.mark.long
async def test_a_long_turn_with_many_summaries_shows_every_call_once_live_resumed_and_rendered(
    offline_server, session_factory
):
    """Trial F #5, #20: a 200-step turn made a dozen summaries, several in one second. Live, their dividers
    stacked above the turn's prompt and the calls they took out were never dimmed; resumed and in /render,
    every section showed the first one's calls (142-155 and more were missing) and the prompt came back once
    per summary. Each divider now sits among the calls where its cut was, every call shows once, and the
    prompt twice at most: where it was sent, and carried past the last summary, labelled so."""
    import re

    settings = ("auto_compact.token_threshold=3000", "auto_confirm=true")
    first = session_factory(offline_server, *settings)
    app = XunApp(first)
    async with app.run_test(size=(140, 44)) as pilot:
        await turn(pilot, "append the numbers 1 to 120 to steps.txt", timeout=120)
        assert len(app.conversation.summarizations) >= 3
        live = chat_rows(app, arguments=True, blocks=await every_block(pilot, app.main.chat))
        await quit_app(pilot, app)
    first.close()

    def calls(rows) -> list[int]:
        return [int(n) for kind, text, _ in rows if kind == "tool" for n in re.findall(r"echo (\d+)", text)]

    assert calls(live) == list(range(1, 121)), calls(live)
    assert [kind for kind, _, _ in live].index("user") == 0 and not live[0][2], "the prompt on top, in the context"
    dividers = [i for i, row in enumerate(live) if row[0] == "divider"]
    assert len(dividers) == len(app.conversation.summarizations) and dividers[0] > 5, "among the calls"
    assert all(dim for kind, _, dim in live[1 : dividers[-1]] if kind == "tool"), "the calls summarised are dimmed"

    again = XunApp(session_factory(offline_server, *settings, resume=first.conversation.conversation_id))
    async with again.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: again.main.chat.children, what="the transcript")
        rows = chat_rows(again, arguments=True, blocks=await every_block(pilot, again.main.chat))
        assert calls(rows) == list(range(1, 121)), calls(rows)
        assert [text for kind, text, _ in rows if kind == "user"] == ["append the numbers 1 to 120 to steps.txt"] * 2
        assert again.main.chat.query(UserBlock).last().border_title.startswith("you · the turn's prompt, carried")
        await submit(pilot, "/render long.md")
        path = again.workdir / "long.md"
        await wait_until(pilot, path.exists, what="the export")
    text = path.read_text()
    assert [int(n) for n in re.findall(r'"command": "echo (\d+) >>', text)] == list(range(1, 121))  # the calls
    assert text.count("## You") == 2 and "carried past the summary" in text
