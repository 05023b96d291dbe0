"""Every private Textual (and Rich) name xun uses, from `xun.tui.textual_private`, still there and shaped as
xun uses it: an upgrade that moves one fails here, naming it, not somewhere in the app."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
import textual
from textual.app import App
from textual.containers import VerticalScroll
from textual.notifications import Notification
from textual.scrollbar import ScrollBar
from textual.widget import Widget
from textual.widgets import Collapsible, Footer, TextArea

from xun.tui import textual_private as private

ROOT = Path(__file__).resolve().parents[2]


def test_textual_is_the_pinned_version():
    pin = re.search(r'"textual==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert textual.__version__ == pin, (
        f"Textual {textual.__version__} is not the pinned {pin}: check every use in xun/tui/textual_private.py"
    )


@pytest.mark.parametrize("owner,name", list(private.OVERRIDDEN), ids=lambda v: getattr(v, "__name__", v))
def test_each_overridden_private_method_is_still_there(owner, name):
    method = getattr(owner, name, None)
    assert callable(method), f"{owner.__name__}.{name} is gone: {private.OVERRIDDEN[(owner, name)]}"
    assert inspect.iscoroutinefunction(method) == (name == "_on_key"), f"{owner.__name__}.{name} changed kind"


def test_the_overrides_take_what_textual_passes():
    from xun.tui.app import XunApp
    from xun.tui.terminal_input import TerminalInputParser
    from xun.tui.widgets.measured_once import MeasuredOnce
    from xun.tui.widgets.prompt_input import PromptInput

    for ours, theirs, name in [
        (XunApp, App, "_on_notify"),
        (XunApp, App, "_unnotify"),
        (PromptInput, TextArea, "_on_key"),
        (MeasuredOnce, Widget, "_size_updated"),
        (TerminalInputParser, private.XTermParser, "_sequence_to_key_events"),
    ]:
        mine = list(inspect.signature(getattr(ours, name)).parameters)
        upstream = list(inspect.signature(getattr(theirs, name)).parameters)
        assert mine == upstream, f"{theirs.__name__}.{name}{upstream} is not what {ours.__name__} overrides: {mine}"


def test_the_drivers_still_make_their_parser_from_a_module_name():
    for module in private.DRIVER_PARSERS:
        loaded = importlib.import_module(module)
        source = inspect.getsource(loaded)
        assert "XTermParser(" in source, f"{module} no longer makes its parser from XTermParser"


async def test_each_private_member_is_there_and_works():
    app = App()
    async with app.run_test() as pilot:
        app.notify("hello", title="t")
        await pilot.pause()
        assert [n.title for n in private.notifications(app)] == ["t"]
        assert await private.check_bindings(app, "nothing-bound") is False
    toast = private.Toast(Notification("m", title="t"))
    assert private.toast_notification(toast).message == "m"
    area = TextArea("abc def")
    assert private.replace_via_keyboard(area, "X", (0, 0), (0, 1)) is not None
    assert private.delete_via_keyboard(area, (0, 0), (0, 1)) is not None
    assert area.text == "bc def"
    assert private.layout_required(Widget()) in (True, False)
    assert private.bindings_ready(Footer()) is False
    assert isinstance(private.collapsible_title(Collapsible(title="x")), private.CollapsibleTitle)
    assert private.divide_line("one two three", 7) == [8]  # where each line after the first starts
    assert isinstance(private.get_time(), float)
    assert issubclass(private.FooterKey, Widget)


def test_a_size_measured_by_a_layout_asks_for_no_second_layout_only_where_xun_says_so():
    """Textual's `_size_updated` asks for another layout when a size changes (the reason for the override);
    `MeasuredOnce` stores the size without asking."""
    from textual.geometry import Size

    from xun.tui.widgets.measured_once import MeasuredOnce

    for widget, asks in ((Widget(), True), (MeasuredOnce(), False)):
        widget._size_updated(Size(3, 1), Size(3, 2), Size(3, 1))
        assert widget.virtual_size == Size(3, 2) and private.layout_required(widget) is asks


def test_each_private_use_has_an_upstream_report_ready_to_file():
    reports = {path.stem for path in (ROOT / "docs" / "upstream").glob("*.md")}
    wanted = {
        "xterm-parser",
        "event-clock",
        "notifications",
        "text-area-edits",
        "footer-keys",
        "collapsible-title",
        "check-bindings",
        "layout-required",
        "rich-wrap-points",
        "size-updated-layout",
        "layout-now",
    }
    assert wanted <= reports, f"no report for {sorted(wanted - reports)} in docs/upstream/"


async def test_a_widget_s_vertical_scrollbar_is_made_as_textual_makes_it():
    """`vertical_scrollbar` makes the bar once, with the class asked for, started as Textual starts its own:
    shown and drawn beside the widget's rows when they overflow."""

    class Bar(ScrollBar):
        pass

    made: list[Bar] = []

    class Scrolled(VerticalScroll):
        @property
        def vertical_scrollbar(self) -> ScrollBar:
            return private.vertical_scrollbar(self, lambda: made.append(Bar(vertical=True)) or made[-1])

    class Host(App):
        def compose(self):
            yield Scrolled(*(Widget() for _ in range(3)))

    app = Host()
    async with app.run_test(size=(20, 10)) as pilot:
        scrolled = app.query_one(Scrolled)
        for child in scrolled.children:
            child.styles.height = 10
        await pilot.pause()
        bar = scrolled.vertical_scrollbar
        assert made == [bar] and scrolled.vertical_scrollbar is bar, "made once"
        assert bar.parent is scrolled and bar.is_attached and bar.display and bar.size.height == 10
        assert bar.window_virtual_size == 30 and bar.window_size == 10


async def test_a_layout_made_inside_a_batch_places_a_widget_just_mounted_and_paints_nothing():
    """`lay_out_now` gives a widget mounted inside `batch_update` its region at once (before, it has none), so
    it can be scrolled to before the batch ends; nothing is painted until then."""
    from textual.containers import VerticalScroll
    from textual.widgets import Static

    class Host(App[None]):
        def compose(self):
            yield VerticalScroll(*(Static(f"line {n}") for n in range(100)))

    app = Host()
    async with app.run_test(size=(40, 10)) as pilot:
        scroll = app.query_one(VerticalScroll)
        painted: list[object] = []
        display = app._display
        app._display = lambda screen, renderable: painted.append(renderable) or display(screen, renderable)
        with app.batch_update():
            late = Static("late")
            await scroll.mount(late)
            assert not late.region, "not placed before a layout"
            private.lay_out_now(app.screen)
            assert late.virtual_region.y == 100
            scroll.scroll_to_widget(late, animate=False, top=True, immediate=True)
            assert scroll.scroll_y == scroll.max_scroll_y > 90
            assert not [r for r in painted if r is not None], "nothing painted inside the batch"
        await pilot.pause()
        assert late.region and scroll.scroll_y == scroll.max_scroll_y
