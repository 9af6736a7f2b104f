"""Range-heavy workloads: the interval workload interval matchers are compared on, and Wu & Yu's section 3.

Both are deterministic by seed and columnar (engine/columnar.py), like
Fabret's presets in workloads/fabret.py.

**Interval workload** (:class:`IntervalSpec`; the one HEM, TAMA, REIN and
BE-Tree report on): ``n_attributes`` numeric attributes, each subscription
``n_ranges`` ranges on distinct attributes, ``x >= lo and x <= lo + width *
span`` with ``lo`` uniform so that the range fits in the domain; events
carry ``event_attributes`` attributes (all of them by default) with values
uniform over the domain.  Defaults: 20 attributes, 10 ranges, width 30 %,
domain 0..1,000,000, events with all 20 attributes.

**Wu & Yu, section 3** (:class:`WuYuSpec`): 10 equality-only attributes
``e0..e9`` and 10 general ones ``g0..g9``; each subscription has 3 clauses:
``e0 = v``, ``e_j = v`` for a ``j`` drawn from 1..9, and one clause on
``g0`` that is ``=`` with probability 1/2 and otherwise ``<`` or ``>``
(evenly); predicate values uniform in ``[6, x]``, event values uniform in
``[6, 95]`` on every one of the 20 attributes.  The paper leaves out the
number of subscriptions and events; the benchmark chooses them
(benchmarks/workloads/intervals.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from fastpubsub.engine.semantics import KIND_NUMBER, OP_CODE
from .fabret import _distinct_columns


@dataclass(frozen=True)
class IntervalSpec:
    """The interval workload (defaults: the one interval matchers publish figures for)."""

    n_attributes: int = 20
    n_ranges: int = 10  # ranges per subscription, on distinct attributes
    width: float = 0.3  # range width, as a fraction of the domain
    domain: tuple[int, int] = (0, 1_000_000)  # inclusive
    event_attributes: int | None = None  # attributes per event (None: all)

    def __post_init__(self) -> None:
        if not 0 < self.n_ranges <= self.n_attributes:
            raise ValueError(f"{self.n_ranges} ranges do not fit on {self.n_attributes} attributes")
        if not 0.0 <= self.width <= 1.0:
            raise ValueError(f"width is a fraction of the domain in [0, 1], not {self.width}")
        if self.domain[0] > self.domain[1]:
            raise ValueError(f"empty domain {self.domain}")
        if self.event_attributes is not None and not 0 < self.event_attributes <= self.n_attributes:
            raise ValueError("event_attributes must be in 1..n_attributes")

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(f"a{i}" for i in range(self.n_attributes))


def interval_subscriptions(spec: IntervalSpec, n: int, seed: int = 0, first_id: int = 0) -> SubscriptionBatch:
    """``n`` subscriptions of ``n_ranges`` ranges ``a >= lo and a <= lo + width * span``."""
    rng = np.random.default_rng(seed)
    k = spec.n_ranges
    attrs = _distinct_columns(rng, n, k, spec.n_attributes)
    d0, d1 = spec.domain
    w = int(round(spec.width * (d1 - d0)))
    lo = rng.integers(d0, d1 - w + 1, size=(n, k))
    m = 2 * n * k
    a = np.repeat(attrs.ravel(), 2)
    ops = np.tile(np.array([OP_CODE[">="], OP_CODE["<="]], dtype=np.int8), n * k)
    vals = np.stack([lo, lo + w], axis=-1).ravel().astype(np.float64)
    return SubscriptionBatch(
        ids=np.arange(first_id, first_id + n, dtype=np.int64),
        attribute_names=spec.attribute_names,
        offsets=np.arange(0, m + 1, 2 * k, dtype=np.int64),
        attributes=a.astype(np.int32),
        operators=ops,
        kinds=np.full(m, KIND_NUMBER, dtype=np.int8),
        numbers=vals,
    )


def interval_events(spec: IntervalSpec, n: int, seed: int = 0) -> EventBatch:
    """``n`` events, values uniform over the domain."""
    rng = np.random.default_rng(seed)
    k = spec.event_attributes or spec.n_attributes
    if k == spec.n_attributes:
        attrs = np.broadcast_to(np.arange(k, dtype=np.int32), (n, k))
    else:
        attrs = _distinct_columns(rng, n, k, spec.n_attributes)
    m = n * k
    return EventBatch(
        attribute_names=spec.attribute_names,
        offsets=np.arange(0, m + 1, k, dtype=np.int64),
        attributes=np.ascontiguousarray(attrs).ravel().astype(np.int32),
        kinds=np.full(m, KIND_NUMBER, dtype=np.int8),
        numbers=rng.integers(spec.domain[0], spec.domain[1] + 1, size=m).astype(np.float64),
    )


@dataclass(frozen=True)
class WuYuSpec:
    """Wu & Yu's section 3 simulation; ``x`` is the upper end of predicate values (15..95 in the paper)."""

    x: int = 55
    eq_fraction: float = 0.5  # share of general clauses that are "="
    low: int = 6
    event_high: int = 95

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(f"e{i}" for i in range(10)) + tuple(f"g{i}" for i in range(10))


def wuyu_subscriptions(spec: WuYuSpec, n: int, seed: int = 0, first_id: int = 0) -> SubscriptionBatch:
    """``n`` subscriptions: ``e0 = v and e_j = v' and g0 op v''`` (module docstring)."""
    if spec.x < spec.low:
        raise ValueError(f"x ({spec.x}) is below the lowest predicate value ({spec.low})")
    rng = np.random.default_rng(seed)
    attrs = np.empty((n, 3), dtype=np.int32)
    attrs[:, 0] = 0
    attrs[:, 1] = rng.integers(1, 10, size=n)
    attrs[:, 2] = 10
    ops = np.empty((n, 3), dtype=np.int8)
    ops[:, :2] = OP_CODE["="]
    u = rng.random(n)
    ops[:, 2] = np.where(u < spec.eq_fraction, OP_CODE["="],
                         np.where(u < spec.eq_fraction + (1 - spec.eq_fraction) / 2, OP_CODE["<"], OP_CODE[">"]))
    vals = rng.integers(spec.low, spec.x + 1, size=(n, 3)).astype(np.float64)
    m = 3 * n
    return SubscriptionBatch(
        ids=np.arange(first_id, first_id + n, dtype=np.int64),
        attribute_names=spec.attribute_names,
        offsets=np.arange(0, m + 1, 3, dtype=np.int64),
        attributes=attrs.ravel(),
        operators=ops.ravel(),
        kinds=np.full(m, KIND_NUMBER, dtype=np.int8),
        numbers=vals.ravel(),
    )


def wuyu_events(spec: WuYuSpec, n: int, seed: int = 0) -> EventBatch:
    """``n`` events carrying all 20 attributes, values uniform in ``[low, event_high]``."""
    rng = np.random.default_rng(seed)
    m = 20 * n
    return EventBatch(
        attribute_names=spec.attribute_names,
        offsets=np.arange(0, m + 1, 20, dtype=np.int64),
        attributes=np.tile(np.arange(20, dtype=np.int32), n),
        kinds=np.full(m, KIND_NUMBER, dtype=np.int8),
        numbers=rng.integers(spec.low, spec.event_high + 1, size=m).astype(np.float64),
    )
