"""Columnar batches: subscriptions and events as flat numpy arrays.

These are the formats the fast paths take (``Matcher.add_bulk`` and
``Matcher.match_encoded``): the workload generator and the processor's decoders
fill them directly, without building one Python object per predicate.

Both use the CSR layout: item ``i`` owns positions ``offsets[i]:offsets[i+1]``
of the per-pair arrays.  Attribute names are given once per batch in
``attribute_names``; ``attributes`` holds indexes into it.  A value is a kind
code (``engine.semantics.KINDS``) plus its payload: numbers (bool as 0/1) in
``numbers``; strings in ``strings``, one entry per string-kind position, in
position order.

A :class:`SubscriptionBatch` holds *rows*, conjunctions of the six
comparisons (engine/frontend/lowering.py rewrites the other operators and OR into
them); a subscription of several rows has them adjacent, the later ones
flagged in ``disjunct``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from itertools import repeat
from operator import itemgetter
from typing import Any, Iterable, Sequence

import numpy as np

from .semantics import (
    KIND_BOOL,
    KIND_NUMBER,
    KIND_STRING,
    OP_CODE,
    OPERATORS,
    RESERVED_PREFIX,
    Predicate,
    validate_event,
    validate_subscription,
    validate_subscription_id,
    value_kind,
)


def _encode_values(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    kinds = np.empty(len(values), dtype=np.int8)
    numbers = np.full(len(values), np.nan, dtype=np.float64)
    strings: list[str] = []
    for i, v in enumerate(values):
        if isinstance(v, bool):
            kinds[i] = KIND_BOOL
            numbers[i] = 1.0 if v else 0.0
        elif isinstance(v, str):
            kinds[i] = KIND_STRING
            strings.append(v)
        else:
            kinds[i] = KIND_NUMBER
            numbers[i] = float(v)
    return kinds, numbers, tuple(strings)


def _decode_values(kinds: np.ndarray, numbers: np.ndarray, strings: Sequence[str]) -> list[Any]:
    out: list[Any] = []
    it = iter(strings)
    for k, x in zip(kinds.tolist(), numbers.tolist()):
        if k == KIND_STRING:
            out.append(next(it))
        elif k == KIND_BOOL:
            out.append(bool(x))
        else:
            out.append(int(x) if float(x).is_integer() and abs(x) < 2**53 else x)
    return out


def _check_csr(name: str, offsets: np.ndarray, n_pairs: int) -> None:
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != n_pairs:
        raise ValueError(f"{name}: offsets must start at 0 and end at the number of pairs ({n_pairs})")
    if len(offsets) > 1 and np.any(np.diff(offsets) < 0):
        raise ValueError(f"{name}: offsets must be non-decreasing")


@dataclass
class EventBatch:
    """``n`` events as CSR arrays (see module docstring); an event may carry an attribute several times."""

    attribute_names: Sequence[str]
    offsets: np.ndarray  # int64 [n + 1]
    attributes: np.ndarray  # int32 [m], index into attribute_names
    kinds: np.ndarray  # int8 [m]
    numbers: np.ndarray  # float64 [m]
    strings: Sequence[str] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def from_dicts(cls, events: Iterable[dict[str, Any]]) -> "EventBatch":
        names: dict[str, int] = {}
        offsets = [0]
        attrs: list[int] = []
        values: list[Any] = []
        for e in events:
            validate_event(e)
            for a, v in e.items():
                if type(v) is list:  # one pair per value (an empty list: no pair, the attribute is absent)
                    attrs.extend([names.setdefault(a, len(names))] * len(v))
                    values.extend(v)
                    continue
                attrs.append(names.setdefault(a, len(names)))
                values.append(v)
            offsets.append(len(attrs))
        kinds, numbers, strings = _encode_values(values)
        return cls(tuple(names), np.array(offsets, np.int64), np.array(attrs, np.int32), kinds, numbers, strings)

    def to_dicts(self) -> list[dict[str, Any]]:
        values = _decode_values(self.kinds, self.numbers, self.strings)
        names = list(self.attribute_names)
        attrs = self.attributes.tolist()
        off = self.offsets.tolist()
        out: list[dict[str, Any]] = []
        for i in range(len(self)):
            event: dict[str, Any] = {}
            for j in range(off[i], off[i + 1]):
                a = names[attrs[j]]
                if a in event:  # an attribute carried several times: its values as a list
                    old = event[a]
                    event[a] = old + [values[j]] if type(old) is list else [old, values[j]]
                else:
                    event[a] = values[j]
            out.append(event)
        return out

    def validate(self) -> None:
        m = len(self.attributes)
        _check_csr("EventBatch", self.offsets, m)
        if not (len(self.kinds) == len(self.numbers) == m):
            raise ValueError("EventBatch: attributes, kinds and numbers must have one entry per pair")
        if m and (self.attributes.min() < 0 or self.attributes.max() >= len(self.attribute_names)):
            raise ValueError("EventBatch: attribute index out of range")
        if int(np.count_nonzero(self.kinds == KIND_STRING)) != len(self.strings):
            raise ValueError("EventBatch: one string is needed per string-kind pair")


@dataclass
class SubscriptionBatch:
    """``n`` subscriptions as CSR arrays of predicates (see module docstring)."""

    ids: np.ndarray  # int64 [n]
    attribute_names: Sequence[str]
    offsets: np.ndarray  # int64 [n + 1]
    attributes: np.ndarray  # int32 [m], index into attribute_names
    operators: np.ndarray  # int8 [m], index into engine.semantics.OPERATORS
    kinds: np.ndarray  # int8 [m]
    numbers: np.ndarray  # float64 [m]
    strings: Sequence[str] = field(default_factory=tuple)
    #: int8 [n] (or empty: all 0): 1 if the row is another disjunct of the previous row's subscription (same id)
    disjunct: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_subscriptions(self) -> int:
        """Subscriptions in the batch (rows that are not later disjuncts of another's)."""
        return len(self.ids) - int(np.count_nonzero(self.disjunct))

    def disjunct_flags(self) -> np.ndarray:
        """``disjunct`` with one entry per row."""
        d = np.asarray(self.disjunct, dtype=np.int8)
        return d if len(d) == len(self.ids) else np.zeros(len(self.ids), np.int8)

    @classmethod
    def from_lists(cls, subscriptions: Iterable[tuple[int, Any]], *,
                   validated: bool = False) -> "SubscriptionBatch":
        """A batch of ``(id, subscription)``: a list of predicates or an ``AnyOf`` / ``AllOf``.

        ``validated``: ids and subscriptions were checked already
        (``validate_subscription``; skip it).  Subscriptions are lowered to
        rows (engine/frontend/lowering.py) by a :class:`SubscriptionBuilder`.
        """
        builder = SubscriptionBuilder()
        for sid, sub in subscriptions:
            builder.append(sid if validated else validate_subscription_id(sid), sub, validated=validated)
        return builder.batch()

    def to_lists(self) -> list[tuple[int, Any]]:
        """``(id, predicates)``, or ``(id, AnyOf(rows))`` for a subscription of several rows (derived predicates lifted)."""
        from .frontend.lowering import lift
        from .semantics import AnyOf

        values = _decode_values(self.kinds, self.numbers, self.strings)
        names = list(self.attribute_names)
        attrs, ops, off = self.attributes.tolist(), self.operators.tolist(), self.offsets.tolist()
        out: list[tuple[int, Any]] = []
        for i, (sid, d) in enumerate(zip(self.ids.tolist(), self.disjunct_flags().tolist())):
            row = lift([(names[attrs[j]], OPERATORS[ops[j]], values[j]) for j in range(off[i], off[i + 1])])
            if d and out:
                prev = out[-1][1]
                out[-1] = (out[-1][0], AnyOf(prev.disjuncts + [row]) if isinstance(prev, AnyOf) else AnyOf([prev, row]))
            else:
                out.append((int(sid), row))
        return out

    def validate(self) -> None:
        m = len(self.attributes)
        _check_csr("SubscriptionBatch", self.offsets, m)
        if len(self.offsets) != len(self.ids) + 1:
            raise ValueError("SubscriptionBatch: offsets must have one more entry than ids")
        if not (len(self.operators) == len(self.kinds) == len(self.numbers) == m):
            raise ValueError("SubscriptionBatch: per-predicate arrays must have one entry per predicate")
        if len(self.ids) and np.any(np.diff(self.offsets) == 0):
            raise ValueError("SubscriptionBatch: a subscription needs at least one predicate")
        if m and (self.attributes.min() < 0 or self.attributes.max() >= len(self.attribute_names)):
            raise ValueError("SubscriptionBatch: attribute index out of range")
        if m and (self.operators.min() < 0 or self.operators.max() >= len(OPERATORS)):
            raise ValueError("SubscriptionBatch: unknown operator code")
        if np.any(np.isnan(self.numbers[self.kinds == KIND_NUMBER])):
            raise ValueError("SubscriptionBatch: NaN is not a valid predicate value")
        d = np.asarray(self.disjunct)
        if len(d) not in (0, len(self.ids)) or (len(d) and (d.min() < 0 or d.max() > 1 or d[0] != 0)):
            raise ValueError("SubscriptionBatch: disjunct must be empty or 0/1 per row, 0 for the first")
        ids = np.asarray(self.ids)
        if len(d):
            if np.any(ids[1:][d[1:] == 1] != ids[:-1][d[1:] == 1]):
                raise ValueError("SubscriptionBatch: a disjunct row must repeat the id of the row before it")
            ids = ids[d == 0]
        ids = np.sort(ids)  # not np.unique: its hash path is several times slower on millions of ids
        if np.any(ids[1:] == ids[:-1]):
            raise ValueError("SubscriptionBatch: duplicate subscription id in batch")
        if int(np.count_nonzero(self.kinds == KIND_STRING)) != len(self.strings):
            raise ValueError("SubscriptionBatch: one string is needed per string-kind predicate")


class SubscriptionBuilder:
    """Subscriptions appended one at a time, taken out as one :class:`SubscriptionBatch`.

    The path of every single add (``Matcher.add`` buffers its subscriptions
    here) and of :meth:`SubscriptionBatch.from_lists`.  A list of
    comparisons given as tuples of attribute, operator and int, float, str or
    bool (the common subscription) costs one pass of type checks and a list
    extend; anything else, valid or not, goes to ``validate_subscription`` and
    is lowered (engine/frontend/lowering.py) when appended.  :meth:`batch` turns the predicates into columns with a
    few passes over all of them at once, none in a Python loop.
    """

    __slots__ = ("ids", "ends", "preds", "later")

    def __init__(self) -> None:
        self.ids: list[int] = []  # one per row
        self.ends: list[int] = []  # end of each row's predicates in preds
        self.preds: list[Predicate] = []
        self.later: list[int] = []  # rows that are later disjuncts of the subscription before

    def __len__(self) -> int:
        """Rows appended."""
        return len(self.ids)

    def append(self, sid: int, subscription: Any, *, validated: bool = False) -> int:
        """Append subscription ``sid`` (a checked id); its first row.  ``ValueError`` (nothing appended) if invalid.

        ``validated``: ``subscription`` came from ``validate_subscription`` (not checked again).
        """
        row = len(self.ids)
        preds = self.preds
        if type(subscription) is list and subscription:  # the common case, checked here as validate_predicates would
            try:
                for p in subscription:
                    if type(p) is not tuple:
                        break
                    a, op, v = p
                    # a < "\x01": an empty name or one starting with NUL (reserved for derived attributes)
                    if type(a) is not str or a < "\x01" or op not in OP_CODE:
                        break
                    t = type(v)
                    if t is int:
                        if not -_HUGE < v < _HUGE:
                            break
                    elif t is float:
                        if v != v:
                            break
                    elif t is not str and t is not bool:
                        break
                else:
                    preds += subscription
                    self.ends.append(len(preds))
                    self.ids.append(sid)
                    return row
            except (TypeError, ValueError):  # a triple of the wrong length, an unhashable operator
                pass
        from .frontend.lowering import lower  # lowering reads EventBatch from this module

        rows = lower(subscription if validated else validate_subscription(subscription))
        for r in rows:
            for _, _, v in r:
                if not isinstance(v, str) and not -_HUGE < v < _HUGE:
                    try:
                        float(v)
                    except OverflowError:
                        raise ValueError("an integer value is too large for a double") from None
        for r in rows:
            if len(self.ids) > row:
                self.later.append(len(self.ids))
            preds += r
            self.ends.append(len(preds))
            self.ids.append(sid)
        return row

    def batch(self) -> "SubscriptionBatch":
        """The rows appended, as a batch (the builder is left as it is)."""
        m = len(self.preds)
        attrs, ops, values = (list(map(itemgetter(i), self.preds)) for i in range(3))
        index = {a: i for i, a in enumerate(dict.fromkeys(attrs))}
        if _NUMBER_TYPES.issuperset(map(type, values)):  # numbers only (the workloads' common case)
            kinds, numbers, strings = np.zeros(m, np.int8), np.array(values, np.float64), ()
        else:
            kinds, numbers, strings = _values(values)
        offsets = np.zeros(len(self.ends) + 1, dtype=np.int64)
        offsets[1:] = self.ends
        disjunct = np.zeros(len(self.ids) if self.later else 0, dtype=np.int8)
        disjunct[self.later] = 1
        return SubscriptionBatch(
            np.array(self.ids, np.int64), tuple(index), offsets,
            np.fromiter(map(index.__getitem__, attrs), np.int32, count=m),
            np.fromiter(map(OP_CODE.__getitem__, ops), np.int8, count=m), kinds, numbers, strings, disjunct)


def _values(values: list) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Kinds, numbers (NaN for strings; booleans 0 / 1) and strings of predicate values."""
    m = len(values)
    kinds = np.fromiter(map(_KIND_OF_TYPE.get, map(type, values), repeat(-1)), np.int8, count=m)
    for j in np.flatnonzero(kinds < 0).tolist():  # subclasses of int, float, str or bool
        kinds[j] = value_kind(values[j])
    objects = np.empty(m, dtype=object)
    objects[:] = values
    numbers = np.full(m, np.nan, dtype=np.float64)
    strings = kinds == KIND_STRING
    numbers[~strings] = objects[~strings].astype(np.float64)
    return kinds, numbers, tuple(objects[strings].tolist())


#: Integers below this in magnitude are doubles (float() of a larger one may overflow).
_HUGE = 2**1023
_NUMBER_TYPES = frozenset((int, float))
_KIND_OF_TYPE = {int: KIND_NUMBER, float: KIND_NUMBER, str: KIND_STRING, bool: KIND_BOOL}


_EVENT_PAIRS = ("attributes", "kinds", "numbers")
_SUBSCRIPTION_PAIRS = ("attributes", "operators", "kinds", "numbers")


def csr_positions(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions ``starts[i]:starts[i] + lengths[i]`` one after another, and their CSR offsets."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64), offsets


def _take(batch: Any, rows: np.ndarray, pair_fields: tuple[str, ...]) -> dict[str, Any]:
    """Offsets, strings and per-pair arrays of items ``rows`` of a CSR batch, in that order."""
    rows = np.asarray(rows, dtype=np.int64)
    pos, offsets = csr_positions(batch.offsets[rows], batch.offsets[rows + 1] - batch.offsets[rows])
    kinds = np.asarray(batch.kinds)
    strings: tuple[str, ...] = ()
    if len(batch.strings):
        string_index = np.cumsum(kinds == KIND_STRING) - 1
        picked = pos[kinds[pos] == KIND_STRING]
        strings = tuple(batch.strings[i] for i in string_index[picked].tolist())
    return {"offsets": offsets, "strings": strings, **{f: np.asarray(getattr(batch, f))[pos] for f in pair_fields}}


def _concat(batches: Sequence[Any], pair_fields: tuple[str, ...]) -> dict[str, Any]:
    """Offsets, unified attribute names, strings and per-pair arrays of ``batches`` one after the other."""
    names: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {f: [] for f in pair_fields}
    strings: list[str] = []
    lengths = []
    for b in batches:
        remap = np.array([names.setdefault(n, len(names)) for n in b.attribute_names], dtype=np.int32)
        for f in pair_fields:
            parts[f].append(remap[b.attributes] if f == "attributes" and len(b.attributes) else np.asarray(getattr(b, f)))
        strings.extend(b.strings)
        lengths.append(np.diff(b.offsets))
    offsets = np.zeros(sum(len(x) for x in lengths) + 1, dtype=np.int64)
    if len(offsets) > 1:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    dtypes = {"attributes": np.int32, "operators": np.int8, "kinds": np.int8, "numbers": np.float64}
    arrays = {f: np.concatenate(xs).astype(dtypes[f], copy=False) if xs else np.zeros(0, dtypes[f])
              for f, xs in parts.items()}
    return {"attribute_names": tuple(names), "offsets": offsets, "strings": tuple(strings), **arrays}


def take_events(batch: EventBatch, rows: np.ndarray) -> EventBatch:
    """The events ``rows`` of ``batch``, in that order, as a new batch."""
    return EventBatch(attribute_names=batch.attribute_names, **_take(batch, rows, _EVENT_PAIRS))


def concat_events(batches: Sequence[EventBatch]) -> EventBatch:
    """One batch holding every event of ``batches`` in order (attribute names unified)."""
    return EventBatch(**_concat(batches, _EVENT_PAIRS))


def take_subscriptions(batch: SubscriptionBatch, rows: np.ndarray) -> SubscriptionBatch:
    """The subscriptions ``rows`` of ``batch``, in that order, as a new batch."""
    rows = np.asarray(rows, dtype=np.int64)
    d = np.asarray(batch.disjunct)
    return SubscriptionBatch(ids=np.asarray(batch.ids)[rows], attribute_names=batch.attribute_names,
                             **_take(batch, rows, _SUBSCRIPTION_PAIRS),
                             disjunct=d[rows] if len(d) else np.zeros(0, np.int8))


def take_subscription_groups(batch: SubscriptionBatch, heads: np.ndarray) -> SubscriptionBatch:
    """The subscriptions whose first rows are ``heads`` (ascending row numbers), with all their rows."""
    d = batch.disjunct_flags()
    if not d.any():
        return take_subscriptions(batch, heads)
    group = np.cumsum(d == 0) - 1  # subscription number of each row
    first = np.flatnonzero(d == 0)
    return take_subscriptions(batch, np.flatnonzero(np.isin(group, np.searchsorted(first, heads))))


def concat_subscriptions(batches: Sequence[SubscriptionBatch]) -> SubscriptionBatch:
    """One batch holding every subscription of ``batches`` in order (attribute names unified)."""
    ids = [np.asarray(b.ids, dtype=np.int64) for b in batches]
    d = np.concatenate([b.disjunct_flags() for b in batches]) if batches else np.zeros(0, np.int8)
    return SubscriptionBatch(ids=np.concatenate(ids) if ids else np.zeros(0, np.int64),
                             **_concat(batches, _SUBSCRIPTION_PAIRS), disjunct=d if d.any() else np.zeros(0, np.int8))


# --- flat arrays (snapshots) ------------------------------------------------------


def pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings -> (UTF-8 bytes of all of them as uint8, int64 offsets in characters): two flat arrays."""
    lengths = np.fromiter((len(x) for x in strings), dtype=np.int64, count=len(strings))
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.frombuffer("".join(strings).encode("utf-8", "surrogatepass"), dtype=np.uint8), offsets


def unpack_strings(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    text = blob.tobytes().decode("utf-8", "surrogatepass")
    off = offsets.tolist()
    return [text[a:b] for a, b in zip(off[:-1], off[1:])]


def batch_to_arrays(batch: EventBatch | SubscriptionBatch, prefix: str) -> dict[str, np.ndarray]:
    """A batch as named flat arrays (``np.savez`` without pickles); inverse of :func:`batch_from_arrays`."""
    out: dict[str, np.ndarray] = {}
    for f in fields(batch):
        value = getattr(batch, f.name)
        if f.name in ("attribute_names", "strings"):
            out[f"{prefix}{f.name}"], out[f"{prefix}{f.name}.offsets"] = pack_strings(list(value))
        else:
            out[f"{prefix}{f.name}"] = np.asarray(value)
    return out


def batch_from_arrays(cls: type, arrays: Any, prefix: str) -> Any:
    """The ``cls`` batch :func:`batch_to_arrays` wrote under ``prefix``."""
    values = {}
    for f in fields(cls):
        key = f"{prefix}{f.name}"
        if f.name == "disjunct" and key not in arrays:  # written before subscriptions had several rows
            continue
        if f.name in ("attribute_names", "strings"):
            values[f.name] = tuple(unpack_strings(arrays[key], arrays[f"{key}.offsets"]))
        else:
            values[f.name] = np.asarray(arrays[key])
    return cls(**values)  # not validated here: Matcher.add_bulk / match_encoded validate what they are given
