"""Schema-based clustering (Fabret et al., section 3): which hash tables, which access predicate.

A *schema* is a set of attributes; a hashing configuration is a set of
schemas, one multi-attribute hash table each.  A subscription ``s`` can be
filed under any schema ``X`` contained in ``A(s)`` (the attributes of its
equality predicates): its access predicate is then its equality predicates on
``X``, satisfied by an event with probability ``nu_X(s)``.  Equation 3.1 makes
the checking part of the per-event cost ``K_c * sum_s nu(C(s).p)``, so

* the *best clustering instance* for a configuration files every subscription
  under the contained schema of smallest ``nu`` (section 3.2), and
* the *greedy* algorithm starts from the single attributes (free: the
  predicate phase hashes them anyway) and adds, while space allows, the
  schema with the best matching benefit per unit of space.

This module plans on a :class:`EqualityProfile` (the equality predicates of
every subscription, with their single-predicate ``nu``) and does not touch the
engine's live structures.  ``nu`` of a conjunction is the product of its
predicates' (independence, section 3.1); callers may fold measured joint
frequencies into the per-predicate probabilities beforehand.

Schemas are packed into one int64 (engine/costmodel/constants.py).

Presence keys (the pivot attribute of Zhang et al., PVLDB 2014): every
predicate needs its field present, so a subscription may also be filed under
the presence of any of its fields, checked with probability ``P(field
present)``.  A profile may carry, per subscription, its best such field
(``presence_field`` / ``presence_nu``); every assignment below then takes it
where it beats the best equality schema (or where the subscription has no
equality: the catch-all is never better).  Presence keys cost no table: the
matcher reaches them with one array read per event pair, so, like single
fields, they are in every configuration, and the greedy prices a
multi-attribute schema against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numba import njit

from .constants import (EMPTY_SCHEMA as CATCH_ALL, FIELD_BITS, FIELD_MASK, MAX_SCHEMA, SAFETY_MARGIN, is_multi, pack3, pack_schema, presence_schema,
                        unpack_rows, unpack_schema)
from ..columnar import csr_positions
from .model import space_cost
from .runs import FILING_TOLERANCE, candidate_benefits, tuples_fit


@njit(cache=True)
def row_tuples(off, attr, value, schemas):
    """Per row: the packed tuple of its predicates on the fields of its schema (the list it is in)."""
    n = off.shape[0] - 1
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        key = schemas[i]
        if key <= 0:
            out[i] = key
            continue
        t = np.int64(0)
        m = 0
        for j in range(off[i], off[i + 1]):
            k = key
            while k:
                if (k & FIELD_MASK) - 1 == attr[j]:
                    t |= np.int64(value[j]) << (21 * m)
                    m += 1
                    break
                k >>= FIELD_BITS
        out[i] = t
    return out

__all__ = ["CATCH_ALL", "Configuration", "EqualityProfile", "MAX_SCHEMA", "best_assignment", "enumerate_multi",
           "fold_presence", "greedy_configuration", "pack_schema", "unpack_schema"]


@dataclass
class EqualityProfile:
    """The equality predicates of ``n`` subscriptions, CSR, attributes sorted within a row.

    ``prob[j]`` is nu of the single predicate ``attr[j] = value[j]`` (the
    probability that an event carries the attribute with that value);
    ``size[i]`` is the subscription's total number of predicates.
    """

    offsets: np.ndarray  # int64 [n + 1]
    attr: np.ndarray  # int64 [m]
    value: np.ndarray  # int64 [m], equality code of the value
    prob: np.ndarray  # float64 [m]
    size: np.ndarray  # int64 [n]
    presence_field: np.ndarray | None = None  # int64 [n]: field of the subscription's best presence key (-1: none)
    presence_nu: np.ndarray | None = None  # float64 [n]: P(that field present)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def take(self, rows: np.ndarray) -> "EqualityProfile":
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        pos, off = csr_positions(starts, ends - starts)
        pf = None if self.presence_field is None else self.presence_field[rows]
        pn = None if self.presence_nu is None else self.presence_nu[rows]
        return EqualityProfile(off, self.attr[pos], self.value[pos], self.prob[pos], self.size[rows], pf, pn)


def fold_presence(profile: EqualityProfile, key: np.ndarray, nu: np.ndarray, length: np.ndarray):
    """Take each subscription's presence key where it beats its equality schema (in place; returns the arrays).

    Ties with the catch-all go to the presence key (reached only when the event
    carries the field); ties with an equality schema to the equality (it also
    drops a column).  A presence key drops no column: its length is 0.
    """
    if profile.presence_field is None:
        return key, nu, length
    has = profile.presence_field >= 0
    take = has & ((profile.presence_nu < nu) | ((key == CATCH_ALL) & (profile.presence_nu <= nu)))
    key[take] = presence_schema(profile.presence_field[take])
    nu[take] = profile.presence_nu[take]
    length[take] = 0
    return key, nu, length


@njit(cache=True, inline="always")
def _find(sorted_keys, key):
    i = np.searchsorted(sorted_keys, key)
    return i if i < sorted_keys.shape[0] and sorted_keys[i] == key else -1


@njit(cache=True, inline="always")
def _subset(attr, prob, j1, j2, j3):
    """(valid, packed key, nu, length) of the subset {j1, j2, j3} of a row (-1: absent).

    Attributes are sorted within a row, so two equalities on one attribute
    are neighbours; such a pair is no schema.
    """
    a0 = attr[j1]
    a1 = attr[j2] if j2 >= 0 else -1
    a2 = attr[j3] if j3 >= 0 else -1
    if (a1 >= 0 and a1 == a0) or (a2 >= 0 and a2 == a1):
        return False, np.int64(0), 1.0, 0
    nu = prob[j1]
    length = 1
    if j2 >= 0:
        nu *= prob[j2]
        length += 1
    if j3 >= 0:
        nu *= prob[j3]
        length += 1
    return True, pack3(a0, a1, a2), nu, length


def multi_fields(config: np.ndarray) -> np.ndarray:
    """Which fields (a bool per field id) some schema of two fields or more in ``config`` holds."""
    config = np.asarray(config, dtype=np.int64)
    fields = unpack_rows(config[is_multi(config)])
    fields = fields[fields >= 0]
    mask = np.zeros(int(fields.max()) + 1 if len(fields) else 0, dtype=np.bool_)
    mask[fields] = True
    return mask


@njit(cache=True, inline="always")
def _in(mask, a):
    return a < mask.shape[0] and mask[a]


@njit(cache=True, nogil=True)  # the heaviest step of a bulk load: a rebuild decodes the next chunk meanwhile
def _best_assignment(off, attr, prob, config, max_schema, tol, multi):
    """Per subscription: the configured schema of smallest nu contained in A(s) (0: catch-all).

    ``multi`` (:func:`multi_fields`): a subset with a field no configured schema of several fields holds
    is no configured schema, and is not looked up (W0 configures one pair of its ten fields).

    Ties go to the shorter schema (cheaper to probe, fewer columns saved but
    the same number of checks).  With ``tol`` > 1, nu within that factor of
    the best so far is a tie, which keeps the earlier one (lower fields): with
    runs, measured probabilities that differ by sampling noise must not
    scatter subscriptions from one long indexed list over many short ones
    (engine/costmodel/runs.py).
    """
    n = off.shape[0] - 1
    best_key = np.zeros(n, dtype=np.int64)
    best_nu = np.ones(n, dtype=np.float64)
    best_len = np.zeros(n, dtype=np.int64)
    for i in range(n):
        lo, hi = off[i], off[i + 1]
        for j1 in range(lo, hi):
            for j2 in range(j1, hi if max_schema >= 2 else j1 + 1):
                if j2 > j1 and not (_in(multi, attr[j1]) and _in(multi, attr[j2])):
                    continue
                for j3 in range(j2, hi if max_schema >= 3 and j2 > j1 else j2 + 1):
                    if j3 > j2 and not _in(multi, attr[j3]):
                        continue
                    ok, key, nu, length = _subset(attr, prob, j1, j2 if j2 > j1 else -1, j3 if j3 > j2 else -1)
                    if not ok or _find(config, key) < 0:
                        continue
                    if tol > 1.0:
                        better = nu * tol < best_nu[i] or (best_key[i] == 0 and nu <= best_nu[i])
                    else:
                        better = nu < best_nu[i] or (nu == best_nu[i] and (best_key[i] == 0 or length < best_len[i]))
                    if better:
                        best_nu[i] = nu
                        best_key[i] = key
                        best_len[i] = length
    return best_key, best_nu, best_len


@njit(cache=True)
def enumerate_multi(off, attr, value, prob, max_schema):
    """Every subset of 2..max_schema attributes of every row: (row, packed schema, nu, length, packed predicate
    tuple) arrays.  The tuple (the subset's ``value`` s, 21 bits each: ``runs.tuples_fit``) names the list the row
    would join under that schema."""
    n = off.shape[0] - 1
    total = 0
    for i in range(n):
        e = off[i + 1] - off[i]
        total += e * (e - 1) // 2
        if max_schema >= 3:
            total += e * (e - 1) * (e - 2) // 6
    rows = np.empty(total, dtype=np.int64)
    keys = np.empty(total, dtype=np.int64)
    nus = np.empty(total, dtype=np.float64)
    lens = np.empty(total, dtype=np.int64)
    tup = np.empty(total, dtype=np.int64)
    w = 0
    for i in range(n):
        lo, hi = off[i], off[i + 1]
        for j1 in range(lo, hi):
            for j2 in range(j1 + 1, hi):
                for j3 in range(j2, hi if max_schema >= 3 else j2 + 1):
                    ok, key, nu, length = _subset(attr, prob, j1, j2, j3 if j3 > j2 else -1)
                    if ok:
                        t = np.int64(value[j1]) | (np.int64(value[j2]) << 21)
                        if j3 > j2:
                            t |= np.int64(value[j3]) << 42
                        rows[w], keys[w], nus[w], lens[w], tup[w] = i, key, nu, length, t
                        w += 1
    return rows[:w], keys[:w], nus[:w], lens[:w], tup[:w]


def best_assignment(profile: EqualityProfile, config: np.ndarray, max_schema: int = MAX_SCHEMA, tol: float = 1.0):
    """The best clustering instance for ``config`` (section 3.2).

    Returns ``(key, nu, length)`` per subscription: the packed schema it is
    filed under (0 for the catch-all, negative for a presence key), the
    probability that it is checked, and the number of its predicates the key
    stands for.
    """
    config = np.unique(np.asarray(config, dtype=np.int64))
    return fold_presence(profile, *_best_assignment(profile.offsets, profile.attr, profile.prob, config, max_schema,
                                                    tol, multi_fields(config)))


@dataclass
class Configuration:
    """A hashing configuration and the best clustering instance for it."""

    schemas: np.ndarray  # packed keys of every table, singles included, sorted
    key: np.ndarray  # int64 [n]: schema each subscription is filed under (0: catch-all)
    nu: np.ndarray  # float64 [n]: probability that the subscription is checked
    length: np.ndarray  # int64 [n]: size of that schema
    steps: list[dict] = field(default_factory=list)  # the greedy's choices, in order

    @property
    def multi(self) -> np.ndarray:
        """The multi-attribute schemas (the ones the greedy added)."""
        return self.schemas[is_multi(self.schemas)]


def greedy_configuration(
    profile: EqualityProfile,
    mu: Callable[[tuple[int, ...]], float],
    model,
    max_space: float | None = None,
    max_schema: int = MAX_SCHEMA,
    sample_size: int = 100_000,
    min_support: int = 2,
    seed: int = 0,
    margin: float = SAFETY_MARGIN,
    pricing=None,
    pi: float = 1.0,
) -> Configuration:
    """The greedy algorithm of section 3.2.

    Starts from the single attributes of equality predicates, then repeatedly
    adds the schema with the largest positive benefit per unit of space,
    among those that keep the estimated space under ``max_space`` (default:
    four times the space of the single-attribute clustering).  Benefits are
    estimated on a uniform sample of ``sample_size`` subscriptions and scaled;
    candidates are the attribute sets of 2..``max_schema`` equality
    predicates that at least ``min_support`` sampled subscriptions share.
    ``mu(attribute ids)`` gives the probability that an event carries them
    all.  ``model`` is an :class:`engine.costmodel.model.CostModel`.  A schema qualifies
    only if the checks it saves are worth ``margin`` times its per-event cost:
    the same safety margin as the dynamic algorithm's ``Bcreate``
    (engine/costmodel/maintenance.py), for the cluster visits the model leaves out.
    With ``pricing`` (a :class:`engine.costmodel.runs.RunPricing`: the store
    keeps runs) the checks a schema saves are those of the lists it empties
    against the lists it fills, each priced with its run index
    (:func:`engine.costmodel.runs.candidate_benefits`; ``pi``: probability of
    a list's first column).
    """
    if not 1 <= max_schema <= MAX_SCHEMA:
        raise ValueError(f"max_schema must be in 1..{MAX_SCHEMA}")
    n = len(profile)
    singles = np.unique(profile.attr + 1)  # packed single-attribute schemas
    if n == 0:
        z = np.zeros(0, np.int64)
        return Configuration(singles, z, np.zeros(0), z)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, size=sample_size, replace=False)) if n > sample_size else np.arange(n)
    sample = profile.take(rows)
    scale = n / len(rows)

    config = singles.copy()
    tol = FILING_TOLERANCE if pricing is not None else 1.0
    _, cur_nu, cur_len = fold_presence(sample, *_best_assignment(sample.offsets, sample.attr, sample.prob, config,
                                                                 max_schema, tol, multi_fields(config)))
    base_space = space_cost(model, np.zeros(0), sample.size, cur_len) * scale  # the single-field clustering
    limit = 4.0 * base_space if max_space is None else float(max_space)
    space = base_space

    steps: list[dict] = []
    if max_schema >= 2 and len(profile.attr):
        e_row, e_key, e_nu, e_len, e_tup = enumerate_multi(sample.offsets, sample.attr, sample.value, sample.prob,
                                                           max_schema)
        cand, inv, support = np.unique(e_key, return_inverse=True, return_counts=True)
        keep = support >= min_support
        cand_len = np.array([len(unpack_schema(k)) for k in cand.tolist()], dtype=np.int64)
        cand_mu = np.array([mu(unpack_schema(k)) for k in cand.tolist()], dtype=np.float64)
        # distinct values per attribute bound the number of entries a table can get
        pairs = np.unique(np.stack([profile.attr, profile.value]), axis=1)
        distinct = np.bincount(pairs[0], minlength=int(profile.attr.max()) + 1).astype(np.float64)
        cand_dom = np.array([np.prod([distinct[a] for a in unpack_schema(k)]) for k in cand.tolist()])
        table_cost = model.table_cost(cand_mu, cand_len)
        chosen = np.zeros(len(cand), dtype=bool)
        priced = pricing is not None and tuples_fit(sample.value)
        if priced:
            cur_schema, _, _ = best_assignment(sample, config, max_schema, tol)
            cur_tup = row_tuples(sample.offsets, sample.attr, sample.value, cur_schema)
        while True:
            saved = np.maximum(cur_nu[e_row] - e_nu, 0.0)
            mover = saved > 0
            gain = np.bincount(inv, weights=saved, minlength=len(cand)) * scale
            if priced:
                lists, row_list = np.unique(np.stack([cur_schema, cur_tup]), axis=1, return_inverse=True)
                row_list = row_list.ravel()
                list_n = np.bincount(row_list).astype(np.float64) * scale
                list_nu = np.zeros(len(list_n))
                list_nu[row_list] = cur_nu
                gain = candidate_benefits(pricing, pi, row_list, list_n, list_nu, np.full(len(cur_nu), scale),
                                          cur_nu, e_row, inv, e_nu, e_tup, len(cand))
                gain[chosen] = -np.inf
            movers = np.bincount(inv, weights=mover, minlength=len(cand)) * scale
            cols = np.bincount(inv, weights=mover * (e_len - cur_len[e_row]), minlength=len(cand)) * scale
            benefit = model.K_c * gain - table_cost
            entries = np.minimum(movers, cand_dom)
            delta_space = model.i_space + model.h_space * entries - model.K_space * cols
            fits = space + np.maximum(delta_space, 0.0) <= limit
            ok = keep & ~chosen & (benefit > 0) & (model.K_c * gain >= margin * table_cost) & fits
            if not ok.any():
                break
            per_space = np.where(delta_space > 0, benefit / np.where(delta_space > 0, delta_space, 1.0), np.inf)
            c = int(np.flatnonzero(ok)[np.argmax(per_space[ok])])
            chosen[c] = True
            config = np.sort(np.append(config, cand[c]))
            space += delta_space[c]
            sel = np.flatnonzero((inv == c) & mover)
            r = e_row[sel]
            cur_nu_before = cur_nu.copy()
            cur_nu[r] = e_nu[sel]
            cur_len[r] = e_len[sel]
            if priced:
                psel = np.flatnonzero((inv == c) & (e_nu < cur_nu_before[e_row]))
                cur_schema[e_row[psel]] = cand[c]
                cur_tup[e_row[psel]] = e_tup[psel]
            steps.append(
                {
                    "schema": unpack_schema(cand[c]),
                    "benefit_ns_per_event": float(benefit[c]),
                    "space_bytes": float(delta_space[c]),
                    "subscriptions_moved": int(round(movers[c])),
                }
            )
    key, nu, length = best_assignment(profile, config, max_schema, tol)
    return Configuration(config, key, nu, length, steps)
