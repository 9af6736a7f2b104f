"""The dynamic clustering's maintenance algorithm (Fabret et al., section 4).

Metrics, in the unit of equation 3.1's checking term -- expected subscription
checks per event -- so that every threshold can be compared with what a hash
table costs per event (``CostModel.table_cost / K_c``, in checks):

* benefit margin of a cluster list (access key) ``c``:
  ``BM(c) = nu(p_c) * |c|``, the paper's first approximation of
  ``sum_s (nu(p_c) - nu(P(s)))``;
* benefit of a potential table ``H``: ``B(H) = sum (nu_now(s) - nu_H(s))``
  over the subscriptions of hot clusters that ``H`` would serve better (the
  paper counts them, "at first approximation B(H) = |H|"; we weigh each by
  the checks it would save);
* benefit of an existing table ``H``: ``sum (nu_fallback(s) - nu_H(s))`` over
  its subscriptions, ``nu_fallback`` being the best single-field access they
  would fall back to.

Thresholds (:class:`Thresholds`), all derived from the calibrated cost model:

* ``BMmax``: a cluster list is examined when it costs more than
  ``bm_max_factor`` checks per event;
* ``Bcreate(H) = create_factor * table_cost(H) / K_c``: a table is created
  when it saves ``create_factor`` times what it costs;
* ``Bdelete(H) = delete_factor * table_cost(H) / K_c``: a table is dropped
  when it no longer pays for itself; ``delete_factor < create_factor`` gives
  hysteresis, so a table is not created and dropped in turn.

The algorithm (``Maintenance.refresh``), run after ``refresh_changes``
subscription changes or ``refresh_events`` events, when ``settle_events``
events are matched with no change after some (the tails of a spell of single
adds would otherwise wait up to ``refresh_events`` to be merged), or when
statistics change:

1. ``cluster_distribute`` each hot cluster list (largest ``BM`` first, at most
   ``budget`` subscriptions per refresh): move every subscription to the
   configured schema that minimises its ``nu``;
2. if the list is still hot, its unmarked subscriptions add to ``B(H)`` of
   every potential schema ``H`` (2..3 of their equality fields, not
   configured) that would serve them better, and are *marked*; the list is a
   candidate of ``H``;
3. while a potential ``H`` reaches ``Bcreate``: create it and
   ``cluster_distribute`` its candidate lists;
4. drop every table whose benefit fell under ``Bdelete`` and re-file its
   subscriptions;
5. with runs (ours), when events were matched since the last round: merge
   the unsorted tails of the lists into their runs, so that the
   subscriptions inserted since then are found through the run index
   instead of being checked one by one.

A marked subscription that moves or is deleted withdraws its contribution
(the paper's marks).  New statistics reset the potential tables, since every
contribution was computed with the old probabilities.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..structures.idpool import grow
from .constants import MAX_SCHEMA, SAFETY_MARGIN, unpack_rows, unpack_schema
from .greedy import enumerate_multi
from .runs import candidate_benefits, drop_benefits, pricing_for, tuples_fit, typical_pi

# The index maintained is a conjunction_index.ClusteredIndex; it is not imported, not even for type checking:
# conjunction_index imports this module, and the package's imports form no cycle (tests/project/test_architecture.py).


@dataclass
class Thresholds:
    bm_max_factor: float = 1.0  # BMmax, in expected checks per event
    create_factor: float = 1.5 * SAFETY_MARGIN  # Bcreate = create_factor * table cost (in checks); docs/design/clustering.md
    delete_factor: float = 1.0  # Bdelete = delete_factor * table cost (in checks)
    refresh_changes: int = 10_000  # subscription changes between refreshes
    refresh_events: int = 200_000  # events between refreshes
    settle_events: int = 10_000  # events matched with no change since some: a round merges their tails then
    budget: int = 200_000  # subscriptions examined per refresh
    max_new_tables: int = 64  # tables created per refresh at most
    list_sample: int = 256  # with runs: subscriptions sampled per hot list to price potential tables
    sample_budget: int = 30_000  # with runs: subscriptions sampled per refresh at most


@dataclass
class _Potential:
    """Potential tables: packed schema -> benefit (checks per event) and candidate access keys."""

    benefit: dict[int, float] = field(default_factory=dict)
    candidates: dict[int, set[int]] = field(default_factory=dict)

    def add(self, keys: np.ndarray, amounts: np.ndarray, cand_keys: np.ndarray) -> None:
        if len(keys) == 0:
            return
        uk, inv = np.unique(keys, return_inverse=True)
        sums = np.bincount(inv, weights=amounts, minlength=len(uk))
        for k, v in zip(uk.tolist(), sums.tolist()):
            self.benefit[k] = self.benefit.get(k, 0.0) + v
        order = np.lexsort((cand_keys, keys))
        pairs = np.unique(np.stack([keys[order], cand_keys[order]]), axis=1)
        for k, c in zip(pairs[0].tolist(), pairs[1].tolist()):
            self.candidates.setdefault(k, set()).add(c)

    def subtract(self, keys: np.ndarray, amounts: np.ndarray) -> None:
        if len(keys) == 0:
            return
        uk, inv = np.unique(keys, return_inverse=True)
        sums = np.bincount(inv, weights=amounts, minlength=len(uk))
        for k, v in zip(uk.tolist(), sums.tolist()):
            if k in self.benefit:
                self.benefit[k] -= v

    def pop(self, key: int) -> set[int]:
        self.benefit.pop(key, None)
        return self.candidates.pop(key, set())

    def clear(self) -> None:
        self.benefit.clear()
        self.candidates.clear()


def _refines(new: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """Whether each packed schema ``new`` holds every field of the single or multi-field schema ``cur``."""
    out = np.zeros(len(new), dtype=bool)
    ok = (new > 0) & (cur > 0)
    if not ok.any():
        return out
    nf, cf = unpack_rows(new[ok]), unpack_rows(cur[ok])
    held = (cf < 0) | (cf[:, :, None] == nf[:, None, :]).any(axis=2)
    out[ok] = held.all(axis=1)
    return out


_NU_MIN = np.finfo(np.float32).tiny


class Maintenance:
    """Keeps a :class:`ClusteredIndex` near the best clustering as subscriptions and statistics change."""

    def __init__(self, index: "ClusteredIndex", thresholds: Thresholds | None = None) -> None:  # noqa: F821
        self.index = index
        self.t = thresholds or Thresholds()
        self.potential = _Potential()
        # > 0: marked, with the nu it had when marked.  float32: a nu only weighs a potential benefit, and this is
        # one entry per subscription
        self.mark_nu = np.zeros(0, dtype=np.float32)
        self.marked_in = np.zeros(0, dtype=np.int64)  # per access key: how many of its subscriptions are marked
        self.examined = np.zeros(0, dtype=np.int64)  # refresh in which each access key was last examined
        self.changes = 0
        self.events = 0
        self.quiet = 0  # events matched since the last subscription change
        self.unsettled = False  # changes since the last round that merged tails (their inserts wait in tails)
        self.refreshes = 0
        self.created = 0
        self.dropped = 0
        self.seconds = 0.0
        self.statistics_changes = 0
        self.tails_sorted = 0  # entries of hot lists' unsorted tails merged into their runs
        self.frozen = False  # the "no change" strategy of section 6.2.2: see Matcher.freeze_clustering
        self._priced_last = None  # with runs: (hot keys, their sizes, best benefit / Bcreate) of the last pricing
        self._priced_stamp = None  # with runs: what the last pricing that created nothing saw (_stamp)
        self.total_changes = 0

    # -- triggers ----------------------------------------------------------
    def note_changes(self, n: int) -> bool:
        """Count subscription changes; True when a round is due (never while frozen)."""
        self.changes += n
        self.total_changes += n
        self.quiet = 0
        self.unsettled = self.unsettled or n > 0
        return not self.frozen and self.changes >= self.t.refresh_changes

    def note_events(self, n: int) -> bool:
        """Count matched events; True when a round is due (never while frozen)."""
        self.events += n
        self.quiet += n
        settle = self.unsettled and self.quiet >= self.t.settle_events
        return not self.frozen and (self.events >= self.t.refresh_events or settle)

    def statistics_changed(self) -> None:
        """New probabilities: every potential benefit and mark is stale."""
        self.statistics_changes += 1
        self._priced_last = None
        self.potential.clear()
        self.mark_nu[:] = 0.0
        self.marked_in[:] = 0
        self.index.refresh_probabilities()

    # -- thresholds ----------------------------------------------------------
    def _checks(self, schemas: np.ndarray) -> np.ndarray:
        """Per-event cost of each schema's table, in subscription checks."""
        m = self.index.model
        fields = unpack_rows(schemas)
        sizes = (fields >= 0).sum(axis=1).astype(np.float64)
        mus = np.array([self.index.mu(tuple(f[f >= 0].tolist())) for f in fields], dtype=np.float64)
        return m.table_cost(mus, sizes) / m.K_c

    @property
    def bm_max(self) -> float:
        return self.t.bm_max_factor

    # -- marks ---------------------------------------------------------------
    def forget(self, handles: np.ndarray) -> None:
        """Withdraw the contributions of marked subscriptions (before they move or leave)."""
        if len(handles) == 0 or len(self.mark_nu) == 0:
            return
        handles = handles[handles < len(self.mark_nu)]
        marked = handles[self.mark_nu[handles] > 0]
        if len(marked) == 0:
            return
        rows, keys, nus = self.index.potential_schemas(marked)
        amount = np.maximum(self.mark_nu[marked][rows] - nus, 0.0)
        self.potential.subtract(keys, amount)
        self.mark_nu[marked] = 0.0
        self._count_marks(marked, -1)

    def _set_marks(self, handles: np.ndarray, nu: np.ndarray) -> None:
        """Mark subscriptions (still filed where they were examined) with the nu they had then."""
        new = handles[self.mark_nu[handles] <= 0]
        self.mark_nu[handles] = np.maximum(nu, _NU_MIN)  # (a nu under float32's range still marks)
        self._count_marks(new, 1)

    def _count_marks(self, handles: np.ndarray, sign: int) -> None:
        """Keep ``marked_in`` (marked subscriptions per access key) in step: a round then gathers only the hot
        lists that hold unmarked subscriptions, instead of every member of every hot list (at 10M W0 every
        (a0, a1) list is hot and all of them end up marked)."""
        if len(handles) == 0:
            return
        self.marked_in = grow(self.marked_in, self.index.key_id_bound(), 0)
        np.add.at(self.marked_in, self.index.key_of(handles), sign)

    def _move(self, handles: np.ndarray, schemas: np.ndarray) -> None:
        self.forget(handles)
        self.index.move(handles, schemas)

    # -- the algorithm -------------------------------------------------------
    def _key_metrics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Live access keys (catch-all excluded), their nu and their BM."""
        live = self.index.live_keys()
        nu = self.index.key_nu(live)
        refs = self.index.key_refs(live)
        pricing = pricing_for(self.index)
        if pricing is None:
            return live, nu, nu * refs
        return live, nu, nu * pricing.list_checks(refs, typical_pi(self.index))

    def _distribute(self, handles: np.ndarray, cur_nu: np.ndarray) -> np.ndarray:
        """cluster_distribute: move each subscription to its best configured schema; returns who stays.

        With the filing tolerance (runs), a key whose nu is within that factor is a tie, unless it refines the
        current key (its fields include the current key's): its nu is then the current one times the added
        predicates' probabilities, not a noisy estimate of another list's (W6: (a0, a1) at 1/70 against a1 at
        1/35, a0 on 2 values).  The pricing that creates a table projects such moves, so they are made."""
        ix = self.index
        key, nu = ix.best_configured(handles)
        lower = nu < cur_nu * (1.0 - 1e-9)
        move = nu * ix.filing_tolerance < cur_nu * (1.0 - 1e-9)
        if ix.filing_tolerance > 1.0 and np.any(lower & ~move):
            maybe = np.flatnonzero(lower & ~move)
            refine = _refines(key[maybe], ix.key_schema(ix.key_of(handles[maybe])))
            move[maybe[refine]] = True
        self._move(handles[move], key[move])
        return ~move

    def refresh(self) -> dict:
        """One maintenance round; returns what it did."""
        t0 = time.perf_counter()
        ix = self.index
        matched = self.events  # events matched since the last round: whether unsorted tails cost anything
        self.changes = self.events = 0
        self.mark_nu = grow(self.mark_nu, ix.handles_high, 0.0)
        moved_before = ix.moved

        # 1: cluster_distribute the hot cluster lists, least recently examined first, then hottest, within
        # the budget.  Only unmarked subscriptions are examined: a marked one was put in its best
        # configured schema when marked, and stays there until a table is created (its candidate lists
        # are redistributed), dropped (its subscriptions re-filed) or the statistics change (marks cleared).
        live, nu, bm = self._key_metrics()
        hot = np.flatnonzero(bm > self.bm_max)
        self.examined = grow(self.examined, ix.key_id_bound(), -1)
        hot = hot[np.lexsort((-bm[hot], self.examined[live[hot]]))]
        hot_keys, hot_nu, refs = live[hot], nu[hot], ix.key_refs(live[hot])
        voters = np.zeros(0, np.int64)
        voter_nu = np.zeros(0)
        voter_key = np.zeros(0, np.int64)
        n_examined = 0
        if len(hot_keys):
            self.marked_in = grow(self.marked_in, ix.key_id_bound(), 0)
            per_list = refs - self.marked_in[hot_keys]  # unmarked subscriptions of each hot list
            within = np.cumsum(per_list) <= max(self.t.budget, int(per_list[0]))
            self.examined[hot_keys[within]] = self.refreshes
            lists = np.flatnonzero(within & (per_list > 0))  # only these lists' members are read
            handles = ix.members_of(hot_keys[lists])  # grouped by key, in hot_keys order
            which = np.repeat(lists, refs[lists])
            take = self.mark_nu[handles] <= 0
            handles, which = handles[take], which[take]
            n_examined = int(within.sum())
            stays = self._distribute(handles, hot_nu[which])
            # 2: lists still hot after it: their subscriptions that stayed vote for potential tables
            left = refs - np.bincount(which[~stays], minlength=len(hot_keys))
            sel = stays & (hot_nu * left > self.bm_max)[which]
            voters, voter_nu, voter_key = handles[sel], hot_nu[which[sel]], hot_keys[which[sel]]

        # 3: create the potential tables whose benefit reaches Bcreate, best first
        if pricing_for(ix) is not None and len(hot_keys):
            created = self._create_priced(hot_keys, voters, voter_nu)
        elif pricing_for(ix) is not None:
            created = []
        else:
            created = self._create(voters, voter_nu, voter_key)

        # 4: drop tables that no longer pay for themselves
        dropped = self._drop_weak_tables()

        # 5: with runs, the inserts (and this round's moves) join their runs, once events have been matched since
        # the last round (a bulk load's rounds leave the tails to the load's own merges).  Every list's, not only
        # the hot ones': lists too cold to be examined add up (docs/design/clustering.md, "Runs").
        if matched and pricing_for(ix) is not None and len(live):
            self.tails_sorted += ix.sort_tails(live)
        if matched:
            self.unsettled = False

        self.refreshes += 1
        dt = time.perf_counter() - t0
        self.seconds += dt
        return {"hot_lists": n_examined, "voters": int(len(voters)), "moved": int(ix.moved - moved_before),
                "created": created, "dropped": dropped, "seconds": dt}

    def _create(self, voters: np.ndarray, voter_nu: np.ndarray, voter_key: np.ndarray) -> list[tuple[int, ...]]:
        """Section 4's creation loop, run on arrays: each creation lowers the benefit left for the others.

        The benefit of a potential table is what marked subscriptions of
        earlier rounds contributed (``self.potential``) plus what this round's
        voters would save; creating a table moves (on paper) the voters it
        serves better, then the next best is taken.  The real moves happen
        once, at the end, for the voters and the candidate lists of the new
        tables; voters that stay vote for the tables not created, and are marked.
        """
        ix = self.index
        rows = keys = np.zeros(0, np.int64)
        nus = np.zeros(0)
        if len(voters):
            rows, keys, nus = ix.potential_schemas(voters)
            useful = ~np.isin(keys, ix.schemas) & (nus < voter_nu[rows])
            rows, keys, nus = rows[useful], keys[useful], nus[useful]
        cand = np.union1d(keys, np.array(list(self.potential.benefit), dtype=np.int64))
        if len(cand) == 0:
            return []
        inv = np.searchsorted(cand, keys)
        earlier = np.array([self.potential.benefit.get(k, 0.0) for k in cand.tolist()])
        need = self.t.create_factor * self._checks(cand)
        cur = voter_nu.copy()
        taken = np.zeros(len(cand), dtype=bool)
        created: list[int] = []
        for _ in range(self.t.max_new_tables):
            gain = earlier + np.bincount(inv, weights=np.maximum(cur[rows] - nus, 0.0), minlength=len(cand))
            ok = ~taken & (gain >= need)
            if not ok.any():
                break
            c = int(np.flatnonzero(ok)[np.argmax(gain[ok])])
            taken[c] = True
            created.append(int(cand[c]))
            better = (inv == c) & (nus < cur[rows])
            cur[rows[better]] = nus[better]
        if created:
            ix.set_schemas(np.append(ix.schemas, created))
            self.created += len(created)
            lists: set[int] = set()
            for k in created:
                lists |= self.potential.pop(k)
            lists_arr = np.array(sorted(lists), dtype=np.int64)
            lists_arr = lists_arr[ix.key_refs(lists_arr) > 0]
            others = np.setdiff1d(ix.members_of(lists_arr), voters) if len(lists_arr) else lists_arr
            if len(others):
                self._distribute(others, ix.key_nu(ix.key_of(others)))
        stays = self._distribute(voters, voter_nu) if created and len(voters) else np.ones(len(voters), bool)
        # voters that stay vote for the tables not created, and are marked
        keep = stays[rows] & ~np.isin(keys, ix.schemas)
        position = np.cumsum(stays) - 1
        self._mark(voters[stays], voter_nu[stays], position[rows[keep]], keys[keep], nus[keep], voter_key[stays])
        return [unpack_schema(k) for k in created]

    def _create_priced(self, hot_keys: np.ndarray, voters: np.ndarray, voter_nu: np.ndarray) -> list[tuple[int, ...]]:
        """With runs: price each potential table on samples of whole hot lists (engine/costmodel/runs.py).

        Against an indexed list a table saves each subscription far less than
        a check, so votes are not accumulated subscription by subscription:
        each round samples every hot list (``list_sample`` subscriptions, at
        most ``sample_budget`` in all), projects the lists a table would empty
        and fill, and creates the best table whose benefit reaches
        ``Bcreate`` (one per round: the lists it empties change the others'
        benefits).  The examined subscriptions that stayed are marked, so
        step 1 does not examine them again.
        """
        ix = self.index
        if len(voters):
            self._set_marks(voters, np.maximum(voter_nu, 1e-300))
        hot_keys = hot_keys[ix.key_refs(hot_keys) > 0]
        if len(hot_keys) == 0:
            return []
        pricing = pricing_for(ix)
        pi = typical_pi(ix)
        refs = ix.key_refs(hot_keys).astype(np.float64)
        # nothing filed, moved, created, dropped or re-estimated since a pricing that created nothing: same answer
        # (at 10M W0 every (a0, a1) list is hot, and pricing them was most of a round once all were marked)
        stamp = (self.total_changes, ix.moved, self.created, self.dropped, self.statistics_changes)
        if stamp == self._priced_stamp:
            return []
        # the same hot lists, none grown or shrunk by a tenth, and no table near Bcreate last time: same answer
        last = self._priced_last
        if (last is not None and last[2] < 0.8 and len(last[0]) == len(hot_keys)
                and np.array_equal(last[0], np.sort(hot_keys))
                and np.all(np.abs(refs[np.argsort(hot_keys)] - last[1]) <= 0.1 * last[1])):
            return []
        take = np.minimum(refs, self.t.list_sample).astype(np.int64)
        within = np.cumsum(take) <= max(self.t.sample_budget, int(take[0]))
        hot_keys, refs, take = hot_keys[within], refs[within], take[within]
        members = ix.members_of(hot_keys)
        starts = np.concatenate(([0], np.cumsum(refs.astype(np.int64))[:-1]))
        rng = np.random.default_rng(self.refreshes)
        pick = np.concatenate([s + rng.choice(int(n), size=int(k), replace=False)
                               for s, n, k in zip(starts.tolist(), refs.tolist(), take.tolist())])
        sample = members[pick]
        row_list = np.repeat(np.arange(len(hot_keys)), take)
        weight = (refs / take)[row_list]
        list_nu = ix.key_nu(hot_keys)
        off, pids = ix.predicates_of(sample)
        prof, _ = ix.profile(off, pids)
        if not tuples_fit(prof.value):
            return []
        e_row, e_key, e_nu, _, e_tup = enumerate_multi(prof.offsets, prof.attr, prof.value, prof.prob, MAX_SCHEMA)
        keep = ~np.isin(e_key, ix.schemas)
        e_row, e_key, e_nu, e_tup = e_row[keep], e_key[keep], e_nu[keep], e_tup[keep]
        if len(e_key) == 0:
            return []
        cand, e_cand = np.unique(e_key, return_inverse=True)
        benefit = candidate_benefits(pricing, pi, row_list, refs, list_nu, weight, list_nu[row_list], e_row, e_cand,
                                     e_nu, e_tup, len(cand))
        need = self.t.create_factor * self._checks(cand)
        ok = benefit >= need
        order = np.argsort(hot_keys)
        self._priced_last = (hot_keys[order], refs[order], float(np.max(benefit / need)))
        if not ok.any():
            self._priced_stamp = stamp
            return []
        self._priced_last = None
        c = int(np.flatnonzero(ok)[np.argmax(benefit[ok])])
        ix.set_schemas(np.append(ix.schemas, cand[c]))
        self.created += 1
        lists = np.unique(row_list[e_row[e_cand == c]])
        handles = ix.members_of(hot_keys[lists])
        self._distribute(handles, ix.key_nu(ix.key_of(handles)))
        return [unpack_schema(int(cand[c]))]

    def _mark(self, handles, cur_nu, rows, keys, nus, key_of) -> None:
        """Record the votes of subscriptions staying where they are, and mark them."""
        if len(handles) == 0:
            return
        self.potential.add(keys, np.maximum(cur_nu[rows] - nus, 0.0), key_of[rows])
        self._set_marks(handles, cur_nu)

    def _drop_weak_tables(self) -> list[tuple[int, ...]]:
        ix = self.index
        if len(ix.schemas) == 0:
            return []
        weak = self._table_benefits() < self.t.delete_factor * self._checks(ix.schemas)
        if not weak.any():
            return []
        gone = ix.schemas[weak]
        keys = self._keys_of_schemas(gone)
        ix.set_schemas(ix.schemas[~weak])
        self.dropped += len(gone)
        if len(keys):
            handles = ix.members_of(keys)
            key, _ = ix.best_configured(handles)
            self._move(handles, key)
        return [unpack_schema(k) for k in gone.tolist()]

    def _keys_of_schemas(self, schemas: np.ndarray) -> np.ndarray:
        """Live access keys whose conjunction has one of the given schemas."""
        live = self.index.live_keys()
        return live[np.isin(self.index.key_schema(live), schemas)]

    def _table_benefits(self) -> np.ndarray:
        """Checks per event each configured multi-field table saves over single-field access."""
        ix = self.index
        pricing = pricing_for(ix)
        if pricing is not None:
            return self._priced_table_benefits(pricing)
        out = np.zeros(len(ix.schemas), dtype=np.float64)
        schema, saved = ix.conjunction_savings()
        if len(schema) == 0:
            return out
        idx = np.minimum(np.searchsorted(ix.schemas, schema), len(ix.schemas) - 1)
        found = ix.schemas[idx] == schema
        np.add.at(out, idx[found], saved[found])
        return out

    def _priced_table_benefits(self, pricing) -> np.ndarray:
        """With runs: what each table's lists cost against the single-predicate lists they would fall back to."""
        ix = self.index
        live, schema, fallback = ix.conjunction_fallbacks()
        if len(live) == 0:
            return np.zeros(len(ix.schemas), dtype=np.float64)
        idx = np.minimum(np.searchsorted(ix.schemas, schema), len(ix.schemas) - 1)
        found = ix.schemas[idx] == schema
        live, idx, fallback = live[found], idx[found], fallback[found]
        fb_key = ix.single_keys(fallback)
        fb_n = np.where(fb_key >= 0, ix.key_refs(np.maximum(fb_key, 0)), 0).astype(np.float64)
        fb_nu = ix.pred_prob[fallback]
        return drop_benefits(pricing, typical_pi(ix), idx, ix.key_refs(live).astype(np.float64), ix.key_nu(live),
                             fallback, fb_n, fb_nu, len(ix.schemas))

    def memory_bytes(self) -> int:
        """The marks (one per handle) and the per-key counts."""
        return int(self.mark_nu.nbytes + self.marked_in.nbytes + self.examined.nbytes)

    def stats(self) -> dict:
        return {
            "frozen": self.frozen,
            "refreshes": self.refreshes,
            "tables_created": self.created,
            "tables_dropped": self.dropped,
            "potential_tables": len(self.potential.benefit),
            "statistics_changes": self.statistics_changes,
            "marked_subscriptions": int(np.count_nonzero(self.mark_nu > 0)),
            "tails_sorted": int(self.tails_sorted),
            "maintenance_seconds": round(self.seconds, 6),
            "thresholds": {"bm_max": self.bm_max, "create_factor": self.t.create_factor,
                           "delete_factor": self.t.delete_factor, "refresh_changes": self.t.refresh_changes,
                           "refresh_events": self.t.refresh_events, "budget": self.t.budget},
        }
