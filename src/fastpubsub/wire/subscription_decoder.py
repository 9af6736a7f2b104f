"""Batch decoding of subscription records (key and value) into columnar arrays.

A rebuild reads every record of ``pubsub.subscriptions``: decoded one by one
with fastavro, each costs a dict per record and a tuple per predicate.  :func:`decode_subscriptions` takes the raw keys and
values of a batch and returns the engine's columnar format directly: a numba
kernel parses every key that is a plain decimal integer and walks the
Confluent wire format + Avro encoding of ``wire/schemas/subscription.avsc``
for every value it can prove well-formed *and* valid (non-empty subscriber
and attribute names within the byte limits, known operators, no NaN, at
least one predicate, ``valid_from < valid_until``).  Every other record
(JSON values, other schema ids, values written with an earlier schema
version, malformed or invalid Avro, keys with a sign, underscores or
spaces, ...) is handed to ``codecs.decode_any_subscription`` and
``processor``'s key parser (:func:`parse_subscription_id`).  So for every
record the result is, by construction, what the per-record path says: the
same subscription, or a :class:`~wire.codecs.DecodeError` with the same reason; an aggregate subscription
(``pubsub tables``) counts as the removal of a plain one with its id, and is not reported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numba
import numpy as np

from fastpubsub.engine import KIND_BOOL, KIND_STRING, OPERATORS, SubscriptionBatch

from .codecs import (
    MAX_ATTRIBUTE_BYTES, MAX_SUBSCRIBER_BYTES, SCHEMA_IDS, AggregateDecodeError, AggregateSubscription, DecodeError,
    PatternDecodeError, PatternSubscription, Subscription, decode_any_subscription, is_aggregate_subscription,
    is_pattern_subscription,
)
from .avro_binary import (
    block_count, copy_pairs, empty_pairs, first_pairs, gather_bytes, intern_name, interned_key, name_string, name_table,
    scalar, varint,
)
from .avro_binary import schema_id as framed_schema_id
from .fallback import FallbackPairs

_SUBSCRIPTION_SCHEMA_ID = SCHEMA_IDS["subscription"]
OP_CODE = {op: i for i, op in enumerate(OPERATORS)}
if OPERATORS != ("=", "!=", "<", "<=", ">", ">="):  # the kernel's _operator spells these codes out
    raise ImportError(f"subscription_decoder: operator codes changed: {OPERATORS}")
#: Per record: its key and value both decoded by the kernel, an empty value (tombstone), or the per-record path.
FAST, TOMBSTONE, SLOW = 0, 1, 2


def parse_subscription_id(key: bytes | None) -> int:
    """Record key -> subscription id (a decimal string of a signed 64-bit integer)."""
    if key is None:
        raise DecodeError("subscription record has no key; the key must be the subscription id as a decimal string")
    try:
        text = key.decode("ascii")
        sid = int(text)
    except (UnicodeDecodeError, ValueError):
        raise DecodeError(f"subscription key {key[:40]!r} is not a decimal integer") from None
    if text.strip() != text or not -(2**63) <= sid < 2**63:
        raise DecodeError(f"subscription key {key[:40]!r} is not a decimal signed 64-bit integer")
    return sid


# --- the kernel -----------------------------------------------------------------


@numba.njit(cache=True)
def _decimal(buf, s, e):
    """``-?[0-9]{1,19}`` within int64 at buf[s:e]: (value, ok).  Anything else is the slow path's to judge."""
    neg = False
    if s < e and buf[s] == 45:  # '-'
        neg = True
        s += 1
    if s >= e or e - s > 19:
        return np.int64(0), False
    if buf[s] == 48 and e - s > 1:  # leading zeros: the slow path (they are rare)
        return np.int64(0), False
    v = np.uint64(0)
    for i in range(s, e):
        c = buf[i]
        if c < 48 or c > 57:
            return np.int64(0), False
        v = v * np.uint64(10) + np.uint64(c - 48)
    if neg:
        if v > np.uint64(9223372036854775808):
            return np.int64(0), False
        if v == np.uint64(0):
            return np.int64(0), True
        return -np.int64(v - np.uint64(1)) - np.int64(1), True
    if v > np.uint64(9223372036854775807):
        return np.int64(0), False
    return np.int64(v), True


@numba.njit(cache=True)
def _operator(buf, pos, n):
    """Code of the operator spelled by buf[pos:pos+n] (= != < <= > >=), or -1."""
    if n == 2 and buf[pos + 1] != 61:  # a two-character operator ends with '='
        return -1
    c = buf[pos]
    if c == 60 or c == 62:  # '<' 2, '<=' 3, '>' 4, '>=' 5
        return (2 if c == 60 else 4) + n - 1
    if n == 1 and c == 61:  # '='
        return 0
    if n == 2 and c == 33:  # '!='
        return 1
    return -1


