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
``not exists``       ``D = true``, ``D`` = "the event has no value of a" (added to such events)
``equals ignore      ``D = casefold(p)``, ``D`` = "a case-folded" (``!=`` for the ``not`` form)
case``
``prefix / suffix    ``D = casefold(p)``, ``D`` = "first / last len(casefold(p)) characters of
ignore case``        a case-folded"
``not prefix``       ``D != p``, ``D`` = "first len(p) characters of a" (all of a if shorter);
``not suffix``       the same with the last ones
``wildcard``         ``D = true``, ``D`` = "the pattern matches a": found through the
                     pattern's leading (else trailing) literal, a dictionary probe per
                     distinct literal length, then the compiled pattern verifies
``not wildcard``     ``D = true``, ``D`` = "the pattern does not match a" (a test per
                     pattern and string: it holds for most strings anyway)
``range``            two rows: ``S = true and a > lo and a <= hi`` | ``R = true``, ``S`` = "a has
                     one number" and ``R`` = "one of a's several numbers is in the range"
                     (only events with several numbers of a get ``R`` pairs: one test
                     per distinct range there; a scalar reaches the indexed first row)
``cidr``             ``D = bits``, ``D`` = the family and first prefix-length bits of a's
                     address; ``bits`` those of the network (an equality, so exact on arrays)
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

import ipaddress
import json
import operator
from itertools import compress, repeat
from typing import Any, Iterable

import numpy as np

from .utf8 import Utf8Strings, char_lengths, char_slices, concatenate, fold, glob, utf8_of
from ..semantics import (
    KIND_BOOL, KIND_NUMBER, KIND_STRING, OP_CODE, RESERVED_PREFIX, AnyOf, Predicate, _distinct, cidr_bits, ip_bits,
    wildcard_parts, wildcard_regex,
)

#: Derived kinds whose argument is a length, whose value is a string, filed only when some constant equals it.
_SLICES = ("prefix", "suffix", "iprefix", "isuffix", "ip")
#: Derived kinds whose argument is a length, whose value is a string present for every string value (for ``!=``).
_FULL_SLICES = ("nprefix", "nsuffix")
#: Derived kinds whose argument is a pattern / substring, whose value is a boolean.
_TESTS = ("contains", "wildcard", "nwildcard")
#: Derived kinds without argument (0).
_WHOLE = ("fold", "absent", "single")
#: Derived kind whose argument is a range ``[op, lo, op, hi]``, whose value is a boolean.
_RANGES = ("within",)
_DERIVED = _SLICES + _FULL_SLICES + _TESTS + _WHOLE + _RANGES
#: The derived kind of each extended string operator, and the operator of its row.
_STRING_LOWERING = {"prefix": ("prefix", "="), "suffix": ("suffix", "="), "not prefix": ("nprefix", "!="),
                    "not suffix": ("nsuffix", "!="), "prefix ignore case": ("iprefix", "="),
                    "suffix ignore case": ("isuffix", "=")}


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
    if kind in _TESTS:
        return (kind, attribute, arg) if isinstance(arg, str) and (arg or kind != "contains") else None
    if kind in _WHOLE:
        return (kind, attribute, 0) if arg == 0 and type(arg) is int else None
    if kind in _RANGES:
        ok = isinstance(arg, list) and len(arg) == 4 and arg[0] in (">", ">=") and arg[2] in ("<", "<=") \
            and all(type(x) in (int, float) for x in arg[1::2])
        return (kind, attribute, arg) if ok else None
    if type(arg) is not int or arg < 1:
        return None
    return kind, attribute, arg


def derived_row_ok(kind: str, arg: Any, op: int, value: Any) -> bool:
    """Whether ``(derived attribute, op, value)`` is a predicate :func:`lower_predicate` can make (``op``: a code)."""
    if kind in _TESTS or kind in _RANGES or kind == "single":
        return op == OP_CODE["="] and value is True
    if kind == "absent":
        return op == OP_CODE["="] and value is True
    if not isinstance(value, str):
        return False
    if kind == "fold":
        return op in (OP_CODE["="], OP_CODE["!="])
    return op == OP_CODE["!=" if kind in _FULL_SLICES else "="] and len(value) == arg


