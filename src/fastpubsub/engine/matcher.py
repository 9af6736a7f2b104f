"""The public matcher: subscriptions in, matching subscription ids out.

Shared by every algorithm: the dictionaries (engine/encoding.py), the
predicate table (engine/predicates.py) and the subscription handles (a dense
int32 per subscription, the entries of the clusters; ``id -> handle`` is a
hash table, ``handle -> id`` an array).  The algorithm owns the structure
subscriptions are filed in (engine/propagation.py, engine/counting.py).

Every way in goes through one vectorised insertion path (``add`` builds a
one-subscription :class:`SubscriptionBatch`), and every way out through one
batch kernel call (``match`` and ``match_batch`` build an
:class:`EventBatch`), so the fast paths are the tested paths.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from .batch import CLUSTERED, COUNTING, PROPAGATION, batch_kernel
from .clustered import ClusteredIndex
from .columnar import EventBatch, SubscriptionBatch
from .cost import CostModel, calibrated_model
from .counting import CountingIndex
from .encoding import N_KINDS, AttributeDictionary, StringDictionary, batch_from_dicts, encode_batch, field_of, number_bits
from .maintenance import Maintenance, Thresholds
from .statistics import EventStatistics, StatisticsCollector
from .hashtable import HashTable
from .idpool import IdPool, grow
from .predicates import PredicateTable, has_duplicate_attribute
from .propagation import PropagationIndex
from .semantics import KIND_BOOL, KIND_STRING, KINDS, OP_EQ, validate_predicates, validate_subscription_id

ALGORITHMS = ("counting", "propagation", "propagation-wp", "static", "dynamic")
_MAX_SETTLE_ROUNDS = 200  # maintenance rounds after new statistics, at most (dynamic)
_OBSERVE_EVERY = 4  # the online statistics sample one event batch in this many (dynamic)
ADOPT_RATIO = 1.5  # online statistics are adopted when some nu differs this much (dynamic; see below)


class Matches(NamedTuple):
    """Matches of a batch of events in CSR form: event ``i`` matched ``ids[offsets[i]:offsets[i+1]]``.

    Ids are ascending and distinct within an event.
    """

    offsets: np.ndarray  # int64 [n_events + 1]
    ids: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def split(self) -> list[np.ndarray]:
        """One array per event (views into ``ids``)."""
        if len(self) == 0:
            return []
        return np.split(self.ids, self.offsets[1:-1])


@njit(cache=True)
def _distinct_per_row(off, pids):
    """Drop repeated predicates within each subscription (``p AND p`` is ``p``)."""
    n = off.shape[0] - 1
    out = np.empty(pids.shape[0], dtype=np.int64)
    new_off = np.zeros(n + 1, dtype=np.int64)
    w = 0
    for i in range(n):
        s = w
        for j in range(off[i], off[i + 1]):
            p = pids[j]
            dup = False
            for t in range(s, w):
                if out[t] == p:
                    dup = True
                    break
            if not dup:
                out[w] = p
                w += 1
        new_off[i + 1] = w
    return new_off, out[:w]


def _check_values(what: str, batch: EventBatch | SubscriptionBatch) -> None:
    """Kind codes in range and booleans 0/1 (beyond what the batches' own ``validate`` checks)."""
    kinds = np.asarray(batch.kinds)
    if len(kinds) and (kinds.min() < 0 or kinds.max() >= len(KINDS)):
        raise ValueError(f"{what}: unknown value kind code")
    bools = np.asarray(batch.numbers)[kinds == KIND_BOOL]
    if np.any((bools != 0) & (bools != 1)):
        raise ValueError(f"{what}: boolean values must be 0 or 1")


class Matcher:
    """Content-based matcher over a set of subscriptions (Fabret et al., SIGMOD 2001).

    ``algorithm``: "counting" (section 5 baseline), "propagation" (single
    equality access predicates, section 6), "propagation-wp" (the same with
    software prefetch), "static" (section 3: greedy multi-attribute
    clustering, recomputed on every bulk load and by :meth:`reorganize`) and
    "dynamic" (section 4: the maintenance algorithm keeps the clustering
    near the best one as subscriptions and statistics change).

    ``model`` (a :class:`~engine.cost.CostModel`) defaults to the calibrated
    one; ``thresholds`` tune the dynamic maintenance (``engine/maintenance.py``).
    """

    def __init__(self, algorithm: str = "dynamic", *, model: CostModel | None = None,
                 thresholds: Thresholds | None = None, max_space: float | None = None, **scan_options: int) -> None:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
        runs = scan_options.pop("runs", 0)  # ClusteredIndex's alone; 0 is every algorithm's default
        if runs and algorithm not in ("static", "dynamic"):
            raise ValueError(f"runs (sorted clusters) is an option of static and dynamic, not of {algorithm}")
        if not isinstance(runs, (int, np.integer)) or runs < 0:
            raise ValueError(f"runs must be a non-negative integer (0: off), not {runs!r}")
        if scan_options and algorithm == "counting":
            raise ValueError(f"counting has no scan options ({', '.join(scan_options)})")
        self.algorithm = algorithm
        self.attributes = AttributeDictionary()
        self.strings = StringDictionary()
        self.preds = PredicateTable(self.strings)
        self.handles = IdPool()
        self.id_table = HashTable(width=1)
        self.handle_id = np.zeros(0, dtype=np.int64)
        self.statistics = EventStatistics.uniform()
        self._external_statistics = False
        self.collector: StatisticsCollector | None = None
        self.maintenance: Maintenance | None = None
        self._batches = 0
        if algorithm == "counting":
            self.index = CountingIndex(self.preds)
            self._kernel = batch_kernel(COUNTING)
        elif algorithm in ("static", "dynamic"):
            self.index = ClusteredIndex(self.preds, model or calibrated_model(), self._eq_probabilities, self._mu,
                                        max_space=max_space, runs=runs, **scan_options)
            self._kernel = batch_kernel(CLUSTERED, *self.index.scan_options)
            if algorithm == "dynamic":
                self.maintenance = Maintenance(self.index, thresholds)
                self.collector = StatisticsCollector()
        else:
            self.index = PropagationIndex(self.preds, prefetch=algorithm == "propagation-wp", **scan_options)
            self._kernel = batch_kernel(PROPAGATION, *self.index.scan_options)

    # -- subscriptions ---------------------------------------------------
    def __len__(self) -> int:
        return len(self.id_table)

    def __contains__(self, sub_id: object) -> bool:
        try:
            sid = validate_subscription_id(sub_id)
        except ValueError:
            return False
        return bool(self.id_table.lookup(np.array([sid], dtype=np.int64))[0] >= 0)

    def add(self, sub_id: int, predicates: list[tuple[str, str, Any]]) -> None:
        """Add one subscription; ``ValueError`` (nothing inserted) if invalid or a duplicate id."""
        sid = validate_subscription_id(sub_id)
        preds = validate_predicates(predicates)
        self.add_bulk(SubscriptionBatch.from_lists([(sid, preds)]))

    def add_bulk(self, batch: SubscriptionBatch) -> None:
        """Add many subscriptions at once (vectorised; see docs/engine.md).

        Everything is validated before anything changes: on ``ValueError``
        the matcher is as it was.
        """
        self._validate_batch(batch)
        n = len(batch)
        if n == 0:
            return
        kinds = np.asarray(batch.kinds, dtype=np.int64)
        attr = self.attributes.intern(batch.attribute_names)[np.asarray(batch.attributes, dtype=np.int64)]
        numbers = np.asarray(batch.numbers, dtype=np.float64)
        eqbits = number_bits(np.where(kinds == KIND_STRING, 0.0, numbers))
        eqbits[kinds == KIND_BOOL] = numbers[kinds == KIND_BOOL].astype(np.int64)
        if len(batch.strings):
            eqbits[kinds == KIND_STRING] = self.strings.intern(list(batch.strings))
        pids = self.preds.intern(field_of(attr, kinds), np.asarray(batch.operators, dtype=np.int8), eqbits)
        off, pids = _distinct_per_row(np.asarray(batch.offsets, dtype=np.int64), pids)
        self.preds.refcount[: self.preds.n_ids] += np.bincount(pids, minlength=self.preds.n_ids)
        handles = self.handles.take(n)
        self.id_table.insert(np.asarray(batch.ids, dtype=np.int64), handles)
        self.handle_id = grow(self.handle_id, self.handles.high, 0)
        self.handle_id[handles] = batch.ids
        if self.maintenance is not None:
            self._insert_dynamic(handles, off, pids)
        else:
            self.index.insert(handles, off, pids)
            if self.algorithm == "static" and n > 1:
                self.index.reorganize()
        self.index.store.trim()

    def _insert_dynamic(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File new subscriptions in chunks of growing size with a maintenance round after each.

        Like the paper's batch-wise loading (section 6.1, n_Sb): the tables the
        first chunks call for exist by the time later chunks arrive, which go
        straight to them instead of being moved later.
        """
        n, start, size = len(handles), 0, self.maintenance.t.refresh_changes
        while start < n:
            end = min(n, start + size)
            self.index.insert(handles[start:end], off[start : end + 1] - off[start], pids[off[start] : off[end]])
            if self.maintenance.note_changes(end - start):
                self._maintain()
            start, size = end, 2 * size

    def _validate_batch(self, batch: SubscriptionBatch) -> None:
        batch.validate()
        _check_values("SubscriptionBatch", batch)
        for s in batch.strings:
            if not isinstance(s, str):
                raise ValueError(f"SubscriptionBatch: strings must be str, got {s!r}")
        for a in batch.attribute_names:
            if not isinstance(a, str) or not a:
                raise ValueError(f"SubscriptionBatch: attribute names must be non-empty strings, got {a!r}")
        present = self.id_table.lookup(np.asarray(batch.ids, dtype=np.int64)) >= 0
        if np.any(present):
            raise ValueError(f"duplicate subscription id {int(np.asarray(batch.ids)[present][0])}")

    def remove(self, sub_id: int) -> None:
        """Remove a subscription in O(its size); ``KeyError`` if unknown."""
        try:
            sid = validate_subscription_id(sub_id)
        except ValueError:
            raise KeyError(sub_id) from None
        key = np.array([sid], dtype=np.int64)
        h = self.id_table.lookup(key)
        if h[0] < 0:
            raise KeyError(sub_id)
        self._remove_found(key, h)

    def remove_bulk(self, sub_ids: Any) -> None:
        """Remove many subscriptions in one pass over the structures (expiry at equilibrium, Fabret section 1).

        All or nothing: an unknown or repeated id raises (``KeyError`` /
        ``ValueError``) before anything changes.
        """
        ids = np.asarray(sub_ids, dtype=np.int64).reshape(-1)
        if len(ids) == 0:
            return
        ordered = np.sort(ids)
        if np.any(ordered[1:] == ordered[:-1]):
            raise ValueError("remove_bulk: repeated subscription id")
        h = self.id_table.lookup(ids)
        if np.any(h < 0):
            raise KeyError(int(ids[h < 0][0]))
        self._remove_found(ids, h)

    def _remove_found(self, ids: np.ndarray, h: np.ndarray) -> None:
        """Take out live subscriptions (distinct ids and their handles): index, predicates, id table, maintenance."""
        if self.maintenance is not None:
            self.maintenance.forget(h)
        pids = self.index.delete(h)
        self.index.predicates_freed(self.preds.decref(pids))
        self.id_table.delete(ids)
        self.handles.release(h)
        if self.maintenance is not None and self.maintenance.note_changes(len(ids)):
            self._maintain()

    # -- events ----------------------------------------------------------
    def match_encoded(self, batch: EventBatch) -> Matches:
        """Match events given as an :class:`EventBatch` (the decoder's path); CSR result."""
        batch.validate()
        _check_values("EventBatch", batch)
        names = list(batch.attribute_names)
        first = {a: i for i, a in reversed(list(enumerate(names)))}
        attrs = np.asarray(batch.attributes, dtype=np.int64)
        if len(first) < len(names):  # a name listed twice: compare events by name, not by index
            attrs = np.array([first[a] for a in names], dtype=np.int64)[attrs]
        if len(attrs) and has_duplicate_attribute(np.asarray(batch.offsets, dtype=np.int64), attrs, len(names)):
            raise ValueError("EventBatch: an event carries the same attribute twice")
        ev = encode_batch(batch, self.attributes, self.strings)
        self.preds.prepare()
        p = self.preds
        off, ids = self._kernel(ev.offsets, ev.field, ev.code, ev.eqbits, p.phase1_args(), len(p.bits),
                                self.index.state(), self.handle_id)
        if self.maintenance is not None:
            self._batches += 1
            if self._batches % _OBSERVE_EVERY == 0:
                self.collector.observe(batch)
            if self.maintenance.note_events(len(batch)):
                self._maintain()
        return Matches(off, ids)

    # -- clustering (static, dynamic) --------------------------------------
    def set_statistics(self, statistics: EventStatistics) -> None:
        """Use these event statistics in the cost model (e.g. a Spark snapshot); they win over online ones."""
        self.statistics = statistics
        self._external_statistics = True
        if isinstance(self.index, ClusteredIndex):
            if self.maintenance is not None:
                self.maintenance.statistics_changed()
                if not self.maintenance.frozen:
                    self._maintain(until_quiet=True)
            else:
                self.index.refresh_probabilities()

    def reorganize(self) -> dict:
        """Static clustering from scratch (section 3.2) with the current statistics; returns what it chose."""
        if not isinstance(self.index, ClusteredIndex):
            raise ValueError(f"reorganize() applies to the static and dynamic algorithms, not {self.algorithm!r}")
        self.index.refresh_probabilities()
        return self.index.reorganize()

    def freeze_clustering(self, frozen: bool = True) -> None:
        """Keep (or, with ``False``, stop keeping) the current hashing configuration (dynamic only).

        Frozen, the maintenance runs no rounds: no table is created or dropped,
        no subscription moves, online statistics are not adopted; a new
        subscription is still filed under the configured schema that is best
        for it.  This is the "no change" strategy Fabret et al. compare the
        dynamic one with (section 6.2.2, figure 4; ``benchmarks/equilibrium.py``).
        """
        if self.maintenance is None:
            raise ValueError(f"freeze_clustering() applies to the dynamic algorithm, not {self.algorithm!r}")
        self.maintenance.frozen = bool(frozen)

    def _maintain(self, until_quiet: bool = False) -> None:
        if self.maintenance.frozen:
            return
        t0 = time.perf_counter()
        self._adopt_online_statistics()
        self.maintenance.seconds += time.perf_counter() - t0  # the rounds add their own time
        for _ in range(_MAX_SETTLE_ROUNDS if until_quiet else 1):
            report = self.maintenance.refresh()
            if not (report["moved"] or report["created"] or report["dropped"]):
                break

    def _adopt_online_statistics(self) -> None:
        """Switch to the online statistics when they disagree with the ones in use (a shifted stream).

        Disagreement is ``ADOPT_RATIO`` for some live equality predicate, on
        probabilities plus a tenth of the uniform one of their field (1 / its
        distinct constants): a value far rarer than uniform becoming rarer
        still changes no cost worth re-planning for, and each adoption
        restarts the potential tables' votes (engine/maintenance.py).
        """
        if self._external_statistics or self.collector is None or self.collector.observed < 2000:
            return
        top = self.preds.n_ids
        live = np.flatnonzero((self.preds.refcount[:top] > 0) & (self.preds.op[:top] == OP_EQ))
        if len(live) == 0:
            return
        snapshot = self.collector.snapshot()
        old = self._eq_probabilities(live)
        current, self.statistics = self.statistics, snapshot
        new = self._eq_probabilities(live)
        field = self.preds.field[live]
        floor = 0.1 / np.bincount(field)[field]
        if np.max(np.abs(np.log((new + floor) / (old + floor)))) > np.log(ADOPT_RATIO):
            self.maintenance.statistics_changed()
        else:
            self.statistics = current

    def _eq_probabilities(self, pids: np.ndarray) -> np.ndarray:
        """nu of equality predicates under the current statistics (uniform: 1 / distinct constants of the field)."""
        field = self.preds.field[pids]
        if self.statistics.source == "uniform":
            top = self.preds.n_ids
            live = (self.preds.refcount[:top] > 0) & (self.preds.op[:top] == OP_EQ)
            distinct = np.bincount(self.preds.field[:top][live], minlength=int(field.max()) + 1)
            return 1.0 / np.maximum(distinct[field], 1)
        names = list(self.attributes.ids)
        strings = list(self.strings.ids)
        bits = self.preds.bits_value[pids]
        out = np.empty(len(pids), dtype=np.float64)
        for i, (f, b) in enumerate(zip(field.tolist(), bits.tolist())):
            kind = f % N_KINDS
            value = strings[b] if kind == KIND_STRING else bool(b) if kind == KIND_BOOL else float(np.int64(b).view(np.float64))
            out[i] = self.statistics.value_probability(names[f // N_KINDS], value)
        return np.maximum(out, 1e-12)

    def _mu(self, fields: tuple[int, ...]) -> float:
        if self.statistics.source == "uniform":
            return 1.0
        names = list(self.attributes.ids)
        return self.statistics.mu([names[f // N_KINDS] for f in fields])

    def match_batch(self, events: list[dict[str, Any]]) -> list[np.ndarray]:
        """Match a list of events (dicts); one ascending int64 id array per event."""
        return self.match_encoded(batch_from_dicts(events)).split()

    def match(self, event: dict[str, Any]) -> np.ndarray:
        """Ids of the subscriptions ``event`` satisfies, ascending."""
        return self.match_batch([event])[0]

    def stats(self) -> dict[str, Any]:
        """Sizes of the structures (predicates, clusters, hash tables, memory bytes)."""
        out: dict[str, Any] = {
            "algorithm": self.algorithm,
            "subscriptions": len(self),
            "attributes": len(self.attributes),
            "strings": len(self.strings),
            "id_hash_slots": len(self.id_table.vals),
        }
        p = self.preds.stats()
        ix = self.index.stats()
        out.update({k: v for k, v in p.items() if k != "memory_bytes"})
        out.update({k: v for k, v in ix.items() if k != "memory_bytes"})
        out["memory_bytes"] = int(p["memory_bytes"] + ix["memory_bytes"] + self.id_table.nbytes + self.handle_id.nbytes)
        if isinstance(self.index, ClusteredIndex):
            out["statistics_source"] = self.statistics.source
            out["cost_model"] = self.index.model.as_dict()
        if self.maintenance is not None:
            out["maintenance"] = self.maintenance.stats()
        return out
