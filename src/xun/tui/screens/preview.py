"""F7 (and /compact preview): what a summary would do right now, from `Conversation.plan_compaction`:
every message in one scrollable list, the cut point marked (above it is summarised, below it kept),
tokens now and estimated after, and what a reclaim would replace, each with its cost in the server's
prompt cache (what the next call pays uncached, and what every later call saves); then run the summary (F5), run the
reclaim (F6), or close. Nothing changes until one of them runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Label, OptionList
from textual.widgets.option_list import Option

from xun.base.valid_text import escape_control
from xun.compact.breakdown import PLACEHOLDER_HEAD, ReclaimPreview, arguments_reclaimed
from xun.context.conversation import CompactionPlan, Conversation
from xun.context.reclaimed import arguments_id
from xun.context.messages import (
    RawOpenAIMessage,
    SystemPrompt,
    UserMessage,
    content_text,
    message_length,
)
from xun.tui.format import one_line, tokens
from xun.tui.screens.modal import Modal

CUT_ID = "cut"
FATE_STYLES = {"stays": "$primary", "summarise": "$warning", "carried": "$success", "keep": "$success"}


@dataclass(frozen=True, slots=True)
class PreviewRow:
    index: int
    fate: str
    """"stays" (the system message), "summarise", "carried" (the last user message, moved past the
    cut word for word) or "keep"."""
    role: str
    tokens: int
    text: str
    reclaim: bool = False
    """A reclaim would replace this tool result (or this message's calls' arguments) with its placeholder."""
    placeholder: bool = False


@dataclass(frozen=True, slots=True)
class PreviewFigures:
    tokens_now: int
    tokens_after: int
    """Estimated after the summary, without the summary itself."""
    reported: int | None
    threshold: int
    condensed: int
    kept: int
    nothing_to_condense: bool
    keep_recent: int
    reclaim: ReclaimPreview
    reclaim_cache_miss: int | None = None
    """Tokens after the first result a reclaim would replace: what the next call pays uncached."""
    automatic: ReclaimPreview | None = None
    """What the automatic policy's reclaim would replace before the next call (None under the threshold)."""


def _describe(message: object) -> tuple[str, str, bool]:
    """(role, one line of what it says, is a placeholder) for a message of the list."""
    if isinstance(message, SystemPrompt):
        names = [name for name, text in message.persist_sections.items() if text]
        what = "summary so far" if message.is_summary else "role prompt"
        return "system", what + (f" + {', '.join(names)}" if names else ""), False
    if isinstance(message, UserMessage):
        return "user", message.text, False
    raw = message.raw if isinstance(message, RawOpenAIMessage) else {}
    role = str(raw.get("role", "?"))
    text = content_text(raw.get("content"))
    if role == "tool":
        return "tool", text, text.startswith(PLACEHOLDER_HEAD)
    calls = [
        str((c.get("function") or {}).get("name", "?")) for c in raw.get("tool_calls") or () if isinstance(c, dict)
    ]
    if calls:
        text = (text + " " if text else "") + "→ " + ", ".join(calls)
    return role, text, any(arguments_reclaimed(c) for c in raw.get("tool_calls") or ())


def preview_rows(conversation: Conversation, plan: CompactionPlan, reclaim: ReclaimPreview) -> list[PreviewRow]:
    """One row per message now, in order, with what the summary would do to it."""
    ratio = conversation.tokens_per_char
    carried = plan.carried_user
    replaced = set(reclaim.ids)
    rows = []
    for index, message in enumerate(conversation.messages):
        if isinstance(message, SystemPrompt) and index == 0:
            fate = "stays"
        elif index < plan.cut_index:
            fate = "carried" if carried is not None and message is carried else "summarise"
        else:
            fate = "keep"
        role, text, placeholder = _describe(message)
        raw = message.raw if isinstance(message, RawOpenAIMessage) else {}
        call_id = str(raw.get("tool_call_id", ""))
        # a tool result, or a message whose calls' arguments, a reclaim would replace
        keys = (
            [call_id]
            if call_id
            else [arguments_id(str(c.get("id", ""))) for c in raw.get("tool_calls") or () if isinstance(c, dict)]
        )
        rows.append(
            PreviewRow(
                index,
                fate,
                role,
                round(message_length(message) * ratio),
                text,
                reclaim=any(key in replaced for key in keys),
                placeholder=placeholder,
            )
        )
    return rows


