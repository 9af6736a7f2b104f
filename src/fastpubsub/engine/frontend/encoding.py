"""Attribute and value dictionaries: everything a kernel sees is an integer or a float.

Section 2.2 leaves the predicate indexes open; to keep them numba kernels
over flat arrays, values are encoded once, when a predicate is inserted:

* an attribute name becomes an ``attr`` id; (attr, value kind) becomes a
  *field* ``attr * 3 + kind``: predicates only ever compare values of one kind
  (engine/semantics.py), so a field is the unit of every index;
* for equality a value becomes ``eqbits`` (int64): the IEEE bits of the double
  for numbers (-0.0 folded onto 0.0), 0/1 for booleans, the string's id in the
  dictionary for strings;
* for order a value becomes ``code`` (float64): the double itself for numbers,
  0/1 for booleans, an order-preserving code for strings.  String codes are
  spaced integers (gap ``SPACING``) so a new constant usually slots between its
  neighbours without renumbering; an event string unseen in any predicate gets
  the midpoint of its neighbours (binary search among sorted constants), so
  ``<`` ``<=`` ``>`` ``>=`` stay exact for it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np
from numba import njit

from ..columnar import EventBatch
from ..semantics import KIND_BOOL, KIND_NUMBER, KIND_STRING, KINDS
from .utf8 import Utf8Table, utf8_of

N_KINDS = len(KINDS)
SPACING = 1 << 20  # gap between consecutive string codes after a renumbering
#: Unseen event strings below this many are placed by ``bisect`` one by one; from it on, by ``np.searchsorted``.
SEARCH_FROM = 32
#: Largest numpy ``U`` array (characters: strings x longest) built to place unseen strings; beyond it, ``bisect``.
SEARCH_CHARS = 1 << 22
_KIND_OF_TYPE = {int: KIND_NUMBER, float: KIND_NUMBER, bool: KIND_BOOL, str: KIND_STRING}
_NUMBER_TYPES = {int, float}  # exact types: bool and numpy scalars take the per-value path


@njit(cache=True)
def predicate_fields(attr_ids, attributes, kinds, numbers):
    """Field (``attr * N_KINDS + kind``) and ``eqbits`` of each predicate of a batch, in one pass over its columns
    (booleans 0 / 1; strings get 0, their ids are the string dictionary's to fill in).

    ``attr_ids``: the batch's attribute names as attribute ids; ``attributes`` index them.
    """
    n = attributes.shape[0]
    field = np.empty(n, dtype=np.int64)
    value = np.empty(n, dtype=np.float64)
    for j in range(n):
        k = np.int64(kinds[j])
        field[j] = attr_ids[attributes[j]] * N_KINDS + k
        value[j] = 0.0 if k == KIND_STRING else numbers[j] + 0.0  # (+ 0.0: -0.0 folded onto 0.0)
    eqbits = value.view(np.int64)
    for j in range(n):
        if kinds[j] == KIND_BOOL:
            eqbits[j] = np.int64(numbers[j])
    return field, eqbits


class AttributeDictionary:
    """Attribute name -> dense id, grown only by subscriptions (events never add names)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self._last: tuple = (None, -1, None)  # (names tuple, len(ids), its lookup): batches often share their names

    def __len__(self) -> int:
        return len(self.ids)

    def intern(self, names: Sequence[str]) -> np.ndarray:
        ids = self.ids
        return np.array([ids.setdefault(n, len(ids)) for n in names], dtype=np.int64)

    def lookup(self, names: Sequence[str]) -> np.ndarray:
        """Ids of names (-1: unknown); the same tuple again, with no name added since, costs nothing."""
        last, size, ids = self._last
        if names is last and size == len(self.ids):
            return ids
        get = self.ids.get
        ids = np.array([get(n, -1) for n in names], dtype=np.int64)
        if type(names) is tuple:
            self._last = (names, len(self.ids), ids)
        return ids


class StringDictionary:
    """String constant -> stable id (for hashing) and order-preserving code (for ranges)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.codes = np.zeros(0, dtype=np.int64)  # by id
        self._sorted: list[str] = []  # known strings in order
        self._sorted_codes: list[int] = []  # their codes
        self.version = 0  # bumped whenever existing codes change
        self._search: tuple | None = None  # (U array of _sorted, int64 codes) or (None, None); dropped on any change
        self._bisected = 0  # unseen strings placed by bisect since it was dropped
        self._utf8: Utf8Table | None = None  # the constants by UTF-8 text, for event strings held as bytes

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_search"], state["_bisected"], state["_utf8"] = None, 0, None  # caches, rebuilt on demand
        return state

    def __len__(self) -> int:
        return len(self.ids)

    def _renumber(self) -> None:
        self._sorted.sort()
        self._sorted_codes = [(i + 1) * SPACING for i in range(len(self._sorted))]
        ids = self.ids
        order = np.array([ids[s] for s in self._sorted], dtype=np.int64)
        self.codes = np.empty(len(ids), dtype=np.int64)
        self.codes[order] = np.array(self._sorted_codes, dtype=np.int64)
        self.version += 1
        self._search, self._bisected = None, 0
        self._unsorted()

    def intern(self, strings: Sequence[str]) -> np.ndarray:
        """Ids of ``strings``, adding new ones (with codes) as needed."""
        ids = self.ids
        new = [s for s in dict.fromkeys(strings) if s not in ids]
        if new:
            for s in new:
                ids[s] = len(ids)
            if getattr(self, "_utf8", None) is not None:
                self._utf8.add(new)
            if len(new) > 64 or not self._sorted:
                self._sorted.extend(new)
                self._renumber()
            else:
                self.codes = np.concatenate([self.codes, np.zeros(len(new), dtype=np.int64)])
                for i, s in enumerate(new):
                    if not self._insert_code(s):  # gap exhausted: renumber everything
                        self._sorted.extend(new[i:])
                        self._renumber()
                        break
        return np.array([ids[s] for s in strings], dtype=np.int64)

    def _insert_code(self, s: str) -> bool:
        p = bisect.bisect_left(self._sorted, s)
        lo = self._sorted_codes[p - 1] if p > 0 else 0
        hi = self._sorted_codes[p] if p < len(self._sorted) else lo + 2 * SPACING
        if hi - lo < 2:
            return False
        code = (lo + hi) // 2
        self._sorted.insert(p, s)
        self._sorted_codes.insert(p, code)
        self.codes[self.ids[s]] = code
        self._search, self._bisected = None, 0
        self._unsorted()
        return True

    def _unsorted(self) -> None:
        if getattr(self, "_utf8", None) is not None:
            self._utf8.sorted = None

    def _table(self) -> Utf8Table:
        """The constants by UTF-8 text (built on first use, then grown with them)."""
        if getattr(self, "_utf8", None) is None:  # (a matcher pickled before this cache had none)
            self._utf8 = Utf8Table()
            self._utf8.add(list(self.ids))
        return self._utf8

    def encode_event_strings(self, strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(id or -1, order code) of event strings; unseen ones get a code between neighbours.

        Each string costs one C-level dict probe (``map``); the codes of the unseen ones come from one
        ``np.searchsorted`` among the sorted constants (:meth:`_between`), so no Python runs per value.
        Strings held as UTF-8 slices (``engine.frontend.utf8``) are looked up and placed by kernels over their
        bytes instead (:meth:`_encode_utf8`), no ``str`` made of them.
        """
        utf8 = utf8_of(strings)
        if utf8 is not None:
            return self._encode_utf8(utf8)
        n = len(strings)
        out_ids = np.fromiter(map(self.ids.get, strings, repeat(-1)), dtype=np.int64, count=n)
        unseen = np.flatnonzero(out_ids < 0)
        if not len(unseen):
            return out_ids, self.codes[out_ids].astype(np.float64)
        out_codes = np.empty(n, dtype=np.float64)
        seen = np.flatnonzero(out_ids >= 0)
        out_codes[seen] = self.codes[out_ids[seen]]
        out_codes[unseen] = self._between(strings if len(unseen) == n else
                                          list(map(strings.__getitem__, unseen.tolist())))
        return out_ids, out_codes

    def lookup_utf8(self, strings) -> np.ndarray:
        """Ids of strings held as UTF-8 slices (-1: no constant)."""
        return self._table().ids(strings)

    def _encode_utf8(self, strings) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_event_strings` of strings held as UTF-8 slices.  The unseen ones are placed by a binary
        search over the constants' sorted text once that is built, by the rule of ``_search`` (at once for many
        strings, under churn once bisecting has cost about as much); before, by :meth:`_between` on their ``str``."""
        table = self._table()
        out_ids = table.ids(strings)
        out_codes = self.codes[np.maximum(out_ids, 0)].astype(np.float64) if len(self.codes) else \
            np.zeros(len(out_ids), np.float64)
        unseen = np.flatnonzero(out_ids < 0)
        if not len(unseen):
            return out_ids, out_codes
        if not self._sorted:
            out_codes[unseen] = float(SPACING)
            return out_ids, out_codes
        if table.sorted is None and len(unseen) >= SEARCH_FROM \
                and getattr(self, "_bisected", 0) + len(unseen) >= len(self._sorted) // 4:
            ids = self.ids
            table.sort(np.array([ids[s] for s in self._sorted], dtype=np.int64),
                       np.array(self._sorted_codes, dtype=np.int64))
        if table.sorted is not None:
            table.place(SPACING, strings, unseen, out_codes)
        else:
            out_codes[unseen] = self._between(list(map(strings.__getitem__, unseen.tolist())))
        return out_ids, out_codes

    def _between(self, unseen: Sequence[str]) -> np.ndarray:
        """Codes of strings that are no constant: the midpoint of their neighbours' codes among the sorted constants
        (0 below the first, the last's + 2 * SPACING above it)."""
        srt, sc = self._sorted, self._sorted_codes
        if not srt:
            return np.full(len(unseen), float(SPACING))
        keys = None
        if len(unseen) >= SEARCH_FROM:
            if getattr(self, "_search", None) is None:  # (a matcher pickled before this cache had none)
                # built once bisecting has cost about as much (strings placed ~ a quarter of the constants), so
                # that constants added between every batch (churn) do not rebuild it for every batch
                self._bisected = getattr(self, "_bisected", 0) + len(unseen)
                if self._bisected >= len(srt) // 4:
                    self._search = self._search_arrays()
            if self._search is not None and self._search[0] is not None:
                longest = max(map(len, unseen))
                if longest * len(unseen) <= SEARCH_CHARS and "\x00" not in "".join(unseen):
                    keys = np.array(unseen, dtype=f"<U{max(1, longest)}")
        last = len(srt) - 1
        if keys is None:  # few strings, or ones numpy's U type cannot hold as they are: bisect, one by one
            p = np.fromiter(map(bisect.bisect_left, repeat(srt), unseen), dtype=np.int64, count=len(unseen))
            lo = np.fromiter(map(sc.__getitem__, np.maximum(p - 1, 0).tolist()), dtype=np.int64, count=len(p))
            hi = np.fromiter(map(sc.__getitem__, np.minimum(p, last).tolist()), dtype=np.int64, count=len(p))
        else:
            p = np.searchsorted(self._search[0], keys, side="left")
            codes = self._search[1]
            lo, hi = codes[np.maximum(p - 1, 0)], codes[np.minimum(p, last)]
        lo = np.where(p > 0, lo, 0)
        hi = np.where(p <= last, hi, lo + 2 * SPACING)
        return (lo + hi) / 2.0

    def _search_arrays(self) -> tuple:
        """The sorted constants as a numpy ``U`` array and their codes; (None, None) where that array would be too
        large or would compare wrong (numpy drops a string's trailing NULs)."""
        srt = self._sorted
        longest = max(map(len, srt), default=0)
        if longest * len(srt) > SEARCH_CHARS or "\x00" in "".join(srt):
            return None, None
        return np.array(srt, dtype=f"<U{max(1, longest)}"), np.array(self._sorted_codes, dtype=np.int64)


class EventArrays(NamedTuple):
    """Events as the kernels take them: CSR over (field, value) pairs (see :class:`EncodedEvents`)."""

    offsets: np.ndarray  # int64 [n + 1]: event i is pairs offsets[i]:offsets[i+1]
    field: np.ndarray  # int64 [m]: the pair's field (-1: matches nothing)
    code: np.ndarray  # float64 [m]: the value's order code
    eqbits: np.ndarray  # int64 [m]: the value's equality bits
    repeats: np.ndarray  # int8 [n]: 1 if the event carries a field more than once (an array's values)


@dataclass
class EncodedEvents:
    """Events as the kernels take them (CSR over pairs).

    ``field`` is -1 for pairs that can match nothing: an attribute no
    subscription mentions, or a NaN number (comparable with nothing).
    """

    offsets: np.ndarray  # int64 [n + 1]
    field: np.ndarray  # int64 [m]
    code: np.ndarray  # float64 [m]
    eqbits: np.ndarray  # int64 [m]
    repeats: np.ndarray  # int8 [n]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def arrays(self) -> EventArrays:
        return EventArrays(self.offsets, self.field, self.code, self.eqbits, self.repeats)


def encode_batch(batch: EventBatch, attributes: AttributeDictionary, strings: StringDictionary) -> EncodedEvents:
    """Map an :class:`EventBatch` onto this matcher's dictionaries (O(pairs): one kernel pass, then the strings)."""
    attr_map = attributes.lookup(batch.attribute_names)
    n = len(batch.kinds)
    field = np.empty(n, dtype=np.int64)
    code = np.empty(n, dtype=np.float64)
    eqbits = np.empty(n, dtype=np.int64)
    encode_pairs(np.asarray(attr_map, dtype=np.int64), np.asarray(batch.attributes), np.asarray(batch.kinds),
                 np.asarray(batch.numbers, dtype=np.float64), field, code, eqbits.view(np.float64), eqbits)
    if len(batch.strings):
        sid, scode = strings.encode_event_strings(batch.strings)
        pos = np.flatnonzero(np.asarray(batch.kinds) == KIND_STRING)
        code[pos] = scode
        eqbits[pos] = sid
    offsets = np.asarray(batch.offsets, dtype=np.int64)
    repeats = repeated_fields(offsets, field, (int(field.max()) + 1) if n else 0)
    return EncodedEvents(offsets, field, code, eqbits, repeats)


@njit(cache=True, nogil=True)
def repeated_fields(offsets, field, n_fields):
    """Per event, 1 if it carries one field (>= 0) more than once: an array of a nested event (engine/semantics.py)."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.int8)
    stamp = np.full(n_fields, -1, dtype=np.int64)
    for i in range(n):
        for j in range(offsets[i], offsets[i + 1]):
            f = field[j]
            if f < 0:
                continue
            if stamp[f] == i:
                out[i] = 1
            stamp[f] = i
    return out


@njit(cache=True, nogil=True)
def encode_pairs(attr_map, attributes, kinds, numbers, field, code, eqbits_as_float, eqbits):
    """The (attribute, value) pairs of a batch as ``field``, ``code`` and ``eqbits`` (the module docstring), in one
    pass, where numpy would take one pass over the batch per step.

    ``attr_map``: this matcher's id of each batch attribute (-1: no predicate names it; empty: no attribute at
    all); ``eqbits_as_float`` is ``eqbits`` viewed as float64, where a number's bits are written.  A string
    pair is left with its field only: :func:`encode_batch` fills its code and id from the string dictionary.
    A NaN number has no field (it satisfies no predicate).
    """
    has_map = attr_map.shape[0] > 0
    for j in range(kinds.shape[0]):
        k = np.int64(kinds[j])
        x = numbers[j]
        a = attr_map[attributes[j]] if has_map else -1
        code[j] = x
        if k == KIND_BOOL:
            eqbits[j] = np.int64(x)
        else:
            eqbits_as_float[j] = x + 0.0  # (folds -0.0 onto 0.0)
        field[j] = a * N_KINDS + k if a >= 0 and (k == KIND_STRING or not np.isnan(x)) else -1


def _classify(values: list[Any]) -> np.ndarray:
    """Kind codes of event values, at C speed for exact int/float/bool/str types."""
    kinds = list(map(_KIND_OF_TYPE.get, map(type, values)))
    if None in kinds:  # subclasses (numpy scalars, IntEnum, ...) or invalid types
        from ..semantics import value_kind

        kinds = [value_kind(v) for v in values]
    return np.array(kinds, dtype=np.int8)


_LISTS = frozenset((list,))


def batch_from_dicts(events: Iterable[dict[str, Any]]) -> EventBatch:
    """A fast :meth:`EventBatch.from_dicts`: per-event work is C-level list extends.

    Same result and the same validation (``ValueError`` for a non-dict event,
    a non-string or empty attribute name, an unsupported value type).
    """
    names: list[str] = []
    values: list[Any] = []
    lengths: list[int] = []
    for e in events:
        if not isinstance(e, dict):
            raise ValueError(f"an event must be a mapping of attribute to value, got {type(e).__name__}")
        if _LISTS.isdisjoint(map(type, e.values())):
            names.extend(e)
            values.extend(e.values())
            lengths.append(len(e))
            continue
        n = 0
        for a, v in e.items():  # an attribute with several values: one pair per value
            if type(v) is list:
                names.extend([a] * len(v))
                values.extend(v)
                n += len(v)
            else:
                names.append(a)
                values.append(v)
                n += 1
        lengths.append(n)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    unique = dict.fromkeys(names)
    for a in unique:
        if type(a) is not str or not a or a[0] == "\x00":
            raise ValueError(f"event attribute names must be non-empty strings not starting with NUL, got {a!r}")
    index = {a: i for i, a in enumerate(unique)}
    attrs = np.fromiter(map(index.__getitem__, names), dtype=np.int32, count=len(names))
    if set(map(type, values)) <= _NUMBER_TYPES:  # the common all-numeric batch: no per-value step
        kinds = np.full(len(values), KIND_NUMBER, dtype=np.int8)
        numbers = np.fromiter(values, dtype=np.float64, count=len(values))
        return EventBatch(tuple(unique), offsets, attrs, kinds, numbers, ())
    kinds = _classify(values)
    numbers = np.full(len(values), np.nan, dtype=np.float64)
    num_pos = np.flatnonzero(kinds != KIND_STRING)
    if len(num_pos) == len(values):
        numbers[:] = np.array(values, dtype=np.float64)
    elif len(num_pos):
        numbers[num_pos] = np.array([values[i] for i in num_pos.tolist()], dtype=np.float64)
    strings = tuple(values[i] for i in np.flatnonzero(kinds == KIND_STRING).tolist())
    return EventBatch(tuple(unique), offsets, attrs, kinds, numbers, strings)
