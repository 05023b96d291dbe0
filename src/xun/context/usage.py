"""Model usage a person can see: the last call's tokens, the session's totals, and what they cost when
the user gave prices for the model (`pricing` in the config, per million tokens).

The totals are a plain dict kept on the conversation (saved with the session, so they survive a resume):
"calls", "prompt", "completion", and "cached_input" once the server reports cached tokens. `add_call` is
the one place they grow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Price(Protocol):
    input: float
    cached_input: float | None
    output: float


def add_call(totals: dict[str, int], prompt: int | None, completion: int | None, cached_input: int | None = None) -> bool:
    """Count one model call's reported usage; False (nothing counted) when the server reported none."""
    if prompt is None and completion is None:
        return False
    totals["calls"] = totals.get("calls", 0) + 1
    totals["prompt"] = totals.get("prompt", 0) + (prompt or 0)
    totals["completion"] = totals.get("completion", 0) + (completion or 0)
    if cached_input is not None:
        totals["cached_input"] = totals.get("cached_input", 0) + cached_input
    return True


def cost(usage: Mapping[str, Any], price: Price | None) -> float | None:
    """Dollars (or whatever unit the prices are in) for `usage`; cached input tokens, a part of the prompt
    tokens, at the cached price when one is given. None without a price."""
    if price is None:
        return None
    prompt = int(usage.get("prompt") or 0)
    cached = min(int(usage.get("cached_input") or 0), prompt) if price.cached_input is not None else 0
    uncached = prompt - cached
    return (uncached * price.input + cached * (price.cached_input or 0.0)
            + int(usage.get("completion") or 0) * price.output) / 1_000_000


def price_for(pricing: Mapping[str, Price], model: str) -> Price | None:
    return pricing.get(model)