def derived_value(kind: str, arg: Any, value: str) -> Any:
    """The value of derived attribute ``(kind, arg)`` for a string ``value``; ``None`` where it has none."""
    if kind == "prefix" or kind == "nprefix":
        return value[:arg] if kind == "nprefix" or len(value) >= arg else None
    if kind == "suffix" or kind == "nsuffix":
        return value[-arg:] if kind == "nsuffix" or len(value) >= arg else None
    if kind == "fold":
        return value.casefold()
    if kind == "iprefix" or kind == "isuffix":
        folded = value.casefold()
        return None if len(folded) < arg else folded[:arg] if kind == "iprefix" else folded[-arg:]
    if kind == "ip":
        bits = ip_bits(value)
        return bits[:arg] if bits is not None and len(bits) >= arg else None
    if kind == "contains":
        return True if arg in value else None
    matched = wildcard_regex(arg).fullmatch(value) is not None
    return True if matched == (kind == "wildcard") else None  # wildcard, nwildcard


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
    if op in _STRING_LOWERING:
        kind, row_op = _STRING_LOWERING[op]
        c = v.casefold() if kind in ("iprefix", "isuffix") else v
        return [[(derived_name(kind, a, len(c)), row_op, c)]]
    if op == "not exists":
        return [[(derived_name("absent", a, 0), "=", True)]]
    if op == "range":
        return [[(derived_name("single", a, 0), "=", True), (a, v[0], v[1]), (a, v[2], v[3])],
                [(derived_name("within", a, list(v)), "=", True)]]
    if op in ("equals ignore case", "not equals ignore case"):
        return [[(derived_name("fold", a, 0), "=" if op[0] == "e" else "!=", v.casefold())]]
    if op in ("wildcard", "not wildcard"):
        return [[(derived_name("wildcard" if op == "wildcard" else "nwildcard", a, v), "=", True)]]
    if op == "cidr":
        bits = cidr_bits(v)
        return [[(derived_name("ip", a, len(bits)), "=", bits)]]
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
    """A row with its derived predicates written back as the operators they lower (``prefix``, ``cidr``, ...).

    Case-folded constants come back folded, a cidr network as ``address/length``.
    """
    out: list[Predicate] = []
    singles = {d[1] for d in (parse_derived(a) for a, _, _ in row if a and a[0] == RESERVED_PREFIX)
               if d is not None and d[0] == "single"}
    bounds: dict[str, list] = {a: [None, None] for a in singles}  # the range's two comparisons, folded back
    for a, op, v in row:
        if a in bounds and op in (">", ">=", "<", "<=") and bounds[a][op[0] == "<"] is None:
            bounds[a][op[0] == "<"] = [op, v]
            continue
        d = parse_derived(a) if a and a[0] == RESERVED_PREFIX else None
        if d is not None and d[0] == "single":
            continue
        if d is not None:
            lifted = _lifted(d, op, v)
            if lifted is not None:
                out.append(lifted)
                continue
        out.append((a, op, v))
    for a, (lo, hi) in bounds.items():
        if lo is not None and hi is not None:
            out.append((a, "range", lo + hi))
        else:  # (not what lower_predicate makes: kept as it is)
            out.extend((a, *b) for b in (lo, hi) if b is not None)
    return out


