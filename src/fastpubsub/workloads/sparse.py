"""Sparse, high-dimensional workloads: OpIndex's synthetic data (Zhang et al., PVLDB 2014, section 7.1) and an
e-commerce catalogue modelled on its eBay experiment.

Tens of thousands of attributes, each event carrying a few dozen of them, each
subscription a handful: the regime where an attribute's *presence* is the
most selective thing about it.  Output is the engine's columnar form
(``SubscriptionBatch`` / ``EventBatch``, as workloads/fabret.py), generated
with vectorised numpy from a seeded ``numpy.random.Generator``: a
(spec, n, seed) triple always yields the same batch.

Reading of section 7.1 and Table 3 (the copy lost the bold defaults except
theta_1 = 40 %, sigma = 50, Zipf = 0):

* ``d`` attributes (default 20,000); attribute ``a{r}`` has popularity rank
  ``r``: weight ``(r + 1) ** -attribute_zipf`` (0: uniform).
* a subscription has a size drawn uniformly in ``subscription_size``
  (default 1..8, i.e. Gamma_max = 8) and distinct attributes drawn by weight;
  an event has a size drawn in ``event_size`` (default exactly m = 40).
  With these defaults 18.5 % of the subscriptions have no ``=`` (the mean of
  0.6**k for k = 1..8) and an event matches 78.5 of 1M subscriptions.
* operators by share (``operators``; default 40 % ``=``, the rest ``<=`` and
  ``>=`` equally); values uniform in ``1..value_range`` (sigma), or Zipf by
  ``value_zipf``.
* beyond the paper: every operator of engine/semantics.py except ``suffix``
  and ``contains`` can be mixed in (``in`` / ``not in`` take ``list_size``
  distinct values, ``between`` two), and every ``string_every``-th attribute
  carries short words instead of numbers, on which ``string_operators``
  apply (``prefix`` included).  Extended operators are lowered to rows exactly
  as engine/frontend/lowering.py does (``in`` -> one row per value, ``between`` -> two
  comparisons, ``prefix`` -> ``=`` on the derived attribute, ...).

The e-commerce preset follows section 7.1's eBay generator: 10,204 attributes,
attribute presence in products skewed (``brand`` in 31 % of products,
``country of manufacture`` in 17 %: a Zipf exponent of log2(31/17) = 0.867 on
the rank), subscription attributes drawn with probability proportional to
``log f(A)`` (f: the attribute's count over the 296,846 crawled products),
products of 3 to 15 attributes, operators ``=`` (80 %) and ``in`` of two values
(20 %) [ours: the paper names the set operator for its real data], Zipf-skewed
categorical values [ours].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from fastpubsub.engine.frontend.lowering import derived_name
from fastpubsub.engine.semantics import KIND_BOOL, KIND_NUMBER, KIND_STRING, MAX_CONJUNCTIONS, OP_CODE

#: Operators the generator draws (engine/semantics.py names).
SPARSE_OPERATORS: tuple[str, ...] = (
    "=", "!=", "<", "<=", ">", ">=", "in", "not in", "between", "not between", "prefix", "exists")
_CODE = {op: i for i, op in enumerate(SPARSE_OPERATORS)}
_IN, _NOT_IN, _BETWEEN, _NOT_BETWEEN, _PREFIX, _EXISTS = (
    _CODE[o] for o in ("in", "not in", "between", "not between", "prefix", "exists"))
#: Letters of the words string attributes carry (a small alphabet, so prefixes are shared).
ALPHABET = "abcd"
#: eBay catalogue of section 7.1: products crawled, share of products with the most common attribute.
EBAY_PRODUCTS = 296_846
EBAY_TOP_PRESENCE = 0.31


@dataclass(frozen=True)
class SparseSpec:
    """One sparse workload (defaults: OpIndex's synthetic data, Table 3 as read in the module docstring)."""

    name: str = "opindex"
    n_attributes: int = 20_000  # d
    attribute_zipf: float = 0.0  # popularity of attribute ranks in events
    subscription_weighting: str = "events"  # "events": as events; "log": log of the catalogue count (eBay)
    subscription_size: tuple[int, int] = (1, 8)  # inclusive; (1, Gamma_max)
    event_size: tuple[int, int] = (40, 40)  # inclusive; m
    operators: tuple[tuple[str, float], ...] = (("=", 0.4), ("<=", 0.3), (">=", 0.3))  # numeric attributes
    value_range: int = 50  # sigma: values 1..sigma
    value_zipf: float = 0.0
    list_size: int = 3  # values of an in / not in list
    string_every: int = 0  # attributes k-1, 2k-1, ... carry words (0: none)
    string_operators: tuple[tuple[str, float], ...] = (("=", 0.5), ("prefix", 0.5))
    prefix_length: tuple[int, int] = (1, 2)  # inclusive

    def __post_init__(self) -> None:
        d = self.n_attributes
        if d < 1:
            raise ValueError(f"{self.name}: n_attributes must be positive")
        for what, (lo, hi) in (("subscription_size", self.subscription_size), ("event_size", self.event_size)):
            if not 1 <= lo <= hi <= d:
                raise ValueError(f"{self.name}: {what} {(lo, hi)} must satisfy 1 <= lo <= hi <= n_attributes")
        if self.subscription_weighting not in ("events", "log"):
            raise ValueError(f"{self.name}: subscription_weighting must be 'events' or 'log'")
        if self.attribute_zipf < 0 or self.value_zipf < 0:
            raise ValueError(f"{self.name}: Zipf exponents must be >= 0")
        if self.value_range < 2:
            raise ValueError(f"{self.name}: value_range must be at least 2")
        if not 1 <= self.list_size <= self.value_range:
            raise ValueError(f"{self.name}: list_size must be in 1..value_range")
        for what, mix in (("operators", self.operators), ("string_operators", self.string_operators)):
            if not mix or any(s < 0 for _, s in mix) or sum(s for _, s in mix) <= 0:
                raise ValueError(f"{self.name}: {what} needs positive shares")
            for op, _ in mix:
                if op not in _CODE:
                    raise ValueError(f"{self.name}: unknown or unsupported operator {op!r} in {what}")
        if any(op == "prefix" and s > 0 for op, s in self.operators):
            raise ValueError(f"{self.name}: prefix applies to string attributes only (string_operators)")
        if self.string_every < 0:
            raise ValueError(f"{self.name}: string_every must be >= 0")
        lo, hi = self.prefix_length
        if not 1 <= lo <= hi <= self.word_length:
            raise ValueError(f"{self.name}: prefix_length must be within 1..{self.word_length} (the word length)")

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(f"a{i}" for i in range(self.n_attributes))

    @property
    def word_length(self) -> int:
        """Letters of the words string attributes carry: enough for ``value_range`` distinct words."""
        return max(1, math.ceil(math.log(self.value_range) / math.log(len(ALPHABET)) - 1e-9))

    def words(self) -> list[str]:
        """Word of value ``v`` at index ``v - 1``: ``v - 1`` in base 4 over ``ALPHABET`` (same order as ``v``)."""
        n, w = self.value_range, self.word_length
        out = []
        for v in range(n):
            letters = []
            for _ in range(w):
                v, r = divmod(v, len(ALPHABET))
                letters.append(ALPHABET[r])
            out.append("".join(reversed(letters)))
        return out

    def is_string(self) -> np.ndarray:
        """bool [d]: which attributes carry words."""
        k = self.string_every
        mask = np.zeros(self.n_attributes, dtype=bool)
        if k:
            mask[k - 1::k] = True
        return mask

    def event_weights(self) -> np.ndarray | None:
        """Relative frequency of each attribute in events (``None``: uniform)."""
        if self.attribute_zipf == 0:
            return None
        return np.arange(1, self.n_attributes + 1, dtype=np.float64) ** -self.attribute_zipf

    def subscription_weights(self) -> np.ndarray | None:
        """Relative frequency of each attribute in subscriptions (``None``: uniform)."""
        w = self.event_weights()
        if self.subscription_weighting == "events":
            return w
        presence = EBAY_TOP_PRESENCE * (w / w[0] if w is not None else np.ones(self.n_attributes))
        return np.log1p(EBAY_PRODUCTS * presence)


OPINDEX = SparseSpec()
SPARSE_PRESETS: dict[str, SparseSpec] = {
    "opindex": OPINDEX,
    "opindex-operators": replace(
        OPINDEX, name="opindex-operators",
        operators=(("=", 0.25), ("!=", 0.05), ("<", 0.05), ("<=", 0.1), (">", 0.05), (">=", 0.1), ("in", 0.1),
                   ("not in", 0.05), ("between", 0.15), ("not between", 0.05), ("exists", 0.05)),
        string_every=10,
        string_operators=(("=", 0.3), ("<=", 0.1), ("in", 0.1), ("prefix", 0.4), ("exists", 0.1))),
    "ebay": SparseSpec(
        name="ebay", n_attributes=10_204, attribute_zipf=math.log2(31 / 17), subscription_weighting="log",
        subscription_size=(1, 5), event_size=(3, 15), operators=(("=", 0.8), ("in", 0.2)), list_size=2, value_zipf=1.0),
}


def _sampler(rng: np.random.Generator, weights: np.ndarray | None, pool: int):
    """Draws of ``size`` integers in ``range(pool)``, uniform or by ``weights``."""
    if weights is None:
        return lambda size: rng.integers(0, pool, size=size, dtype=np.int64)
    cdf = np.cumsum(weights, dtype=np.float64)
    cdf /= cdf[-1]
    return lambda size: np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), pool - 1)


