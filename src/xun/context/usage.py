"""Model usage a person can see: the last call's tokens, the session's totals, and what they cost when
the user gave prices for the model (`pricing` in the config, per million tokens).

The totals are a plain dict kept on the conversation (saved with the session, so they survive a resume):
"calls", "prompt", "completion", and "cached_input" once the server reports cached tokens. `add_call`, which
the agent calls after each model call (the summarizer's too), is the one place they grow. The cost:

    (prompt - cached_input) x input + cached_input x cached_input price + completion x output

per million tokens; without a `cached_input` price, cached tokens cost as input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Price(Protocol):
    input: float
    cached_input: float | None
    output: float


def add_call(
    totals: dict[str, int], prompt: int | None, completion: int | None, cached_input: int | None = None
) -> bool:
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
    return (
        uncached * price.input + cached * (price.cached_input or 0.0) + int(usage.get("completion") or 0) * price.output
    ) / 1_000_000


def price_for(pricing: Mapping[str, Price], model: str) -> Price | None:
    return pricing.get(model)


def cost_text(spent: float) -> str:
    """A cost as the front ends show it: four decimals under one unit, else two."""
    return f"${spent:,.4f}" if spent < 1 else f"${spent:,.2f}"


def usage_totals_line(totals: Mapping[str, Any], spent: float | None) -> str:
    """The session's totals in one line (`/tokens`, `xun run`): input uncached and cached, output, calls, cost."""
    prompt, cached = int(totals.get("prompt") or 0), int(totals.get("cached_input") or 0)
    calls = int(totals.get("calls") or 0)
    line = (
        f"session: {prompt - cached:,} input uncached · {cached:,} cached · {int(totals.get('completion') or 0):,} "
        "output"
        f" ({calls:,} call{'s' if calls != 1 else ''})"
    )
    return line + (f" · cost {cost_text(spent)}" if spent is not None else " · no price for the model (pricing)")
