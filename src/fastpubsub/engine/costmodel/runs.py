"""The price of a cluster list with a run index (ours; equation 3.1's checking term for sorted clusters).

Equation 3.1 charges ``K_c`` per subscription of every list an event
reaches.  A list of at least ``run_min`` entries (engine/structures/sorted_runs.py)
that also holds over ``INDEX_GAIN`` times as many entries as the event has
satisfied predicates is scanned through its run index (engine/kernels/scan.py,
``run_path``): per event that reaches it,

* ``K_l`` per satisfied predicate, looked up in the index (the per-cluster term);
* ``K_run`` per run found (two cache misses: its start, then its entries);
* ``K_e`` per entry of the runs found: the entries whose first column, their
  rarest equality (``order_columns``), the event satisfies -- ``n * pi`` of
  them, ``pi`` being that column's probability.

The runs found are at most one per satisfied first-column field: ``F * (1 -
exp(-n * pi / F))`` for ``F`` fields.  A run found holds ``L = n * pi /
hits`` entries on average; with a second level (engine/structures/sorted_runs.py),
a run of ``L`` entries costs ``K_s`` per word of its own index's bitmap,
AND-ed with the event's (``B`` words: the span of the equality predicate
ids over 32), and ``K_e`` per entry found, instead of ``K_e`` per entry,
which pays once ``L`` exceeds ``K_s * B / K_e`` (:meth:`RunPricing.level2_min`,
the store's threshold).  Shorter lists cost ``K_c`` per entry,
as in the paper.  So an indexed list costs about the same whatever its size,
and a table that splits it saves far less than ``K_c`` per subscription
moved: the static greedy and the dynamic maintenance price a table by what
the lists it empties and the lists it fills cost under this model
(:func:`candidate_benefits`, :func:`drop_benefits`), with one projection of
every list's size for both decisions.

``K_run`` and ``K_l`` are measured on the running machine with the other
constants (``python -m fastpubsub.engine.costmodel.calibration --save``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from ..kernels.run_lookups import LINE_IDS, RUN_AHEAD
from ..kernels.scan import INDEX_GAIN, prefetch
from .model import CostModel, load_calibration, model_path, save_calibration

#: With runs, access keys whose nu is within this factor of each other are ties when subscriptions are filed
#: (the earlier key wins): online statistics measure equal probabilities with sampling noise, and filing
#: each subscription under the one measured rarest scattered W6's indexed (a0, a1) lists over a thousand
#: short plain single-field ones, each costing a probe; a narrower tolerance still let part of the new
#: subscriptions leave the pair table.  Real improvements are larger: a table of one more field divides nu by
#: the field's distinct values.
FILING_TOLERANCE = 3.0
#: Fields whose packed predicate tuples fit in one int64 (21 bits per predicate id).
_TUPLE_BITS = 21


@dataclass(frozen=True)
class RunCosts:
    """Constants of the run index's price, nanoseconds."""

    K_run: float  # per run found: its start and its entries, two scattered cache misses
    K_l: float  # per satisfied predicate looked up in a list's run index
    K_e: float = 3.1  # per entry of a run found: its second column tested against the group's bit vector
    # per word of a run's second-level bitmap AND-ed with the event's: fitted to the whole kernel on W0 loaded in
    # chunks, where a loop over the indexes alone priced a word lower and gave a second level to runs that lose
    # with it (docs/design/clustering.md, "The second level")
    K_s: float = 3.5

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


#: Measured with ``python -m fastpubsub.engine.costmodel.calibration`` on the development machine (``K_s``: its
#: default) (docs/design/clustering.md, "The cost model"); used until a machine saves its own.
RUN_CALIBRATED = RunCosts(K_run=19.0, K_l=3.5, K_e=3.1)


def run_costs_path():
    """Saved beside the cost model (``$PUBSUB_COST_MODEL``'s directory)."""
    return model_path().with_name("run_costs.json")


def save_run_costs(costs: RunCosts):
    return save_calibration(run_costs_path(), costs)


def calibrated_run_costs() -> RunCosts:
    """This machine's saved run costs if there are some, else :data:`RUN_CALIBRATED`."""
    return load_calibration(run_costs_path(), RunCosts, RUN_CALIBRATED, "run costs")


