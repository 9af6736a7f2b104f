"""Fabret et al.'s workload generator (section 6.1, Table 1) and presets W0-W6.

Subscriptions and events are drawn uniformly from per-attribute integer
domains ``[l, u]``; narrowing a domain models skew.  Every subscription has
``n_P`` predicates: one *fixed* predicate on each common attribute (the first
attributes of the subscription attribute range, with the operators listed in
``fixed``) and ``n_P - len(fixed)`` *free* predicates on distinct attributes
drawn from the rest of the range.  Events carry ``n_A`` distinct attributes
out of all ``n_t`` (every attribute when ``n_A == n_t``).

Generation is vectorised numpy with a seeded ``numpy.random.Generator``, so a
(spec, n, seed) triple always yields the same batch, and 6M subscriptions take
a few seconds.  Output is the engine's columnar format.

Reading of the paper's presets (its subscripts are partly lost in print; the
operator split below is ours, the counts are the paper's):

* W0: n_t=32, n_P=5, 2 fixed, all equality, n_A=32, values 1..35.
* W1: n_P=4: fixed ``=``, ``=``, ``<=`` plus one free ``=``.
* W2: n_P=9: fixed ``=``, ``=``, five ``<=``, one ``>=`` plus one free ``=``.
* W3: subscriptions on attributes 0..15 only, n_P=5, 1 fixed; events on all 32.
* W4: as W3 on attributes 16..31.
* W5: as W0 (n_t=32, n_P=5, 2 fixed).
* W6: as W5 with the first fixed attribute skewed to 2 values, for both
  subscriptions and events.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from fastpubsub.engine.semantics import KIND_NUMBER, OP_CODE


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload of Table 1 (defaults are W0)."""

    name: str = "W0"
    n_attributes: int = 32  # n_t
    subscription_attributes: tuple[int, int] = (0, 32)  # half-open range subscriptions draw from
    n_predicates: int = 5  # n_P
    fixed: tuple[str, ...] = ("=", "=")  # operator of each fixed predicate (n_Pfix = len)
    free_operator: str = "="
    n_event_pairs: int = 32  # n_A
    domain: tuple[int, int] = (1, 35)  # [l, u], inclusive
    skew: dict[int, tuple[int, int]] = field(default_factory=dict)  # attribute -> narrowed [l, u]

    def __post_init__(self) -> None:
        lo, hi = self.subscription_attributes
        n_free = self.n_predicates - len(self.fixed)
        if not 0 <= lo < hi <= self.n_attributes:
            raise ValueError(f"{self.name}: subscription attribute range {self.subscription_attributes} is not within 0..{self.n_attributes}")
        if n_free < 0 or len(self.fixed) + n_free > hi - lo:
            raise ValueError(f"{self.name}: {self.n_predicates} predicates do not fit on {hi - lo} attributes")
        if not 0 < self.n_event_pairs <= self.n_attributes:
            raise ValueError(f"{self.name}: n_A must be in 1..n_t")
        for op in (*self.fixed, self.free_operator):
            if op not in OP_CODE:
                raise ValueError(f"{self.name}: unknown operator {op!r}")

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(f"a{i}" for i in range(self.n_attributes))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-attribute inclusive value bounds (skew applied)."""
        lower = np.full(self.n_attributes, self.domain[0], dtype=np.int64)
        upper = np.full(self.n_attributes, self.domain[1], dtype=np.int64)
        for a, (lo, hi) in self.skew.items():
            lower[a], upper[a] = lo, hi
        return lower, upper


W0 = WorkloadSpec()
PRESETS: dict[str, WorkloadSpec] = {
    "W0": W0,
    "W1": replace(W0, name="W1", n_predicates=4, fixed=("=", "=", "<=")),
    "W2": replace(W0, name="W2", n_predicates=9, fixed=("=", "=") + ("<=",) * 5 + (">=",)),
    "W3": replace(W0, name="W3", subscription_attributes=(0, 16), fixed=("=",)),
    "W4": replace(W0, name="W4", subscription_attributes=(16, 32), fixed=("=",)),
    "W5": replace(W0, name="W5"),
    "W6": replace(W0, name="W6", skew={0: (1, 2)}),
}


def _distinct_columns(rng: np.random.Generator, n: int, k: int, pool: int) -> np.ndarray:
    """``n`` rows of ``k`` distinct integers from ``range(pool)`` (rejection per column)."""
    out = np.empty((n, k), dtype=np.int32)
    for j in range(k):
        col = rng.integers(0, pool, size=n, dtype=np.int32)
        while True:
            clash = np.zeros(n, dtype=bool)
            for i in range(j):
                clash |= col == out[:, i]
            bad = np.flatnonzero(clash)
            if bad.size == 0:
                break
            col[bad] = rng.integers(0, pool, size=bad.size, dtype=np.int32)
        out[:, j] = col
    return out


def generate_subscriptions(spec: WorkloadSpec, n: int, seed: int = 0, first_id: int = 0) -> SubscriptionBatch:
    """``n`` subscriptions of ``spec`` with ids ``first_id .. first_id + n - 1``."""
    rng = np.random.default_rng(seed)
    lo, hi = spec.subscription_attributes
    n_fix = len(spec.fixed)
    n_free = spec.n_predicates - n_fix
    k = spec.n_predicates
    attrs = np.empty((n, k), dtype=np.int32)
    ops = np.empty((n, k), dtype=np.int8)
    attrs[:, :n_fix] = np.arange(lo, lo + n_fix, dtype=np.int32)
    ops[:, :n_fix] = np.array([OP_CODE[o] for o in spec.fixed], dtype=np.int8)
    if n_free:
        attrs[:, n_fix:] = lo + n_fix + _distinct_columns(rng, n, n_free, hi - lo - n_fix)
        ops[:, n_fix:] = OP_CODE[spec.free_operator]
    lower, upper = spec.bounds()
    flat_attrs = attrs.ravel()
    values = rng.integers(lower[flat_attrs], upper[flat_attrs] + 1)
    m = n * k
    return SubscriptionBatch(
        ids=np.arange(first_id, first_id + n, dtype=np.int64),
        attribute_names=spec.attribute_names,
        offsets=np.arange(0, m + 1, k, dtype=np.int64),
        attributes=flat_attrs,
        operators=ops.ravel(),
        kinds=np.full(m, KIND_NUMBER, dtype=np.int8),
        numbers=values.astype(np.float64),
    )


def generate_events(spec: WorkloadSpec, n: int, seed: int = 0) -> EventBatch:
    """``n`` events of ``spec``: ``n_A`` distinct attributes each, uniform values."""
    rng = np.random.default_rng(seed)
    k = spec.n_event_pairs
    if k == spec.n_attributes:
        attrs = np.broadcast_to(np.arange(k, dtype=np.int32), (n, k))
    else:
        attrs = _distinct_columns(rng, n, k, spec.n_attributes)
    lower, upper = spec.bounds()
    flat_attrs = np.ascontiguousarray(attrs).ravel()
    values = rng.integers(lower[flat_attrs], upper[flat_attrs] + 1)
    m = n * k
    return EventBatch(
        attribute_names=spec.attribute_names,
        offsets=np.arange(0, m + 1, k, dtype=np.int64),
        attributes=flat_attrs,
        kinds=np.full(m, KIND_NUMBER, dtype=np.int8),
        numbers=values.astype(np.float64),
    )
