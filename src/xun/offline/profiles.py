"""How the offline server imitates the servers xun meets in the real world (`--profile`).

Each profile reproduces what a real server does at the edges that matter to compaction, as measured
against the real thing: how it refuses a request longer than its window, whether streams carry usage,
and where it tells its window and counts tokens. `openai` is the default and what the tests always had.

| profile    | overflow, streamed          | overflow, not streamed                 | usage in streams | window at            | tokenize at                 |
|------------|-----------------------------|----------------------------------------|------------------|----------------------|-----------------------------|
| `openai`   | HTTP 400 context_length_exceeded | the same                          | when asked       | (nowhere)            | (none)                      |
| `llamacpp` | HTTP 200, then nothing      | HTTP 400, llama-cpp-python's words     | never            | `GET /props`         | `/tokenize`, `/extras/tokenize/count` |
| `vllm`     | HTTP 400, vLLM's words      | the same                               | when asked       | `max_model_len` in `/v1/models` | `/tokenize`       |
| `deepseek` | as `openai`                 | the same                               | when asked       | (nowhere)            | (none)                      |
| `llamacpp-server` | as `openai`          | the same                               | when asked       | `GET /props`         | `/tokenize`                 |

With `--cache-ttl`, the prompt-cache figures come in each server's shape: `usage.prompt_tokens_details.
cached_tokens` (`openai`, `vllm`), `usage.prompt_cache_hit_tokens`/`prompt_cache_miss_tokens` (`deepseek`),
`timings.cache_n` beside the final chunk or the completion (`llamacpp-server`, llama.cpp's own server), and
none at all from `llamacpp` (llama-cpp-python says nothing of its cache).

The `llamacpp` profile also refuses an assistant message whose content is null (llama-cpp-python's
request validation answers HTTP 500), so the agent's fallback to "" is tested offline too.
"""  # noqa: E501 - the table of profiles is wider than a line

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xun.offline.protocol import error_body


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    usage_in_streams: bool = True
    empty_stream_on_overflow: bool = False
    serves_props: bool = False
    tokenize: str | None = None
    """"llamacpp" (`{"content"}` -> `{"tokens"}`, and `/extras/tokenize/count`) or "vllm"."""
    window_in_models: bool = False
    rejects_null_content: bool = False
    cache_report: str | None = "openai"
    """The shape of the prompt-cache figures (see `ReplyMeta.cache_report`); None: never reported."""

    def overflow(self, window: int, prompt_tokens: int, max_tokens: int | None) -> tuple[int, dict[str, Any]]:
        """The status and body this kind of server answers to a prompt longer than its window."""
        if self.name == "llamacpp":  # llama-cpp-python reformats llama.cpp's ValueError this way
            message = (
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{prompt_tokens + (max_tokens or 0)} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            return 400, error_body(message, "invalid_request_error", "messages", "context_length_exceeded")
        if self.name == "vllm":
            message = (
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{prompt_tokens + (max_tokens or 0)} tokens ({prompt_tokens} in the messages, {max_tokens or 0} in "
                "the "
                "completion). Please reduce the length of the messages or completion."
            )
            return 400, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
        message = (
            f"This model's maximum context length is {window} tokens, but the prompt is {prompt_tokens} tokens "
            "(offline tokenizer: 4 characters per token). Reduce the length of the messages."
        )
        return 400, error_body(message, "invalid_request_error", "messages", "context_length_exceeded")


PROFILES: dict[str, Profile] = {
    "openai": Profile("openai"),
    "llamacpp": Profile(
        "llamacpp",
        usage_in_streams=False,
        empty_stream_on_overflow=True,
        serves_props=True,
        tokenize="llamacpp",
        rejects_null_content=True,
        cache_report=None,
    ),
    "vllm": Profile("vllm", tokenize="vllm", window_in_models=True),
    "deepseek": Profile("deepseek", cache_report="deepseek"),
    "llamacpp-server": Profile("llamacpp-server", serves_props=True, tokenize="llamacpp", cache_report="timings"),
}


def null_content_error(messages: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    """llama-cpp-python's answer to an assistant message with `content: null`, if there is one."""
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("content", "") is None:
            detail = (
                f"{{'type': 'string_type', 'loc': ('body', 'messages', {index}, "
                "'ChatCompletionRequestAssistantMessage', "
                "'content'), 'msg': 'Input should be a valid string', 'input': None}"
            )
            return 500, error_body(f"1 validation error:\n  {detail}", "internal_server_error")
    return None