def row_content(row: PreviewRow, width: int = 0) -> Content:
    marks = " ↺" if row.reclaim else " ·" if row.placeholder else "  "
    head = f"{row.fate:<9} #{row.index:<4} {row.role:<9} {tokens(row.tokens):>6}{marks} "
    room = max(width - len(head), 10) if width else 80
    return Content.assemble(
        (f"{row.fate:<9}", FATE_STYLES.get(row.fate, "")),
        (f" #{row.index:<4} {row.role:<9} {tokens(row.tokens):>6}", "dim" if row.fate == "summarise" else ""),
        (marks, "bold $warning" if row.reclaim else "dim"),
        " ",
        (one_line(row.text, room) or "(no text)", "dim" if row.fate == "summarise" or row.placeholder else ""),
    )


def cut_content(figures: PreviewFigures, width: int = 0) -> Content:
    text = f" ✂ cut: {figures.condensed} above are summarised · {figures.kept} below are kept "
    fill = max((width or 72) - len(text), 4)
    return Content.styled("─" * 2 + text + "─" * (fill - 2), "bold $accent")


def kept_whole(kept: int) -> str:
    """Why a summary would condense nothing: every message is in the part it keeps (or there is none)."""
    if kept == 0:
        return "there are no messages yet"
    return f"{'the one message is' if kept == 1 else f'all {kept:,} messages are'} in the part a summary keeps"


def summary_line(f: PreviewFigures) -> str:
    if f.nothing_to_condense:
        return (
            f"summary: nothing to condense: {kept_whole(f.kept)} (the last "
            f"turn when it has at most {f.keep_recent} messages, else the newest {f.keep_recent}) · now "
            f"{tokens(f.tokens_now)} of {tokens(f.threshold)}"
        )
    return (
        f"summary: {f.condensed} messages summarised, {f.kept} kept · {tokens(f.tokens_now)} now → "
        f"about {tokens(f.tokens_after)} after, plus the summary · threshold {tokens(f.threshold)} · cache: the "
        f"next call pays its whole prompt uncached (about {tokens(f.tokens_after)} plus the summary), then "
        f"{tokens(f.tokens_now - f.tokens_after)} less per call, less the summary"
    )


def reclaim_line(f: PreviewFigures) -> str:
    r, a = f.reclaim, f.automatic
    automatic = ""
    if a is not None and a.count > r.count:  # over the threshold the policy keeps fewer than F6
        automatic = (
            f" · over the threshold, the automatic reclaim before the next call keeps the newest {a.keep_max}: "
            f"{a.what if a.arguments else f'{a.count} result' + ('s' if a.count != 1 else '')}, "
            f"about {tokens(a.tokens_saved)} tokens"
        )
    if not r.count:
        return f"reclaim (F6): nothing to replace now: {r.why_nothing}{automatic}"
    cache = (
        (
            f" · cache: the next call pays about {tokens(f.reclaim_cache_miss)} uncached, then "
            f"{tokens(r.tokens_saved)} less per call"
        )
        if f.reclaim_cache_miss is not None
        else ""
    )
    return (
        f"reclaim (F6): {r.what} older than the newest {r.keep_max} "
        f"become placeholders (↺) · about {tokens(r.tokens_saved)} tokens freed{cache}{automatic}"
    )