def _lifted(d: tuple[str, str, Any], op: str, v: Any) -> Predicate | None:
    kind, attribute, arg = d
    if kind == "contains":
        return (attribute, "contains", arg) if op == "=" and v is True else None
    if kind in ("wildcard", "nwildcard"):
        return (attribute, "wildcard" if kind == "wildcard" else "not wildcard", arg) if op == "=" and v is True \
            else None
    if kind == "absent":
        return (attribute, "not exists", None) if op == "=" and v is True else None
    if kind == "within":
        return (attribute, "range", list(arg)) if op == "=" and v is True else None
    if not isinstance(v, str):
        return None
    if kind == "fold" and op in ("=", "!="):
        return (attribute, "equals ignore case" if op == "=" else "not equals ignore case", v)
    if kind in _FULL_SLICES and op == "!=" and len(v) == arg:
        return (attribute, "not prefix" if kind == "nprefix" else "not suffix", v)
    if op != "=" or len(v) != arg:
        return None
    if kind == "ip" and v[:1] in ("4", "6") and set(v[1:]) <= {"0", "1"}:
        width = 32 if v[0] == "4" else 128
        bits = v[1:]
        address = int(bits.ljust(width, "0"), 2) if bits else 0
        return (attribute, "cidr", str(ipaddress.ip_network((address, len(bits)))))
    names = {"prefix": "prefix", "suffix": "suffix", "iprefix": "prefix ignore case", "isuffix": "suffix ignore case"}
    return (attribute, names[kind], v) if kind in names else None