@numba.njit(cache=True, nogil=True)  # a rebuild decodes on a thread of its own while the loop bulk-loads
def _decode_records(buf, key_starts, key_ends, has_key, starts, ends, schema_id, max_names, max_attribute_bytes,
                    max_subscriber_bytes):
    """Decode every record whose key and value are plain and valid; mark the others for the slow path.

    Returns per record: status, id, subscriber index, valid_until / valid_from
    (with presence flags); the predicates as :class:`~.avro_binary.Pairs`
    (strings as slices of ``buf``); the (start, length) of every attribute and
    subscriber name; and whether a name table overflowed (then the caller
    retries with more room).
    """
    n = len(starts)
    status = np.full(n, SLOW, np.int8)
    ids = np.zeros(n, np.int64)
    owner = np.zeros(n, np.int32)
    until = np.zeros(n, np.int64)
    has_until = np.zeros(n, np.bool_)
    since = np.zeros(n, np.int64)
    has_since = np.zeros(n, np.bool_)
    cap = len(buf) // 4 + 1  # a predicate takes at least 4 bytes (two lengths, an attribute byte, a branch)
    pairs = empty_pairs(cap)
    rec, attr, op, kind, number, sstart, slen = pairs
    attributes = name_table(max_names)
    a_count = 0
    subscribers = name_table(max_names)
    s_count = 0
    m = 0
    full = False
    for r in range(n):
        if not has_key[r]:
            continue
        sid, ok = _decimal(buf, key_starts[r], key_ends[r])
        if not ok:
            continue
        ids[r] = sid
        s, e = starts[r], ends[r]
        if s == e:
            status[r] = TOMBSTONE
            continue
        if framed_schema_id(buf, s, e) != schema_id:
            continue
        pos = s + 5
        ln, pos, ok = name_string(buf, pos, e, max_subscriber_bytes)
        if not ok:
            continue
        who, s_count = intern_name(buf, pos, ln, subscribers, s_count)
        if who < 0:  # the caller retries with more room
            full = True
            break
        pos += ln
        m0 = m
        while ok:
            count, pos, ok = block_count(buf, pos, e)
            if not ok or count == 0:
                break
            for _j in range(count):
                aid, a_count, pos, ok = interned_key(buf, pos, e, max_attribute_bytes, attributes, a_count)
                if not ok:
                    break
                full = aid < 0  # the caller retries with more room
                olen, pos, ok = varint(buf, pos, e)
                if full or not ok or olen < 1 or olen > 2 or pos + olen > e:
                    ok = False
                    break
                code = _operator(buf, pos, olen)
                kind[m], number[m], sstart[m], slen[m], pos, ok = scalar(buf, pos + olen, e)
                if code < 0 or not ok or (kind[m] == 0 and number[m] != number[m]):  # NaN: the slow path says why
                    ok = False
                    break
                rec[m] = r
                attr[m] = aid
                op[m] = code
                m += 1
        if full:
            break
        if not ok or m == m0:  # malformed, or no predicate at all
            m = m0
            continue
        for which in range(2):  # valid_until, then valid_from: union of null and long
            branch, pos, ok = varint(buf, pos, e)
            if not ok or branch < 0 or branch > 1:
                ok = False
                break
            if branch == 1:
                t, pos, ok = varint(buf, pos, e)
                if not ok:
                    break
                if which == 0:
                    until[r] = t
                    has_until[r] = True
                else:
                    since[r] = t
                    has_since[r] = True
            elif which == 0:
                has_until[r] = False
            else:
                has_since[r] = False
        if not ok or pos != e or (has_until[r] and has_since[r] and since[r] >= until[r]):
            has_until[r] = has_since[r] = False
            m = m0
            continue
        status[r] = FAST
        owner[r] = who
    # copies of the used part (here, off the GIL), so that a batch may hold these columns as they are
    return status, ids, owner, until, has_until, since, has_since, copy_pairs(first_pairs(pairs, m)), \
        attributes.start[:a_count], attributes.length[:a_count], subscribers.start[:s_count], \
        subscribers.length[:s_count], full


# --- the result -------------------------------------------------------------------


