"""`xun config`, bad configuration (exit 2 naming file and key), and `xun sessions`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from xun.context.conversation import Conversation
from xun.context.sessions import SessionStore

from .helpers import Cli


def _show(cli: Cli, *args: str) -> dict[str, dict]:
    lines = cli.inproc("config", "show", "--json", *args).check(0).stdout.splitlines()
    return {row["key"]: row for row in map(json.loads, lines)}


def test_config_set_show_unset_and_path(cli: Cli):
    project = cli.state / "config.toml"
    user = cli.home / ".config" / "xun" / "config.toml"
    assert _show(cli)["auto_compact.token_threshold"] == {
        "key": "auto_compact.token_threshold",
        "value": 192000,
        "source": "default",
        "description": _show(cli)["auto_compact.token_threshold"]["description"],
    }

    done = cli.inproc("config", "set", "auto_compact.token_threshold", "5000").check(0)
    assert done.stdout.strip() == f"auto_compact.token_threshold = 5000  (written to {project})"
    cli.inproc("config", "set", "model.name", "llama3", "--user").check(0)
    assert 'name = "llama3"' in user.read_text()
    rows = _show(cli)
    assert rows["auto_compact.token_threshold"]["value"] == 5000
    assert rows["auto_compact.token_threshold"]["source"] == str(project)
    assert rows["model.name"] == {**rows["model.name"], "value": "llama3", "source": str(user)}
    overridden = _show(cli, "--set", "auto_compact.token_threshold=7", "--model", "other")
    assert overridden["auto_compact.token_threshold"]["value"] == 7
    assert overridden["auto_compact.token_threshold"]["source"] == "command line"
    assert overridden["model.name"]["value"] == "other"

    text = cli.inproc("config", "show", "-v").check(0).stdout
    line = next(row for row in text.splitlines() if row.startswith("auto_compact.token_threshold"))
    assert line.split() == ["auto_compact.token_threshold", "5000", str(project)]
    assert "Compact before a model call when the estimate of the request" in text
    assert "API key: $OPENAI_API_KEY is not set: xun uses the offline demo model" in text

    assert (
        cli.inproc("config", "unset", "auto_compact.token_threshold")
        .check(0)
        .stdout.startswith("auto_compact.token_threshold removed")
    )
    assert _show(cli)["auto_compact.token_threshold"]["source"] == "default"
    again = cli.inproc("config", "unset", "auto_compact.token_threshold").check(0)
    assert "is not set in" in again.stderr

    paths = cli.inproc("config", "path").check(0).stdout.splitlines()
    assert paths[0].split()[:2] == ["user", str(user)] and "(exists)" in paths[0]
    assert paths[1].split()[:2] == ["project", str(project)]
    assert cli.inproc("config", "path", "--user").check(0).stdout.strip() == str(user)
    assert cli.inproc("config", "path", "--project").check(0).stdout.strip() == str(project)


def test_config_set_of_a_trusted_key_in_an_untrusted_folder_is_refused_naming_user_and_trust(cli: Cli):
    """It would be written and then ignored (issue 25, newcomer finding 35): nothing is written, and the
    message names the two ways that work."""
    project = cli.state / "config.toml"
    for key, value in (("ui.keymap.quit", "f12"), ("provider.base_url", "http://127.0.0.1:9/v1")):
        refused = cli.inproc("config", "set", key, value).check(2)
        assert refused.stdout == "" and not project.exists(), "nothing written"
        assert f"xun: {key} not written: this folder is not trusted" in refused.stderr, refused.stderr
        assert "Add --user to set it in your user config, or run `xun trust` in" in refused.stderr
    quiet = cli.inproc("config", "set", "auto_compact.token_threshold", "5000").check(0)
    assert quiet.stderr == "", "an ordinary key needs no trust"
    user = cli.inproc("config", "set", "provider.base_url", "http://127.0.0.1:9/v1", "--user").check(0)
    assert user.stderr == "", "the user's own config is always read"
    cli.inproc("trust").check(0)
    trusted = cli.inproc("config", "set", "provider.base_url", "http://127.0.0.1:9/v1").check(0)
    assert trusted.stderr == ""


def test_config_set_errors_name_the_file_and_the_key(cli: Cli):
    project = cli.state / "config.toml"
    unknown = cli.inproc("config", "set", "auto_compact.token_treshold", "5").check(2)
    assert unknown.stderr.strip() == (
        f"xun: configuration error: {project}: auto_compact.token_treshold: unknown key; "
        "did you mean auto_compact.token_threshold?"
    )
    trust = cli.inproc("config", "set", "auto_confirm", "true").check(2)
    assert "auto_confirm" in trust.stderr and "project file" in trust.stderr
    cli.inproc("config", "set", "auto_confirm", "true", "--user").check(0)  # the user file may
    assert _show(cli)["auto_confirm"]["value"] is True
    assert "auto_confirm" in cli.inproc("config").check(0).stdout, "bare `xun config` shows the settings"


def test_bad_configuration_is_exit_2_naming_file_and_key(cli: Cli):
    project = cli.state / "config.toml"
    project.parent.mkdir()
    project.write_text('[auto_compact]\ntoken_threshold = "lots"\n')
    for args in (("run", "hi"), ("run", "--json", "hi"), ("config", "show")):
        result = cli(*args).check(2)  # as a real process
        assert str(project) in result.stderr and "auto_compact.token_threshold" in result.stderr, args
        assert "expected" in result.stderr and "Traceback" not in result.stderr
    project.write_text("[auto_compact\n")
    broken = cli.inproc("run", "hi").check(2)
    assert broken.stderr.startswith(f"xun: configuration error: {project}: invalid TOML at line 1")
    project.write_text("")
    bad_set = cli.inproc("run", "--set", "model.context_window=-3", "hi").check(2)
    assert "command line: model.context_window: expected" in bad_set.stderr
    assert "Traceback" in cli.inproc("run", "--debug", "--set", "nonsense", "hi").check(2).stderr
    assert cli.session_files() == []


def test_config_show_in_an_untrusted_folder_says_what_it_ignores(cli: Cli):
    """Trial F #9: `xun config`, the command one runs to see why base_url "doesn't work", said nothing of the
    keys it ignored (`xun run` does), and named the folder's file as the source of the empty keymap."""
    project = cli.write(
        ".xun/config.toml", '[provider]\nbase_url = "http://evil.example/v1"\n[ui.keymap]\nquit = "enter"\n'
    )
    said = (
        f"xun: this folder is not trusted, so its .xun/config.toml may not set provider.base_url, "
        f"ui.keymap.quit: ignored (run `xun trust` in {cli.workdir.resolve()} if you trust it)\n"
    )
    for args in (("config",), ("config", "show", "-v"), ("config", "show", "--json")):
        shown = cli.inproc(*args).check(0)
        assert shown.stderr == said, args
        assert str(project) not in shown.stdout, args
    rows = _show(cli)
    assert rows["ui.keymap"]["source"] == "default" and rows["provider.base_url"]["source"] == "default"
    cli.inproc("trust").check(0)
    trusted = cli.inproc("config").check(0)
    assert trusted.stderr == ""
    assert _show(cli)["ui.keymap"] == {**_show(cli)["ui.keymap"], "value": {"quit": "enter"}, "source": str(project)}


