"""The propagation algorithm (sections 2.2 and 6): one equality predicate as access key.

Insertion (section 2.3): a subscription's predicates are already in the
predicate table; one of its equality predicates becomes its access predicate
(the least referenced one, so that subscriptions spread over many small
cluster lists), the others become the ``k`` columns of a cluster of its key,
ordered so that the test most likely to fail comes first (equalities, then
ranges, then ``!=``).  Subscriptions without equality predicates go to the
catch-all list (key 0).

Matching (Figure 2): phase 1 sets the bits of satisfied predicates and
collects the keys of satisfied access predicates; phase 2 scans every
cluster of those keys (and of the catch-all) with the kernel for its ``k``.
A whole batch of events is one numba call; the result is CSR.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..structures.access_keys import CATCH_ALL, AccessKeys
from ..kernels.batch import propagation_kernel
from ..structures.cluster_store import NO_PROBABILITIES, OP_RANK, ClusterStore, order_columns
from .index import IndexContext
from ..structures.predicates import PredicateTable
from ..kernels.scan import LOOKAHEAD, PREFETCH_COLUMNS, UNFOLD

@njit(cache=True)
def choose_access(off, pids, op, refcount):
    """Per subscription: its access predicate (-1: none), the least referenced equality.

    The least referenced one, so that subscriptions spread over many small
    cluster lists.  ``pids[off[i]:off[i+1]]`` are the distinct predicates of
    subscription i.  Returns an (n, 1) array (the shape ``order_columns`` takes).
    """
    n = off.shape[0] - 1
    access = np.full((n, 1), -1, dtype=np.int64)
    for i in range(n):
        best = -1
        for j in range(off[i], off[i + 1]):
            p = pids[j]
            if op[p] == 0 and (best < 0 or refcount[p] < refcount[best] or (refcount[p] == refcount[best] and p < best)):
                best = p
        access[i, 0] = best
    return access


class PropagationIndex:
    """Clusters of subscriptions filed under single-equality access keys."""

    def __init__(self, preds: PredicateTable, prefetch: bool,
                 unfold: int = UNFOLD, lookahead: int = LOOKAHEAD, prefetch_columns: int = PREFETCH_COLUMNS) -> None:
        self.preds = preds
        self.keys = AccessKeys()
        self.store = ClusterStore()
        self.scan_options = (prefetch_columns if prefetch else 0, unfold, lookahead)
        self._kernel = propagation_kernel(*self.scan_options)

    def add_bulk(self, handles: np.ndarray, off: np.ndarray, pids: np.ndarray) -> None:
        """File subscriptions (distinct predicate ids in CSR), taking their predicate references."""
        self.preds.refcount[: self.preds.n_ids] += np.bincount(pids, minlength=self.preds.n_ids)
        access = choose_access(off, pids, self.preds.op, self.preds.refcount)
        ks, cols, col_off = order_columns(off, pids, self.preds.op, access, OP_RANK, NO_PROBABILITIES)
        has = access[:, 0] >= 0
        keys = np.full(len(handles), CATCH_ALL, dtype=np.int64)
        if np.any(has):
            keys[has] = self.keys.for_predicates(access[has, 0])
        self.keys.incref(keys)
        clusters = self.store.clusters_for(keys, ks)
        self.store.append(clusters, handles, cols, col_off)
        self.store.trim()

    def remove_bulk(self, handles: np.ndarray) -> None:
        """Unfile subscriptions and drop their predicate references (a dead access predicate's key went with them)."""
        self.preds.decref(self._unfile(handles))

    def _unfile(self, handles: np.ndarray) -> np.ndarray:
        cols, _ = self.store.payload(handles)
        keys = self.store.key_of(handles)
        self.store.remove(handles)
        pids = np.concatenate([cols, self.keys.predicates_of(keys)])
        for q in self.keys.decref(keys).tolist():
            self.store.release_key(q)
        return pids

    def match_encoded(self, events, batch, handle_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Matches of encoded events (:func:`engine.kernels.batch.propagation_events`)."""
        return self._kernel(events, self.preds.arrays(), self.store.arrays(), self.store.run_arrays(),
                            self.keys.pred_key, handle_id)

    def stats(self) -> dict:
        s = self.store.stats()
        k = self.keys.stats()
        s["access_keys"] = k["access_keys"]
        s["memory_bytes"] += k["memory_bytes"]
        return s


def make_propagation(prefetch: bool):
    """The factory of ``Matcher("propagation")`` (or ``"propagation-wp"``): scan options, no runs."""
    name = "propagation-wp" if prefetch else "propagation"

    def make(ctx: IndexContext, **options) -> PropagationIndex:
        if options.pop("runs", 0):
            raise ValueError(f"runs (sorted clusters) is an option of static and dynamic, not of {name}")
        return PropagationIndex(ctx.preds, prefetch=prefetch, **options)

    return make