@dataclass(frozen=True)
class RunPricing:
    """Per-event cost of cluster lists, in subscription checks (``K_c`` units), for a store with runs."""

    model: CostModel
    costs: RunCosts
    run_min: int  # clusters of this many entries keep runs (ClusterStore(runs=...))
    nsat: float  # satisfied predicates per event (run index lookups per indexed list)
    fields: float  # distinct first-column fields a list's runs spread over (F)
    level2: int | None = 0  # runs of this many entries get a second level (None: the model's own; 0: none)
    words: float = 1.0  # words of a second-level bitmap (B): the live equality predicate ids over 32

    def level2_min(self) -> int:
        """The shortest run whose second level pays: its ``L`` entries tested (``K_e`` each) cost more than the
        words of its index AND-ed with the event's (``K_s`` each).  0: no second level."""
        if self.level2 is not None:
            return int(self.level2)
        c = self.costs
        return max(2, int(np.floor(c.K_s * self.words / c.K_e)) + 1)

    def indexed(self, n: np.ndarray) -> np.ndarray:
        """Lists of ``n`` entries scanned through their run index (engine.kernels.scan.run_path)."""
        n = np.asarray(n, dtype=np.float64)
        return (n >= self.run_min) & (n > INDEX_GAIN * self.nsat)

    def list_checks(self, n: np.ndarray, pi: np.ndarray | float) -> np.ndarray:
        """Checks per event reaching a list of ``n`` entries whose first column holds with probability ``pi``."""
        n = np.asarray(n, dtype=np.float64)
        pi = np.broadcast_to(np.asarray(pi, dtype=np.float64), n.shape)
        f = max(self.fields, 1.0)
        hits = f * -np.expm1(-n * pi / f)
        m, c = self.model, self.costs
        entries = c.K_e * n * pi
        lmin = self.level2_min()
        if lmin:  # the words, and the entries whose second column holds (``pi`` again), each written
            per_run = n * pi / np.maximum(hits, 1e-12)
            entries = np.where(per_run >= lmin, hits * c.K_s * self.words + entries * pi, entries)
        by_index = (c.K_l * self.nsat + entries + c.K_run * hits) / m.K_c
        return np.where(self.indexed(n), by_index, np.maximum(n, 0.0))


def pricing_for(index, pi_rows: np.ndarray | None = None) -> RunPricing | None:
    """The run pricing of a clustered index (None when its store keeps no runs)."""
    run_min = index.store.run_min
    if not run_min:
        return None
    preds = index.preds
    fields = preds.fields_in_use()
    if len(fields) and index.presence and len(index.field_nu) >= preds.n_fields:
        nsat = float(np.sum(index.field_nu[fields]))
    else:
        nsat = float(len(fields))
    return RunPricing(index.model, index.run_costs, run_min, max(nsat, 1.0), max(nsat - 1.0, 1.0), index.level2,
                      bitmap_words(preds))


def bitmap_words(preds) -> float:
    """The words of a second-level bitmap (``B``): the live equality predicate ids over 32."""
    top = preds.n_ids
    return max(np.count_nonzero((preds.refcount[:top] > 0) & (preds.op[:top] == 0)) / 32.0, 1.0)


def level2_threshold(index) -> int:
    """The store's second-level threshold for a clustered index: :meth:`RunPricing.level2_min` (its ``level2`` if
    set), without the rest of the pricing."""
    if index.level2 is not None:
        return int(index.level2)
    probe = RunPricing(index.model, index.run_costs, index.store.run_min, 1.0, 1.0, None, bitmap_words(index.preds))
    return probe.level2_min()


def typical_pi(index) -> float:
    """The probability of a cluster's first column: the median nu of the live equality predicates.

    Columns are ordered rarest equality first (``order_columns``), so a
    list's first column is a typical equality of its subscriptions that the
    access key does not hold; the median keeps a few skewed values (W6's
    ``a0`` on 2 values) from pricing every list.
    """
    preds = index.preds
    top = preds.n_ids
    live = np.flatnonzero((preds.refcount[:top] > 0) & (preds.op[:top] == 0))
    if len(live) == 0:
        return 1.0
    index._ensure_probabilities(live)
    return float(np.median(index.pred_prob[live]))


