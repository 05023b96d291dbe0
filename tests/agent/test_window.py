"""The context window: discovered from the server, learned from its overflow errors in every shape servers
send them, and never exceeded afterwards. Over real HTTP: the offline server's profiles, and a scripted
server that answers exactly as llama.cpp, llama-cpp-python, vLLM, LM Studio, Ollama and OpenAI do."""

from __future__ import annotations

import json
import re
import time

import pytest

from xun.agent.tools import Toolbox
from xun.agent.window import (
    TEXT,
    Calibration,
    LearnedEstimates,
    LearnedWindows,
    is_overflow_text,
    overflow_window,
    requested_tokens,
)

from .helpers import make_agent
from .scripted_server import EMPTY_STREAM, NOT_FOUND, Json, ScriptedServer, Stream, prompt_chars

WINDOW = 3000
"""The scripted server's window, in its own tokens: 4 characters of message text each."""
SUMMARY = "\n".join(
    f"## {name}\n- kept"
    for name in (
        "system_context",
        "overview",
        "key_facts",
        "user_preferences",
        "decisions",
        "pending_tasks",
        "open_questions",
        "tone_context",
    )
)


def overflow_shapes(window: int, requested: int) -> dict[str, Json | object]:
    """What each kind of server answers to a prompt of `requested` tokens over a `window`."""
    return {
        "openai": Json(
            400,
            {
                "error": {
                    "message": f"This model's maximum context length is {window} tokens. However, your "
                    f"messages resulted in {requested} tokens. Please reduce the length of the messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        ),
        "llama-cpp-python": Json(
            400,
            {
                "error": {
                    "message": f"This model's maximum context length is {window} tokens. However, "
                    f"you requested {requested} tokens ({requested} in the messages, None in the "
                    "completion). Please reduce the length of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        ),
        "llama.cpp": Json(
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": requested,
                    "n_ctx": window,
                }
            },
        ),
        "vllm": Json(
            400,
            {
                "object": "error",
                "message": f"This model's maximum context length is {window} tokens. However, you "
                f"requested {requested} tokens ({requested} in the messages, 0 in the completion). "
                "Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
        ),
        "lm studio": Json(
            400,
            {
                "error": f"Trying to keep the first {requested} tokens when context the overflows. However, the model "
                f"is loaded with context length of only {window} tokens, which is not enough. Try to load "
                "the model with a larger context length, or provide a shorter input"
            },
        ),
        "ollama": Json(
            500,
            {
                "error": {
                    "message": "the input length exceeds the context length",
                    "type": "api_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
        "llama.cpp stream": EMPTY_STREAM,
    }


NAMES_THE_WINDOW = {"openai", "llama-cpp-python", "llama.cpp", "vllm", "lm studio"}


@pytest.fixture
def scripted():
    servers: list[ScriptedServer] = []

    def start(answer) -> ScriptedServer:
        server = ScriptedServer(answer).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def refusing(shape: str, window: int = WINDOW, models: Json | None = None):
    """A server that refuses any chat request over `window` the way `shape` does, summarises on request,
    and otherwise answers "fine"."""

    def answer(method: str, path: str, body):
        if method == "GET" and path.endswith("/models") and models is not None:
            return models
        if method != "POST" or not path.endswith("/chat/completions"):
            return NOT_FOUND
        tokens = -(-prompt_chars(body) // 4)
        if tokens > window:
            reply = overflow_shapes(window, tokens)[shape]
            return (
                reply
                if (reply is not EMPTY_STREAM or body.get("stream"))
                else Json(400, {"error": {"message": "too long"}})
            )
        if "system_context" in json.dumps(body["messages"][-1]):
            return Stream([SUMMARY])
        return Stream(["fine"])

    return answer


def long_history(agent, turns: int = 4, chars: int = 4000) -> None:
    for turn in range(turns):
        agent.conversation.add_user_message(f"turn {turn}: " + "notes about the parser " * (chars // 23))
        agent.conversation.add_agent_message({"role": "assistant", "content": f"reply {turn}: understood."})


@pytest.mark.parametrize("shape", list(overflow_shapes(WINDOW, 1)))
async def test_every_overflow_shape_is_recognised_learned_compacted_and_retried_once(shape, scripted, tmp_path):
    server = scripted(refusing(shape))
    agent, rec = make_agent(server, tmp_path)
    agent.toolbox = Toolbox()  # the scripted server counts message text only
    long_history(agent)
    finished = await agent.run("and now a short question")
    assert finished.status == "ok", rec.types()
    warning = next(w.message for w in rec.of("warning") if "too long" in w.message)
    bodies = server.chat_bodies()
    over = [b for b in bodies if -(-prompt_chars(b) // 4) > WINDOW]
    assert len(over) == 1 and over[0] is bodies[0], "only the first request, which xun could not know was too long"
    if shape in NAMES_THE_WINDOW:
        assert agent.window.tokens == WINDOW and agent.window.kind == "learned"
        assert f"window {WINDOW:,} (learned from the server's error)" in warning
    else:  # nothing named: an assumed window, below what was refused
        assert agent.window.kind == "assumed" and agent.window.tokens < -(-prompt_chars(bodies[0]) // 4)
    assert LearnedWindows().get(server.base_url, agent.config.model.name).tokens == agent.window.tokens
    assert [e.trigger for e in rec.of("summary_finished")] == ["emergency"]


async def test_a_learned_window_is_kept_for_the_next_session(scripted, tmp_path):
    server = scripted(refusing("vllm"))
    first, _ = make_agent(server, tmp_path)
    first.toolbox = Toolbox()
    long_history(first)
    assert (await first.run("question")).status == "ok"
    second, rec = make_agent(server, tmp_path)
    second.toolbox = Toolbox()
    long_history(second)
    assert (await second.run("question")).status == "ok"
    assert second.window.tokens == WINDOW and "earlier session" in second.window.source
    refused = [b for b in server.chat_bodies() if -(-prompt_chars(b) // 4) > WINDOW]
    assert len(refused) == 1, "the second session never sends what the first learned cannot fit"
    assert [e.trigger for e in rec.of("summary_finished")] == ["auto"]


@pytest.mark.parametrize(
    "card, expected",
    [
        ({"id": "xun-offline", "max_model_len": 32768}, 32768),  # vLLM
        ({"id": "xun-offline", "context_length": 131072}, 131072),  # OpenRouter, LM Studio
        (
            {"id": "/models/SmolLM2.gguf", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}},
            2048,
        ),  # llama-server (its only card)
        ({"id": "other"}, None),
    ],
)
async def test_the_window_is_discovered_from_the_model_card(card, expected, scripted, tmp_path):
    cards = [card] if "meta" in card else [card, {"id": "unrelated", "context_length": 8}]
    server = scripted(refusing("openai", models=Json(200, {"object": "list", "data": cards})))
    agent, _ = make_agent(server, tmp_path)
    await agent.start_discovery()
    assert agent.window.tokens == expected
    if expected:
        assert agent.threshold == min(agent.config.auto_compact.token_threshold, int(0.8 * expected))


async def test_ollama_and_llama_cpp_say_their_window_elsewhere(scripted, tmp_path):
    def answer(method, path, body):
        if path == "/api/show":
            return Json(
                200, {"parameters": "temperature 0.7\nnum_ctx 8192", "model_info": {"llama.context_length": 131072}}
            )
        return NOT_FOUND

    agent, _ = make_agent(scripted(answer), tmp_path)
    await agent.start_discovery()
    assert agent.window.tokens == 8192 and agent.window.source == "the server's /api/show"

    def props(method, path, body):
        return Json(200, {"default_generation_settings": {"n_ctx": 4096}}) if path == "/props" else NOT_FOUND

    agent, _ = make_agent(scripted(props), tmp_path)
    await agent.start_discovery()
    assert agent.window.tokens == 4096 and agent.window.source == "the server's /props"


async def test_the_configured_window_wins_over_the_server(offline_server_factory, tmp_path):
    server = offline_server_factory(context_window=5000, profile="vllm")
    agent, _ = make_agent(server, tmp_path)
    await agent.start_discovery()
    assert agent.window.tokens == 5000 and agent.window.source == "the server's /v1/models"
    agent.config.model.context_window = 4000
    assert agent.window.tokens == 4000 and agent.window.kind == "config"


async def test_discovery_of_the_offline_profiles(offline_server_factory, tmp_path):
    agent, _ = make_agent(offline_server_factory(context_window=6000, profile="llamacpp"), tmp_path)
    await agent.start_discovery()
    assert (agent.window.tokens, agent.window.source) == (6000, "the server's /props")
    agent, _ = make_agent(offline_server_factory(context_window=6000), tmp_path)
    await agent.start_discovery()
    assert not agent.window.known  # OpenAI's API does not say


def test_the_figures_in_real_error_texts():
    texts = {
        "Requested tokens (2372) exceed context window of 2048": (2048, 2372),
        "This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (32000 in the "
        "messages, "
        "1000 in the completion).": (32768, 32000),
        '{"code":400,"message":"the request exceeds the available context size","n_prompt_tokens":5000,"n_ctx":4096}': (
            4096,
            5000,
        ),
        "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)": (7424, None),
        "Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with context "
        "length "
        "of only 7866 tokens, which is not enough.": (7866, 10136),
        "The number of tokens to keep from the initial prompt is greater than the context length.": (None, None),
    }
    for text, (window, requested) in texts.items():
        assert is_overflow_text(text), text
        assert overflow_window(text) == window, text
        assert requested_tokens(text) == requested, text
    for text in ("rate limit reached", "model not found", "n_ctx_train is 8192 but", "Invalid API key"):
        assert not is_overflow_text(text) or overflow_window(text) is None


async def test_a_prompt_too_large_for_the_window_is_never_sent(offline_server_factory, tmp_path):
    server = offline_server_factory(context_window=2000, profile="llamacpp")
    agent, rec = make_agent(server, tmp_path)
    await agent.run("hello")
    sent = server.request_count
    before = list(agent.conversation.messages)
    finished = await agent.run("word " * 4000)
    assert finished.status == "error" and finished.restored_prompt == "word " * 4000
    assert "nothing was sent" in finished.error and "window 2,000 (the server's /props" in finished.error
    assert server.request_count == sent and list(agent.conversation.messages) == before
    assert rec.of("error")[-1].detail == "ContextTooLargeError"


async def test_summaries_in_pieces_when_the_history_cannot_fit_one_request(offline_server_factory, tmp_path):
    """A session already over the window (as one stuck before this check existed): the summary goes in
    pieces that each fit, and no request the server gets is over its window."""
    server = offline_server_factory(context_window=3000, profile="vllm")
    agent, rec = make_agent(server, tmp_path)
    for turn in range(8):
        agent.conversation.add_user_message(f"turn {turn}: remember src/module_{turn}.py " + "and its notes " * 150)
        agent.conversation.add_agent_message({"role": "assistant", "content": f"noted module {turn}"})
    from xun.compact.summary import compact_conversation

    await agent.start_discovery()
    assert agent.request_tokens() > 3000
    result = await compact_conversation(agent, keep_recent=2)
    assert result.compacted, result.message
    finished = rec.of("summary_finished")[-1]
    assert finished.pieces > 1 and finished.method == "model"
    assert max(server.prompt_sizes) <= 3000
    assert "src/module_0.py" in agent.conversation.messages[0].content


async def test_a_window_too_small_for_any_summary_request_gets_xuns_own_summary(offline_server_factory, tmp_path):
    """An earlier summary already fills most of a small window: no request could carry it and a piece of
    the history, so xun writes the summary from the messages itself (none is sent), instead of failing."""
    server = offline_server_factory(
        context_window=1600, profile="vllm"
    )  # at 1,700 a summary of a fifth of the threshold fits
    agent, rec = make_agent(server, tmp_path)
    earlier = "## overview\n" + "the earlier work on src/module_old.py went on for a long time; " * 40
    agent.conversation.set_system_message_content(earlier, is_compressed=True)
    for turn in range(3):
        agent.conversation.add_user_message(f"turn {turn}: remember src/module_{turn}.py " + "and its notes " * 40)
        agent.conversation.add_agent_message({"role": "assistant", "content": f"noted module {turn}"})
    from xun.compact.summary import compact_conversation

    await agent.start_discovery()
    asked = len(server.prompt_sizes)
    result = await compact_conversation(agent, keep_recent=1)
    assert result.compacted, result.message
    finished = rec.of("summary_finished")[-1]
    assert finished.method == "extractive" and finished.pieces == 0
    assert len(server.prompt_sizes) == asked, "no summary request was sent"
    summary = agent.conversation.messages[0].content
    assert "leaves no room for a summary request" in summary and "src/module_2.py" in summary


def test_a_server_that_trickles_its_answer_cannot_hold_discovery(tmp_path):
    """A byte every 50 ms forever on every endpoint: discovery gives up within its time, window unknown."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from xun.agent.window import DISCOVERY_TIMEOUT, count_tokens_sync, discover_window_sync

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _trickle(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            while not stop.wait(0.05):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return

        do_GET = do_POST = _trickle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        started = time.monotonic()
        assert not discover_window_sync(base, "m", {}, timeout=0.5).known
        assert count_tokens_sync(base, "m", "some text", {}, timeout=0.5) is None
        assert time.monotonic() - started < 6 * (0.5 + 0.5)  # six requests, each cut at its time
        assert DISCOVERY_TIMEOUT <= 5
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def summarising(window: int, fill: bool = False):
    """A server with a `window` (4 characters of message text a token) that refuses longer requests as
    OpenAI does, answers a summary request with the eight sections (`fill`: padded to its `max_tokens`, as
    a wordy model writes) and anything else with "fine"."""

    def answer(method: str, path: str, body):
        if method != "POST" or not path.endswith("/chat/completions"):
            return NOT_FOUND
        tokens = -(-prompt_chars(body) // 4)
        if tokens > window:
            return overflow_shapes(window, tokens)["openai"]
        if "system_context" in json.dumps(body["messages"][-1]):
            limit = body.get("max_tokens") or body.get("max_completion_tokens") or 0
            padding = " detail" * max(0, (4 * limit - len(SUMMARY) - 8) // 7) if fill else ""
            return Stream([SUMMARY + padding])
        return Stream(["fine"])

    return answer


def wordy(needs: int):
    """A server that writes a summary of `needs` tokens (4 characters each) whatever it is asked: cut
    off at the request's `max_tokens` (finish_reason "length") when that is less; anything else: "fine"."""

    def answer(method: str, path: str, body):
        if method != "POST" or not path.endswith("/chat/completions"):
            return NOT_FOUND
        if "system_context" in json.dumps(body["messages"][-1]):
            limit = body.get("max_tokens") or body.get("max_completion_tokens")
            if limit < needs:
                return Stream([(SUMMARY + " detail" * needs)[: 4 * limit]], finish_reason="length")
            return Stream([SUMMARY])
        return Stream(["fine"])

    return answer


def summary_requests(server) -> list[tuple[int, str]]:
    return [
        (b["max_tokens"], b["messages"][-1]["content"])
        for b in server.chat_bodies()
        if "system_context" in json.dumps(b["messages"][-1])
    ]


async def test_a_summary_cut_off_at_its_limit_is_not_asked_for_again_with_the_same_limit(scripted, tmp_path):
    """Issue 25, finding 20: a summary cut off at its `max_tokens` was asked for again with the same limit,
    and cut off again: a wasted call in every compaction. No larger limit fits (it is already SUMMARY_MAX_TOKENS),
    so xun writes its own summary at once."""
    from xun.compact.summary import SUMMARY_MAX_TOKENS, compact_conversation

    server = scripted(wordy(needs=5000))
    agent, rec = make_agent(server, tmp_path)
    agent.toolbox = Toolbox()
    long_history(agent, turns=4, chars=4000)
    result = await compact_conversation(agent, keep_recent=1)
    assert result.compacted, result.message
    assert [limit for limit, _ in summary_requests(server)] == [SUMMARY_MAX_TOKENS]
    rejected = rec.of("summary_rejected")
    assert len(rejected) == 1 and rejected[0].next == "extractive"
    assert f"token limit of {SUMMARY_MAX_TOKENS:,}" in rejected[0].reason
    assert rec.of("summary_finished")[-1].method == "extractive"


async def test_compression_max_tokens_bounds_every_summary_request(scripted, tmp_path):
    """`compression.max_tokens` is the summary's limit: its request's `max_tokens` and the limit its prompt
    states. A model that writes past it is cut off there and never asked again with more (xun writes its own)."""
    from xun.compact.summary import compact_conversation

    server = scripted(wordy(needs=5000))
    agent, rec = make_agent(server, tmp_path, compression__max_tokens=300)
    agent.toolbox = Toolbox()
    long_history(agent, turns=4, chars=4000)
    result = await compact_conversation(agent, keep_recent=1)
    assert result.compacted, result.message
    [(limit, prompt)] = summary_requests(server)
    assert limit == 300 and "Stay under 300 tokens." in prompt
    assert rec.of("summary_finished")[-1].method == "extractive"


def test_compression_max_tokens_below_the_smallest_summary_is_refused():
    from pydantic import ValidationError

    from xun.agent.config import XunConfig
    from xun.compact.summary import MIN_SUMMARY_TOKENS

    assert XunConfig.model_validate({"compression": {"max_tokens": MIN_SUMMARY_TOKENS}}).compression.max_tokens == 64
    with pytest.raises(ValidationError, match="greater than or equal to 64"):
        XunConfig.model_validate({"compression": {"max_tokens": MIN_SUMMARY_TOKENS - 1}})


@pytest.mark.parametrize("window, repeats, method", [(2000, 300, "model"), (1000, 45, "extractive")])
async def test_a_later_summary_folds_in_a_turn_too_small_to_pay_for_a_new_frame(
    window, repeats, method, scripted, tmp_path
):
    """Found against llama.cpp with a small window: one earlier turn (under the size that pays for a first
    summary's frame) was left out of every summary, and the next prompt could not be sent. A summary that
    updates an earlier one pays no new frame, so that turn is folded in and the prompt goes. In the
    smaller window no summary request fits: xun's own summary quotes that turn's prompt cut in its middle."""
    server = scripted(summarising(window))
    agent, rec = make_agent(server, tmp_path, model__context_window=window)
    agent.toolbox = Toolbox()  # the scripted server counts message text only
    agent.conversation.set_system_message_content(SUMMARY, is_compressed=True)
    earlier = "the earlier turn: " + "notes about the parser " * 52
    agent.conversation.add_user_message(earlier)
    agent.conversation.add_agent_message({"role": "assistant", "content": "noted"})
    finished = await agent.run("and now the next task: " + "check the build " * repeats)
    assert finished.status == "ok", finished.error
    summary = rec.of("summary_finished")
    assert (
        len(summary) == 1 and summary[0].condensed == 2 and summary[0].trigger == "auto" and summary[0].method == method
    )
    assert all(-(-prompt_chars(b) // 4) <= window - agent.output_reserve(window) for b in server.chat_bodies())
    if method == "extractive":
        text = agent.conversation.messages[0].content
        assert earlier[:100] in text and earlier[-100:] in text and "characters of this prompt are cut here" in text


async def test_a_summary_leaves_room_for_the_prompt_it_was_written_for(scripted, tmp_path):
    """A long prompt after a long history, in a small window: a summary as long as a quarter of the window
    would leave no room for the prompt, so the summary is asked for (and kept) shorter, and the turn goes."""
    window = 3000
    server = scripted(summarising(window, fill=True))
    agent, rec = make_agent(server, tmp_path, model__context_window=window)
    agent.toolbox = Toolbox()
    long_history(agent, turns=4, chars=4000)
    finished = await agent.run("the new task, word for word: " + "rename the parser's entry point " * 237)
    assert finished.status == "ok", finished.error
    assert rec.of("summary_finished")
    summary_limits = [
        b["max_tokens"] for b in server.chat_bodies() if "system_context" in json.dumps(b["messages"][-1])
    ]
    assert summary_limits and max(summary_limits) < window // 4
    budget = window - agent.output_reserve(window)
    assert all(-(-prompt_chars(b) // 4) <= budget for b in server.chat_bodies())


def test_each_reply_corrects_the_measure_quickly_up_and_slowly_down(tmp_path):
    """One bad calibration (a ratio far too low) is corrected by the first reply's count; a count below
    the estimate only halves the gap (an estimate too low is what sends a request over the window)."""
    measure = Calibration(tokens_per_char=0.1, fixed_tokens=30, tool_tokens=1000)
    # 4,000 characters in 5 messages, no tools: the server counted 1,025 tokens (0.25 per character)
    assert measure.estimate(4000, 5, with_tools=False) == 425
    assert measure.learn(1025, 4000, 5, with_tools=False) == pytest.approx(0.25)
    assert measure.estimate(4000, 5, with_tools=False) == 1025 and measure.replies == 1
    measure.learn(825, 4000, 5, with_tools=False)  # 0.2 per character now
    assert measure.tokens_per_char == pytest.approx(0.225)
    assert measure.learn(10, 50, 1, with_tools=False) is None, "a few words say nothing of the ratio"
    store = LearnedEstimates(tmp_path / "estimates.json")
    assert store.get("http://127.0.0.1:8080/v1", "m") is None
    assert store.remember("http://127.0.0.1:8080/v1", "m", measure) is None
    again = store.get("http://127.0.0.1:8080/v1/", "m")
    assert again == measure and store.get("http://127.0.0.1:8080/v1", "other") is None
    (tmp_path / "estimates.json").write_text(
        json.dumps(
            {"http://127.0.0.1:8080/v1 m": {"tokens_per_char": 7, "fixed_tokens": 1, "tool_tokens": 0, "replies": 1}}
        )
    )
    assert store.get("http://127.0.0.1:8080/v1", "m") is None, "a figure out of range is not believed"


async def test_a_summary_that_did_not_fit_never_switches_automatic_compaction_off(scripted, tmp_path, monkeypatch):
    """Three summaries failing because their request did not fit the window are xun's planning bug, not
    the model's failure: automatic compaction goes on. Three failing otherwise pause it."""
    from xun.compact import policy
    from xun.context.compaction_results import SummaryCompactResult

    agent, rec = make_agent(scripted(refusing("openai")), tmp_path, auto_compact__token_threshold=1000)
    long_history(agent)
    for did_not_fit, suspended in ((True, False), (False, True)):

        async def failing(*args, **kwargs):
            return SummaryCompactResult(
                SummaryCompactResult.Status.SUMMARIZE_FAILED, "Summary failed", did_not_fit=did_not_fit
            )

        monkeypatch.setattr(policy, "compact_conversation", failing)
        compactor = policy.AutoCompactor()
        for _ in range(3):
            await compactor.auto_compact(agent)
        assert compactor.paused is suspended


# ------------------------------------------------------- counted by the server before the call

TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|[^\w\s]")
"""The scripted llama-server's tokenizer: a special token, a word or one punctuation mark each (so code
costs far more tokens per character than prose, as with a real one)."""


def chatml(messages: list[dict], generation: bool = True) -> str:
    rendered = "".join(f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages)
    return rendered + ("<|im_start|>assistant\n" if generation else "")


def imitating_llama_server(usage: list[int]):
    """llama-server's counting endpoints (`/apply-template`, `/tokenize`, which refuses nothing) and its
    refusal to render a prompt that ends in an assistant's tool calls; each chat reply reports the
    prompt's tokens, appended to `usage`."""

    def answer(method: str, path: str, body):
        if path == "/apply-template":
            messages = body["messages"]
            if messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                return Json(
                    400, {"error": {"message": "Cannot continue an assistant message that contains tool calls."}}
                )
            return Json(200, {"prompt": chatml(messages)})
        if path == "/tokenize":
            return Json(200, {"tokens": list(range(len(TOKEN.findall(body["content"]))))})
        if path == "/v1/chat/completions":
            usage.append(len(TOKEN.findall(chatml(body["messages"]))))
            return Stream(
                ["Noted."], usage={"prompt_tokens": usage[-1], "completion_tokens": 2, "total_tokens": usage[-1] + 2}
            )
        return NOT_FOUND

    return answer


async def test_the_estimate_before_a_call_is_the_servers_count_of_it(scripted, tmp_path):
    """A ratio learnt on prose priced a message of code far too low (and a reply's closing framing, which
    `usage` leaves out, not at all): where the server can render and count the request, the estimate the
    window check judges before each call is its count, token for token."""
    counts: list[int] = []
    server = scripted(imitating_llama_server(counts))
    agent, rec = make_agent(server, tmp_path)
    # a measure remembered before the server's way of counting was kept: measured again, not trusted
    agent.learned_estimates.remember(server.base_url, agent.config.model.name, Calibration(0.05, 0, 0))
    code = "x[i]=f(a,b);" * 60  # 720 characters, 600 tokens
    for text in ("Please tell me about the parser and how its entry point is called " * 8, code):
        finished = await agent.run(text)
        assert finished.status == "ok", finished.error
    judged = [e.estimated_tokens for e in rec.of("usage") if e.source == "estimate"]
    assert counts[-1] > 600 and counts[-1] in judged, (judged, counts)
    assert agent.knowledge.calibration.tokenizer == "template"
    assert agent.learned_estimates.get(server.base_url, agent.config.model.name).tokenizer == "template"


def imitating_llama_cpp_python(probe_seconds: float):
    """llama-cpp-python's ways of counting: its tokenizer counts text (`/extras/tokenize/count`) and no endpoint
    renders the template, so the whole prompt is counted by a request for one token, answered here after
    `probe_seconds` (a small machine processing the prompt); a turn's stream is answered at once."""

    def answer(method: str, path: str, body):
        if path == "/extras/tokenize/count":
            return Json(200, {"count": len(TOKEN.findall(body["input"]))})
        if path == "/v1/chat/completions" and not body.get("stream"):
            time.sleep(probe_seconds)
            tokens = len(TOKEN.findall(chatml(body["messages"])))
            message = {"role": "assistant", "content": "A"}
            return Json(
                200,
                {
                    "id": "p",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1},
                },
            )
        if path == "/v1/chat/completions":
            return Stream(["Noted."])
        return NOT_FOUND

    return answer


@pytest.mark.parametrize(
    "probe_seconds, timeout, measured", [(1.0, 10.0, True), (5.0, 0.3, False)], ids=["answered", "given-up"]
)
async def test_the_probe_of_the_whole_prompt_waits_as_long_as_the_call_would(
    probe_seconds, timeout, measured, scripted, tmp_path
):
    """A loaded small machine took 32 s to answer llama-cpp-python's probe, past a deadline of its own, and the
    session went unmeasured while the call queued behind the abandoned probe anyway. The probe waits what the
    call waits for the server (`provider.timeout`): a slow answer is kept, and one slower than that is given up
    without holding the turn."""
    server = scripted(imitating_llama_cpp_python(probe_seconds))
    agent, rec = make_agent(server, tmp_path, provider__timeout=timeout)
    started = time.monotonic()
    finished = await agent.run("Please tell me about the parser and how its entry point is called " * 8)
    elapsed = time.monotonic() - started
    assert finished.status == "ok", finished.error
    probes = [body for body in server.chat_bodies() if not body.get("stream")]
    assert len(probes) == 1 and probes[0]["max_tokens"] == 1
    calibration = agent.knowledge.calibration
    assert (calibration is not None and calibration.tokenizer == TEXT) is measured, calibration
    if not measured:
        assert elapsed < probe_seconds, f"the turn waited {elapsed:.1f} s for a probe it had given up"


@pytest.mark.parametrize("reserve", [64, None], ids=["configured", "unset"])
async def test_a_configured_reply_reserve_is_the_limit_while_the_window_is_unknown(reserve, scripted, tmp_path):
    """A server that does not say its window (llama-cpp-python) got no `max_tokens` until an overflow taught
    the window, and a small model wrote replies of 1,000 tokens and more where 32 were configured. The reserve
    the user set is the reply's limit from the first request; unset, the server's own limit stands."""
    server = scripted(lambda method, path, body: Stream(["Noted."]) if path == "/v1/chat/completions" else NOT_FOUND)
    agent, _ = make_agent(server, tmp_path, model__output_reserve=reserve)
    for text in ("hello", "and again"):
        assert (await agent.run(text)).status == "ok"
    assert agent.window.tokens is None
    limits = [body.get("max_tokens") for body in server.chat_bodies()]
    assert limits == [reserve, reserve], limits


def test_a_changes_uncached_tail_is_counted_where_the_template_renders_it(scripted):
    """The tokens from the first changed message to the end, as the server renders them (a marker in that
    message's place finds where; the prefix alone ends in tool calls, which llama-server will not render)."""
    from xun.agent.window import count_tail_sync

    server = scripted(imitating_llama_server([]))
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read it."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "[Compacted, ID: c1]"},
        {"role": "user", "content": "What does it do?"},
    ]
    measure = Calibration(0.25, 3, 0, tokenizer="template")
    tail = count_tail_sync(server.base_url, "m", messages, None, {}, measure, 3)
    whole, prefix = chatml(messages), chatml(messages[:3], generation=False) + "<|im_start|>tool\n"
    assert tail == len(TOKEN.findall(whole)) - len(TOKEN.findall(prefix)) > 0


def test_an_honest_count_of_chinese_through_a_byte_level_vocabulary_is_believed():
    """A vocabulary trained on English spends two or three tokens on a Chinese character: such a count is
    honest, and disbelieving it would leave the estimate far under the truth. More tokens than the text has
    UTF-8 bytes (three a character here), with room for the framing, is not."""
    from xun.agent.window import believable_count

    text = "长会话压缩上下文" * 125  # 1,000 characters, 3,000 UTF-8 bytes
    assert believable_count(2_600, len(text), messages=1)
    assert not believable_count(2 * len(text.encode()), len(text), messages=1)