class DerivedAttributes:
    """The derived attributes a matcher's subscriptions use, by the attribute they derive from."""

    def __init__(self) -> None:
        self.by_attribute: dict[str, list[tuple[str, str, Any]]] = {}  # attribute -> [(name, kind, arg)]
        self._known: set[str] = set()
        self._wildcards: dict[str, WildcardIndex] = {}  # attribute -> its wildcard patterns, indexed

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
                if d[0] == "wildcard":
                    self._wildcards.setdefault(d[1], WildcardIndex()).add(name, d[2])

    def derive_events(self, batch: Any, known: Any) -> Any:
        """An ``EventBatch`` with each event's derived pairs added (O(string pairs x derived attributes of theirs)).

        ``known``: the matcher's string constants (its ``StringDictionary``, or their ids by ``str``); a slice that is none of them
        is left out where the derived attribute takes only ``=``.  ``absent`` pairs go to every event without
        a (non-NaN) value of their attribute.  Strings held as UTF-8 slices (``engine.frontend.utf8``) are sliced
        and case-folded as bytes and the derived ones added as slices too, and tested for a substring or a
        negated wildcard as bytes: no ``str`` per value but for ``wildcard`` (its index probes ``str`` literals)
        and ``ip``.
        """
        if not self.by_attribute:
            return batch
        index = {n: i for i, n in enumerate(batch.attribute_names)}
        kinds = np.asarray(batch.kinds)
        attrs = np.asarray(batch.attributes)
        offsets = np.asarray(batch.offsets, dtype=np.int64)
        n_events = len(offsets) - 1
        is_str = kinds == KIND_STRING
        str_index = np.cumsum(is_str) - 1
        event_of = np.repeat(np.arange(n_events, dtype=np.int64), np.diff(offsets))
        names = list(batch.attribute_names)
        utf8 = utf8_of(batch.strings)
        strings: Any = [utf8] if utf8 is not None else list(batch.strings)  # bytes: the parts, in order
        n_strings = len(batch.strings)
        new_event: list[np.ndarray] = []
        new_attr: list[np.ndarray] = []
        new_kind: list[np.ndarray] = []
        new_sidx: list[np.ndarray] = []
        new_number: list[np.ndarray] = []

        def add(name: str, evs: np.ndarray, k: int, numbers: np.ndarray, sidx: np.ndarray) -> None:
            if len(evs):
                names.append(name)
                new_event.append(evs)
                new_attr.append(np.full(len(evs), len(names) - 1, dtype=np.int32))
                new_kind.append(np.full(len(evs), k, dtype=np.int8))
                new_number.append(numbers)
                new_sidx.append(sidx)

        for attribute, specs in self.by_attribute.items():
            ai = index.get(attribute)
            pos = np.flatnonzero((attrs == ai) & is_str) if ai is not None else np.empty(0, np.int64)
            column = _Column(batch.strings, str_index[pos])
            evs = event_of[pos]
            if len(pos) and attribute in self._wildcards:
                for name, hits_ in self._wildcards[attribute].matches(column.values()).items():
                    add(name, evs[hits_], KIND_BOOL, np.ones(len(hits_)), np.full(len(hits_), -1, dtype=np.int64))
            ranged = [(name, kind, arg) for name, kind, arg in specs if kind == "single" or kind in _RANGES]
            if ranged:
                self._ranges(ai, attrs, kinds, np.asarray(batch.numbers, dtype=np.float64), event_of, n_events,
                             ranged, add)
            for name, kind, arg in specs:
                if kind == "wildcard" or kind == "single" or kind in _RANGES:
                    continue
                if kind == "absent":
                    present = np.zeros(n_events, dtype=bool)
                    if ai is not None:
                        at = attrs == ai
                        nums = np.asarray(batch.numbers, dtype=np.float64)
                        at &= ~((kinds == KIND_NUMBER) & np.isnan(nums))
                        present[event_of[at]] = True
                    lack = np.flatnonzero(~present)
                    add(name, lack, KIND_BOOL, np.ones(len(lack)), np.full(len(lack), -1, dtype=np.int64))
                    continue
                if not len(pos):
                    continue
                if kind in _TESTS:
                    hit = np.flatnonzero(column.holds(kind, arg))
                    add(name, evs[hit], KIND_BOOL, np.ones(len(hit)), np.full(len(hit), -1, dtype=np.int64))
                    continue
                keep, picked = column.slices(kind, arg)
                if utf8 is not None and type(picked) is not Utf8Strings:
                    picked = Utf8Strings.of(picked)
                if kind in _SLICES:  # '=' only: a slice that is no constant satisfies nothing
                    if utf8 is not None and hasattr(known, "lookup_utf8"):
                        filed = known.lookup_utf8(picked) >= 0
                    else:
                        filed = np.fromiter(map(getattr(known, "ids", known).__contains__, picked), dtype=bool,
                                            count=len(picked))
                    if not filed.all():
                        keep = keep[filed]
                        picked = picked.take(np.flatnonzero(filed)) if utf8 is not None \
                            else list(compress(picked, filed))
                add(name, evs[keep], KIND_STRING, np.zeros(len(picked)),
                    np.arange(n_strings, n_strings + len(picked), dtype=np.int64))
                n_strings += len(picked)
                if utf8 is not None:
                    strings.append(picked)
                else:
                    strings.extend(picked)
        if not new_event:
            return batch
        ev = np.concatenate([event_of] + new_event)
        order = np.argsort(ev, kind="stable")
        old_sidx = np.where(is_str, str_index, -1)
        sidx = np.concatenate([old_sidx] + new_sidx)[order]
        kinds_all = np.concatenate([kinds.astype(np.int8)] + new_kind)[order]
        numbers = np.concatenate([np.asarray(batch.numbers, dtype=np.float64)] + new_number)[order]
        counts = np.bincount(ev, minlength=n_events)
        new_offsets = np.zeros(len(offsets), dtype=np.int64)
        np.cumsum(counts, out=new_offsets[1:])
        picked = sidx[sidx >= 0]
        out_strings = concatenate(strings).take(picked) if utf8 is not None else \
            tuple(map(strings.__getitem__, picked.tolist()))
        return type(batch)(tuple(names), new_offsets, np.concatenate([attrs.astype(np.int32)] + new_attr)[order],
                          kinds_all, numbers, out_strings)

    @staticmethod
    def _ranges(ai, attrs, kinds, numbers, event_of, n_events, specs, add) -> None:
        """``single`` pairs for events with one number of the attribute, ``within`` pairs for events with several
        of which one is in the range (the only events where a range's comparisons could be met by two values)."""
        if ai is None:
            return
        pos = np.flatnonzero((attrs == ai) & (kinds == KIND_NUMBER) & ~np.isnan(numbers))
        count = np.bincount(event_of[pos], minlength=n_events)
        for name, kind, arg in specs:
            if kind == "single":
                evs = np.flatnonzero(count == 1)
            else:
                several = pos[count[event_of[pos]] >= 2]
                x = numbers[several]
                lo = x > arg[1] if arg[0] == ">" else x >= arg[1]
                hi = x < arg[3] if arg[2] == "<" else x <= arg[3]
                evs = np.unique(event_of[several][lo & hi])
            add(name, evs, KIND_BOOL, np.ones(len(evs)), np.full(len(evs), -1, dtype=np.int64))


