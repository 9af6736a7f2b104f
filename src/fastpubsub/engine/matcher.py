"""The public matcher: subscriptions in, matching subscription ids out.

Shared by every algorithm: the dictionaries (engine/frontend/encoding.py), the
predicate table (engine/structures/predicates.py) and the subscription handles (a dense
int32 per subscription, the entries of the clusters; ``id -> handle`` is a
hash table, ``handle -> id`` an array).  The algorithm's
:class:`~engine.algorithms.index.Index`, built by the registry of engine/algorithms/index.py, owns
the structure subscriptions are filed in and matches events against it.

Every way in goes through one vectorised insertion path (``add`` builds a
one-subscription :class:`SubscriptionBatch`), and every way out through one
batch kernel call (``match`` and ``match_batch`` build an
:class:`EventBatch`), so the fast paths are the tested paths.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from .algorithms import builtin  # noqa: F401  (registers the built-in algorithms)
from .columnar import EventBatch, SubscriptionBatch, SubscriptionBuilder, csr_positions, take_subscription_groups
from .costmodel.maintenance import Maintenance, Thresholds
from .costmodel.model import CostModel
from .costmodel.probabilities import EventProbabilities
from .frontend.encoding import (AttributeDictionary, StringDictionary, batch_from_dicts, encode_batch, predicate_fields,
                                repeated_fields)
from .structures.hashtable import IdTable
from .structures.id_filter import IdFilter
from .structures.idpool import IdPool, grow
from .algorithms.index import REGISTRY, Clustering, Index, IndexContext
from .kernels.sorting import merge_matches
from .heap import release_free_memory
from .memory_budget import check_load
from .columnar import take_subscriptions
from .frontend.lowering import DerivedAttributes, derived_row_ok, parse_derived
from .structures.prefix_groups import PrefixGroups
from .structures.predicates import PredicateTable
from .semantics import KIND_BOOL, KIND_STRING, KINDS, RESERVED_PREFIX, validate_subscription_id
from .costmodel.statistics import EventStatistics

#: Single adds (rows) or removes buffered at most before they are applied in bulk: filing costs less per
#: subscription in larger batches (the planner's fixed work per batch), up to about this size.
PENDING_MAX = 16384
_ID_MIN, _ID_MAX = -(2**63), 2**63 - 1
#: The registered algorithms' names (engine/algorithms/index.py; a later ``register`` adds to it).
ALGORITHMS = REGISTRY


class Matches(NamedTuple):
    """Matches of a batch of events in CSR form: event ``i`` matched ``ids[offsets[i]:offsets[i+1]]``.

    Ids are ascending and distinct within an event.
    """

    offsets: np.ndarray  # int64 [n_events + 1]
    ids: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def split(self) -> list[np.ndarray]:
        """One array per event (views into ``ids``): slices, a fifth of what ``np.split``'s per-piece checks cost."""
        bounds = self.offsets.tolist()
        ids = self.ids
        return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


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


@njit(cache=True, nogil=True)
def distinct_per_event(off, ids):
    """Drop repeated ids within each event of a CSR result (ids ascending per event: repeats are adjacent).

    A subscription of several rows (engine/frontend/lowering.py) is reported once per
    event however many of its rows hold.
    """
    n = off.shape[0] - 1
    new_off = np.zeros(n + 1, dtype=np.int64)
    out = np.empty(ids.shape[0], dtype=np.int64)
    w = 0
    for i in range(n):
        for j in range(off[i], off[i + 1]):
            if j == off[i] or ids[j] != ids[j - 1]:
                out[w] = ids[j]
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


def _check_derived(batch: SubscriptionBatch, derived: list[int]) -> None:
    """Predicates on derived attributes are what engine/frontend/lowering.py makes (:func:`derived_row_ok`);
    event matching relies on it."""
    at = np.flatnonzero(np.isin(np.asarray(batch.attributes), derived))
    kinds, ops = np.asarray(batch.kinds)[at], np.asarray(batch.operators)[at]
    string_pos = np.cumsum(np.asarray(batch.kinds) == KIND_STRING) - 1
    names = batch.attribute_names
    for j, k, op, a in zip(at.tolist(), kinds.tolist(), ops.tolist(), np.asarray(batch.attributes)[at].tolist()):
        kind, _, arg = parse_derived(names[a])  # type: ignore[misc]
        value = batch.strings[string_pos[j]] if k == KIND_STRING else bool(batch.numbers[j]) if k == KIND_BOOL else None
        if not derived_row_ok(kind, arg, op, value):
            raise ValueError(f"SubscriptionBatch: predicate {j} on the derived attribute {names[a]!r} is not "
                             "what an extended operator lowers to (engine/frontend/lowering.py)")