def _distinct_rows(draw, sizes: np.ndarray) -> np.ndarray:
    """Flat CSR values: row ``i`` holds ``sizes[i]`` distinct draws (rejection per column)."""
    n, k_max = len(sizes), int(sizes.max()) if len(sizes) else 0
    out = np.full((n, k_max), -1, dtype=np.int64)
    for j in range(k_max):
        rows = np.flatnonzero(sizes > j)
        col = draw(len(rows))
        while True:
            clash = np.zeros(len(rows), dtype=bool)
            for i in range(j):
                clash |= col == out[rows, i]
            bad = np.flatnonzero(clash)
            if bad.size == 0:
                break
            col[bad] = draw(bad.size)
        out[rows, j] = col
    return out[np.arange(k_max) < sizes[:, None]]


def _value_weights(spec: SparseSpec) -> np.ndarray | None:
    if spec.value_zipf == 0:
        return None
    return np.arange(1, spec.value_range + 1, dtype=np.float64) ** -spec.value_zipf


def _draw_operators(rng: np.random.Generator, mix: tuple[tuple[str, float], ...], size: int) -> np.ndarray:
    codes = np.array([_CODE[o] for o, _ in mix], dtype=np.int64)
    p = np.array([s for _, s in mix], dtype=np.float64)
    return codes[np.minimum(np.searchsorted(np.cumsum(p) / p.sum(), rng.random(size), side="right"), len(p) - 1)]


