"""Opening a session: which model server, which conversation."""

import pytest

from xun.agent.launch import LATEST, OFFLINE_MODEL, NoSessionToResume, open_session


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("XUN_HOME", raising=False)


def test_no_key_starts_the_offline_demo_server(tmp_path):
    with open_session(tmp_path, environ={}) as session:
        assert session.offline and session.config.model.name == OFFLINE_MODEL
        assert session.config.provider.base_url == session.offline_server.base_url
        assert "offline demo model" in session.describe_provider()
    assert session.offline_server is None  # closed


async def test_the_offline_demo_server_simulates_a_prompt_cache_by_default(tmp_path, monkeypatch):
    """A newcomer sees the cache share on the gauge without configuring anything: the second call of a
    session reports the prefix it shares with the first as cached, over real HTTP."""
    monkeypatch.delenv("XUN_OFFLINE_CACHE_TTL", raising=False)
    with open_session(tmp_path, environ={}) as session:
        assert session.offline_server.prefix_cache is not None
        await session.agent.run("hello")
        await session.agent.run("and again")
        record = session.conversation.prompt_cache
        assert record.last_cached is not None and record.last_cached > 0
        assert 0 < session.conversation.prompt_cache.last_hit_share < 1


def test_xun_offline_cache_ttl_zero_turns_the_demo_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("XUN_OFFLINE_CACHE_TTL", "0")
    with open_session(tmp_path, environ={}) as session:
        assert session.offline_server.prefix_cache is None
    monkeypatch.setenv("XUN_OFFLINE_CACHE_TTL", "60")
    with open_session(tmp_path, environ={}) as session:
        assert session.offline_server.prefix_cache.ttl == 60


def test_a_key_means_the_configured_provider(tmp_path):
    with open_session(tmp_path, environ={"OPENAI_API_KEY": "sk-test-123"}) as session:
        assert not session.offline and session.config.provider.base_url is None


def test_offline_never_sends_the_users_key(tmp_path):
    with open_session(tmp_path, offline=True, environ={"OPENAI_API_KEY": "sk-test-secret"}) as session:
        assert session.agent.client().api_key != "sk-test-secret"
        helper = type(session.agent).inherit(session.agent)
        assert helper.client().api_key != "sk-test-secret"


async def test_resume_latest_names_the_files_it_could_not_read(tmp_path):
    """Every session file is damaged: "nothing to resume" would hide them, so the error names each one."""
    with open_session(tmp_path, environ={}) as first:
        await first.agent.run("hello")
        saved = first.save()
    saved.write_text(saved.read_text()[:40])
    with pytest.raises(NoSessionToResume, match=r"that can be read \(.*" + saved.name + r".*not valid JSON"):
        open_session(tmp_path, resume=LATEST, environ={})


async def test_resume_latest_and_by_id(tmp_path):
    with pytest.raises(NoSessionToResume):
        open_session(tmp_path, resume=LATEST, environ={})
    with open_session(tmp_path, environ={}) as first:
        await first.agent.run("hello")
        first.save()
    with open_session(tmp_path, resume=LATEST, environ={}) as again:
        assert again.conversation.conversation_id == first.conversation.conversation_id
        assert again.resumed and again.conversation.to_history()[0] == {"role": "user", "content": "hello"}
    with open_session(tmp_path, resume=first.conversation.conversation_id, environ={}) as by_id:
        assert len(by_id.conversation.messages) == len(first.conversation.messages)
    with pytest.raises(FileNotFoundError):
        open_session(tmp_path, resume="0123abcd", environ={})


def test_offload_off_keeps_originals_in_the_session(tmp_path):
    with open_session(tmp_path, overrides=["offload.enabled=false"], environ={}) as session:
        assert session.conversation.offload_dir is None


async def test_a_session_opener_reads_and_locks_the_conversation_first_then_opens_around_it(tmp_path):
    from xun.agent.opener import SessionOpener
    from xun.base.errors import SessionLocked
    from xun.context.sessions import SessionStore

    with open_session(tmp_path, environ={}) as first:
        await first.agent.run("hello")
        first.save()
        ident = first.conversation.conversation_id
    assert SessionOpener(tmp_path, environ={}).conversation() is None, "a new session has nothing to show first"
    opener = SessionOpener(
        tmp_path,
        resume=ident[:6],
        resolve=lambda store, text: next(
            info.conversation_id for info in store.list() if info.conversation_id.startswith(text)
        ),
        environ={},
    )
    conversation = opener.conversation()
    assert conversation is not None and conversation.conversation_id == ident
    assert opener.conversation() is conversation, "read once"
    with pytest.raises(SessionLocked):
        SessionStore(tmp_path).lock(ident)  # locked from the moment it is read
    with opener() as session:
        assert session.conversation is conversation and session.resumed
        assert "hello" in session.conversation.messages[-2].text
    SessionStore(tmp_path).lock(ident)  # closed: the lock is free again


async def test_a_session_that_fails_to_open_after_its_conversation_was_read_leaves_no_lock(tmp_path):
    from xun.agent.config import ConfigError
    from xun.agent.opener import SessionOpener
    from xun.context.sessions import SessionStore

    with open_session(tmp_path, environ={}) as first:
        first.save()
        ident = first.conversation.conversation_id
    (tmp_path / ".xun" / "config.toml").write_text('[auto_compact]\ntoken_threshold = "lots"\n')
    opener = SessionOpener(tmp_path, resume=LATEST, environ={})
    assert opener.conversation().conversation_id == ident
    with pytest.raises(ConfigError):
        opener()
    store = SessionStore(tmp_path)
    store.lock(ident)  # not left held by the failed opening
    store.unlock()
