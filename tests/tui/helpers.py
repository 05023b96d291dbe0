"""Driving the app in Pilot tests: wait for a condition instead of sleeping, type, read the panes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from xun.tui.app import XunApp

TIMEOUT = 15.0
SLACK = 2
"""Every wait may take this many times its timeout: a timeout only ends a failing test, and the suite's
workers (pytest-xdist) share two cores with the real model servers, so a passing test can be that slow."""


async def wait_until(
    pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = TIMEOUT, what: str = ""
) -> None:
    """Poll `predicate` until it is true after a pause (the app has handled every message pending then);
    fail after `timeout` seconds. Between polls the test only sleeps: a pause posts a message to every widget
    on the screen and waits for the process to go idle, and done a hundred times a second that was a large
    share of the suite's CPU."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout * SLACK
    while True:
        if predicate():
            await pilot.pause()
            if predicate():
                return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what or predicate}")
        await asyncio.sleep(0.01)


async def at_the_end(pilot: Pilot[Any], view: Any, what: str = "the view") -> None:
    """`view` scrolled to its end, and its height steady over three polls: a Markdown block lays itself
    out over a few refreshes after it mounts, and a screen under a modal is laid out only when refreshed."""
    heights: list[int] = []

    def steady() -> bool:
        view.scroll_end(animate=False, immediate=True)
        heights.append(view.virtual_size.height)
        return len(heights) >= 3 and len(set(heights[-3:])) == 1 and view.scroll_y == view.max_scroll_y

    await wait_until(pilot, steady, what=f"{what} at its end, its height steady")


def idle(app: XunApp) -> bool:
    busy_groups = {"agent", "compaction", "save"}
    return app.work.busy is None and not any(w.is_running for w in app.workers if w.group in busy_groups)


async def wait_idle(pilot: Pilot[Any], timeout: float = TIMEOUT) -> None:
    app = pilot.app
    assert isinstance(app, XunApp)
    await wait_until(pilot, lambda: idle(app), timeout, "the app to be idle")


async def submit(pilot: Pilot[Any], text: str) -> None:
    """Type a prompt (or slash command) into the prompt and press Enter."""
    app = pilot.app
    assert isinstance(app, XunApp)
    app.main.prompt.focus()
    app.main.prompt.load_text(text)
    app.main.prompt.move_cursor(app.main.prompt.document.end)
    await pilot.press("enter")


async def finish(pilot: Pilot[Any], action: Callable[[], Any], timeout: float = TIMEOUT) -> None:
    """Do something that starts agent work (a prompt, a key, a command) and wait until it is over."""
    app = pilot.app
    assert isinstance(app, XunApp)
    before = app.work.finished
    result = action()
    if asyncio.iscoroutine(result):
        await result
    await wait_until(pilot, lambda: app.work.finished > before and idle(app), timeout, "the work to finish")


async def turn(pilot: Pilot[Any], text: str, timeout: float = TIMEOUT) -> None:
    """Send a prompt and wait until the turn is over and the app idle."""
    await finish(pilot, lambda: submit(pilot, text), timeout)


def of_type(messages: list[Any], kind: type) -> list[Any]:
    return [message for message in messages if isinstance(message, kind)]


def words_cut(screen: Any) -> list[str]:
    """The texts on `screen` (its labels and statics) that are not shown whole: a word missing from what the
    widget draws in its own box, or the box reaching past the edge of the widget that holds it."""
    from rich.text import Text
    from textual.content import Content
    from textual.geometry import Region
    from textual.widgets import Static

    cut: list[str] = []
    for widget in screen.walk_children(Static):
        if not widget.display or not widget.is_attached or widget.children or not widget.region:
            continue
        content = widget.content
        if not isinstance(content, (Content, Text, str)):
            continue  # a Rich renderable (a table) lays itself out
        text = content if isinstance(content, str) else content.plain
        if not text.strip():
            continue
        width, height = widget.size
        drawn = " ".join(strip.text for strip in widget.render_lines(Region(0, 0, width, height)))
        holder = widget.parent
        edge = holder.content_region.right if holder is not None else screen.region.right
        if "".join(drawn.split()) != "".join(text.split()) or widget.region.right > edge:  # a long word may fold
            cut.append(text)
    return cut


async def quit_app(pilot: Pilot[Any], app: XunApp) -> None:
    """Ctrl+Q, and wait until the app has quit (the session saved)."""
    await pilot.press("ctrl+q")
    await wait_until(pilot, lambda: app.return_code is not None, what="the quit")


async def session_ready(pilot: Pilot[Any], app: XunApp) -> None:
    """Until the session is open and takes prompts (a resume's notices are shown by then)."""
    await wait_until(pilot, lambda: app.session is not None and app.main.header.status == "ready", what="the session")


async def window_settled(pilot: Pilot[Any], chat: Any) -> None:
    """The chat's window changed as far as the last scroll or key asked (no page wanted or being read)."""
    await wait_until(
        pilot,
        lambda: not (chat._older_wanted or chat._newer_wanted or chat._loading_older),
        what="the chat's window to settle",
    )
    await pilot.pause()


async def every_block(pilot: Pilot[Any], chat: Any) -> list[Any]:
    """Every block of the chat's session, top to bottom, each once: Home, then down to the newest a page at a
    time (the chat mounts a bounded window). A block mounted at two steps is the same widget at both."""
    from xun.tui.widgets.chat_view import BLOCKS

    chat.focus()
    await pilot.press("home")
    await wait_until(pilot, lambda: not chat.older_count, what="the first block")
    blocks: list[Any] = []
    for _ in range(500):
        await window_settled(pilot, chat)
        window = [child for child in chat._window() if isinstance(child, BLOCKS)]
        if blocks and window:
            at = next(i for i, block in enumerate(blocks) if block is window[0])
            overlap = blocks[at:]
            assert all(a is b for a, b in zip(overlap, window)), "the window skipped or doubled a block"
            window = window[len(overlap) :]
        blocks += window
        if chat.at_end:
            return blocks
        chat.scroll_to(y=chat.max_scroll_y, animate=False, immediate=True)
    raise AssertionError("the chat's window never reached the newest block")