@dataclass
class DecodedSubscriptions:
    """``n`` subscription records decoded: per record an id or a key error, and a subscription, a tombstone or a value error.

    ``key_errors`` maps the index of every record whose key is not a
    subscription id to its reason; ``errors`` the index of every other record
    whose value is not a valid subscription.  The subscriptions of the valid
    records are columns indexed by record: subscriber (``owner`` into
    ``subscribers``), validity bounds, and CSR predicates (``offsets`` by
    record; strings as UTF-8 slices of ``buffer``).
    """

    ids: np.ndarray  # int64 [n]; meaningless where the key is bad
    key_errors: dict[int, str]
    errors: dict[int, str]
    tombstone: np.ndarray  # bool [n]: an empty or null value
    valid: np.ndarray  # bool [n]: key and value make a subscription
    subscribers: tuple[str, ...]
    owner: np.ndarray  # int32 [n]
    valid_until: np.ndarray  # int64 [n], meaningful where has_until
    has_until: np.ndarray
    valid_from: np.ndarray
    has_from: np.ndarray
    attribute_names: tuple[str, ...]
    offsets: np.ndarray  # int64 [n + 1]
    attributes: np.ndarray  # int32 [pairs]
    operators: np.ndarray  # int8 [pairs]
    kinds: np.ndarray  # int8 [pairs]
    numbers: np.ndarray  # float64 [pairs]
    string_start: np.ndarray  # int64 [pairs]
    string_length: np.ndarray  # int32 [pairs], -1 for non-strings
    buffer: np.ndarray  # uint8
    slow: int = 0  # records the per-record path decoded (the kernel could not prove them plain)
    #: record index -> the predicates of a valid subscription that is not a plain conjunction of the six
    #: comparisons (OR, ``in``, ``prefix``, ...): it has no columns here, the engine lowers it to rows
    complex: dict[int, Any] = field(default_factory=dict)
    #: records that are aggregate or pattern subscriptions (valid or not): not this decoder's to report
    aggregate: set[int] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, rows: np.ndarray) -> SubscriptionBatch:
        """The subscriptions of records ``rows`` (all valid, distinct ids), in that order, as one batch."""
        rows = np.asarray(rows, np.int64)
        if self.complex and any(r in self.complex for r in rows.tolist()):
            return SubscriptionBatch.from_lists(((int(self.ids[r]), self.predicates(r)) for r in rows.tolist()),
                                                validated=True)
        if len(rows) == len(self) and (rows == np.arange(len(rows))).all() and not (self.kinds == KIND_STRING).any():
            # every record, in order (a rebuild's chunk of distinct new ids) and no strings: the columns as they are
            return SubscriptionBatch(self.ids, self.attribute_names, self.offsets, self.attributes, self.operators,
                                     self.kinds, self.numbers, ())
        counts = self.offsets[rows + 1] - self.offsets[rows]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        # the pairs of each picked row, in order: start of its run + position within it
        pair = np.repeat(self.offsets[rows] - offsets[:-1], counts) + np.arange(offsets[-1], dtype=np.int64)
        kinds = self.kinds[pair]
        is_string = kinds == KIND_STRING
        strings: tuple[str, ...] = ()
        if is_string.any():
            picked = pair[is_string]
            soff, data = gather_bytes(self.buffer, self.string_start[picked], self.string_length[picked])
            raw = data.tobytes()
            cache: dict[bytes, str] = {}
            strings = tuple(cache.get(b) or cache.setdefault(b, b.decode("utf-8", "surrogatepass"))
                            for b in (raw[a:z] for a, z in zip(soff[:-1].tolist(), soff[1:].tolist())))
        return SubscriptionBatch(self.ids[rows], self.attribute_names, offsets, self.attributes[pair],
                                 self.operators[pair], kinds, self.numbers[pair], strings)


    def predicates(self, r: int) -> Any:
        """The predicates of valid record ``r`` as the per-record decoder gives them (a list, or an ``AnyOf``)."""
        if r in self.complex:
            return self.complex[r]
        out: list = []
        for j in range(int(self.offsets[r]), int(self.offsets[r + 1])):
            kind, number = int(self.kinds[j]), float(self.numbers[j])
            if kind == KIND_STRING:
                start, length = int(self.string_start[j]), int(self.string_length[j])
                value: Any = self.buffer[start:start + length].tobytes().decode("utf-8", "surrogatepass")
            elif kind == KIND_BOOL:
                value = bool(number)
            else:
                value = int(number) if number.is_integer() and abs(number) < 2**53 else number
            out.append((self.attribute_names[int(self.attributes[j])], OPERATORS[int(self.operators[j])], value))
        return out


