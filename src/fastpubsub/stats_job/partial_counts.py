"""Per-batch partial counts of decoded events: the map-side half of the job's aggregations.

Shipping every attribute/value pair into Spark (32 rows per W0 event) and
aggregating there costs Spark tens of seconds per million events on two cores;
counting each decoded batch where it is decoded (Arrow's C++ hash aggregation,
numba) and letting Spark merge the counts across splits gives the same exact
numbers for a fraction of the cost: a combiner, as in MapReduce.

Every batch becomes rows of :data:`SCHEMA`, one table per ``table`` value:

* ``records``: ``count`` records, ``bad`` of them undecodable, timestamps ``min_ts``..``max_ts``;
* ``bad``: ``count`` records failed with ``reason``;
* ``value``: ``count`` events carry ``attribute`` with the value (``kind``, ``number``, ``string``);
* ``schema``: ``count`` events have exactly the attributes ``schema`` (sorted);
* ``joint``: ``count`` events carry the values ``values`` on the attribute set ``schema``;
* ``cover``: the batch counted the joint values of the set ``schema`` over all its ``count`` events.

Joint value counts need the frequent attribute sets, known only once the
whole window is counted.  So each batch of the first pass guesses: it counts
the joint values of the sets most frequent in the batch itself (or of the
sets the user named), and says so with ``cover`` rows; the job uses a set's
first-pass counts only if every batch covered it, and reads the window again
for the other sets.  On streams where batches agree (W0: every batch) one
pass does.

Values are normalised as Spark groups them: one NaN, ``-0.0`` is ``0.0``,
``number`` is 0 for strings and ``string`` null for numbers and booleans.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations
from typing import Sequence

import numba
import numpy as np
import pyarrow as pa

from fastpubsub.engine import KIND_STRING
from fastpubsub.wire.event_decoder import DecodedEvents, decode_events

_VALUE = pa.struct([("kind", pa.int8()), ("number", pa.float64()), ("string", pa.string())])
SCHEMA = (
    "table string, attribute string, kind tinyint, number double, string string, schema array<string>, "
    "`values` array<struct<kind: tinyint, number: double, string: string>>, reason string, "
    "count long, bad long, min_ts long, max_ts long"
)
_ARROW = pa.schema([
    ("table", pa.string()), ("attribute", pa.string()), ("kind", pa.int8()), ("number", pa.float64()),
    ("string", pa.string()), ("schema", pa.list_(pa.string())), ("values", pa.list_(_VALUE)),
    ("reason", pa.string()), ("count", pa.int64()), ("bad", pa.int64()), ("min_ts", pa.int64()), ("max_ts", pa.int64()),
])


def _rows(table: str, n: int, **columns) -> pa.RecordBatch:
    arrays = [pa.array([table] * n, pa.string())]
    for f in list(_ARROW)[1:]:
        arrays.append(columns[f.name] if f.name in columns else pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=_ARROW)


def _numbers(decoded: DecodedEvents) -> np.ndarray:
    x = np.where(decoded.kinds == KIND_STRING, 0.0, decoded.numbers) + 0.0  # -0.0 + 0.0 == 0.0
    x[np.isnan(x)] = np.nan  # one NaN bit pattern
    return x


def record_counts(n_records: int, errors: dict[int, str], timestamps: np.ndarray | None) -> list[pa.RecordBatch]:
    """The ``records`` row and the ``bad`` rows of a batch (``timestamps``: ms, or None if the broker has none)."""
    lo = hi = None
    if timestamps is not None and len(timestamps):
        lo, hi = int(timestamps.min()), int(timestamps.max())
    out = [_rows("records", 1, count=pa.array([n_records], pa.int64()), bad=pa.array([len(errors)], pa.int64()),
                 min_ts=pa.array([lo], pa.int64()), max_ts=pa.array([hi], pa.int64()))]
    if errors:
        reasons = Counter(errors.values())
        out.append(_rows("bad", len(reasons), reason=pa.array(list(reasons), pa.string()),
                         count=pa.array(list(reasons.values()), pa.int64())))
    return out


def value_counts(decoded: DecodedEvents) -> pa.RecordBatch:
    """Events per (attribute, value) of the batch.

    An event carrying an attribute several times (an array, wire/paths.py)
    counts once per distinct value: the count stays a number of events, as
    the cost model reads it (an equality's probability is that of an event
    with some value equal).
    """
    names = pa.array(decoded.attribute_names, pa.string())
    pairs = pa.table({
        "attribute": pa.DictionaryArray.from_arrays(pa.array(decoded.attributes, pa.int32()), names),
        "kind": pa.array(decoded.kinds, pa.int8()),
        "number": pa.array(_numbers(decoded)),
        "string": decoded.string_array(),
    })
    if _has_repeats(decoded.offsets, decoded.attributes, len(decoded.attribute_names)):
        event = np.repeat(np.arange(len(decoded.offsets) - 1, dtype=np.int64), np.diff(decoded.offsets))
        pairs = (pairs.append_column("event", pa.array(event))
                 .group_by(["event", "attribute", "kind", "number", "string"], use_threads=False)
                 .aggregate([]).drop_columns(["event"]))
    counts = pairs.group_by(["attribute", "kind", "number", "string"], use_threads=False).aggregate([([], "count_all")])
    return _rows("value", counts.num_rows, attribute=counts["attribute"].combine_chunks().cast(pa.string()),
                 kind=counts["kind"].combine_chunks(), number=counts["number"].combine_chunks(),
                 string=counts["string"].combine_chunks(), count=counts["count_all"].combine_chunks())


@numba.njit(cache=True)
def _has_repeats(offsets, attributes, n_names):
    """Whether some event carries an attribute more than once."""
    stamp = np.full(n_names, -1, np.int64)
    for i in range(len(offsets) - 1):
        for p in range(offsets[i], offsets[i + 1]):
            if stamp[attributes[p]] == i:
                return True
            stamp[attributes[p]] = i
    return False


@numba.njit(cache=True)
def _schema_masks(offsets, attributes, rank, words):
    """Per event, the bit set of its attributes' name ranks (``words`` 64-bit words)."""
    n = len(offsets) - 1
    masks = np.zeros((n, words), np.uint64)
    for i in range(n):
        for p in range(offsets[i], offsets[i + 1]):
            r = rank[attributes[p]]
            masks[i, r >> 6] |= np.uint64(1) << np.uint64(r & 63)
    return masks