def generate_sparse_subscriptions(spec: SparseSpec, n: int, seed: int = 0, first_id: int = 0) -> SubscriptionBatch:
    """``n`` subscriptions of ``spec`` with ids ``first_id .. first_id + n - 1`` (rows lowered as the engine does)."""
    rng = np.random.default_rng(seed)
    lo, hi = spec.subscription_size
    sizes = rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    attrs = _distinct_rows(_sampler(rng, spec.subscription_weights(), spec.n_attributes), sizes)
    m = len(attrs)
    sub_of = np.repeat(np.arange(n, dtype=np.int64), sizes)
    is_str = spec.is_string()[attrs]
    ops = np.empty(m, dtype=np.int64)
    ops[~is_str] = _draw_operators(rng, spec.operators, int((~is_str).sum()))
    ops[is_str] = _draw_operators(rng, spec.string_operators, int(is_str.sum()))
    draw_value = _sampler(rng, _value_weights(spec), spec.value_range)
    first = draw_value(m) + 1
    second = draw_value(m) + 1
    lists = _distinct_rows(draw_value, np.full(m, spec.list_size, dtype=np.int64)).reshape(m, spec.list_size) + 1
    plen = rng.integers(spec.prefix_length[0], spec.prefix_length[1] + 1, size=m, dtype=np.int64)
    return _lower(spec, n, first_id, sizes, sub_of, attrs, is_str, ops, first, second, lists, plen)


