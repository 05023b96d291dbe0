"""Chat-completion keyword arguments that skip the openai SDK's request transform for the big fields.

The SDK walks every message and tool of a request (``_async_transform_recursive``) on every call, on the
event loop, before a byte is sent: about 0.7 ms per message, so a 4,000-message context froze the app for
seconds. xun's messages and tool schemas are already plain JSON, so they travel in ``extra_body``, which the
SDK merges into the body untouched; an empty placeholder keeps each key at its place, so the server receives
the same JSON body, byte for byte, as before. Everything else (retries, errors, streaming) stays the SDK's.
"""

from __future__ import annotations

from typing import Any

UNTRANSFORMED = ("messages", "tools")


def untransformed(request: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` equal on the wire to ``request``."""
    kwargs = dict(request)
    extra = dict(kwargs.pop("extra_body", None) or {})
    for key in UNTRANSFORMED:
        if key in kwargs and key not in extra:
            extra[key] = kwargs[key]
            kwargs[key] = []  # placeholder: the transform runs on nothing, the merge keeps the key's place
    if extra:
        kwargs["extra_body"] = extra
    return kwargs
