"""The API key never reaches the output, the session, the offload log or any other file under .xun/."""

from __future__ import annotations

import secrets

from .helpers import Cli, sample_text


def test_the_api_key_appears_nowhere(cli: Cli):
    key = "sk-test-" + secrets.token_hex(20)
    env = {"OPENAI_API_KEY": key}
    for i in range(1, 3):
        cli.write(f"part{i}.txt", sample_text(f"part {i}"))
    outputs = []
    # A command that tries to print the key; two more turns; a summary (the offload log); the listings.
    outputs.append(cli("run", "--offline", "--json", "--yes", "run `printenv OPENAI_API_KEY; env`", env=env).check(0))
    for i in range(1, 3):
        outputs.append(cli("run", "--offline", "--json", "--resume", "--", f"read part{i}.txt", env=env).check(0))
    outputs.append(cli("compact", "--offline", "--json", "--keep", "2", env=env).check(0))
    assert outputs[-1].of("summary_finished")
    outputs.append(cli("history", env=env).check(0))
    outputs.append(cli.inproc("sessions", env=env).check(0))
    outputs.append(cli.inproc("config", "show", env=env).check(0))
    assert (cli.state / "conversation_history").is_dir()
    command_result = outputs[0].of("tool_call_finished")[0]
    assert command_result["name"] == "run_command" and not command_result["is_error"]
    for result in outputs:
        assert key not in result.stdout and key not in result.stderr, result.args
        assert key[8:] not in result.stdout and key[8:] not in result.stderr
    files = [path for path in cli.state.rglob("*") if path.is_file()]
    assert len(files) >= 2
    for path in files:
        data = path.read_bytes()
        assert key.encode() not in data and key[8:].encode() not in data, path
    assert "$OPENAI_API_KEY is set (its value is never shown or stored)" in outputs[-1].stdout


def test_config_set_refuses_to_store_a_key(cli: Cli):
    result = cli.inproc("config", "set", "provider.api_key_env", "sk-" + "a1" * 20).check(2)
    assert "not the API key itself" in result.stderr or "looks like an API key" in result.stderr
    assert not (cli.state / "config.toml").exists()
    named = cli.inproc("config", "set", "provider.api_key", "whatever").check(2)
    assert "provider.api_key" in named.stderr