def _lower(spec, n, first_id, sizes, sub_of, attrs, is_str, ops, first, second, lists, plen) -> SubscriptionBatch:
    """Rows of comparisons (engine/frontend/lowering.py's rewriting, vectorised) as a ``SubscriptionBatch``."""
    m, L = len(attrs), spec.list_size
    # Comparisons of every alternative of every predicate: (predicate, alternative, op, kind, value, string?).
    parts: list[tuple[np.ndarray, ...]] = []

    def emit(preds, alt, op, kind, value):
        parts.append((preds, np.broadcast_to(alt, preds.shape), np.broadcast_to(np.int64(op) if np.isscalar(op) else op, preds.shape),
                      np.broadcast_to(np.int64(kind), preds.shape), np.broadcast_to(value, preds.shape).astype(np.float64)))

    plain = np.flatnonzero(ops < _IN)
    emit(plain, 0, ops[plain], KIND_NUMBER, first[plain])  # kinds fixed below for string attributes
    p = np.flatnonzero(ops == _BETWEEN)
    lo_v, hi_v = np.minimum(first[p], second[p]), np.maximum(first[p], second[p])
    emit(p, 0, OP_CODE[">="], KIND_NUMBER, lo_v)
    emit(p, 0, OP_CODE["<="], KIND_NUMBER, hi_v)
    p = np.flatnonzero(ops == _NOT_BETWEEN)
    lo_v, hi_v = np.minimum(first[p], second[p]), np.maximum(first[p], second[p])
    emit(p, 0, OP_CODE["<"], KIND_NUMBER, lo_v)
    emit(p, 1, OP_CODE[">"], KIND_NUMBER, hi_v)
    p = np.flatnonzero(ops == _IN)
    for j in range(L):
        emit(p, j, OP_CODE["="], KIND_NUMBER, lists[p, j])
    p = np.flatnonzero(ops == _NOT_IN)
    for j in range(L):
        emit(p, 0, OP_CODE["!="], KIND_NUMBER, lists[p, j])
    p = np.flatnonzero(ops == _PREFIX)
    emit(p, 0, OP_CODE["="], KIND_STRING, first[p])
    p = np.flatnonzero(ops == _EXISTS)
    emit(p, 0, OP_CODE[">="], KIND_NUMBER, -np.inf)
    emit(p, 1, OP_CODE[">="], KIND_STRING, 0.0)  # ""
    emit(p, 2, OP_CODE[">="], KIND_BOOL, 0.0)  # False
    c_pred, c_alt, c_op, c_kind, c_val = (np.concatenate(col) for col in zip(*parts))
    order = np.lexsort((np.arange(len(c_pred)), c_alt, c_pred))  # stable: emission order within an alternative
    c_pred, c_alt, c_op, c_kind, c_val = c_pred[order], c_alt[order], c_op[order], c_kind[order], c_val[order]
    # Value kinds: words on string attributes (the "exists" rows keep their own kinds).
    exists = ops[c_pred] == _EXISTS
    c_kind = np.where(is_str[c_pred] & ~exists, KIND_STRING, c_kind)

    n_alt = np.ones(m, dtype=np.int64)
    n_alt[ops == _IN] = L
    n_alt[ops == _NOT_BETWEEN] = 2
    n_alt[ops == _EXISTS] = 3
    alt_start = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(n_alt, out=alt_start[1:])
    alt_global = alt_start[c_pred] + c_alt
    comp_count = np.bincount(alt_global, minlength=int(alt_start[-1]))
    comp_start = np.zeros(len(comp_count) + 1, dtype=np.int64)
    np.cumsum(comp_count, out=comp_start[1:])

    # Rows: the cross product of the alternatives of a subscription's predicates (earlier predicates vary slowest).
    pred_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=pred_start[1:])
    pos = np.arange(m, dtype=np.int64) - pred_start[sub_of]
    stride = np.ones(m, dtype=np.int64)  # product of n_alt of the later predicates of the subscription
    for j in range(int(sizes.max()) - 2 if m else -1, -1, -1):
        at = np.flatnonzero((pos == j) & (pos + 1 < sizes[sub_of]))
        stride[at] = stride[at + 1] * n_alt[at + 1]
    head = pred_start[:-1]
    rows_per_sub = stride[head] * n_alt[head]
    if m and int(rows_per_sub.max()) > MAX_CONJUNCTIONS:
        raise ValueError(f"{spec.name}: a subscription lowers to more than {MAX_CONJUNCTIONS} rows; lower list_size")
    n_rows = int(rows_per_sub.sum())
    row_sub = np.repeat(np.arange(n, dtype=np.int64), rows_per_sub)
    row_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(rows_per_sub, out=row_start[1:])
    row_local = np.arange(n_rows, dtype=np.int64) - row_start[row_sub]
    # (row, predicate) pairs, then the comparisons of the alternative each pair picks.
    pair_row = np.repeat(np.arange(n_rows, dtype=np.int64), sizes[row_sub])
    pair_start = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(sizes[row_sub], out=pair_start[1:])
    pair_pred = pred_start[row_sub[pair_row]] + np.arange(len(pair_row), dtype=np.int64) - pair_start[pair_row]
    pair_alt = alt_start[pair_pred] + (row_local[pair_row] // stride[pair_pred]) % n_alt[pair_pred]
    per_pair = comp_count[pair_alt]
    pair_first = np.zeros(len(pair_alt) + 1, dtype=np.int64)
    np.cumsum(per_pair, out=pair_first[1:])
    comp_pair = np.repeat(np.arange(len(pair_alt), dtype=np.int64), per_pair)
    take = comp_start[pair_alt][comp_pair] + np.arange(len(comp_pair), dtype=np.int64) - pair_first[comp_pair]
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_row[comp_pair], minlength=n_rows), out=offsets[1:])

    kinds = c_kind[take].astype(np.int8)
    values = c_val[take]
    out_pred = c_pred[take]
    attributes = attrs[out_pred].astype(np.int64)
    names = list(spec.attribute_names)
    # prefix comparisons go to the derived attribute of (attribute, length), one name per pair in use
    is_prefix = ops[out_pred] == _PREFIX
    if is_prefix.any():
        key = attributes[is_prefix] * (spec.word_length + 1) + plen[out_pred[is_prefix]]
        uniq, inverse = np.unique(key, return_inverse=True)
        base = len(names)
        for k in uniq.tolist():
            a, length = divmod(k, spec.word_length + 1)
            names.append(derived_name("prefix", names[a], length))
        attributes[is_prefix] = base + inverse
    words = spec.words()
    str_pos = np.flatnonzero(kinds == KIND_STRING)
    exists_str = ops[out_pred[str_pos]] == _EXISTS
    cut = np.where(ops[out_pred[str_pos]] == _PREFIX, plen[out_pred[str_pos]], spec.word_length)
    strings = tuple("" if e else words[int(v) - 1][:c]
                    for v, c, e in zip(values[str_pos].tolist(), cut.tolist(), exists_str.tolist()))
    values = np.where(kinds == KIND_STRING, np.nan, values)
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    disjunct = (row_local > 0).astype(np.int8)
    return SubscriptionBatch(
        ids=ids[row_sub], attribute_names=tuple(names), offsets=offsets, attributes=attributes.astype(np.int32),
        operators=c_op[take].astype(np.int8), kinds=kinds, numbers=values, strings=strings,
        disjunct=disjunct if disjunct.any() else np.zeros(0, np.int8))


def generate_sparse_events(spec: SparseSpec, n: int, seed: int = 0) -> EventBatch:
    """``n`` events of ``spec``: sizes in ``event_size``, distinct attributes by event weight, words on string ones."""
    rng = np.random.default_rng(seed)
    lo, hi = spec.event_size
    sizes = rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    attrs = _distinct_rows(_sampler(rng, spec.event_weights(), spec.n_attributes), sizes)
    values = _sampler(rng, _value_weights(spec), spec.value_range)(len(attrs)) + 1
    is_str = spec.is_string()[attrs]
    words = spec.words()
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return EventBatch(
        attribute_names=spec.attribute_names, offsets=offsets, attributes=attrs.astype(np.int32),
        kinds=np.where(is_str, KIND_STRING, KIND_NUMBER).astype(np.int8),
        numbers=np.where(is_str, np.nan, values.astype(np.float64)),
        strings=tuple(words[v - 1] for v in values[is_str].tolist()))
