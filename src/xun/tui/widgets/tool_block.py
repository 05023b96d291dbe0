"""One tool call: name and arguments in the title, then its size and duration once it finished; the
body holds the arguments and the start of the result. Marked when its result is reclaimed later."""

from __future__ import annotations

import json
import re

from textual.widgets import Collapsible

from xun.tui.folding import fold
from xun.tui.format import literal, one_line, tokens
from xun.tui.widgets.readable_text import ReadableText, folded_content

DECLINED_RESULT = "[Error] the user declined: "
"""How the result of a call the user denied begins (written by `xun.agent.tools.toolbox`; a test keeps the two
alike): a resumed chat shows it denied, as it was live, not as done."""
RESULT_PREVIEW_LINES = 12
RESULT_PREVIEW_CHARS = 2_000


def _keep_end(text: str, limit: int) -> str:
    """`text` on one line, cut at the start when too long (a path's file name is what tells)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[len(flat) - limit + 1 :]


STRING_FIELD = re.compile(r'"(\w+)"\s*:\s*"((?:[^"\\]|\\.)*)"')
"""A whole string field of a JSON object (`"path": "a.txt"`), found in text that may not be whole JSON."""


def _string_fields(text: str) -> dict[str, str]:
    """The whole string fields of what may be a JSON object cut short."""
    fields = {}
    for key, value in STRING_FIELD.findall(text):
        try:
            fields[key] = json.loads(f'"{value}"')
        except ValueError:
            continue
    return fields


def call_subject(arguments: str, limit: int = 40) -> str:
    """The argument that says what a call is about (path, command, pattern and where, id), else the JSON.
    A long path keeps its end; anything else is cut at its end."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:  # e.g. the preview of reclaimed arguments, cut short: its whole fields still say it
        parsed = _string_fields(arguments)
        if not parsed:
            return one_line(arguments, limit)
    if isinstance(parsed, dict):
        pattern, path = parsed.get("pattern"), parsed.get("path")
        if isinstance(pattern, str) and pattern:  # search_text: the pattern, and where when not everywhere
            where = f" in {path}" if isinstance(path, str) and path not in ("", ".") else ""
            return one_line(f"{pattern!r}{where}", limit)
        if isinstance(path, str) and path:
            return _keep_end(path, limit)
        for key in ("command", "toolcall_id"):
            value = parsed.get(key)
            if isinstance(value, str) and value:
                return one_line(value, limit)
        return one_line(json.dumps(parsed, ensure_ascii=False), limit) if parsed else ""
    return one_line(arguments, limit)


def pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def result_preview(text: str) -> str:
    shown = "\n".join(text[:RESULT_PREVIEW_CHARS].splitlines()[:RESULT_PREVIEW_LINES])
    if previewed_in_part(text):
        shown += f"\n… ({len(text):,} chars in all · click or o opens it whole)"
    return shown


def previewed_in_part(text: str) -> bool:
    """Whether `result_preview` shows only the start of `text`."""
    return len(text) > RESULT_PREVIEW_CHARS or len(text[:RESULT_PREVIEW_CHARS].splitlines()) > RESULT_PREVIEW_LINES


class ToolBlock(Collapsible):
    """The body (arguments and result preview) is built the first time the block is opened: a long
    history holds hundreds of these, folded. A block made from the history is finished (and marked reclaimed)
    before it mounts: its state classes then change without a restyle, which the mount does once."""

    def __init__(self, call_id: str, name: str, arguments: str) -> None:
        self.call_id = call_id
        self.tool_name = name
        self.arguments = arguments
        self.state = "running"
        self.result_chars: int | None = None
        self.duration_text = ""
        self.reclaimed = False
        self.restored = False
        self.result_text: str | None = None
        self._result_view: ReadableText | None = None
        super().__init__(title=literal(self._heading(), flat=True), collapsed=True, classes="block tool -running")
        self.title = self._heading()
        self._title.can_focus = (
            False  # the chat's [ and ] select a block and Enter opens it: Tab skips hundreds of titles
        )

    def _watch_title(self, title: str) -> None:
        """The tool's name and arguments come from the model: the title is text, never markup."""
        self._title.label = literal(title, flat=True) if isinstance(title, str) else title

    def watch_collapsed(self, collapsed: bool) -> None:
        if not collapsed and self._result_view is None and self.is_mounted:
            result = self.result_text or ""
            self._result_view = ReadableText(
                literal(result_preview(result)),
                title=self._reader_title("result"),
                whole=result if previewed_in_part(result) else None,
                classes="tool-result",
            )
            arguments = pretty_arguments(self.arguments)
            folded = fold(arguments)
            self.query_one(Collapsible.Contents).mount(
                ReadableText(
                    literal(arguments) if folded is None else folded_content(folded, "click opens it whole"),
                    title=self._reader_title("arguments"),
                    whole=None if folded is None else arguments,
                    classes="tool-arguments",
                ),
                self._result_view,
            )

    def _reader_title(self, what: str) -> str:
        subject = call_subject(self.arguments)
        return f"{self.tool_name}{f' {subject}' if subject else ''} · {what}"

    def read_whole(self) -> None:
        """The result in the reader (the arguments while there is none)."""
        from xun.tui.screens.reader import read_whole  # read when first opened, not at start-up

        if self.result_text is not None:
            read_whole(self.app, self._reader_title("result"), self.result_text)
        else:
            read_whole(self.app, self._reader_title("arguments"), pretty_arguments(self.arguments))

    def _heading(self) -> str:
        """`read_file src/app.py · reclaimed · 2.1k chars · 5 ms`: the marks first, so a narrow pane keeps them."""
        subject = call_subject(self.arguments)
        parts = [self.tool_name + (f" {subject}" if subject else "")]
        if self.reclaimed:
            parts.append("reclaimed")
        elif self.restored:
            parts.append("restored")
        if self.state == "running":
            parts.append("running…")
        else:
            if self.state in ("error", "denied", "cancelled"):
                parts.append(self.state)
            if self.result_chars is not None:
                parts.append(f"{tokens(self.result_chars)} chars")
            if self.duration_text:
                parts.append(self.duration_text)
        return " · ".join(parts)

    def _set_state(self, state: str) -> None:
        self.remove_class(f"-{self.state}", update=self.is_attached)
        self.state = state
        self.add_class(f"-{state}", update=self.is_attached)

    def finished(
        self, *, result_chars: int, duration_text: str, result: str | None, is_error: bool = False, denied: bool = False
    ) -> None:
        cancelled = bool(result and result.startswith("[Cancelled]"))
        denied = denied or bool(result and result.startswith(DECLINED_RESULT))
        is_error = is_error or bool(result and result.startswith("[Error]"))
        self._set_state("denied" if denied else "cancelled" if cancelled else "error" if is_error else "done")
        self.result_chars = result_chars
        self.duration_text = duration_text
        if result is not None:
            self.result_text = result
            if self._result_view is not None:
                self._result_view.update(literal(result_preview(result)))
                self._result_view.whole = result if previewed_in_part(result) else None
        self.title = self._heading()

    def mark_reclaimed(self) -> None:
        self.reclaimed, self.restored = True, False
        self.add_class("-reclaimed", update=self.is_attached)
        self.title = self._heading()

    def mark_restored(self) -> None:
        self.reclaimed, self.restored = False, True
        self.remove_class("-reclaimed", update=self.is_attached)
        self.title = self._heading()
