"""The public matcher (placeholder until the numba engine lands, issue #7).

This interim implementation delegates to the brute-force oracle so that the
processor can be built against the final interface; ``stats()`` says so.
"""

from __future__ import annotations

from typing import Any

from .oracle import OracleMatcher

ALGORITHMS = ("counting", "propagation", "propagation-wp", "static", "dynamic")


class Matcher(OracleMatcher):
    def __init__(self, algorithm: str = "dynamic") -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
        super().__init__()
        self.algorithm = algorithm

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["implementation"] = "interim brute-force oracle (numba engine pending)"
        return out
