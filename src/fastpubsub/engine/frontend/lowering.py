"""Lowering: every subscription as conjunctions of the six comparisons the kernels index.

The operators of engine/semantics.py beyond ``= != < <= > >=`` and OR are
rewritten, exactly, into *rows*: conjunctions of comparisons that share the
subscription's id (``SubscriptionBatch.disjunct`` marks the rows after the
first).  Every algorithm then indexes them with its existing structures, and
the matcher reports an id once per event however many of its rows hold.

=================== ====================================================================
``a in (x, y)``      two rows: ``a = x`` | ``a = y`` (each filed under its own value)
``a not in (x, y)``  one row: ``a != x and a != y`` (``!=`` requires comparability too)
``a between lo, hi`` one row: ``a >= lo and a <= hi`` (the sorted inequality groups)
``not between``      two rows: ``a < lo`` | ``a > hi``
``a exists``         three rows: ``a >= -inf`` | ``a >= ""`` | ``a >= false`` (one per kind)
``a prefix p``       ``D = p`` where ``D`` is the derived attribute "first len(p) characters of a"
``a suffix p``       ``D = p``, ``D`` = "last len(p) characters of a"
``a contains p``     ``D = true``, ``D`` = "a is a string containing p"
=================== ====================================================================

Derived attributes are named ``"\\x00" + json([kind, attribute, length or p])``
(event and subscription names may not start with NUL, so nothing collides).
Before matching, :func:`derive_events` adds to each event that carries a
string value of ``a`` the derived pairs of every derived attribute of ``a``
the matcher knows: for ``prefix`` / ``suffix`` one slice per distinct length,
so the subscriptions are reached through an equality probe on their own
value (indexed like any ``=``); for ``contains`` one test per distinct
constant.  ``in`` and the derived equalities are access predicates like any
other, so an event reaches such a subscription through its own value.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np

from ..semantics import KIND_BOOL, KIND_STRING, OP_CODE, RESERVED_PREFIX, AnyOf, Predicate, _distinct

_DERIVED = ("prefix", "suffix", "contains")


def derived_name(kind: str, attribute: str, arg: Any) -> str:
    """Name of the derived attribute ``kind`` of ``attribute`` (``arg``: a length, or the contained string)."""
    return RESERVED_PREFIX + json.dumps([kind, attribute, arg], ensure_ascii=False)


def parse_derived(name: str) -> tuple[str, str, Any] | None:
    """(kind, attribute, arg) of a derived attribute name; ``None`` for an ordinary or malformed name."""
    if not name or name[0] != RESERVED_PREFIX:
        return None
    try:
        kind, attribute, arg = json.loads(name[1:])
    except (ValueError, TypeError):
        return None
    if kind not in _DERIVED or not isinstance(attribute, str) or not attribute:
        return None
    if kind == "contains":
        return (kind, attribute, arg) if isinstance(arg, str) and arg else None
    if type(arg) is not int or arg < 1:
        return None
    return kind, attribute, arg


def lower_predicate(p: Predicate) -> list[list[Predicate]]:
    """The alternatives (rows) of one validated predicate, each a conjunction of comparisons."""
    a, op, v = p
    if op in OP_CODE:
        return [[p]]
    if op == "in":
        return [[(a, "=", x)] for x in _distinct(v)]
    if op == "not in":
        return [[(a, "!=", x) for x in _distinct(v)]]
    if op == "between":
        return [[(a, ">=", v[0]), (a, "<=", v[1])]]
    if op == "not between":
        return [[(a, "<", v[0])], [(a, ">", v[1])]]
    if op == "exists":
        return [[(a, ">=", float("-inf"))], [(a, ">=", "")], [(a, ">=", False)]]
    if op in ("prefix", "suffix"):
        return [[(derived_name(op, a, len(v)), "=", v)]]
    return [[(derived_name("contains", a, v), "=", True)]]  # contains


def lower(subscription: "list[Predicate] | AnyOf") -> list[list[Predicate]]:
    """The rows of a validated subscription (a conjunction or an :class:`AnyOf`)."""
    groups = subscription.disjuncts if isinstance(subscription, AnyOf) else [subscription]
    rows: list[list[Predicate]] = []
    for g in groups:
        if all(op in OP_CODE for _, op, _ in g):
            rows.append(list(g))
            continue
        acc: list[list[Predicate]] = [[]]
        for p in g:
            alts = lower_predicate(p)
            acc = [r + alt for r in acc for alt in alts] if len(alts) > 1 else [r + alts[0] for r in acc]
        rows.extend(acc)
    return rows


def lift(row: list[Predicate]) -> list[Predicate]:
    """A row with its derived predicates written back as ``prefix`` / ``suffix`` / ``contains``."""
    out = []
    for a, op, v in row:
        d = parse_derived(a) if a and a[0] == RESERVED_PREFIX else None
        if d is not None and op == "=":
            kind, attribute, arg = d
            if kind == "contains" and v is True:
                out.append((attribute, "contains", arg))
                continue
            if kind != "contains" and isinstance(v, str) and len(v) == arg:
                out.append((attribute, kind, v))
                continue
        out.append((a, op, v))
    return out


class DerivedAttributes:
    """The derived attributes a matcher's subscriptions use, by the attribute they derive from."""

    def __init__(self) -> None:
        self.by_attribute: dict[str, list[tuple[str, str, Any]]] = {}  # attribute -> [(name, kind, arg)]
        self._known: set[str] = set()

    def __len__(self) -> int:
        return len(self._known)

    def learn(self, names: Iterable[str]) -> None:
        """Take note of the derived attributes among ``names`` (a batch's attribute names)."""
        for name in names:
            if name and name[0] == RESERVED_PREFIX and name not in self._known:
                d = parse_derived(name)
                if d is None:
                    raise ValueError(f"unknown reserved attribute name {name!r}")
                self._known.add(name)
                self.by_attribute.setdefault(d[1], []).append((name, d[0], d[2]))

    def derive_events(self, batch: Any, known: Any) -> Any:
        """An ``EventBatch`` with each event's derived pairs added (O(string pairs x derived attributes of theirs)).

        ``known``: the string constants of the matcher (``StringDictionary.ids``); a derived string that is
        none of them is left out, since derived attributes take only ``=`` (``Matcher`` checks it).
        """
        if not self.by_attribute or not len(batch.strings):
            return batch
        wanted = [(i, self.by_attribute[n]) for i, n in enumerate(batch.attribute_names) if n in self.by_attribute]
        if not wanted:
            return batch
        kinds = np.asarray(batch.kinds)
        attrs = np.asarray(batch.attributes)
        offsets = np.asarray(batch.offsets, dtype=np.int64)
        is_str = kinds == KIND_STRING
        str_index = np.cumsum(is_str) - 1
        event_of = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        names = list(batch.attribute_names)
        strings = list(batch.strings)
        new_event: list[np.ndarray] = []
        new_attr: list[np.ndarray] = []
        new_kind: list[np.ndarray] = []
        new_sidx: list[np.ndarray] = []
        for ai, specs in wanted:
            pos = np.flatnonzero((attrs == ai) & is_str)
            if not len(pos):
                continue
            values = [strings[k] for k in str_index[pos].tolist()]
            evs = event_of[pos]
            lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
            for name, kind, arg in specs:
                ni = len(names)
                names.append(name)
                if kind == "contains":
                    keep = np.fromiter((arg in v for v in values), dtype=bool, count=len(values))
                    sidx = np.full(int(keep.sum()), -1, dtype=np.int64)
                    k = KIND_BOOL
                else:  # only slices equal to some constant: the others can satisfy no '=' (the only operator here)
                    cut = [v[:arg] if kind == "prefix" else v[-arg:] for v in values]
                    keep = (lengths >= arg) & np.fromiter(map(known.__contains__, cut), dtype=bool, count=len(cut))
                    picked = [cut[j] for j in np.flatnonzero(keep).tolist()]
                    sidx = np.arange(len(strings), len(strings) + len(picked), dtype=np.int64)
                    strings.extend(picked)
                    k = KIND_STRING
                m = int(keep.sum())
                if m:
                    new_event.append(evs[keep])
                    new_attr.append(np.full(m, ni, dtype=np.int32))
                    new_kind.append(np.full(m, k, dtype=np.int8))
                    new_sidx.append(sidx)
        if not new_event:
            return batch
        ev = np.concatenate([event_of] + new_event)
        order = np.argsort(ev, kind="stable")
        old_sidx = np.where(is_str, str_index, -1)
        sidx = np.concatenate([old_sidx] + new_sidx)[order]
        kinds_all = np.concatenate([kinds.astype(np.int8)] + new_kind)[order]
        numbers = np.concatenate([np.asarray(batch.numbers, dtype=np.float64),
                                  np.ones(len(ev) - len(event_of), dtype=np.float64)])[order]  # derived bools: true
        counts = np.bincount(ev, minlength=len(offsets) - 1)
        new_offsets = np.zeros(len(offsets), dtype=np.int64)
        np.cumsum(counts, out=new_offsets[1:])
        picked = sidx[sidx >= 0]
        return type(batch)(tuple(names), new_offsets, np.concatenate([attrs.astype(np.int32)] + new_attr)[order],
                          kinds_all, numbers, tuple(map(strings.__getitem__, picked.tolist())))
