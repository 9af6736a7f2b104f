"""The price of the bit-parallel path (engine/algorithms/bitmaps.py) against the scan of the catch-all list.

Per event, ``n`` subscriptions constraining ``F`` fields with ``R`` range
(``<`` ``<=`` ``>`` ``>=`` ``!=``) predicates between them cost:

* on the bit-parallel path::

      bitmaps = K_b0 + F * K_bf + F * ceil(n / 64) * K_bw + survivors * K_bx

  one row ORed per field (a cell row, or the missing row), then the
  survivors checked predicate by predicate; ``survivors`` is taken as
  ``SURVIVOR_SHARE * n`` (the share found on the interval workload with
  16 cells);

* in the catch-all list, scanned::

      scan = K_c * n + K_p * RANGE_NU * R

  equation 3.1's checking (``K_c`` of :class:`~engine.costmodel.model.CostModel`)
  plus what phase 1 pays for the range predicates only these subscriptions
  hold: each satisfied one is listed, its bit set and cleared (``K_p``).
  The model knows nu only for equality predicates; ``RANGE_NU`` is the
  share of a range predicate's values an event satisfies when nothing else
  is known (a uniform one-sided range: 1/2).

The catch-all moves to the bit-parallel path when ``bitmaps * MARGIN <
scan`` and back when ``bitmaps > scan`` (hysteresis, so a list near the
break-even point does not flap at every change), and only once it holds
``MIN_SUBSCRIPTIONS``: below that, the fixed cost of a second kernel call
per batch dominates.  ``K_bw`` and ``K_p`` are what ``python -m
benchmarks.workloads.intervals`` measures (it prints the values its runs imply; the
lower ends of their ranges are taken, docs/benchmarks.md, "Tuned
constants"); ``K_b0``, ``K_bf`` and
``K_bx`` are estimates of fixed costs, which decide nothing but lists near
``MIN_SUBSCRIPTIONS``: on the interval workload the two prices differ by
three orders of magnitude (docs/benchmarks.md, "Range-only subscriptions").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

#: Survivors per subscription assumed by the price (the interval workload's share, rounded up).
SURVIVOR_SHARE = 1e-4
#: Share of a range predicate's values an event satisfies, when nothing is known.
RANGE_NU = 0.5
#: The bit-parallel path must be this many times cheaper to be taken; it is left when dearer than the scan.
MARGIN = 2.0
#: Below this many subscriptions the catch-all is scanned.
MIN_SUBSCRIPTIONS = 256


@dataclass(frozen=True)
class BitmapCost:
    K_b0: float = 400.0  # ns per event: the second kernel's share of a batch call, its chunk setup and the merge
    K_bf: float = 25.0  # ns per constrained field per event: the event's row (cell search) for that field
    K_bw: float = 0.6  # ns per 64-bit word ORed (a block of every row in L2, the loops vectorised)
    K_bx: float = 60.0  # ns per survivor checked exactly
    K_p: float = 28.0  # ns per satisfied range predicate in phase 1 (listed, bit set, bit cleared)

    def bitmaps(self, n: int, fields: int) -> float:
        """Per-event cost of ``n`` subscriptions constraining ``fields`` fields on the bit-parallel path."""
        return self.K_b0 + fields * (self.K_bf + ((n + 63) // 64) * self.K_bw) + SURVIVOR_SHARE * n * self.K_bx

    def scan(self, K_c: float, n: int, range_predicates: int) -> float:
        """Per-event cost of scanning them in the catch-all list (``K_c``: the cost model's check)."""
        return K_c * n + self.K_p * RANGE_NU * range_predicates

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


#: The constants in use (module docstring: how they were obtained).
BITMAP_COST = BitmapCost()


def prefer_bitmaps(cost: BitmapCost, K_c: float, n: int, fields: int, range_predicates: int, active: bool) -> bool:
    """Whether the catch-all list should be on the bit-parallel path (with the hysteresis of the docstring)."""
    if n < MIN_SUBSCRIPTIONS:
        return False
    b, s = cost.bitmaps(n, fields), cost.scan(K_c, n, range_predicates)
    return b <= s if active else b * MARGIN < s