def test_config_set_of_an_unknown_key_names_the_whole_key(cli: Cli):
    """Trial F #9: `xun config set no.such.key 1` said `no: unknown key`."""
    project = cli.state / "config.toml"
    refused = cli.inproc("config", "set", "no.such.key", "1").check(2)
    assert refused.stderr == f"xun: configuration error: {project}: no.such.key: unknown key\n"
    moved = cli.inproc("config", "set", "auto_compat.token_threshold", "1").check(2)
    assert moved.stderr == (
        f"xun: configuration error: {project}: auto_compat.token_threshold: unknown key; "
        "did you mean auto_compact.token_threshold?\n"
    )
    assert not project.exists()


def test_a_bad_keymap_is_exit_2_and_a_taken_key_a_warning(cli: Cli):
    """Trial F #28: `summarise = "f11"` (no such id) and `help = "notakey"` were listed without a word, and
    the app started with F1 unbound."""
    user = cli.home / ".config" / "xun" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[ui.keymap]\nreclaim = "f10"\nsummarise = "f11"\nhelp = "notakey"\n')
    bad = cli.inproc("config").check(2)
    assert bad.stdout == ""
    assert (
        f"xun: configuration error: {user}: ui.keymap.summarise: unknown binding id; did you mean compact?"
        in bad.stderr
    )
    assert "The ids are help, toggle_side, compact, reclaim, preview" in bad.stderr
    assert f"xun: configuration error: {user}: ui.keymap.help: 'notakey' is not a key name" in bad.stderr
    user.write_text('[ui.keymap]\nreclaim = "f5"\n')
    taken = cli.inproc("config").check(0)
    assert taken.stderr == (
        "xun: warning: ui.keymap.reclaim takes 'f5' from compact (Summarise), which has no key "
        "then (Ctrl+P still runs it; give it one with ui.keymap.compact)\n"
    )


