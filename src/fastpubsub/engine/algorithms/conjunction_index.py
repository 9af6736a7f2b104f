"""The static and dynamic matchers: subscriptions filed under conjunctions of equalities.

Section 3: a subscription may be filed under any *schema* (set of fields)
contained in the fields of its equality predicates; its access predicate is
then the conjunction of its equalities on that schema, reached through the
multi-attribute hash table of the schema.  Here every table lives in one
open-addressing table keyed by the predicate ids of the conjunction
(``AccessKeys.conj``): an event knows, after the predicate phase, which
equality predicate it satisfies on each field (at most one), so probing the
table of schema ``X`` is looking up the tuple of those predicates -- and an
event lacking a field of ``X`` skips ``X`` without hashing (the ``mu(H)`` of
equation 3.1).  Single-field schemas are the predicate phase's own
(``AccessKeys.pred_key``) and cost nothing extra.

* ``static`` (section 3.2): :func:`engine.costmodel.greedy.greedy_configuration`
  chooses the schemas from scratch (on every bulk load, and on demand with
  :meth:`ClusteredIndex.reorganize`) and files every subscription under its
  best one.
* ``dynamic`` (section 4): new subscriptions go to the configured schema that
  is best for them; :class:`engine.costmodel.maintenance.Maintenance` creates and drops
  schemas and moves subscriptions as clusters grow hot and statistics shift.

Matching is :func:`engine.kernels.probing.clustered_events`.  Fields stand in for the
paper's attributes (a field is an attribute and a value kind; predicates only
ever compare values of one kind).
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from ..structures.access_keys import CATCH_ALL, AccessKeys
from ..kernels.batch import clustered_kernel
from .catchall import CatchAllPath
from ..structures.cluster_store import OP_RANK, ClusterStore, order_columns
from ..structures.sorted_runs import RUN_MIN, put_live
from ..costmodel.constants import (MAX_SCHEMA, is_multi, is_presence, pack_rows, presence_field, presence_schema,
                                  unpack_rows, unpack_schema)
from ..costmodel.greedy import EqualityProfile, best_assignment, enumerate_multi, greedy_configuration
from ..costmodel.model import CostModel
from ..costmodel.maintenance import Maintenance, Thresholds
from ..costmodel.probabilities import EventProbabilities
from ..costmodel.runs import (FILING_TOLERANCE, RunCosts, calibrated_run_costs, level2_threshold, pricing_for,
                              typical_pi)
from .direct import DirectTable
from .packed import LIST_MODES, PackedLists, expected_satisfied, packed_events, use_packed
from ..structures.idpool import grow
from .index import IndexContext
from ..structures.predicates import PredicateTable
from ..kernels.probing import GROUP, PHASE1_AHEAD_FIELDS, ProbeScratch
from ..kernels.scan import LOOKAHEAD, PREFETCH_COLUMNS, UNFOLD
from ..semantics import OP_EQ
from ..costmodel.statistics import StatisticsCollector

#: Maintenance rounds after new statistics, at most (dynamic).
MAX_SETTLE_ROUNDS = 200
#: The online statistics sample one event batch in this many (dynamic).
OBSERVE_EVERY = 4


@njit(cache=True)
def equality_profile(off, pids, pred_field, pred_op, pred_prob):
    """The equality predicates of each row, sorted by field: (offsets, field, pid, prob, size)."""
    n = off.shape[0] - 1
    eq_off = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for j in range(off[i], off[i + 1]):
            if pred_op[pids[j]] == 0:
                c += 1
        eq_off[i + 1] = eq_off[i] + c
    field = np.empty(eq_off[n], dtype=np.int64)
    pid = np.empty(eq_off[n], dtype=np.int64)
    prob = np.empty(eq_off[n], dtype=np.float64)
    size = np.empty(n, dtype=np.int64)
    for i in range(n):
        w = eq_off[i]
        for j in range(off[i], off[i + 1]):
            p = pids[j]
            if pred_op[p] == 0:
                # insertion sort by (field, pid): rows are short
                t = w
                while t > eq_off[i] and (field[t - 1] > pred_field[p] or (field[t - 1] == pred_field[p] and pid[t - 1] > p)):
                    field[t], pid[t], prob[t] = field[t - 1], pid[t - 1], prob[t - 1]
                    t -= 1
                field[t], pid[t], prob[t] = pred_field[p], p, pred_prob[p]
                w += 1
        size[i] = off[i + 1] - off[i]
    return eq_off, field, pid, prob, size


@njit(cache=True)
def best_presence(off, pids, pred_field, field_nu, field_rank):
    """Per row: the field of its predicates least likely present in an event (its pivot), and that probability.

    Ties (every field at 1 under uniform statistics) go to the field with the
    smallest ``field_rank`` -- the number of predicates on it, the
    subscription database standing in for the event stream (Zhang et al.,
    section 4.1) -- then to the smallest field id.
    """
    n = off.shape[0] - 1
    best_field = np.full(n, -1, dtype=np.int64)
    best_nu = np.ones(n, dtype=np.float64)
    for i in range(n):
        bf = -1
        bn = 2.0
        br = 0.0
        for j in range(off[i], off[i + 1]):
            f = pred_field[pids[j]]
            nu = field_nu[f]
            r = field_rank[f]
            if bf < 0 or nu < bn or (nu == bn and (r < br or (r == br and f < bf))):
                bf, bn, br = f, nu, r
        best_field[i] = bf
        best_nu[i] = min(bn, 1.0)
    return best_field, best_nu


@njit(cache=True)
def access_of(off, pids, pred_field, pred_op, schema_fields):
    """Per row: its equality predicates on its schema's fields, in field order (-1 padded).

    ``schema_fields[i]`` holds the fields of row ``i``'s schema (-1 padded; all -1: catch-all).
    """
    n = off.shape[0] - 1
    access = np.full((n, schema_fields.shape[1]), -1, dtype=np.int64)
    for i in range(n):
        for m in range(schema_fields.shape[1]):
            f = schema_fields[i, m]
            if f < 0:
                break
            for j in range(off[i], off[i + 1]):
                p = pids[j]
                if pred_op[p] == 0 and pred_field[p] == f:
                    access[i, m] = p
                    break
    return access



def _sums_by(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` and the sum of ``weights`` of each (``np.unique`` with weighted counts)."""
    distinct, which = np.unique(values, return_inverse=True)
    return distinct, np.bincount(which.ravel(), weights=weights, minlength=len(distinct)).astype(np.int64)