def schemas_of(decoded: DecodedEvents) -> tuple[list[list[str]], np.ndarray]:
    """The distinct schemas (sorted attribute names) of the batch's events and how many events have each."""
    names = decoded.attribute_names
    by_name = sorted(range(len(names)), key=lambda i: names[i])
    rank = np.empty(len(names), np.int64)
    rank[by_name] = np.arange(len(names))
    words = max(1, (len(names) + 63) // 64)
    masks = _schema_masks(decoded.offsets, decoded.attributes, rank, words)
    unique, counts = np.unique(masks, axis=0, return_counts=True)
    schemas = []
    for row in unique:
        bits = [w * 64 + b for w in range(words) for b in range(64) if int(row[w]) >> b & 1]
        schemas.append([names[by_name[r]] for r in bits])
    return schemas, counts.astype(np.int64)


def schema_counts(schemas: list[list[str]], counts: np.ndarray) -> pa.RecordBatch:
    """Events per schema of the batch (from :func:`schemas_of`)."""
    return _rows("schema", len(schemas), schema=pa.array(schemas, pa.list_(pa.string())), count=pa.array(counts))


def set_order(attributes: tuple[str, ...], support: int) -> tuple:
    """How frequent attribute sets are ranked: most frequent first, then smaller, then by name."""
    return (-support, len(attributes), attributes)


def local_joint_sets(schemas: list[list[str]], counts: np.ndarray, min_support: float, k: int,
                     max_schemas: int = 64) -> list[tuple[str, ...]]:
    """The ``k`` most frequent pairs and triples of a batch with support >= ``min_support`` (a fraction).

    Batches with more than ``max_schemas`` distinct schemas guess nothing (enumerating their sets
    costs more than the second pass saves).
    """
    if k <= 0 or len(schemas) > max_schemas:
        return []
    support: dict[tuple[str, ...], int] = {}
    for schema, count in zip(schemas, counts.tolist()):
        for size in (2, 3):
            for c in combinations(schema, size):
                support[c] = support.get(c, 0) + count
    floor = min_support * int(counts.sum())
    frequent = sorted((set_order(s, c) for s, c in support.items() if c >= floor))
    return [s for _, _, s in frequent[:k]]


@numba.njit(cache=True)
def _positions(offsets, attributes, column, width):
    """``pos[i, c]``: the pair of event i on the attribute of column c, -1 if it has none."""
    n = len(offsets) - 1
    pos = np.full((n, width), -1, np.int64)
    for i in range(n):
        for p in range(offsets[i], offsets[i + 1]):
            c = column[attributes[p]]
            if c >= 0:
                pos[i, c] = p
    return pos


@numba.njit(cache=True)
def _dense_ids(keys, kinds):
    """Ids 0.. of the distinct (``kinds``, ``keys``) in order of first appearance (open addressing),
    and each id's first index."""
    n = len(keys)
    size = 1
    while size < 2 * n:
        size *= 2
    slot_key = np.empty(size, np.int64)
    slot_kind = np.empty(size, np.int8)
    slot_id = np.full(size, -1, np.int64)
    ids = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    m = 0
    mask = np.uint64(size - 1)
    for i in range(n):
        k, t = keys[i], kinds[i]
        h = ((np.uint64(k) ^ np.uint64(t)) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)
        j = np.int64(h & mask)
        while slot_id[j] >= 0 and (slot_key[j] != k or slot_kind[j] != t):
            j = (j + 1) & (size - 1)
        if slot_id[j] < 0:
            slot_key[j] = k
            slot_kind[j] = t
            slot_id[j] = m
            first[m] = i
            m += 1
        ids[i] = slot_id[j]
    return ids, first[:m]


@numba.njit(cache=True)
def _column_value_ids(pos, kinds, bits):
    """Per column of ``pos`` (pairs, -1: absent): dense value ids of its pairs (-1: absent) and a
    representative pair of each id (``reps[c, :n_values[c]]``)."""
    n, w = pos.shape
    ids = np.full((n, w), -1, np.int64)
    reps = np.empty((w, n), np.int64)
    n_values = np.zeros(w, np.int64)
    for c in range(w):
        rows = np.flatnonzero(pos[:, c] >= 0)
        p = pos[rows, c]
        v, first = _dense_ids(bits[p], kinds[p])
        for i in range(len(rows)):
            ids[rows[i], c] = v[i]
        n_values[c] = len(first)
        for i in range(len(first)):
            reps[c, i] = p[first[i]]
    return ids, reps, n_values


def joint_counts(decoded: DecodedEvents, sets: Sequence[Sequence[str]]) -> list[pa.RecordBatch]:
    """Events per combination of values of each set (sorted names) of the batch, and the ``cover`` rows.

    Each attribute's values get dense ids (``np.unique``), a combination is one
    mixed-radix integer of its ids, and combinations are counted with
    ``np.unique`` too: no hash aggregation over many key columns per set.
    """
    if not sets:
        return []
    out = [_rows("cover", len(sets), schema=pa.array([list(s) for s in sets], pa.list_(pa.string())),
                 count=pa.array([len(decoded)] * len(sets), pa.int64()))]
    index = {name: i for i, name in enumerate(decoded.attribute_names)}
    wanted = sorted({a for s in sets for a in s if a in index})
    if not wanted:
        return out
    column = np.full(len(decoded.attribute_names), -1, np.int64)
    for c, a in enumerate(wanted):
        column[index[a]] = c
    pos = _positions(decoded.offsets, decoded.attributes, column, len(wanted))
    col_of = {a: c for c, a in enumerate(wanted)}
    kinds, numbers, strings = decoded.kinds, _numbers(decoded), decoded.string_array()
    string_ids = np.zeros(len(kinds), np.int64)
    if np.any(kinds == KIND_STRING):
        encoded = strings.dictionary_encode().indices
        string_ids = np.asarray(encoded.fill_null(0), dtype=np.int64)
    bits = np.where(kinds == KIND_STRING, string_ids, numbers.view(np.int64))
    # per column: value id of each event (-1: absent), representative pair of each id
    id_matrix, rep_matrix, n_values = _column_value_ids(pos, kinds, bits)
    ids = {c: id_matrix[:, c] for c in range(len(wanted))}
    reps = {c: rep_matrix[c, : n_values[c]] for c in range(len(wanted))}
    for attrs in sets:
        if not all(a in col_of for a in attrs):
            continue
        cols = [col_of[a] for a in attrs]
        rows = np.flatnonzero(np.all([ids[c] >= 0 for c in cols], axis=0))
        if not len(rows):
            continue
        radix = [len(reps[c]) for c in cols]
        w = len(attrs)
        if math.prod(radix) < 2**62:  # one integer per combination
            key = np.zeros(len(rows), np.int64)
            for c, r in zip(cols, radix):
                key = key * r + ids[c][rows]
            inverse, first = _dense_ids(key, np.zeros(len(key), np.int8))
            combos, counts = key[first], np.bincount(inverse, minlength=len(first))
            value_ids = np.empty((len(combos), w), np.int64)
            for j in range(w - 1, -1, -1):
                combos, value_ids[:, j] = np.divmod(combos, radix[j])
        else:  # many attributes (--joint): rows of ids
            value_ids, counts = np.unique(np.stack([ids[c][rows] for c in cols], axis=1), axis=0, return_counts=True)
        n = len(value_ids)
        # the representative pair of each value of each combination
        flat_pairs = np.stack([reps[c][value_ids[:, j]] for j, c in enumerate(cols)], axis=1).ravel()
        flat = pa.StructArray.from_arrays(
            [pa.array(kinds[flat_pairs], pa.int8()), pa.array(numbers[flat_pairs]), strings.take(pa.array(flat_pairs))],
            fields=list(_VALUE),
        )
        values = pa.ListArray.from_arrays(pa.array(np.arange(0, n * w + 1, w, dtype=np.int32)), flat)
        out.append(_rows("joint", n, schema=pa.array([list(attrs)] * n, pa.list_(pa.string())), values=values,
                         count=pa.array(counts.astype(np.int64))))
    return out


def batch_counts(values: Sequence[bytes | None], timestamps: np.ndarray, mode: str = "first",
                 joint_sets: list[list[str]] | None = None, joint_auto: tuple[int, float] | None = None,
                 registered=None) -> list[pa.RecordBatch]:
    """Decode one batch of record values into the partial counts of :data:`SCHEMA`: what every reader yields.

    ``timestamps``: the batch's record timestamps in ms (records without one left out).
    ``mode`` ``first``: records, bad, value and schema counts, and the joint
    counts of ``joint_sets`` if given, else of the batch's ``joint_auto =
    (k, min_support)`` most frequent sets.  ``joint``: the joint counts of
    ``joint_sets`` only (the second pass).  ``count``: records and bad counts
    alone (the benchmark's measure of reading).
    ``registered``: a ``wire.registered.RegisteredDecoders``, with which records in producers' registered schemas
    are read and counted by attribute path like any event.
    """
    decoded = decode_events(values, registered)
    if mode == "joint":
        return joint_counts(decoded, joint_sets or [])
    out = record_counts(len(values), decoded.errors, timestamps if len(timestamps) else None)
    if mode == "count" or not len(decoded):
        return out
    schemas, counts = schemas_of(decoded)
    out += [value_counts(decoded), schema_counts(schemas, counts)]
    if joint_sets:
        out += joint_counts(decoded, joint_sets)
    elif joint_auto:
        out += joint_counts(decoded, local_joint_sets(schemas, counts, joint_auto[1], joint_auto[0]))
    return out
