"""Constants shared by the clustering's planner, its maintenance and the index (Fabret et al., section 3).

A *schema* (the set of attributes of a multi-attribute hash table) has at
most ``MAX_SCHEMA`` fields; an access key therefore stands for at most that
many equality predicates.  Schemas are packed into one int64 (sorted field
ids, ``(id + 1) << (FIELD_BITS * i)``; 0 is the empty schema, the catch-all),
written here once and used by every module that packs or unpacks them.

A *presence* key (the pivot of Zhang et al., PVLDB 2014, section 4.1) is
written as the negative ``-(field + 1)``: "the event carries ``field``",
which every predicate on the field implies, so any subscription may be filed
under the presence of any of its fields.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit

#: Fields of a schema, and predicates of an access key, at most.
MAX_SCHEMA = 3
#: Bits per field in a packed schema; field ids must be below ``FIELD_MASK``.
FIELD_BITS = 21
FIELD_MASK = (1 << FIELD_BITS) - 1
#: The empty schema: no access predicate, checked for every event.
EMPTY_SCHEMA = np.int64(0)
#: A table must save this many times its modelled per-event cost before the static greedy or the
#: dynamic maintenance creates it: the model leaves out the visit of the cluster lists a probe finds,
#: and on W0 at 6M tables with a smaller margin lowered throughput (docs/design/clustering.md).
SAFETY_MARGIN = 2.0


def pack_schema(fields: Sequence[int]) -> int:
    """Packed key of a field set (order does not matter)."""
    attrs = sorted(set(int(a) for a in fields))
    if len(attrs) > MAX_SCHEMA:
        raise ValueError(f"schemas have at most {MAX_SCHEMA} attributes, got {len(attrs)}")
    key = 0
    for i, a in enumerate(attrs):
        if not 0 <= a < FIELD_MASK:
            raise ValueError(f"attribute id {a} out of range for a packed schema")
        key |= (a + 1) << (FIELD_BITS * i)
    return key


def unpack_schema(key: int) -> tuple[int, ...]:
    """The fields of a packed schema, ascending."""
    out = []
    key = int(key)
    if key < 0:
        raise ValueError(f"{key} is a presence key (field {-key - 1}), not a field set")
    while key:
        out.append((key & FIELD_MASK) - 1)
        key >>= FIELD_BITS
    return tuple(out)


def pack_rows(fields: np.ndarray) -> np.ndarray:
    """Packed schemas of (n, MAX_SCHEMA) field rows (-1 padded, ascending), vectorised."""
    fields = np.asarray(fields, dtype=np.int64)
    out = np.zeros(len(fields), dtype=np.int64)
    for m in range(fields.shape[1]):
        f = fields[:, m]
        out |= np.where(f >= 0, (f + 1) << (FIELD_BITS * m), 0)
    return out


def unpack_rows(schemas: np.ndarray) -> np.ndarray:
    """(n, MAX_SCHEMA) field rows (-1 padded) of packed schemas (0 -> all -1), vectorised."""
    schemas = np.asarray(schemas, dtype=np.int64)
    out = np.empty((len(schemas), MAX_SCHEMA), dtype=np.int64)
    for m in range(MAX_SCHEMA):
        out[:, m] = ((schemas >> (FIELD_BITS * m)) & FIELD_MASK) - 1
    return out


def presence_schema(fields: np.ndarray | int) -> np.ndarray | int:
    """Packed presence key of fields (negative: never a field set)."""
    return -(np.asarray(fields, dtype=np.int64) + 1) if not isinstance(fields, int) else -(fields + 1)


def is_presence(schemas: np.ndarray) -> np.ndarray:
    return np.asarray(schemas) < 0


def presence_field(schemas: np.ndarray) -> np.ndarray:
    """Field of packed presence keys."""
    return -np.asarray(schemas, dtype=np.int64) - 1


def is_multi(schemas: np.ndarray) -> np.ndarray:
    """Packed schemas of two fields or more."""
    return np.asarray(schemas) > FIELD_MASK


@njit(cache=True, inline="always")
def pack3(a0, a1, a2):
    """Packed schema of fields ``a0 < a1 < a2`` inside a kernel (-1: absent)."""
    key = np.int64(a0 + 1)
    if a1 >= 0:
        key |= np.int64(a1 + 1) << FIELD_BITS
    if a2 >= 0:
        key |= np.int64(a2 + 1) << (2 * FIELD_BITS)
    return key