class _Column:
    """The string values of one attribute in a batch (``strings[index]``), with what several derived kinds share
    (lengths, case-folded text) computed once.  Strings given as ``str``: every step a C-level ``map`` over the
    values, no Python loop per value; held as UTF-8 slices: kernels over their bytes, and a ``str`` of each only
    for a kind that needs one (``values``)."""

    def __init__(self, strings: Any, index: np.ndarray) -> None:
        utf8 = utf8_of(strings)
        self.utf8 = utf8.take(index) if utf8 is not None else None
        self._values: list[str] | None = None if utf8 is not None else list(map(strings.__getitem__, index.tolist()))
        self._n = len(index)
        self._lengths: np.ndarray | None = None
        self._folded: Any = None
        self._folded_lengths: np.ndarray | None = None

    def values(self) -> list[str]:
        if self._values is None:
            self._values = list(self.utf8)
        return self._values

    def lengths(self) -> np.ndarray:
        if self._lengths is None:
            if self.utf8 is not None:
                u = self.utf8
                self._lengths = char_lengths(u.data, u.start, u.length)
            else:
                self._lengths = np.fromiter(map(len, self._values), dtype=np.int64, count=self._n)
        return self._lengths

    def folded(self) -> Any:
        """The values case-folded: a list of ``str``, or :class:`Utf8Strings` for values held so."""
        if self._folded is None:
            self._folded = fold(self.utf8) if self.utf8 is not None else list(map(str.casefold, self._values))
        return self._folded

    def folded_lengths(self) -> np.ndarray:
        if self._folded_lengths is None:
            folded = self.folded()
            if self.utf8 is not None:
                self._folded_lengths = char_lengths(folded.data, folded.start, folded.length)
            else:
                self._folded_lengths = np.fromiter(map(len, folded), dtype=np.int64, count=len(folded))
        return self._folded_lengths

    def holds(self, kind: str, arg: str) -> np.ndarray:
        """Per value, whether the test ``contains`` / ``nwildcard`` (``derived_value`` is ``True``) holds."""
        if self.utf8 is not None:
            matched = glob(self.utf8, ["", arg, ""] if kind == "contains" else wildcard_parts(arg))
            return ~matched if kind == "nwildcard" else matched
        values = self.values()
        n = len(values)
        if kind == "contains":
            return np.fromiter(map(operator.contains, values, repeat(arg)), dtype=bool, count=n)
        matched = np.fromiter(map(bool, map(wildcard_regex(arg).fullmatch, values)), dtype=bool, count=n)
        return matched if kind == "wildcard" else ~matched

    def slices(self, kind: str, arg: Any) -> tuple[np.ndarray, Any]:
        """Positions of the values with a value of the derived slice ``(kind, arg)`` and those values
        (``derived_value``'s): a list of ``str``, or :class:`Utf8Strings` for values held so (``ip``: ``str``)."""
        n = self._n
        if kind == "fold":
            return np.arange(n, dtype=np.int64), self.folded()
        if kind == "ip":
            bits = list(map(ip_bits, self.values()))  # (cached per distinct address)
            address = np.fromiter(map(bool, bits), dtype=bool, count=n)  # (bits are never empty)
            keep = np.flatnonzero(address)
            source = bits if len(keep) == n else list(map(bits.__getitem__, keep.tolist()))
            long_enough = np.fromiter(map(len, source), dtype=np.int64, count=len(source)) >= arg
            keep, source = keep[long_enough], list(compress(source, long_enough))
            return keep, list(map(operator.itemgetter(slice(None, arg)), source))
        head = kind in ("prefix", "nprefix", "iprefix")
        whole = kind in _FULL_SLICES  # all of a value shorter than the length
        folded = kind in ("iprefix", "isuffix")
        if self.utf8 is not None:
            source = self.folded() if folded else self.utf8
            start, length = char_slices(source.data, source.start, source.length, arg, head, whole)
            keep = np.flatnonzero(length >= 0)
            return keep, Utf8Strings(source.data, start[keep], length[keep])
        cut = operator.itemgetter(slice(None, arg) if head else slice(-arg, None))
        if whole:
            return np.arange(n, dtype=np.int64), list(map(cut, self._values))
        source = self.folded() if folded else self._values
        keep = np.flatnonzero((self.folded_lengths() if folded else self.lengths()) >= arg)
        if len(keep) < n:
            source = list(map(source.__getitem__, keep.tolist()))
        return keep, list(map(cut, source))