class Matcher:
    """Content-based matcher over a set of subscriptions (Fabret et al., SIGMOD 2001).

    ``algorithm``: "counting" (section 5 baseline), "propagation" (single
    equality access predicates, section 6), "propagation-wp" (the same with
    software prefetch), "static" (section 3: greedy multi-attribute
    clustering, recomputed on every bulk load and by :meth:`reorganize`) and
    "dynamic" (section 4: the maintenance algorithm keeps the clustering
    near the best one as subscriptions and statistics change); "opindex"
    (Zhang et al., PVLDB 2014: subscriptions filed under their attribute
    rarest in events, for sparse events over many attributes; engine/algorithms/opindex.py).

    The algorithm is looked up in the registry (engine/algorithms/index.py), which
    other algorithms join with ``register``; keyword ``options`` (scan
    parameters, ``runs``) go to its factory.  ``model`` (a
    :class:`~engine.costmodel.model.CostModel`) defaults to the calibrated
    one; ``thresholds`` tune the dynamic maintenance
    (engine/costmodel/maintenance.py).
    """

    def __init__(self, algorithm: str = "dynamic", *, model: CostModel | None = None,
                 thresholds: Thresholds | None = None, max_space: float | None = None, **options: int) -> None:
        self.algorithm = algorithm
        self.attributes = AttributeDictionary()
        self.strings = StringDictionary()
        self.preds = PredicateTable(self.strings)
        self.handles = IdPool()
        self.id_table = IdTable()  # id -> handle, the ids read from handle_id (handles are int32: cluster_store.py)
        self.id_filter = IdFilter()  # ids certainly not in id_table, without a kernel call (the single-add path)
        self.handle_id = np.zeros(0, dtype=np.int64)
        self.probabilities = EventProbabilities(self.attributes, self.strings, self.preds)
        ctx = IndexContext(self.preds, self.probabilities, model=model, thresholds=thresholds, max_space=max_space)
        self._index: Index = REGISTRY.build(algorithm, ctx, **options)
        self.derived = DerivedAttributes()  # derived attributes of prefix / suffix / contains (engine/frontend/lowering.py)
        self.prefixes = PrefixGroups()  # subscriptions that are one prefix predicate (engine/structures/prefix_groups.py)
        self._rows: dict[int, np.ndarray] = {}  # id -> handles of its later rows, for subscriptions of several rows
        self._checked_names: tuple | None = None  # the last event batch names found valid and without repeats
        self._adds = SubscriptionBuilder()  # buffered single adds, validated and lowered (see add)
        self._pending_add: dict[int, int] = {}  # their ids -> first rows in _adds
        self._cancelled = False  # some rows of _adds were removed before being filed
        self._pending_remove: dict[int, None] = {}  # buffered single removes of filed subscriptions

    @property
    def statistics(self) -> EventStatistics:
        """The event statistics the cost model uses now (uniform until some are given or adopted)."""
        return self.probabilities.statistics

    @property
    def index(self) -> Index:
        """The algorithm's index (engine/algorithms/index.py), with every buffered single change applied."""
        self.flush()
        return self._index

    @property
    def maintenance(self) -> Maintenance | None:
        """The dynamic algorithm's maintenance (None for the others), with every buffered single change applied."""
        self.flush()
        return getattr(self._index, "maintenance", None)

    # -- subscriptions ---------------------------------------------------
    def __len__(self) -> int:
        return len(self.id_table) + len(self._pending_add) - len(self._pending_remove)

    def __contains__(self, sub_id: object) -> bool:
        try:
            sid = validate_subscription_id(sub_id)
        except ValueError:
            return False
        if sid in self._pending_add:
            return True
        return sid not in self._pending_remove and self.id_filter.may_hold(sid) and self._is_filed(sid)

    def holds(self, sub_ids: Any) -> np.ndarray:
        """``sid in matcher`` for each of ``sub_ids`` (int64), as a bool array: one probe of the id table each,
        without a Python step per id (a rebuild asks it of a million ids)."""
        self.flush()
        ids = np.asarray(sub_ids, dtype=np.int64)
        return self.id_table.lookup(ids, self.handle_id) >= 0 if len(ids) else np.zeros(0, dtype=bool)

    def _is_filed(self, sid: int) -> bool:
        """``sid`` is in the id table (one probe, a scalar argument: the single-change path)."""
        return self.id_table.has(sid, self.handle_id)

    def add(self, sub_id: int, predicates: Any) -> None:
        """Add one subscription; ``ValueError`` (nothing inserted) if invalid or a duplicate id.

        ``predicates``: a list of predicates (a conjunction), an ``AnyOf`` of
        such lists (OR of conjunctions) or an ``AllOf`` (AND of ORs), over
        every operator of engine/semantics.py.

        Validated at once, filed with the next batch of changes: single adds
        and removes are buffered (up to ``PENDING_MAX``) and applied in bulk
        before anything reads the matcher (matching, ``len``, ``stats``, a bulk
        change; docs/design/engine.md, "Single changes"), so each costs microseconds
        and the subscriptions are filed as a bulk load would file them.
        """
        sid = sub_id if type(sub_id) is int and _ID_MIN <= sub_id <= _ID_MAX else validate_subscription_id(sub_id)
        if sid in self._pending_add or (sid not in self._pending_remove and self.id_filter.may_hold(sid)
                                        and self._is_filed(sid)):
            raise ValueError(f"duplicate subscription id {sid}")
        self._pending_add[sid] = self._adds.append(sid, predicates)
        if len(self._adds.ids) >= PENDING_MAX:
            self.flush()

    def flush(self) -> None:
        """Apply the buffered single changes now: removals first, then additions (see :meth:`add`)."""
        if self._pending_remove:
            ids = np.fromiter(self._pending_remove, dtype=np.int64, count=len(self._pending_remove))
            self._remove_found(ids, self.id_table.lookup(ids, self.handle_id))
            self._pending_remove.clear()
        if len(self._adds):
            batch = self._adds.batch()
            if self._cancelled:
                batch = take_subscription_groups(batch, np.array(sorted(self._pending_add.values()), dtype=np.int64))
            self._adds, self._pending_add, self._cancelled = SubscriptionBuilder(), {}, False
            self._file(batch)

    def add_bulk(self, batch: SubscriptionBatch) -> None:
        """Add many subscriptions at once (vectorised; see docs/design/engine.md).

        Everything is validated before anything changes: on ``ValueError``
        the matcher is as it was.  A batch whose estimated peak memory exceeds
        what is free is refused the same way, with
        :class:`~engine.memory_budget.InsufficientMemory`, before anything is
        allocated (engine/memory_budget.py).  What the matcher already holds
        counts once more: the load may move any of it (the arena compacted,
        the id table grown), and the old copy is freed only after.
        """
        self.flush()
        held = self.memory_bytes() if len(self) else 0
        check_load(self.algorithm, len(batch), len(batch.operators), held)
        self._validate_batch(batch)
        self._file(batch)
        release_free_memory()  # the load's temporaries (engine/heap.py)

    def _file(self, batch: SubscriptionBatch) -> None:
        """Intern and file a validated batch of new subscriptions."""
        if len(batch) == 0:
            return
        batch = self._file_prefixes(batch)
        n = len(batch)
        if n == 0:
            return
        names = batch.attribute_names
        if any(a[0] == RESERVED_PREFIX for a in names):  # the derived attributes the index's rows use
            names = [names[a] for a in np.unique(np.asarray(batch.attributes)).tolist()]
        self.derived.learn(names)
        kinds = np.asarray(batch.kinds)
        numbers = np.asarray(batch.numbers, dtype=np.float64)
        fields, eqbits = predicate_fields(self.attributes.intern(batch.attribute_names), np.asarray(batch.attributes),
                                          kinds, numbers)
        if len(batch.strings):
            eqbits[kinds == KIND_STRING] = self.strings.intern(list(batch.strings))
        ops = np.asarray(batch.operators, dtype=np.int8)
        off = np.asarray(batch.offsets, dtype=np.int64)
        handles = self.handles.take(n)
        # range-only rows the index holds as intervals are never interned (engine/algorithms/catchall.py)
        take_ranges = getattr(self._index, "take_ranges", None)
        rest = None
        if take_ranges is not None:
            taken = take_ranges(handles, off, fields, ops, numbers)
            if taken.any():
                rest = np.flatnonzero(~taken)
                pos, off = csr_positions(off[rest], off[rest + 1] - off[rest])
                fields, ops, eqbits = fields[pos], ops[pos], eqbits[pos]
        if len(fields):
            off, pids = _distinct_per_row(off, self.preds.intern(fields, ops, eqbits))
        else:
            pids = np.zeros(0, dtype=np.int64)
        ids = np.asarray(batch.ids, dtype=np.int64)
        d = batch.disjunct_flags()
        self.handle_id = grow(self.handle_id, self.handles.high, 0)
        self.handle_id[handles] = ids
        if d.any():  # subscriptions of several rows: the id table holds the first row's handle
            head = d == 0
            self._insert_ids(ids[head], handles[head])
            group = np.cumsum(head) - 1
            later = np.flatnonzero(~head)
            starts = np.r_[0, np.flatnonzero(np.diff(group[later])) + 1]
            for s, e in zip(starts.tolist(), np.r_[starts[1:], len(later)].tolist()):
                self._rows[int(ids[later[s]])] = handles[later[s:e]]
        else:
            self._insert_ids(ids, handles)
        if rest is None:
            self._index.add_bulk(handles, off, pids)
        elif len(rest):
            self._index.add_bulk(handles[rest], off, pids)

    def _insert_ids(self, ids: np.ndarray, handles: np.ndarray) -> None:
        """File ``handles`` under ``ids`` (``handle_id`` already holds them)."""
        self.id_table.insert(handles, self.handle_id)
        self.id_filter.insert(ids, lambda: self.handle_id[self.id_table.handles()])

    def _file_prefixes(self, batch: SubscriptionBatch) -> SubscriptionBatch:
        """File the subscriptions that are one ``prefix`` predicate in the prefix groups; the rest of ``batch``.

        They need none of the index's machinery (docs/design/engine.md, "Prefix groups"); every algorithm
        shares them.
        """
        names = batch.attribute_names
        if not any(a[0] == RESERVED_PREFIX for a in names):
            return batch
        parsed = [parse_derived(a) for a in names]
        prefix_attr = np.array([d is not None and d[0] == "prefix" for d in parsed], dtype=bool)
        off = np.asarray(batch.offsets, dtype=np.int64)
        first = off[:-1]
        single = np.diff(off) == 1
        d = batch.disjunct_flags()
        alone = d == 0
        alone[:-1] &= d[1:] == 0  # the subscription has no later row
        attrs = np.asarray(batch.attributes, dtype=np.int64)
        rows = np.flatnonzero(single & alone)
        rows = rows[prefix_attr[attrs[first[rows]]]]
        if not len(rows):
            return batch
        string_pos = np.cumsum(np.asarray(batch.kinds) == KIND_STRING) - 1
        pairs = first[rows]
        prefixes = [batch.strings[k] for k in string_pos[pairs].tolist()]
        attributes = [parsed[a][1] for a in attrs[pairs].tolist()]  # type: ignore[index]
        ids = np.asarray(batch.ids, dtype=np.int64)[rows]
        handles = self.handles.take(len(rows))
        self.handle_id = grow(self.handle_id, self.handles.high, 0)
        self.handle_id[handles] = ids
        self._insert_ids(ids, handles)
        self.prefixes.add(handles, ids, attributes, prefixes)
        rest = np.ones(len(batch), dtype=bool)
        rest[rows] = False
        return take_subscriptions(batch, np.flatnonzero(rest))

    def _validate_batch(self, batch: SubscriptionBatch) -> None:
        batch.validate()
        _check_values("SubscriptionBatch", batch)
        for s in batch.strings:
            if not isinstance(s, str):
                raise ValueError(f"SubscriptionBatch: strings must be str, got {s!r}")
        for a in batch.attribute_names:
            if not isinstance(a, str) or not a:
                raise ValueError(f"SubscriptionBatch: attribute names must be non-empty strings, got {a!r}")
            if a[0] == RESERVED_PREFIX and parse_derived(a) is None:
                raise ValueError(f"SubscriptionBatch: unknown reserved attribute name {a!r}")
        derived = [i for i, a in enumerate(batch.attribute_names) if a[0] == RESERVED_PREFIX]
        if derived:
            _check_derived(batch, derived)
        present = self.id_table.lookup(np.asarray(batch.ids, dtype=np.int64), self.handle_id) >= 0
        if np.any(present):
            raise ValueError(f"duplicate subscription id {int(np.asarray(batch.ids)[present][0])}")

    def remove(self, sub_id: int) -> None:
        """Remove a subscription; ``KeyError`` if unknown.  Buffered like :meth:`add`; O(its size) when applied."""
        if type(sub_id) is int and _ID_MIN <= sub_id <= _ID_MAX:
            sid = sub_id
        else:
            try:
                sid = validate_subscription_id(sub_id)
            except ValueError:
                raise KeyError(sub_id) from None
        if self._pending_add and self._pending_add.pop(sid, None) is not None:
            self._cancelled = True
            return
        # (no filter: a removed id is mostly held)
        if sid in self._pending_remove or not self.id_table.has(sid, self.handle_id):
            raise KeyError(sub_id)
        self._pending_remove[sid] = None
        if len(self._pending_remove) >= PENDING_MAX:
            self.flush()

    def remove_bulk(self, sub_ids: Any) -> None:
        """Remove many subscriptions in one pass over the structures (expiry at equilibrium, Fabret section 1).

        All or nothing: an unknown or repeated id raises (``KeyError`` /
        ``ValueError``) before anything changes.
        """
        self.flush()
        ids = np.asarray(sub_ids, dtype=np.int64).reshape(-1)
        if len(ids) == 0:
            return
        ordered = np.sort(ids)
        if np.any(ordered[1:] == ordered[:-1]):
            raise ValueError("remove_bulk: repeated subscription id")
        h = self.id_table.lookup(ids, self.handle_id)
        if np.any(h < 0):
            raise KeyError(int(ids[h < 0][0]))
        self._remove_found(ids, h)
        release_free_memory()

    def _remove_found(self, ids: np.ndarray, h: np.ndarray) -> None:
        """Take out live subscriptions (distinct ids and their handles): index (and its predicate references), id table."""
        if len(self.prefixes):
            mine = self.prefixes.owns(h)
            if mine.any():
                self.prefixes.remove(h[mine], ids[mine])
                self.id_table.delete(ids[mine], self.handle_id)
                self.handles.release(h[mine])
                ids, h = ids[~mine], h[~mine]
                if not len(ids):
                    return
        if self._rows:
            later = [self._rows.pop(i) for i in ids.tolist() if i in self._rows]
            if later:
                h = np.concatenate([h] + later)
        self._index.remove_bulk(h)
        self.id_table.delete(ids, self.handle_id)
        self.handles.release(h)

    # -- events ----------------------------------------------------------
    def match_encoded(self, batch: EventBatch) -> Matches:
        """Match events given as an :class:`EventBatch` (the decoder's path); CSR result."""
        self.flush()
        batch.validate()
        _check_values("EventBatch", batch)
        names = batch.attribute_names
        if not (type(names) is tuple and names is self._checked_names):  # (batches of one source share their names)
            for a in names:
                if not a or a[0] == RESERVED_PREFIX:
                    raise ValueError(f"EventBatch: attribute names must be non-empty strings not starting with NUL, got {a!r}")
            if type(names) is tuple:
                self._checked_names = names
        # an event may carry an attribute several times (engine/semantics.py): every kernel reads any of its values
        n_prefix = len(self.prefixes)
        if n_prefix:
            p_off, p_ids = self.prefixes.match(batch)
            if repeated_fields(np.asarray(batch.offsets, dtype=np.int64), np.asarray(batch.attributes, dtype=np.int64),
                               len(names)).any():  # a prefix met by several values of one attribute: once
                p_off, p_ids = distinct_per_event(p_off, p_ids)
            if n_prefix == len(self.id_table):  # nothing else is filed: the index would find nothing
                return Matches(p_off, p_ids)
        if len(self.derived):
            batch = self.derived.derive_events(batch, self.strings)
        ev = encode_batch(batch, self.attributes, self.strings)
        self.preds.prepare()
        off, ids = self._index.match_encoded(ev.arrays(), batch, self.handle_id)
        if self._rows or ev.repeats.any():  # (a field carried several times may reach a list twice)
            off, ids = distinct_per_event(off, ids)
        if n_prefix:
            off, ids = merge_matches(off, ids, p_off, p_ids)
        return Matches(off, ids)

    # -- clustering (static, dynamic) --------------------------------------
    def set_statistics(self, statistics: EventStatistics) -> None:
        """Use these event statistics in the cost model (e.g. a Spark snapshot); they win over online ones."""
        self.flush()
        self.probabilities.use(statistics)
        if isinstance(self._index, Clustering):
            self._index.statistics_changed()

    def reorganize(self) -> dict:
        """Static clustering from scratch (section 3.2) with the current statistics; returns what it chose."""
        self.flush()
        if not isinstance(self._index, Clustering):
            raise ValueError(f"reorganize() applies to the static and dynamic algorithms, not {self.algorithm!r}")
        self._index.refresh_probabilities()
        return self._index.reorganize()

    def freeze_clustering(self, frozen: bool = True) -> None:
        """Keep (or, with ``False``, stop keeping) the current hashing configuration (dynamic only).

        Frozen, the maintenance runs no rounds: no table is created or dropped,
        no subscription moves, online statistics are not adopted; a new
        subscription is still filed under the configured schema that is best
        for it.  This is the "no change" strategy Fabret et al. compare the
        dynamic one with (section 6.2.2, figure 4; ``benchmarks/figures/equilibrium.py``).
        """
        freeze = getattr(self._index, "freeze", None)
        if freeze is None:
            raise ValueError(f"freeze_clustering() applies to the dynamic algorithm, not {self.algorithm!r}")
        self.flush()  # the changes made before freezing are filed (and maintained) as before it
        freeze(frozen)

    def match_batch(self, events: list[dict[str, Any]]) -> list[np.ndarray]:
        """Match a list of events (dicts); one ascending int64 id array per event."""
        return self.match_encoded(batch_from_dicts(events)).split()

    def match(self, event: dict[str, Any]) -> np.ndarray:
        """Ids of the subscriptions ``event`` satisfies, ascending."""
        return self.match_batch([event])[0]

    def stats(self) -> dict[str, Any]:
        """Sizes of the structures (predicates, clusters, hash tables, memory bytes)."""
        self.flush()
        out: dict[str, Any] = {
            "algorithm": self.algorithm,
            "subscriptions": len(self),
            "attributes": len(self.attributes),
            "strings": len(self.strings),
            "id_hash_slots": len(self.id_table.slots),
        }
        p = self.preds.stats()
        ix = self._index.stats()
        pg = self.prefixes.stats()
        out.update({k: v for k, v in p.items() if k != "memory_bytes"})
        out.update({k: v for k, v in ix.items() if k != "memory_bytes"})
        out.update({k: v for k, v in pg.items() if k != "memory_bytes"})
        out["memory"] = self.memory_by_structure()
        out["memory_bytes"] = sum(out["memory"].values())
        return out

    def memory_bytes(self) -> int:
        """What the matcher's structures hold, in bytes (``stats()["memory_bytes"]``), without the counts ``stats``
        also makes: an index that can say it alone (``memory_bytes()``) is not asked for its stats."""
        return sum(self.memory_by_structure().values())

    def memory_by_structure(self) -> dict[str, int]:
        """:meth:`memory_bytes` by structure (``stats()["memory"]``): which one grows is what an operator (and a
        soak test) needs to see.  An index that can say it by structure (``memory_by_structure()``) is asked so;
        another is one entry, ``index``."""
        by = getattr(self._index, "memory_by_structure", None)
        if by is not None:
            index = by()
        else:
            own = getattr(self._index, "memory_bytes", None)
            index = {"index": int(own() if own is not None else self._index.stats()["memory_bytes"])}
        return {"predicates": int(self.preds.stats()["memory_bytes"]),
                "ids": int(self.id_table.nbytes + self.id_filter.nbytes + self.handle_id.nbytes),
                "prefix_groups": int(self.prefixes.stats()["memory_bytes"]), **index}
