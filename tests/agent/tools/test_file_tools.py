"""read_file, list_directory, search_text, write_file and extract_compacted_tool_result on real files."""

from __future__ import annotations

import json
import os
import stat

import pytest

from xun.agent.tools import Decision

from .conftest import Confirmer, ReclaimedResults


async def call(toolbox, ctx, name, **arguments):
    return await toolbox.call(name, json.dumps(arguments), ctx)


# ---------------------------------------------------------------------------------------- read_file


async def test_read_file_whole_with_line_numbers(toolbox, make_context, workspace):
    (workspace / "a.txt").write_text("alpha\nbeta\r\ngamma")
    outcome = await call(toolbox, make_context(), "read_file", path="a.txt")
    assert outcome.text == "[a.txt: lines 1-3 of 3, the whole file]\n     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_read_file_offset_and_limit_say_what_remains(toolbox, make_context, workspace):
    (workspace / "n.txt").write_text("".join(f"row {i}\n" for i in range(1, 101)))
    ctx = make_context()
    part = await call(toolbox, ctx, "read_file", path="n.txt", offset=10, limit=5)
    lines = part.text.splitlines()
    assert lines[0] == "[n.txt: lines 11-15 of 100; 85 more lines remaining, continue with offset=15]"
    assert lines[1:] == [f"{i:>6}\trow {i}" for i in range(11, 16)]
    end = await call(toolbox, ctx, "read_file", path="n.txt", offset=95)
    assert end.text.splitlines()[0] == "[n.txt: lines 96-100 of 100, to the end of the file]"
    past = await call(toolbox, ctx, "read_file", path="n.txt", offset=500)
    assert past.text == "[n.txt: 100 lines; offset 500 is past the end (use an offset below 100)]"
    assert not past.is_error


async def test_read_file_stops_at_the_output_budget_and_says_where_to_continue(toolbox, make_context, workspace):
    (workspace / "big.txt").write_text("".join(f"{'x' * 90} {i}\n" for i in range(1, 1001)))
    outcome = await call(toolbox, make_context(max_output_chars=5_000), "read_file", path="big.txt")
    header = outcome.text.splitlines()[0]
    shown = len(outcome.text.splitlines()) - 1
    remaining = 1000 - shown
    assert (
        header == f"[big.txt: lines 1-{shown} of 1000; {remaining} more lines remaining, continue with offset={shown}]"
    )
    assert 30 < shown < 60 and outcome.truncated_chars == 0 and len(outcome.text) <= 5_000


