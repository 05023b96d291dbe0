"""`xun history search` and `xun history --reindex`: the recall index from the command line."""

from __future__ import annotations

import json

from .helpers import Cli


def _session_with_history(cli: Cli) -> None:
    cli.write("alpha.txt", "the zanzibar configuration lives here\n" * 40)
    cli.write("beta.txt", "nothing to see\n" * 40)
    cli("run", "read alpha.txt").check(0)
    cli("run", "--resume", "--", "read beta.txt").check(0)
    cli("compact", "--toolcall", "--set", "auto_compact.toolcall_keep_max=1").check(0)


def test_search_finds_a_reclaimed_result_in_text_and_json(cli: Cli):
    _session_with_history(cli)
    text = cli.inproc("history", "search", "zanzibar").check(0)
    assert "«zanzibar»" in text.stdout and "tool" in text.stdout
    hits = cli.inproc("history", "search", "zanzibar", "--json").check(0).events
    assert hits and hits[0]["source"] == "reclaimed" and hits[0]["tool"] == "read_file"
    assert "zanzibar" in hits[0]["snippet"] and "«" not in hits[0]["snippet"]
    assert cli.inproc("history", "search", "nowhere-to-be-found", "--json").check(0).stdout == ""


def test_reindex_rebuilds_the_same_results(cli: Cli):
    _session_with_history(cli)
    before = [
        (h["session"], h["snippet"]) for h in cli.inproc("history", "search", "zanzibar", "--json").check(0).events
    ]
    (cli.state / "history.db").unlink()
    done = cli.inproc("history", "--reindex").check(0)
    assert "reindexed" in done.stdout
    after = [
        (h["session"], h["snippet"]) for h in cli.inproc("history", "search", "zanzibar", "--json").check(0).events
    ]
    assert after == before and after


def test_search_usage_errors(cli: Cli):
    assert "needs words" in cli.inproc("history", "search").check(2).stderr
    assert cli.inproc("history", "search", "x", "--limit", "0").check(2)
    assert "unexpected words" in cli.inproc("history", "abc", "def").check(2).stderr


def test_odd_queries_do_not_fail(cli: Cli):
    _session_with_history(cli)
    for query in ('"', "AND(", "zanz*", "foo-bar", "NEAR/3"):
        cli.inproc("history", "search", query, "--json").check(0)
    hit = json.loads(cli.inproc("history", "search", "configuration lives", "--json").stdout.splitlines()[0])
    assert hit["type"] == "history_hit" and hit["tool"] == "read_file"