def _join(chunks: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray, bool, bytes]:
    """(starts, ends, whether every chunk is bytes, the chunks joined); None counts as empty."""
    try:  # the common case at C speed: no None among them
        lengths = np.fromiter(map(len, chunks), np.int64, len(chunks))
        blob, complete = b"".join(chunks), True
    except TypeError:
        lengths = np.fromiter((len(v) if v is not None else 0 for v in chunks), np.int64, len(chunks))
        blob, complete = b"".join(v for v in chunks if v), False
    ends = np.cumsum(lengths)
    return ends - lengths, ends, complete, blob


def decode_subscriptions(keys: Sequence[bytes | None], values: Sequence[bytes | None]) -> DecodedSubscriptions:
    """Decode the records ``(keys[i], values[i])`` of ``pubsub.subscriptions``; bad ones go to the errors."""
    n = len(keys)
    if len(values) != n:
        raise ValueError(f"{n} keys but {len(values)} values")
    k_starts, k_ends, all_keys, k_blob = _join(keys)
    v_starts, v_ends, _, v_blob = _join(values)
    buf = np.frombuffer(k_blob + v_blob, np.uint8)
    has_key = np.ones(n, np.bool_) if all_keys else np.fromiter((k is not None for k in keys), np.bool_, n)
    max_names = 1024
    while True:
        (status, ids, owner, until, has_until, since, has_since, pairs, a_start, a_len, s_start, s_len,
         overflow) = _decode_records(
            buf, k_starts, k_ends, has_key, v_starts + len(k_blob), v_ends + len(k_blob), _SUBSCRIPTION_SCHEMA_ID,
            max_names, MAX_ATTRIBUTE_BYTES, MAX_SUBSCRIBER_BYTES)
        if not overflow:
            break
        max_names *= 4
    raw = buf.tobytes() if len(a_start) or len(s_start) else b""
    names = [raw[a:a + k].decode("utf-8") for a, k in zip(a_start.tolist(), a_len.tolist())]
    owners = [raw[a:a + k].decode("utf-8") for a, k in zip(s_start.tolist(), s_len.tolist())]
    tombstone = status == TOMBSTONE
    valid = status == FAST
    key_errors: dict[int, str] = {}
    errors: dict[int, str] = {}
    slow = np.flatnonzero(status == SLOW)
    complex_: dict[int, Any] = {}
    aggregate: set[int] = set()
    if len(slow):
        fallback = FallbackPairs(names, len(buf), "surrogatepass")
        owner_index = {name: i for i, name in enumerate(owners)}
        for r in slow.tolist():
            try:
                ids[r] = parse_subscription_id(keys[r])
            except DecodeError as exc:
                key_errors[r] = str(exc)
                if is_aggregate_subscription(values[r]) or is_pattern_subscription(values[r]):
                    aggregate.add(r)  # the table or pattern service's to refuse
                continue
            if not values[r]:
                tombstone[r] = True
                continue
            try:
                sub = decode_any_subscription(values[r])
            except (AggregateDecodeError, PatternDecodeError):
                sub = None
            except DecodeError as exc:
                errors[r] = str(exc)
                continue
            if sub is None or isinstance(sub, (AggregateSubscription, PatternSubscription)):
                # an aggregate or pattern subscription, valid or not, belongs to the table service
                # (services.tables) or the pattern service (services.patterns): for the event processor its id
                # just stops being a plain subscription
                tombstone[r] = True
                aggregate.add(r)
                continue
            valid[r] = True
            owner[r] = owner_index.setdefault(sub.subscriber, len(owner_index))
            if sub.valid_until is not None:
                until[r], has_until[r] = sub.valid_until, True
            if sub.valid_from is not None:
                since[r], has_since[r] = sub.valid_from, True
            if type(sub.predicates) is not list or any(o not in OP_CODE for _, o, _ in sub.predicates):
                complex_[r] = sub.predicates  # OR or an operator beyond the six: lowered to rows by the engine
                continue
            for a, o, v in sub.predicates:
                fallback.add(r, a, v, OP_CODE[o])
        names, owners = fallback.names, list(owner_index)
        buf, pairs = fallback.merged(buf, pairs)
    offsets = np.zeros(n + 1, np.int64)
    if n:
        np.cumsum(np.bincount(pairs.rec, minlength=n), out=offsets[1:])
    return DecodedSubscriptions(ids, key_errors, errors, tombstone, valid, tuple(owners), owner, until, has_until,
                                since, has_since, tuple(names), offsets, pairs.attr, pairs.op, pairs.kind, pairs.number,
                                pairs.start, pairs.length, buf, len(slow), complex_, aggregate)