def tuples_fit(values: np.ndarray) -> bool:
    """Predicate ids small enough to pack three into one int64."""
    return len(values) == 0 or int(np.max(values)) < (1 << _TUPLE_BITS)


def candidate_benefits(pricing: RunPricing, pi: float, row_list: np.ndarray, list_n: np.ndarray, list_nu: np.ndarray,
                       weight: np.ndarray, cur_nu: np.ndarray, e_row: np.ndarray, e_cand: np.ndarray,
                       e_nu: np.ndarray, e_tup: np.ndarray, n_cand: int) -> np.ndarray:
    """Checks per event each candidate table saves, the lists it empties against the lists it fills.

    Rows are (a sample of) subscriptions, each standing for ``weight`` of
    them, in list ``row_list`` (``list_n`` entries, reached with probability
    ``list_nu``) with nu ``cur_nu``.  ``e_*``: per (row, candidate), the
    candidate index, nu under it and the predicate tuple of the list it would
    join.  A row moves to a candidate whose nu is lower (the best clustering
    instance); the benefit of candidate ``H`` is ``sum_L nu_L (C(n_L) -
    C(n_L - m_LH)) - sum_d nu_d C(n_d)`` with ``C`` = :meth:`RunPricing.list_checks`
    and ``n_d`` the projected size of each new list.
    """
    out = np.zeros(n_cand, dtype=np.float64)
    movers = e_nu < cur_nu[e_row] * (1.0 - 1e-9)
    if not movers.any():
        return out
    r, c, nu, t = e_row[movers], e_cand[movers], e_nu[movers], e_tup[movers]
    w = weight[r]
    src = row_list[r]
    # what the lists emptied save: grouped by (candidate, source list)
    pair = c * (len(list_n) + 1) + src
    up, inv = np.unique(pair, return_inverse=True)
    m = np.bincount(inv, weights=w, minlength=len(up))
    pc, pl = up // (len(list_n) + 1), up % (len(list_n) + 1)
    n_l = list_n[pl]
    saved = list_nu[pl] * (pricing.list_checks(n_l, pi) - pricing.list_checks(np.maximum(n_l - m, 0.0), pi))
    np.add.at(out, pc, saved)
    # what the lists filled cost: grouped by (candidate, predicate tuple)
    order = np.lexsort((t, c))
    c2, t2, w2, nu2 = c[order], t[order], w[order], nu[order]
    first = np.ones(len(c2), dtype=bool)
    first[1:] = (c2[1:] != c2[:-1]) | (t2[1:] != t2[:-1])
    starts = np.flatnonzero(first)
    size = np.add.reduceat(w2, starts)
    dest_cost = nu2[starts] * pricing.list_checks(size, pi)
    np.add.at(out, c2[starts], -dest_cost)
    return out


