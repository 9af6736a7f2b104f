"""Brute-force matcher: the specification every fast path is tested against.

It checks every subscription against the event with
:func:`engine.semantics.subscription_holds` (every operator, OR).  Slow on purpose: no index, no clustering,
nothing that could share a bug with the engine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fastpubsub.engine.semantics import subscription_holds, validate_event, validate_subscription, validate_subscription_id


class OracleMatcher:
    """Same interface as :class:`engine.Matcher`, evaluated naively."""

    algorithm = "oracle"

    def __init__(self) -> None:
        self._subs: dict[int, Any] = {}

    def add(self, sub_id: int, predicates: Any) -> None:
        sub_id = validate_subscription_id(sub_id)
        preds = validate_subscription(predicates)
        if sub_id in self._subs:
            raise ValueError(f"duplicate subscription id {sub_id}")
        self._subs[sub_id] = preds

    def remove(self, sub_id: int) -> None:
        del self._subs[sub_id]

    def __len__(self) -> int:
        return len(self._subs)

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._subs

    def match(self, event: dict[str, Any]) -> np.ndarray:
        event = validate_event(event)
        hits = [
            sid
            for sid, preds in self._subs.items()
            if subscription_holds(preds, event)
        ]
        return np.array(sorted(hits), dtype=np.int64)

    def match_batch(self, events: list[dict[str, Any]]) -> list[np.ndarray]:
        return [self.match(e) for e in events]

    def stats(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "subscriptions": len(self._subs),
            "predicates": sum(len(p) if isinstance(p, list) else sum(map(len, p.disjuncts))
                              for p in self._subs.values()),
        }
