"""Times read back from files xun did not necessarily write last (a session, its compaction log)."""

from __future__ import annotations

import math

LATEST_TIME = 253402300799.0
"""The last second of the year 9999: `time.localtime` and `datetime` refuse (OverflowError) far beyond."""


def sane_timestamp(value: object, fallback: float = 0.0) -> float:
    """`value` as seconds since the epoch when it is a finite number in 0..year 9999, else `fallback`
    (a tampered `updated_at: 1e300` once broke `xun sessions` and a resume)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return fallback
    number = float(value)
    return number if math.isfinite(number) and 0.0 <= number <= LATEST_TIME else fallback