async def test_read_file_errors(toolbox, make_context, workspace):
    ctx = make_context()
    (workspace / "folder").mkdir()
    (workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x00\x01")
    (workspace / "empty.txt").write_text("")
    cases = {
        "missing.txt": "[Error] missing.txt: no such file in the workspace",
        "folder": "[Error] folder is a directory; use list_directory",
        "blob.bin": "[Error] blob.bin looks like a binary file",
        "": "[Error] the path is empty",
    }
    for path, expected in cases.items():
        outcome = await call(toolbox, ctx, "read_file", path=path)
        assert outcome.is_error and outcome.text.startswith(expected), outcome.text
    assert (await call(toolbox, ctx, "read_file", path="empty.txt")).text == "[empty.txt: empty file, 0 lines]"
    bad = await call(toolbox, ctx, "read_file", path="a", offset=-1)
    assert bad.is_error and "argument 'offset'" in bad.text
    bad = await call(toolbox, ctx, "read_file", path="a", limit=0)
    assert bad.is_error and "argument 'limit'" in bad.text


async def test_read_file_refuses_a_fifo_instead_of_hanging(toolbox, make_context, workspace):
    os.mkfifo(workspace / "pipe")
    outcome = await call(toolbox, make_context(), "read_file", path="pipe")
    assert outcome.is_error and "is not a regular file" in outcome.text
    found = await call(toolbox, make_context(), "search_text", pattern="x")
    assert not found.is_error


async def test_read_file_invalid_utf8_is_replaced_not_fatal(toolbox, make_context, workspace):
    (workspace / "latin.txt").write_bytes(b"caf\xe9\n")
    outcome = await call(toolbox, make_context(), "read_file", path="latin.txt")
    assert not outcome.is_error and "caf\ufffd" in outcome.text


# ----------------------------------------------------------------------------------- list_directory


async def test_list_directory_sorted_with_folders_marked(toolbox, make_context, workspace):
    (workspace / "b.txt").write_text("b")
    (workspace / "A.md").write_text("a")
    (workspace / "src").mkdir()
    (workspace / "src" / "inner.py").write_text("")
    os.symlink("b.txt", workspace / "link")
    ctx = make_context()
    outcome = await call(toolbox, ctx, "list_directory")
    assert outcome.text == "[workspace root: 4 entries]\nA.md\nb.txt\nlink -> b.txt\nsrc/"
    sub = await call(toolbox, ctx, "list_directory", path="src")
    assert sub.text == "[src/: 1 entry]\ninner.py"
    (workspace / "void").mkdir()
    assert (await call(toolbox, ctx, "list_directory", path="void")).text == "[void/: 0 entries]\n(empty folder)"
    not_dir = await call(toolbox, ctx, "list_directory", path="b.txt")
    assert not_dir.is_error and "is a file, not a folder" in not_dir.text
    missing = await call(toolbox, ctx, "list_directory", path="nope")
    assert missing.is_error and "no such folder" in missing.text


# -------------------------------------------------------------------------------------- search_text


async def test_search_text_reports_file_line_text(toolbox, make_context, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (workspace / "README.md").write_text("Use main() to start.\n")
    (workspace / "image.png").write_bytes(b"main\x00\x00binary")
    for hidden in (".git", ".xun"):
        (workspace / hidden).mkdir()
        (workspace / hidden / "notes").write_text("main is here too\n")
    outcome = await call(toolbox, make_context(), "search_text", pattern=r"main\(")
    assert outcome.text.splitlines() == [
        "README.md:1: Use main() to start.",
        "src/app.py:3: def main():",
        r"[2 matches for /main\(/ in .]",
    ]
    scoped = await call(toolbox, make_context(), "search_text", pattern="os", path="src/app.py")
    assert scoped.text.splitlines()[:2] == ["src/app.py:1: import os", "src/app.py:4:     return os.getcwd()"]


async def test_search_text_caps_matches_and_handles_no_match_and_bad_regex(toolbox, make_context, workspace):
    (workspace / "many.txt").write_text("hit\n" * 500)
    ctx = make_context()
    many = await call(toolbox, ctx, "search_text", pattern="hit")
    lines = many.text.splitlines()
    assert len(lines) == 201 and lines[-1].startswith("[200 matches for /hit/ in .; stopped at 200 matches")
    none = await call(toolbox, ctx, "search_text", pattern="absent")
    assert none.text == "No matches for /absent/ in . (1 text file searched)" and not none.is_error
    bad = await call(toolbox, ctx, "search_text", pattern="(unclosed")
    assert bad.is_error and bad.text.startswith("[Error] invalid regular expression '(unclosed'")


async def test_search_text_does_not_follow_symlinks_out(toolbox, make_context, workspace, outside):
    os.symlink(outside / "secret.txt", workspace / "leak.txt")
    os.symlink(outside, workspace / "leakdir")
    (workspace / "own.txt").write_text("secret of our own\n")
    outcome = await call(toolbox, make_context(), "search_text", pattern="secret")
    assert outcome.text.splitlines()[0] == "own.txt:1: secret of our own"
    assert "top secret" not in outcome.text


# -------------------------------------------------------------------------------------- write_file


async def test_write_file_creates_folders_and_reports(toolbox, make_context, workspace):
    outcome = await call(toolbox, make_context(), "write_file", path="deep/er/new.txt", content="one\ntwo\n")
    assert outcome.text == "Created deep/er/new.txt: 2 lines, 8 characters." and not outcome.is_error
    assert (workspace / "deep/er/new.txt").read_text() == "one\ntwo\n"
    again = await call(toolbox, make_context(), "write_file", path="deep/er/new.txt", content="x")
    assert again.text == "Overwrote deep/er/new.txt: 1 line, 1 character."


async def test_write_file_is_atomic_and_keeps_the_mode(toolbox, make_context, workspace):
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o750)
    await call(toolbox, make_context(), "write_file", path="run.sh", content="#!/bin/sh\necho new\n")
    assert script.read_text().endswith("echo new\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(p.name for p in workspace.iterdir()) == ["run.sh"]  # no temp file left behind


async def test_write_file_failure_keeps_the_old_file(toolbox, make_context, workspace, monkeypatch):
    target = workspace / "keep.txt"
    target.write_text("precious\n")

    def broken_replace(src, dst, **dir_fds):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("xun.agent.tools.builtin.os.replace", broken_replace)
    outcome = await call(toolbox, make_context(), "write_file", path="keep.txt", content="new")
    assert outcome.is_error and "No space left on device" in outcome.text
    assert target.read_text() == "precious\n"
    assert sorted(p.name for p in workspace.iterdir()) == ["keep.txt"]


async def test_write_file_refuses_folders_and_xun_state(toolbox, make_context, workspace):
    (workspace / "dir").mkdir()
    (workspace / ".xun").mkdir()
    ctx = make_context()
    folder = await call(toolbox, ctx, "write_file", path="dir", content="x")
    assert folder.is_error and "is a folder" in folder.text
    state = await call(toolbox, ctx, "write_file", path=".xun/config.toml", content="auto_confirm = true\n")
    assert state.is_error and "xun's own state folder" in state.text
    assert not (workspace / ".xun" / "config.toml").exists()


async def test_write_confirmation_shows_the_resolved_path_and_a_diff(toolbox, make_context, workspace):
    (workspace / "cfg.ini").write_text("a = 1\nb = 2\n")
    confirmer = Confirmer(Decision.ALLOW_ONCE)
    ctx = make_context(auto_confirm=False, confirm=confirmer)
    outcome = await call(toolbox, ctx, "write_file", path="./cfg.ini", content="a = 1\nb = 3\n")
    assert not outcome.is_error
    [request] = confirmer.requests
    resolved = (workspace / "cfg.ini").resolve()
    assert request.tool == "write_file" and request.kind == "diff" and request.path == resolved
    assert request.title == f"Overwrite {resolved} (+1 -1 lines)"
    assert "--- a/cfg.ini\n+++ b/cfg.ini" in request.preview
    assert "\n-b = 2\n+b = 3" in request.preview


async def test_write_confirmation_for_a_new_file_shows_the_content(toolbox, make_context, workspace):
    confirmer = Confirmer(Decision.DENY)
    ctx = make_context(auto_confirm=False, confirm=confirmer)
    outcome = await call(toolbox, ctx, "write_file", path="new/file.txt", content="hello\x1b[2Jworld\n")
    assert outcome.is_error and outcome.denied
    [request] = confirmer.requests
    assert request.kind == "new_file"
    assert request.title == f"Create {(workspace / 'new/file.txt').resolve()} (1 line, 15 characters)"
    assert request.preview == "hello\\x1b[2Jworld\n"  # escape codes are shown, never obeyed
    assert not (workspace / "new").exists()


async def test_write_without_a_way_to_ask_is_refused(toolbox, make_context, workspace):
    outcome = await call(toolbox, make_context(auto_confirm=False), "write_file", path="x.txt", content="x")
    assert outcome.is_error and "needs the user's confirmation" in outcome.text
    assert not (workspace / "x.txt").exists()


# ------------------------------------------------------------------------- extract_compacted_tool_result


async def test_extract_compacted_tool_result(toolbox, make_context):
    ctx = make_context(conversation=ReclaimedResults({"call_7": "the original output"}))
    found = await call(toolbox, ctx, "extract_compacted_tool_result", toolcall_id="call_7")
    assert (found.text, found.is_error) == ("the original output", False)
    missing = await call(toolbox, ctx, "extract_compacted_tool_result", toolcall_id="call_8")
    assert missing.is_error and missing.text.startswith("[Error] no compacted tool result has the ID 'call_8'")
    empty = await call(toolbox, ctx, "extract_compacted_tool_result", toolcall_id="")
    assert empty.is_error
    detached = await call(toolbox, make_context(conversation=None), "extract_compacted_tool_result", toolcall_id="x")
    assert detached.is_error and "no conversation" in detached.text


async def test_extract_compacted_tool_result_reads_a_calls_reclaimed_arguments(toolbox, make_context):
    from xun.context.conversation import Conversation

    c = Conversation()
    c.add_user_message("write two files")
    for i in range(2):
        arguments = json.dumps({"path": f"f{i}.txt", "content": f"content {i} " * 100})
        c.add_agent_message(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"call_{i}", "type": "function", "function": {"name": "write_file", "arguments": arguments}}
                ],
            }
        )
        c.add_tool_result(f"call_{i}", "written")
    c.reclaim_tool_results(keep_max=1)
    shown = json.loads(c.messages[1].raw["tool_calls"][0]["function"]["arguments"])["content"]
    wanted = shown[shown.index("[Compacted, ID: ") + len("[Compacted, ID: ") :].split(". ")[0]  # as a model reads it
    found = await call(toolbox, make_context(conversation=c), "extract_compacted_tool_result", toolcall_id=wanted)
    assert wanted == "call_0:arguments" and not found.is_error
    assert json.loads(found.text) == {"path": "f0.txt", "content": "content 0 " * 100}


@pytest.mark.parametrize("name", ["read_file", "list_directory", "search_text", "extract_compacted_tool_result"])
async def test_read_only_tools_never_ask(toolbox, make_context, workspace, name):
    (workspace / "f.txt").write_text("x\n")
    confirmer = Confirmer()
    args = {
        "read_file": {"path": "f.txt"},
        "list_directory": {},
        "search_text": {"pattern": "x"},
        "extract_compacted_tool_result": {"toolcall_id": "a"},
    }[name]
    await call(toolbox, make_context(auto_confirm=False, confirm=confirmer), name, **args)
    assert confirmer.requests == []
