"""Rates from cumulative counters, for live progress lines on long work."""

from __future__ import annotations

import time


class RateMeter:
    """Per-second rates of named cumulative counters since the previous tick."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._start = self._last_time = time.monotonic()
        self._last: dict[str, float] = {}

    def due(self) -> bool:
        return time.monotonic() - self._last_time >= self.interval

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def tick(self, counters: dict[str, float]) -> dict[str, float]:
        """Rates per second of each counter since the previous tick."""
        now = time.monotonic()
        dt = max(now - self._last_time, 1e-9)
        rates = {k: (v - self._last.get(k, 0)) / dt for k, v in counters.items()}
        self._last, self._last_time = dict(counters), now
        return rates


def human(n: float) -> str:
    """12345 -> '12.3k': short numbers for one-line progress."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"