class WildcardIndex:
    """The wildcard patterns of one attribute, filed by their leading literal (else their trailing one).

    A string reaches the patterns whose literal it starts (ends) with through one dictionary probe per distinct
    literal length; the compiled pattern then verifies.  Only patterns with a star at both ends (``*x*``) are
    tried on every string.
    """

    def __init__(self) -> None:
        self.heads: dict[int, dict[str, list]] = {}  # literal length -> leading literal -> [(name, regex)]
        self.tails: dict[int, dict[str, list]] = {}
        self.rest: list = []

    def add(self, name: str, pattern: str) -> None:
        parts = wildcard_parts(pattern)
        entry = (name, wildcard_regex(pattern))
        if parts[0]:
            self.heads.setdefault(len(parts[0]), {}).setdefault(parts[0], []).append(entry)
        elif parts[-1]:
            self.tails.setdefault(len(parts[-1]), {}).setdefault(parts[-1], []).append(entry)
        else:
            self.rest.append(entry)

    def matches(self, values: list[str]) -> dict[str, np.ndarray]:
        """Derived name -> positions in ``values`` the pattern matches (ascending; names by their first position).

        Per distinct literal length one C-level pass of slices and dictionary probes; the values a literal reaches
        are then verified per pattern of it, all of them in one ``map`` of its compiled ``fullmatch``.
        """
        out: dict[str, np.ndarray] = {}
        for tables, head in ((self.heads, True), (self.tails, False)):
            for n, table in tables.items():
                ends = list(map(operator.itemgetter(slice(None, n) if head else slice(-n, None)), values))
                entries = list(map(table.get, ends))  # (a value shorter than n has no literal of length n)
                found = np.flatnonzero(np.fromiter(map(bool, entries), dtype=bool, count=len(entries)))
                if not len(found):
                    continue
                literal = list(map(ends.__getitem__, found.tolist()))
                group = {lit: i for i, lit in enumerate(dict.fromkeys(literal))}
                of = np.fromiter(map(group.__getitem__, literal), dtype=np.int64, count=len(literal))
                order = np.argsort(of, kind="stable")
                bounds = np.searchsorted(of[order], np.arange(len(group) + 1))
                for lit, g in group.items():
                    at = found[order[bounds[g]:bounds[g + 1]]]
                    texts = list(map(values.__getitem__, at.tolist()))
                    for name, regex in table[lit]:
                        ok = np.fromiter(map(bool, map(regex.fullmatch, texts)), dtype=bool, count=len(texts))
                        if ok.any():
                            out[name] = at[ok]
        for name, regex in self.rest:
            ok = np.fromiter(map(bool, map(regex.fullmatch, values)), dtype=bool, count=len(values))
            if ok.any():
                out[name] = np.flatnonzero(ok)
        return dict(sorted(out.items(), key=lambda item: int(item[1][0])))  # (the order a scan of the values gives)