class ClusteredIndex:
    """Subscriptions filed under single or conjunctive equality access keys (sections 3 and 4).

    ``probabilities`` gives nu of equality predicates and mu of field sets
    under the current event statistics.  ``runs`` keeps clusters of that
    many entries or more sorted into runs (engine/structures/sorted_runs.py; the
    matcher's factory passes ``RUN_MIN`` unless told ``runs=0``, the paper's
    plain clusters), and the cost model then prices indexed lists
    (engine/costmodel/runs.py).  ``level2``: runs of at least that many
    entries get a second level (0: none); ``None``, the default, lets the cost
    model choose the length from which it pays (``RunPricing.level2_min``).  This
    class files new subscriptions under the configured schema best for each;
    :class:`StaticIndex` and :class:`DynamicIndex` decide the configuration.
    """

    def __init__(self, preds: PredicateTable, model: CostModel, probabilities: EventProbabilities, *,
                 prefetch_columns: int = PREFETCH_COLUMNS, unfold: int = UNFOLD, lookahead: int = LOOKAHEAD,
                 max_space: float | None = None, runs: int = 0, presence: bool = True, catch_all: str = "auto",
                 lists: str = "auto", run_costs: RunCosts | None = None, level2: int | None = None) -> None:
        self.preds = preds
        self.model = model
        self.run_costs = run_costs or calibrated_run_costs()
        self.filing_tolerance = FILING_TOLERANCE if runs else 1.0  # nu this close is a tie (engine/costmodel/runs.py)
        self.probabilities = probabilities
        self.max_space = max_space
        self.keys = AccessKeys()
        self.level2 = level2
        self._level2_ids = 0  # predicate ids when the store's second-level threshold was last set
        self.store = ClusterStore(runs=runs)
        self.scan_options = (prefetch_columns, unfold, lookahead)
        self._kernel = clustered_kernel(*self.scan_options)
        self.schemas = np.zeros(0, dtype=np.int64)  # configured multi-field schemas (packed, sorted)
        self.sch_fields = np.zeros((0, MAX_SCHEMA), dtype=np.int64)
        self.pred_prob = np.zeros(0, dtype=np.float64)  # nu of each equality predicate id
        self.presence = bool(presence)
        self.field_nu = np.ones(0, dtype=np.float64)  # P(event carries the field), for presence keys
        self._field_known = np.zeros(0, dtype=bool)
        self._prob_known = np.zeros(0, dtype=bool)
        self.eq_of_field = np.full(0, -1, dtype=np.int64)
        self.gmask = np.zeros(0, dtype=np.uint32)  # stage_runs' group bit vector (all zero between batches)
        self.matches_per_event = 0.0  # of the last batch matched: sizes the next batch's output
        # filed subscriptions whose first column is not an equality (each flagged by handle): while there are
        # none, the run index is looked up for an event's satisfied equalities only
        self.first_not_eq = np.zeros(0, dtype=np.uint8)
        self.n_first_not_eq = 0
        self.moved = 0  # subscriptions re-filed since creation
        self.reorganize_seconds = 0.0
        self.handles_high = 0
        # the catch-all list on the bit-parallel path when its price says so (engine/algorithms/catchall.py)
        self.catch_all = CatchAllPath(preds, model.K_c, self, mode=catch_all)
        # short lists packed into one block each, over thousands of fields (engine/algorithms/packed.py)
        self.lists = lists
        self.direct = DirectTable(preds)
        self.packed = PackedLists(self.store, self.direct)
        self._satisfied = (-1, None, 0.0)  # (live predicates, statistics, expected satisfied inequalities) of the choice

    def packs(self) -> bool:
        """Whether matching takes the packed lists (engine/algorithms/packed.py); the expected count of satisfied inequality
        predicates it weighs is refreshed when the live predicates change by an eighth or the statistics change."""
        if self.lists != "auto" or self.preds.n_fields < PHASE1_AHEAD_FIELDS:
            return use_packed(self.lists, self.preds.n_fields, 0.0)
        n, stats, sat = self._satisfied
        live, current = self.preds.n_live, self.probabilities.statistics
        if current is not stats or 8 * abs(live - n) > n:
            sat = expected_satisfied(self.preds, self.field_nu if self.presence else np.ones(0))
            self._satisfied = (live, current, sat)
        return use_packed(self.lists, self.preds.n_fields, sat)

    def catch_all_members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        handles = self.members_of(np.array([CATCH_ALL]))
        off, pids = self.predicates_of(handles)
        return handles, off, pids

    def mu(self, fields: tuple[int, ...]) -> float:
        """Probability that an event carries every one of ``fields`` (equation 3.1's mu(H))."""
        return self.probabilities.mu(fields)

    # -- probabilities -----------------------------------------------------
    def refresh_probabilities(self, pids: np.ndarray | None = None) -> None:
        """nu of the given equality predicates (all live ones if None) from the current statistics."""
        top = self.preds.n_ids
        self.pred_prob = grow(self.pred_prob, top, 1.0)
        self._prob_known = grow(self._prob_known, top, False)
        everything = pids is None
        if pids is None:
            pids = np.flatnonzero((self.preds.refcount[:top] > 0) & (self.preds.op[:top] == OP_EQ))
        else:
            pids = np.unique(pids[self.preds.op[pids] == OP_EQ])
        if len(pids):
            self.pred_prob[pids] = self.probabilities.nu(pids)
            self._prob_known[pids] = True
        if everything:
            self._refresh_presence(None)

    def _refresh_presence(self, fields: np.ndarray | None) -> None:
        """P(present) of the given fields (None: every field live predicates use), the price of presence keys."""
        n = self.preds.n_fields
        if not self.presence or n == 0:
            return
        self.field_nu = grow(self.field_nu, n, 1.0)
        self._field_known = grow(self._field_known, n, False)
        if fields is None:
            fields = self.preds.fields_in_use()
        if len(fields):
            self.field_nu[fields] = self.probabilities.presence(fields)
            self._field_known[fields] = True

    def _ensure_probabilities(self, pids: np.ndarray) -> None:
        top = self.preds.n_ids
        self.pred_prob = grow(self.pred_prob, top, 1.0)
        self._prob_known = grow(self._prob_known, top, False)
        unknown = pids[~self._prob_known[pids]]
        if len(unknown):
            self.refresh_probabilities(unknown)

    def profile(self, off: np.ndarray, pids: np.ndarray) -> tuple[EqualityProfile, np.ndarray]:
        """Equality profile of subscriptions given as CSR predicate ids (and the pid of each entry).

        With presence keys on, it carries each subscription's best presence
        key (its pivot) too.
        """
        self._ensure_probabilities(pids)
        eq_off, field, pid, prob, size = equality_profile(off, pids, self.preds.field, self.preds.op, self.pred_prob)
        prof = EqualityProfile(eq_off, field, pid, prob, size)
        if self.presence and len(pids):
            n = self.preds.n_fields
            self._field_known = grow(self._field_known, n, False)
            fields = self.preds.fields_of(pids)
            unknown = fields[~self._field_known[fields]]
            if len(unknown):
                self._refresh_presence(unknown)
            top = self.preds.n_ids
            rank = np.bincount(self.preds.field[:top], weights=self.preds.refcount[:top], minlength=n)
            prof.presence_field, prof.presence_nu = best_presence(off, pids, self.preds.field, self.field_nu, rank)
            # A presence key that prunes nothing is scanned for every event like the catch-all; without any
            # equality such subscriptions go to the catch-all when its bit-parallel path is priced cheaper.
            idle = np.flatnonzero((np.diff(eq_off) == 0) & (prof.presence_nu >= 1.0))
            if len(idle) and self.catch_all.would_take(off, pids, idle):
                prof.presence_field[idle] = -1
        return prof, pid

    def config(self) -> np.ndarray:
        """Every schema subscriptions may be filed under: all single fields plus the multi ones."""
        fields = self.preds.fields_in_use(equality_only=True, live_only=False)
        return np.union1d(fields + 1, self.schemas)

    def set_schemas(self, schemas: np.ndarray) -> None:
        self.schemas = np.unique(np.asarray(schemas, dtype=np.int64))
        self.sch_fields = unpack_rows(self.schemas)

    # -- filing ------------------------------------------------------------
    def file(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray, schemas: np.ndarray) -> None:
        """File subscriptions (distinct predicate ids in CSR) under the given packed schemas (negative: presence)."""
        schemas = np.asarray(schemas, dtype=np.int64)
        pres = is_presence(schemas)
        access = access_of(off, pids, self.preds.field, self.preds.op, unpack_rows(np.where(pres, 0, schemas)))
        self._ensure_probabilities(pids)
        ks, cols, col_off = order_columns(off, pids, self.preds.op, access, OP_RANK, self.pred_prob)
        n_members = (access >= 0).sum(axis=1)
        keys = np.full(len(handles), CATCH_ALL, dtype=np.int64)
        if np.any(pres):
            keys[pres] = self.keys.for_fields(presence_field(schemas[pres]))
        single = n_members == 1
        if np.any(single):
            keys[single] = self.keys.for_predicates(access[single, 0])
        multi = n_members >= 2
        if np.any(multi):
            keys[multi] = self.keys.for_conjunctions(access[multi])
        self.keys.incref(keys)
        clusters = self.store.clusters_for(keys, ks)
        top = self.preds.n_ids
        if self.store.run_min and 8 * abs(top - self._level2_ids) >= max(self._level2_ids, 1):
            # the runs long enough for a second level, as the live predicates price it (again once they change by
            # an eighth)
            self.store.sub_min = level2_threshold(self)
            self._level2_ids = top
        self.store.append(clusters, handles, cols, col_off)
        self.handles_high = max(self.handles_high, int(handles.max()) + 1 if len(handles) else 0)
        self._flag_first_columns(handles, ks, cols, col_off)
        self.catch_all.filed(handles, keys, off, pids)

    def take_ranges(self, handles: np.ndarray, off: np.ndarray, field: np.ndarray, op: np.ndarray,
                    value: np.ndarray) -> np.ndarray:
        """Range-only subscriptions of a batch, before their predicates are interned: the catch-all's bit-parallel
        path holds them as intervals when priced cheaper (:meth:`CatchAllPath.take_ranges`); which rows it took."""
        return self.catch_all.take_ranges(handles, off, field, op, value)

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File new subscriptions under the configured schema that is best for each (section 4)."""
        self.reference(pids)
        self.insert(handles, off, pids)
        self.store.trim()

    def reference(self, pids: np.ndarray) -> None:
        """Take one reference to each predicate of subscriptions being filed."""
        self.preds.refcount[: self.preds.n_ids] += np.bincount(pids, minlength=self.preds.n_ids)

    def insert(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File new subscriptions under the configured schema that is best for each (section 4)."""
        prof, _ = self.profile(off, pids)
        key, _, _ = best_assignment(prof, self.config(), tol=self.filing_tolerance)
        self.file(handles, off, pids, key)

    def predicates_of(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicate ids (CSR: access predicates, then columns) of filed subscriptions."""
        cols, col_off = self.store.payload(handles)
        members = self.keys.members[self.store.key_of(handles)]
        n_acc = (members >= 0).sum(axis=1)
        off = np.zeros(len(handles) + 1, dtype=np.int64)
        np.cumsum(np.diff(col_off) + n_acc, out=off[1:])
        pids = np.empty(int(off[-1]), dtype=np.int64)
        _interleave(pids, off, cols, col_off, members)
        return off, pids

    def _flag_first_columns(self, handles: np.ndarray, ks: np.ndarray, cols: np.ndarray, col_off: np.ndarray) -> None:
        """Count the filed subscriptions whose first column (``order_columns``: an equality whenever they have
        one besides their access predicates) is another operator: only those make a run index worth looking up
        for a satisfied inequality."""
        first = np.zeros(len(handles), dtype=np.uint8)
        has = ks > 0
        first[has] = self.preds.op[cols[col_off[:-1][has]]] != OP_EQ
        self.first_not_eq = grow(self.first_not_eq, self.handles_high, 0)
        self.n_first_not_eq += int(first.sum()) - int(self.first_not_eq[handles].sum())
        self.first_not_eq[handles] = first

    def unfile(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Take subscriptions out of their clusters; returns their predicate ids (CSR), references kept."""
        if len(handles):
            self.n_first_not_eq -= int(self.first_not_eq[handles].sum())
            self.first_not_eq[handles] = 0
        off, pids = self.predicates_of(handles)
        keys = self.store.key_of(handles)
        self.store.remove(handles)
        for q in self.keys.decref(keys).tolist():
            self.store.release_key(q)
        self.catch_all.unfiled(handles, keys, off, pids)
        return off, pids

    def remove_bulk(self, handles: np.ndarray) -> None:
        """Unfile subscriptions and drop their predicate references (dead access keys went with them)."""
        _, pids = self.unfile(self.catch_all.remove_ranges(handles))
        self.preds.decref(pids)

    def move(self, handles: np.ndarray, schemas: np.ndarray) -> None:
        """Re-file subscriptions under new schemas (the maintenance algorithm's moves)."""
        if len(handles) == 0:
            return
        off, pids = self.unfile(handles)
        self.file(handles, off, pids, schemas)
        self.moved += len(handles)

    def sort_tails(self, keys: np.ndarray) -> int:
        """Merge the unsorted tails of these access keys' lists into their runs (engine/structures/sorted_runs.py)."""
        return self.store.sort_tails(keys)

    def members_of(self, keys: np.ndarray) -> np.ndarray:
        """Handles filed under the given access keys."""
        return _members(np.asarray(keys, dtype=np.int64), self.store.arrays())

    def live_handles(self) -> np.ndarray:
        e = self.store.e_cluster[: self.handles_high]
        return np.flatnonzero(e >= 0)

    def key_schema(self, keys: np.ndarray) -> np.ndarray:
        """Packed schema of access keys: the fields of their predicates (0: catch-all; negative: presence)."""
        keys = np.asarray(keys, dtype=np.int64)
        members = self.keys.members[keys]
        packed = pack_rows(np.where(members >= 0, self.preds.field[np.maximum(members, 0)], -1))
        field = self.keys.key_field[keys]
        return np.where(field >= 0, presence_schema(field), packed)

    def key_nu(self, keys: np.ndarray) -> np.ndarray:
        """nu of access keys: the product of their predicates' probabilities (catch-all: 1; presence: P(present))."""
        keys = np.asarray(keys, dtype=np.int64)
        members = self.keys.members[keys]
        self._ensure_probabilities(members[members >= 0])
        nu = np.where(members >= 0, self.pred_prob[np.maximum(members, 0)], 1.0).prod(axis=1)
        field = self.keys.key_field[keys]
        pres = field >= 0
        if pres.any():
            self.field_nu = grow(self.field_nu, self.preds.n_fields, 1.0)
            nu[pres] = self.field_nu[field[pres]]
        return nu

    def live_keys(self) -> np.ndarray:
        """Access keys with at least one subscription, catch-all excluded."""
        live = np.flatnonzero(self.keys.refs[: self.keys.ids.high] > 0)
        return live[live != CATCH_ALL]

    # -- what the maintenance reads (engine/costmodel/maintenance.py) --------
    def key_refs(self, keys: np.ndarray) -> np.ndarray:
        """Subscriptions filed under each access key."""
        keys = np.asarray(keys, dtype=np.int64)
        refs = self.keys.refs
        return np.where(keys < len(refs), refs[np.minimum(keys, len(refs) - 1)], 0)

    def key_id_bound(self) -> int:
        """One more than the largest access key id in use."""
        return self.keys.ids.high

    def key_of(self, handles: np.ndarray) -> np.ndarray:
        """Access key each handle is filed under."""
        return self.store.key_of(handles)

    def best_configured(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per handle: the configured schema of smallest nu it could be filed under, and that nu (section 3.2)."""
        off, pids = self.predicates_of(handles)
        prof, _ = self.profile(off, pids)
        key, nu, _ = best_assignment(prof, self.config(), tol=self.filing_tolerance)
        return key, nu

    def potential_schemas(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every multi-field schema each handle could be filed under: (row into handles, packed schema, nu)."""
        off, pids = self.predicates_of(handles)
        prof, _ = self.profile(off, pids)
        rows, keys, nus, _, _ = enumerate_multi(prof.offsets, prof.attr, prof.value, prof.prob, MAX_SCHEMA)
        return rows, keys, nus

    def conjunction_savings(self) -> tuple[np.ndarray, np.ndarray]:
        """Per live conjunction key: its schema, and the checks per event it saves over its best single predicate."""
        live = self.live_keys()
        live = live[self.keys.members[live, 1] >= 0]
        members = self.keys.members[live]
        probs = np.where(members >= 0, self.pred_prob[np.maximum(members, 0)], np.inf)
        saved = (probs.min(axis=1) - self.key_nu(live)) * self.keys.refs[live] if len(live) else np.zeros(0)
        return self.key_schema(live), saved

    def conjunction_fallbacks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per live conjunction key: the key, its schema, and its predicate of smallest nu (the single-predicate list it falls back to)."""
        live = self.live_keys()
        live = live[self.keys.members[live, 1] >= 0]
        members = self.keys.members[live]
        probs = np.where(members >= 0, self.pred_prob[np.maximum(members, 0)], np.inf)
        fallback = members[np.arange(len(live)), np.argmin(probs, axis=1)] if len(live) else np.zeros(0, np.int64)
        return live, self.key_schema(live), fallback

    def single_keys(self, pids: np.ndarray) -> np.ndarray:
        """The single-predicate access key of each predicate (-1: none yet)."""
        pk = self.keys.pred_key
        pids = np.asarray(pids, dtype=np.int64)
        return np.where(pids < len(pk), pk[np.minimum(pids, len(pk) - 1)], -1)

    def filed_schemas(self) -> tuple[np.ndarray, np.ndarray]:
        """The packed schema of every access key holding live subscriptions, and how many each holds.  Counted per
        key, not per subscription: the statistics are sampled inside the service loop, and the schema of a million
        handles one by one stalled it for tens of milliseconds."""
        live = self.live_handles()
        if len(live) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        per_key = np.bincount(self.store.key_of(live))
        used = np.flatnonzero(per_key)
        return self.key_schema(used), per_key[used]

    # -- whole reorganisations ---------------------------------------------
    def reorganize(self) -> dict:
        """Section 3.2 from scratch: greedy configuration, then every subscription re-filed."""
        t0 = time.perf_counter()
        handles = self.live_handles()
        if len(handles) == 0:
            self.set_schemas(np.zeros(0, np.int64))
            return {"schemas": 0, "moved": 0}
        off, pids = self.unfile(handles)
        prof, _ = self.profile(off, pids)
        cfg = greedy_configuration(prof, self.mu, self.model, max_space=self.max_space, pricing=pricing_for(self),
                                   pi=typical_pi(self))
        self.set_schemas(cfg.multi)
        self.file(handles, off, pids, cfg.key)
        self.moved += len(handles)
        self.reorganize_seconds += time.perf_counter() - t0
        return {"schemas": len(cfg.multi), "moved": len(handles), "steps": cfg.steps}

    # -- matching ----------------------------------------------------------
    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Match encoded events (:func:`engine.kernels.probing.clustered_events`); CSR of subscription ids."""
        p = self.preds
        self.eq_of_field = grow(self.eq_of_field, max(p.n_fields, 1), -1)
        self.gmask = grow(self.gmask, len(p.bits), 0)
        assert GROUP <= 8 * self.gmask.itemsize  # one bit per event of a group
        probe = np.empty((GROUP * max(len(self.schemas), 1), MAX_SCHEMA), dtype=np.int64)
        # the output sized by the last batch's matches per event, so that the kernel rarely grows and copies it
        # (W1 at 6M: 72 per event, 1.4M ids per 20,000 events, eleven doublings from 1,024)
        n_ev = len(events.offsets) - 1
        out = np.empty(int(n_ev * self.matches_per_event * 1.25) + 1024, dtype=np.int64)
        scratch = ProbeScratch(self.eq_of_field, probe, self.gmask, out, self.n_first_not_eq == 0)
        store = self.store.arrays()
        if self.packs():
            def scan():
                packed = self.packed.arrays()
                return packed_events(events, p.arrays(), self.direct.arrays(), store, self.keys.arrays(self.sch_fields),
                                     self.direct.scratch(), packed, handle_id)

            return self.catch_all.match(scan, store.key_head, events, handle_id)

        def scan():
            off, ids = self._kernel(events, p.arrays(), store, self.store.run_arrays(),
                                    self.keys.arrays(self.sch_fields), scratch, handle_id)
            if n_ev:
                self.matches_per_event = len(ids) / n_ev
            return off, ids

        return self.catch_all.match(scan, store.key_head, events, handle_id)

    def memory_bytes(self) -> int:
        """``stats()["memory_bytes"]`` without the per-subscription counts ``stats`` also makes: a load in chunks
        asks it before every chunk (``Matcher.add_bulk``), and those counts read every subscription."""
        return sum(self.memory_by_structure().values())

    def memory_by_structure(self) -> dict[str, int]:
        """:meth:`memory_bytes` by structure, so that growth under churn shows where it is (``/metrics``)."""
        return {"clusters": int(self.store.memory_bytes()), "access_keys": int(self.keys.stats()["memory_bytes"]),
                "probabilities": int(self.pred_prob.nbytes + self.eq_of_field.nbytes + self.first_not_eq.nbytes),
                "catch_all": int(self.catch_all.memory_bytes()), "packed_lists": int(self.packed.memory_bytes()),
                "direct": int(self.direct.memory_bytes())}

    def stats(self) -> dict:
        s = self.store.stats()
        k = self.keys.stats()
        s.update({key: v for key, v in k.items() if key != "memory_bytes"})
        s["memory_bytes"] = self.memory_bytes()
        s["lists"] = "packed" if self.packs() else "clusters"
        s.update(self.packed.stats())
        s["catch_all"] = self.catch_all.stats()
        schemas, filed = self.filed_schemas()
        tables = []
        for sch, n_subs in zip(*_sums_by(schemas, filed)):
            fields = unpack_schema(int(sch)) if sch > 0 else ()
            if len(fields) >= 2:
                tables.append({"fields": list(fields), "subscriptions": int(n_subs)})
        s["hash_tables"] = {
            "multi_attribute": len(self.schemas),
            "schemas": tables,
            "single_field_subscriptions": int(filed[(schemas > 0) & ~is_multi(schemas)].sum()),
            "presence_subscriptions": int(filed[schemas < 0].sum()),
            "catch_all_subscriptions": int(filed[schemas == 0].sum()) + self.catch_all.ranges,
        }
        top = self.store.ids.high
        sizes = (self.store.c_len[:top] - self.store.c_dead[:top])[self.store.c_k[:top] >= 0]  # live entries
        s["cluster_size_histogram"] = _log2_histogram(sizes)
        s["subscriptions_moved"] = int(self.moved)
        s["reorganize_seconds"] = round(self.reorganize_seconds, 6)
        s["statistics_source"] = self.probabilities.statistics.source
        s["cost_model"] = self.model.as_dict()
        return s

    # -- configuration (engine.algorithms.index.Clustering) -----------------------------
    def statistics_changed(self) -> None:
        """New probabilities: re-read nu (the configuration changes on the next bulk load or reorganize)."""
        self.refresh_probabilities()


class StaticIndex(ClusteredIndex):
    """Section 3.2: the greedy configuration recomputed from scratch on every bulk load (and by ``reorganize``)."""

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        self.reference(pids)
        self.insert(handles, off, pids)
        if len(handles) > 1:
            self.reorganize()
        self.store.trim()


class DynamicIndex(ClusteredIndex):
    """Section 4: the maintenance keeps the configuration near the best as subscriptions and statistics change.

    New subscriptions go to the configured schema best for each; after
    ``Thresholds.refresh_changes`` changes or ``refresh_events`` events a
    maintenance round (:class:`~engine.costmodel.maintenance.Maintenance`)
    creates and drops tables and moves subscriptions.  One event batch in
    ``OBSERVE_EVERY`` feeds the online statistics, adopted when they disagree
    with the ones in use (:meth:`EventProbabilities.adopt_online`).
    """

    def __init__(self, *args, thresholds: Thresholds | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.maintenance = Maintenance(self, thresholds)
        self.collector = StatisticsCollector()
        self._batches = 0

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File new subscriptions in chunks of growing size with a maintenance round after each.

        Like the paper's batch-wise loading (section 6.1, n_Sb): the tables the
        first chunks call for exist by the time later chunks arrive, which go
        straight to them instead of being moved later.  The first chunk is as
        large as what is filed already: a load in several calls then runs the
        rounds one load into an empty matcher would, not a full series per call
        (each round reads the hot lists, which grow with what is filed).
        """
        self.reference(pids)
        filed = int(self.keys.refs[: self.keys.ids.high].sum())
        n, start, size = len(handles), 0, max(self.maintenance.t.refresh_changes, filed)
        while start < n:
            end = min(n, start + size)
            self.insert(handles[start:end], off[start : end + 1] - off[start], pids[off[start] : off[end]])
            if self.maintenance.note_changes(end - start):
                self.maintain()
            start, size = end, 2 * size
        self.store.trim()

    def remove_bulk(self, handles: np.ndarray) -> None:
        handles = self.catch_all.remove_ranges(handles)
        self.maintenance.forget(handles)
        super().remove_bulk(handles)
        if self.maintenance.note_changes(len(handles)):
            self.maintain()

    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        result = super().match_encoded(events, batch, handle_id)
        self._batches += 1
        if self._batches % OBSERVE_EVERY == 0 and not self.probabilities.external:
            self.collector.observe(batch)  # (given statistics win over online ones: nothing to observe then)
        if self.maintenance.note_events(len(batch)):
            self.maintain()
        return result

    def statistics_changed(self) -> None:
        """New probabilities: stale potential tables and marks are dropped, then rounds run until quiet."""
        self.maintenance.statistics_changed()
        if not self.maintenance.frozen:
            self.maintain(until_quiet=True)

    def freeze(self, frozen: bool) -> None:
        self.maintenance.frozen = bool(frozen)

    def maintain(self, until_quiet: bool = False) -> None:
        """One maintenance round (or rounds until one changes nothing), after adopting online statistics if due."""
        if self.maintenance.frozen:
            return
        t0 = time.perf_counter()
        if self.probabilities.adopt_online(self.collector):
            self.maintenance.statistics_changed()
        self.maintenance.seconds += time.perf_counter() - t0  # the rounds add their own time
        for _ in range(MAX_SETTLE_ROUNDS if until_quiet else 1):
            report = self.maintenance.refresh()
            if not (report["moved"] or report["created"] or report["dropped"]):
                break

    def memory_by_structure(self) -> dict[str, int]:
        return {**super().memory_by_structure(), "maintenance": int(self.maintenance.memory_bytes())}

    def stats(self) -> dict:
        s = super().stats()
        s["maintenance"] = self.maintenance.stats()
        return s


def make_clustering(cls: type[ClusteredIndex]):
    """The factory of ``Matcher("static")`` / ``Matcher("dynamic")``: scan options, ``runs`` and ``level2``."""
    def make(ctx: IndexContext, **options) -> ClusteredIndex:
        runs = options.pop("runs", RUN_MIN)
        if not isinstance(runs, (int, np.integer)) or runs < 0:
            raise ValueError(f"runs must be a non-negative integer (0: off), not {runs!r}")
        presence = options.pop("presence", True)
        if not isinstance(presence, bool):
            raise ValueError(f"presence must be True or False, not {presence!r}")
        options["presence"] = presence
        level2 = options.pop("level2", None)
        if level2 is not None and (not isinstance(level2, (int, np.integer)) or level2 < 0):
            raise ValueError(f"level2 must be None (the cost model's choice) or a non-negative integer, not {level2!r}")
        options["level2"] = level2
        lists = options.pop("lists", "auto")
        if lists not in LIST_MODES:
            raise ValueError(f"lists must be one of {', '.join(LIST_MODES)}, not {lists!r}")
        options["lists"] = lists
        extra = {"thresholds": ctx.thresholds} if cls is DynamicIndex else {}
        return cls(ctx.preds, ctx.cost_model(), ctx.probabilities, max_space=ctx.max_space, runs=int(runs),
                   **extra, **options)

    return make



def _log2_histogram(sizes: np.ndarray) -> dict[str, int]:
    """Cluster sizes in power-of-two buckets: {"1": n, "2-3": n, "4-7": n, ...}."""
    sizes = sizes[sizes > 0]
    if len(sizes) == 0:
        return {}
    b = np.floor(np.log2(sizes)).astype(np.int64)
    out = {}
    for e, n in zip(*np.unique(b, return_counts=True)):
        lo, hi = 1 << int(e), (1 << (int(e) + 1)) - 1
        out[f"{lo}" if lo == hi else f"{lo}-{hi}"] = int(n)
    return out


@njit(cache=True)
def _interleave(pids, off, cols, col_off, members):
    for i in range(off.shape[0] - 1):
        w = off[i]
        for m in range(members.shape[1]):
            if members[i, m] >= 0:
                pids[w] = members[i, m]
                w += 1
        for j in range(col_off[i], col_off[i + 1]):
            pids[w] = cols[j]
            w += 1


@njit(cache=True)
def _members(keys, store):
    """Handles of the clusters of the given access keys, key after key (the dead entries of sorted prefixes dropped)."""
    key_head, c_next, c_base, c_cap, c_len, c_k, arena = (store.key_head, store.next, store.base, store.cap,
                                                          store.length, store.k, store.arena)
    total = 0
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        while c >= 0:
            total += c_len[c]
            c = c_next[c]
    out = np.empty(total, dtype=np.int64)
    w = 0
    for q in keys:
        c = key_head[q] if q < key_head.shape[0] else -1
        while c >= 0:
            line = c_base[c] + c_k[c] * c_cap[c]
            for j in range(c_len[c]):
                w = put_live(out, w, arena[line + j])
            c = c_next[c]
    return out[:w]
