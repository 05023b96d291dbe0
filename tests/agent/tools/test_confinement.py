"""Path confinement: nothing outside the workspace is read, listed, searched or written."""

from __future__ import annotations

import json
import os

import pytest

from xun.agent.tools import PathOutsideWorkspace, ToolError, resolve_in_workspace


async def call(toolbox, ctx, name, **arguments):
    return await toolbox.call(name, json.dumps(arguments), ctx)


def escapes(workspace, outside):
    """Ways out of the workspace, each planted for real: (label, path the model sends)."""
    os.symlink(outside / "secret.txt", workspace / "file_link")
    os.symlink(outside, workspace / "dir_link")
    (workspace / "sub").mkdir()
    os.symlink(outside, workspace / "sub" / "parent_link")
    os.symlink(outside / "not-there-yet.txt", workspace / "dangling")
    return [
        ("dot-dot", "../outside/secret.txt"),
        ("deep dot-dot", "sub/../../outside/secret.txt"),
        ("absolute", str(outside / "secret.txt")),
        ("etc", "/etc/passwd"),
        ("home", "~/.bashrc"),
        ("symlinked file", "file_link"),
        ("symlinked folder", "dir_link/secret.txt"),
        ("symlinked parent", "sub/parent_link/secret.txt"),
        ("dangling symlink out", "dangling"),
    ]


@pytest.fixture
def planted(workspace, outside):
    return escapes(workspace, outside)


async def test_read_file_refuses_every_way_out(toolbox, make_context, planted):
    ctx = make_context()
    for label, path in planted:
        outcome = await call(toolbox, ctx, "read_file", path=path)
        assert outcome.is_error, label
        assert "outside the workspace" in outcome.text, (label, outcome.text)
        assert "top secret" not in outcome.text, label


async def test_list_and_search_refuse_ways_out(toolbox, make_context, planted, outside):
    ctx = make_context()
    for path in ("..", str(outside), "dir_link", "sub/parent_link"):
        for name, args in (("list_directory", {"path": path}), ("search_text", {"pattern": "secret", "path": path})):
            outcome = await call(toolbox, ctx, name, **args)
            assert outcome.is_error and "outside the workspace" in outcome.text, (name, path)


async def test_write_file_refuses_every_way_out(toolbox, make_context, planted, outside):
    ctx = make_context()  # auto_confirm on: confinement is not a matter of consent
    targets = [path for _, path in planted] + [
        "dir_link/new.txt",  # not yet existing, its existing ancestor is a symlink out
        "sub/parent_link/deeper/new.txt",
        "../outside/created.txt",
    ]
    for path in targets:
        outcome = await call(toolbox, ctx, "write_file", path=path, content="pwned\n")
        assert outcome.is_error and "outside the workspace" in outcome.text, (path, outcome.text)
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_confinement_is_checked_before_asking(toolbox, make_context, planted):
    asked = []

    async def confirm(request):
        asked.append(request)
        raise AssertionError("must not be asked")

    outcome = await call(
        toolbox, make_context(auto_confirm=False, confirm=confirm), "write_file", path="dir_link/x.txt", content="x"
    )
    assert outcome.is_error and "outside the workspace" in outcome.text and asked == []


async def test_paths_inside_are_fine_even_absolute_or_through_inner_links(toolbox, make_context, workspace):
    (workspace / "real").mkdir()
    (workspace / "real" / "data.txt").write_text("inside\n")
    os.symlink(workspace / "real", workspace / "alias")
    ctx = make_context()
    for path in (str(workspace / "real" / "data.txt"), "alias/data.txt", "real/../real/data.txt", "./real/data.txt"):
        outcome = await call(toolbox, ctx, "read_file", path=path)
        assert not outcome.is_error and "inside" in outcome.text, path
    written = await call(toolbox, ctx, "write_file", path="alias/new.txt", content="ok")
    assert not written.is_error and (workspace / "real" / "new.txt").read_text() == "ok"


def test_resolve_in_workspace_directly(workspace, outside):
    root = workspace.resolve()
    assert resolve_in_workspace(workspace, ".") == root
    assert resolve_in_workspace(workspace, "a/b/../c") == root / "a" / "c"
    with pytest.raises(PathOutsideWorkspace, match=r"\.\./x resolves to .* outside the workspace"):
        resolve_in_workspace(workspace, "../x")
    with pytest.raises(ToolError, match="NUL"):
        resolve_in_workspace(workspace, "a\x00b")
    with pytest.raises(ToolError, match="empty"):
        resolve_in_workspace(workspace, "  ")
    os.symlink("loop_b", workspace / "loop_a")
    os.symlink("loop_a", workspace / "loop_b")
    with pytest.raises(ToolError):
        resolve_in_workspace(workspace, "loop_a")


def test_error_messages_do_not_carry_control_characters(workspace):
    with pytest.raises(PathOutsideWorkspace) as info:
        resolve_in_workspace(workspace, "../\x1b[31mred")
    assert "\x1b" not in str(info.value) and "\\x1b[31mred" in str(info.value)


def test_a_missing_workspace_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="not available"):
        resolve_in_workspace(tmp_path / "gone", "a.txt")
