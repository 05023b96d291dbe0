"""What a failed model call was: SDK and transport errors turned into the failures the loop acts on
(retry, compact to fit, or fail with words that say why), and the figures servers put in them."""

from __future__ import annotations

import json
import math

from xun.agent.window import Window, is_overflow_text, overflow_window, requested_tokens


class TransientServerError(Exception):
    """A model call that may succeed when tried again (5xx, timeout, dropped or broken stream)."""


class EmptyStreamError(TransientServerError):
    """The server answered 200 and then sent nothing at all (how llama.cpp servers refuse an overflow)."""


class ContextOverflowError(Exception):
    """The server refused the request as longer than the model's context window."""

    def __init__(self, message: str, window: int | None = None, requested: int | None = None) -> None:
        super().__init__(message)
        self.window = window
        self.requested = requested


class ContextStillTooLongError(RuntimeError):
    """The server refused a request as too long again, after compacting to fit the window it named."""


class ContextTooLargeError(Exception):
    """Nothing was sent: the request cannot fit the model's window, even after compaction.

    `prompt` is True when the newest user message alone (with the system prompt and the tool
    definitions) is too large: the front ends give it back to the user instead of keeping it."""

    def __init__(self, needed: int, budget: int, window: Window, prompt: bool, detail: str = "") -> None:
        self.needed, self.budget, self.window, self.prompt = needed, budget, window, prompt
        what = "the prompt" if prompt else "the context"
        kept = f", less {window.tokens - budget:,} kept for the reply" if window.tokens is not None else ""
        text = (
            f"{what} does not fit the model's context window: about {needed:,} tokens are needed and "
            f"{budget:,} are available ({window.describe()}{kept})"
        )
        if prompt:
            text += "; nothing was sent. Shorten the prompt, or split it over several turns"
        super().__init__(text + (f"; {detail}" if detail else ""))


def error_text(exc: BaseException) -> str:
    """The error's message and body, where servers put their words (and figures) about an overflow."""
    body = getattr(exc, "body", None)
    try:
        body_text = json.dumps(body, ensure_ascii=False) if body is not None else ""
    except (TypeError, ValueError):
        body_text = str(body)
    return f"{exc} {body_text}"


def classify(exc: Exception) -> Exception:
    """Map SDK and transport errors to what the loop does with them: retry, compact, or fail."""
    import openai

    from xun.agent.bounded_http import ReplyRefused, cut_note

    if isinstance(exc, ReplyRefused):
        return RuntimeError(
            f"the model call failed: {exc}; the reply was dropped and the call not retried (a server "
            "that sends that sends it again)"
        )
    if isinstance(exc, openai.APIStatusError) and (note := cut_note(exc.response)):
        exc.message += note  # the status still decides what is done; the words say the body was cut
        exc.args = (exc.message,)
    if isinstance(exc, openai.APIError) and not isinstance(
        exc, (openai.APIConnectionError, openai.APIResponseValidationError)
    ):
        text = error_text(exc)
        status = getattr(exc, "status_code", None)
        if (status is None or status in (400, 413, 422) or status >= 500) and is_overflow_text(text):
            return ContextOverflowError(str(exc), window=overflow_window(text), requested=requested_tokens(text))
    if isinstance(exc, openai.BadRequestError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
            return TransientServerError(f"HTTP {exc.status_code} from the server: {exc.message}")
        return exc
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        return TransientServerError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError, UnicodeDecodeError)):
        return TransientServerError(f"the server sent a malformed stream ({exc})")
    name = type(exc).__module__
    if name.startswith(("httpx", "httpcore", "h11", "anyio")) or isinstance(exc, (ConnectionError, TimeoutError)):
        return TransientServerError(f"{type(exc).__name__}: {exc}")
    return exc


def server_unreached(exc: BaseException) -> bool:
    """Whether the server was never reached or stopped answering (no HTTP status): then where xun was
    connecting is what the user needs to know."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # (timeouts too)
        return True
    return type(exc).__module__.startswith(("httpx", "httpcore", "anyio")) or isinstance(
        exc, (ConnectionError, TimeoutError)
    )


def server_address(url: object) -> str:
    """A base URL as messages name it: scheme, host, port and path, never a user, password or query
    (they may hold a key)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(str(url))
    try:
        host, port = parts.hostname or "", parts.port
    except ValueError:
        host, port = parts.hostname or "", None
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{host}:{port}" if port else host, parts.path.rstrip("/"), "", ""))


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (`retry-after-ms` or a `Retry-After` in seconds), if it did."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name)) * scale
        except (TypeError, ValueError):  # absent, or an HTTP date (not worth parsing for a capped wait)
            continue
        if seconds >= 0 and math.isfinite(seconds):
            return seconds
    return None