def outlook_line(f: PreviewFigures, key_of: Callable[[str], str]) -> str:
    """What compaction would do now, in one line (for /context; F7 shows it message by message).
    `key_of(binding_id)`: how the app's key for it reads now (after `ui.keymap`)."""
    r, a = f.reclaim, f.automatic
    if r.count:
        reclaim = f"{key_of('reclaim')} would reclaim {r.what} (about {tokens(r.tokens_saved)} tokens)"
    else:
        reclaim = f"{key_of('reclaim')} would reclaim nothing ({r.why_nothing})"
    if a is not None and a.count > r.count:
        reclaim += f"; the automatic reclaim, keeping {a.keep_max}, {a.count} (about {tokens(a.tokens_saved)})"
    if f.nothing_to_condense:
        summary = f"{key_of('compact')} would summarise nothing ({kept_whole(f.kept)})"
    else:
        summary = f"{key_of('compact')} would summarise {f.condensed} messages and keep {f.kept}"
    return f"compaction now: {reclaim} · {summary} · {key_of('preview')} shows each message"


class PreviewScreen(Modal[str | None]):
    """Dismisses with "compact" (run the summary), "reclaim" (run the reclaim) or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f7", "dismiss(None)", "Close", id="preview.close"),
        Binding("f5,s", "run('compact')", "Summarise now", id="preview.compact"),
        Binding("f6,r", "run('reclaim')", "Reclaim now", id="preview.reclaim"),
    ]

    def __init__(self, rows: list[PreviewRow], figures: PreviewFigures) -> None:
        super().__init__(id="preview")
        self.rows = rows
        self.figures = figures

    @property
    def cut_position(self) -> int:
        """Where the cut line sits in the list: before the first kept message."""
        return next((i for i, row in enumerate(self.rows) if row.fate == "keep"), len(self.rows))

    def compose(self) -> ComposeResult:
        f = self.figures
        with Vertical(id="preview-box") as box:
            box.border_title = "preview · what compaction would do now"
            box.border_subtitle = "f5/s summarise · f6/r reclaim · esc close"
            yield Label(Text(escape_control(summary_line(f))), id="preview-summary")
            yield Label(Text(escape_control(reclaim_line(f))), id="preview-reclaim")
            yield OptionList(id="preview-list")
            with Horizontal(id="preview-buttons"):
                yield Button(
                    "Summarise now (F5)", id="compact", variant="primary", compact=True, disabled=f.nothing_to_condense
                )
                yield Button(
                    "Reclaim now (F6)", id="reclaim", variant="warning", compact=True, disabled=not f.reclaim.count
                )
                yield Button("Cancel (Esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self._fill()
        option_list = self.query_one("#preview-list", OptionList)
        option_list.focus()
        if not self.figures.nothing_to_condense:
            # open on the cut, with the last summarised messages above it in view
            option_list.highlighted = min(self.cut_position + 1, option_list.option_count - 1)
            option_list.scroll_to_highlight(top=False)

    def on_resize(self) -> None:
        self._fill()

    def _fill(self) -> None:
        option_list = self.query_one("#preview-list", OptionList)
        width = option_list.scrollable_content_region.width
        highlighted = option_list.highlighted
        options: list[Option] = []
        for position, row in enumerate(self.rows):
            if position == self.cut_position and not self.figures.nothing_to_condense:
                options.append(Option(cut_content(self.figures, width), id=CUT_ID, disabled=True))
            options.append(Option(row_content(row, width), id=str(row.index)))
        option_list.set_options(options)
        if highlighted is not None and option_list.option_count:
            option_list.highlighted = min(highlighted, option_list.option_count - 1)

    def action_run(self, what: str) -> None:
        if what == "compact" and self.figures.nothing_to_condense:
            self.notify("nothing to summarise yet: the history is already short", severity="warning")
            return
        if what == "reclaim" and not self.figures.reclaim.count:
            self.notify("nothing to reclaim now", severity="warning")
            return
        self.dismiss(what)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id in ("compact", "reclaim"):
            self.action_run(event.button.id)
        else:
            self.dismiss(None)