def test_sessions_lists_newest_first_and_names_unreadable_files(cli: Cli):
    store = SessionStore(cli.workdir)
    for ident, messages in (("older", 1), ("newer", 3)):
        conversation = Conversation(conversation_id=ident)
        for i in range(messages):
            conversation.add_user_message(f"message {i}")
        store.save(conversation)
        time.sleep(0.02)
    (store.root / "broken.json").write_text('{"format_version": 1, "messa')
    store.lock("older")  # held by this process: "open" to the one below, as the app's /sessions says (trial F #33)
    result = cli("sessions").check(0)  # as a real process
    store.unlock("older")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "MESSAGES", "TOKENS", "SUMMARIES", "RECLAIMED", "OPEN", "TITLE"]
    assert [line.split()[0] for line in lines[1:]] == ["newer", "older", "broken"]
    newer = lines[1].split()
    assert newer[3] == "3" and newer[4].isdigit() and newer[5:] == ["0", "0", "message", "0"], newer
    assert lines[2].split()[5:] == ["0", "0", "open", "message", "0"], lines[2]
    assert lines[2].endswith("message 0"), "titled with the first prompt"
    # listed, not left out (issue 25, newcomer finding 36): in the table, with why and where
    assert lines[3].split(None, 1)[1].startswith("cannot read: not valid JSON"), lines[3]
    assert lines[3].endswith(f"the file may be truncated or corrupt ({store.root / 'broken.json'})"), lines[3]
    assert result.stderr == ""
    listed = cli.inproc("sessions", "--json").check(0)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["messages"]) for r in rows] == [("newer", 3), ("older", 1)]
    assert f"cannot read session file {store.root / 'broken.json'}: not valid JSON" in listed.stderr
    # ids: a unique prefix works, an ambiguous one is refused
    cli("run", "--resume", "new", "--", "hello").check(0)
    assert json.loads(cli.inproc("sessions", "--json").stdout.splitlines()[0])["messages"] == 5
    store.save(Conversation(conversation_id="newest"))
    ambiguous = cli.inproc("history", "new").check(2)
    assert "ambiguous" in ambiguous.stderr and "newer" in ambiguous.stderr and "newest" in ambiguous.stderr
    assert cli.inproc("history", "newer").returncode == 0  # an exact id is never ambiguous


def test_sessions_when_there_are_none(cli: Cli):
    result = cli.inproc("sessions").check(0)
    assert result.stdout == "" and "no saved sessions in" in result.stderr


def test_sessions_lists_a_corrupt_file_when_it_is_the_only_one(cli: Cli):
    store = SessionStore(cli.workdir)
    store.root.mkdir(parents=True)
    (store.root / "cut.json").write_text('{"format_version": 2, "conversation_id": "cut", "messages": [')
    lines = cli.inproc("sessions").check(0).stdout.splitlines()
    assert lines[0].startswith("ID") and lines[1].startswith("cut  cannot read: "), lines


def test_a_corrupt_session_file_is_a_failure_naming_the_file(cli: Cli):
    store = SessionStore(cli.workdir)
    store.root.mkdir(parents=True)
    (store.root / "bad.json").write_text("{ not json")
    for args in (("run", "--resume", "bad", "hi"), ("compact", "bad")):
        result = cli.inproc(*args).check(1)
        assert result.stderr.startswith(f"xun: cannot load the session: {store.root / 'bad.json'}: not valid JSON"), (
            result.stderr
        )
        assert len(result.stderr.strip().splitlines()) == 1
    assert (store.root / "bad.json").read_text() == "{ not json"  # left as it was


def test_bare_config_shows_the_settings_and_a_closed_pipe_is_not_an_error(cli: Cli):
    bare = cli("config").check(0)
    assert bare.stdout == cli("config", "show").check(0).stdout and "auto_compact.token_threshold" in bare.stdout
    for i in range(3):
        cli("run", f"hello {i}").check(0)
    # `xun sessions --json | head -1`: the reader goes away early
    reader = subprocess.run(
        f"{sys.executable} -m xun sessions --json | head -c 10",
        shell=True,
        cwd=cli.workdir,
        env=cli.environment(None),
        capture_output=True,
        text=True,
    )
    assert reader.returncode == 0 and "Broken pipe" not in reader.stderr, reader.stderr


def test_the_offline_address_names_its_source(cli: Cli):
    from xun.agent.config import describe_config
    from xun.agent.launch import open_session

    session = open_session(cli.workdir, environ={})
    try:
        items = {item.key: item for item in describe_config(session.config)}
        assert items["provider.base_url"].source == "the offline demo server (no API key)"
        session.config.set_here("auto_compact.mode", "off", "chosen in the app (this session only)")
        assert describe_config(session.config)[0].key and session.config.source_of("auto_compact.mode").startswith(
            "chosen"
        )
    finally:
        session.close()