def drop_benefits(pricing: RunPricing, pi: float, table: np.ndarray, key_n: np.ndarray, key_nu: np.ndarray,
                  fallback: np.ndarray, fallback_n: np.ndarray, fallback_nu: np.ndarray, n_tables: int) -> np.ndarray:
    """Checks per event each table saves over the lists its subscriptions would fall back to.

    Per live key of a table (``table`` its index, ``key_n`` entries, reached
    with probability ``key_nu``): ``fallback`` names the single-predicate list
    its subscriptions return to if the table goes (``fallback_n`` entries
    today, ``fallback_nu``).  The same projection as
    :func:`candidate_benefits`, read backwards: the fallback lists grow by
    what the table holds.
    """
    out = np.zeros(n_tables, dtype=np.float64)
    if len(table) == 0:
        return out
    np.add.at(out, table, -key_nu * pricing.list_checks(key_n, pi))
    pair = table * (int(fallback.max()) + 1) + fallback
    up, inv = np.unique(pair, return_inverse=True)
    inflow = np.bincount(inv, weights=key_n, minlength=len(up))
    first = np.zeros(len(up), dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    n0, nu0 = fallback_n[first], fallback_nu[first]
    grow = nu0 * (pricing.list_checks(n0 + inflow, pi) - pricing.list_checks(n0, pi))
    np.add.at(out, up // (int(fallback.max()) + 1), grow)
    return out


@njit(cache=True)
def _runs_loop(starts, column, hits, ahead):
    """Per hit run: read its start, then its first entry (two scattered misses), the next ones prefetched ahead."""
    total = 0
    n = hits.shape[0]
    for i in range(n):
        if i + 2 * ahead < n:
            prefetch(starts, hits[i + 2 * ahead])
        if i + ahead < n:
            prefetch(column, starts[hits[i + ahead]])
        total += column[starts[hits[i]]]
    return total


@njit(cache=True)
def _entries_loop(starts, column, gmask, hits, length, ahead):
    """Per hit run: ``length`` entries tested against a group bit vector (as ``run_lookups.stage_runs``)."""
    total = 0
    n = hits.shape[0]
    for i in range(n):
        if i + ahead < n:
            prefetch(column, starts[hits[i + ahead]])
        s = starts[hits[i]]
        for j in range(length):
            if gmask[column[s + j] & 0xFFFF] & (1 << (j & 15)):
                total += 1
    return total


@njit(cache=True)
def _lookup_loop(words, lookups):
    """Per satisfied predicate: one bit test in a run index row (rows of many clusters, mostly not cached)."""
    found = 0
    for i in range(lookups.shape[0]):
        p = lookups[i]
        if (words[p >> 5] >> (p & 31)) & 1:
            found += 1
    return found


def measure_run_costs(repeat: int = 5, seed: int = 0) -> RunCosts:
    """Measure ``K_run`` and ``K_l`` the way the matcher meets them, over a 512 MB arena.

    Each simulated event reaches one random cluster of 32K entries (128 KB
    of its second column, a 4 KB row of run starts) and finds 30 runs in it:
    ``K_run`` is the time per run found, its start and its entry read with
    the prefetch distance of ``run_lookups.stage_runs``.  ``K_l`` is one bit test
    per satisfied predicate in that cluster's run index (a 4 KB row).  ``K_s``
    is not measured here: a loop over second-level indexes alone priced a word
    below what the whole kernel pays (``RunCosts.K_s``).
    """
    import time

    rng = np.random.default_rng(seed)

    def best(fn) -> float:
        out = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()  # CPU time: the shared machine's other processes drop out
            fn()
            out = min(out, time.process_time() - t0)
        return out

    width, row, per_event, events = 32 << 10, 1 << 10, 30, 60_000
    column = rng.integers(0, 1000, size=128 << 20, dtype=np.int32)
    clusters = len(column) // width
    starts = (np.repeat(np.arange(clusters, dtype=np.int64) * width, row)
              + rng.integers(0, width, size=clusters * row, dtype=np.int64))
    chosen = rng.integers(0, clusters, size=events, dtype=np.int64)
    hits = (np.repeat(chosen * row, per_event) + rng.integers(0, row, size=events * per_event)).astype(np.int64)
    _runs_loop(starts, column, hits[:100], RUN_AHEAD)
    k_run = best(lambda: _runs_loop(starts, column, hits, RUN_AHEAD)) / len(hits)
    words = rng.integers(0, 1 << 32, size=clusters * row, dtype=np.uint32)
    lookups = (np.repeat(chosen * row * 32, per_event) + rng.integers(0, row * 32, size=events * per_event))
    _lookup_loop(words, lookups[:100])
    k_l = best(lambda: _lookup_loop(words, lookups)) / len(lookups)
    gmask = rng.integers(0, 1 << 16, size=1 << 16, dtype=np.int64).astype(np.uint16)
    _entries_loop(starts, column, gmask, hits[:100], 1, RUN_AHEAD)
    one = best(lambda: _entries_loop(starts, column, gmask, hits, 1, RUN_AHEAD))
    eight = best(lambda: _entries_loop(starts, column, gmask, hits, 9, RUN_AHEAD))
    k_e = max(eight - one, 0.0) / (8 * len(hits))
    del column, starts, words
    return RunCosts(K_run=k_run * 1e9, K_l=k_l * 1e9, K_e=k_e * 1e9)
