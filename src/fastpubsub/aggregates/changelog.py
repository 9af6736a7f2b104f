"""Aggregate state as keyed changelog records (:mod:`fastpubsub.state`): one record per table row.

Everything the reformulators and the S-UN answers hold derives from the tables' rows, so the
changelog holds one change per table row: key ``[table, row key]`` (JSON), value the row
(JSON), or a tombstone when the row is deleted.  Each change names the input partition and
offset of the update that produced it (:class:`fastpubsub.state.StateChanges`), so that a
restore drops changes past the committed input offsets: at-least-once delivery leaves them when it
crashes between the outputs' acknowledgement and the offset commit (transactions on Apache Kafka
never do: a read_committed reader sees them only with their offsets).  A Kafka stage writes
them (``fastpubsub.state.to_records``) in the same transaction as the outputs, to a compacted
topic, and restores them before processing.
"""

from __future__ import annotations

import json
from typing import Any, Hashable, Mapping

import numpy as np

from ..state import KeyedStore, StateChanges, source_headers
from .table import Row


def encode_key(table: str, key: Hashable) -> bytes:
    try:
        return json.dumps([table, key], separators=(",", ":")).encode()
    except TypeError:
        raise ValueError(f"table {table!r}: row key {key!r} is not a string or number") from None


def decode_key(b: bytes) -> tuple[str, Any]:
    table, key = json.loads(b)
    return table, key


def encode_row(row: Row | None) -> bytes | None:
    return None if row is None else json.dumps(row, separators=(",", ":"), sort_keys=True).encode()


def row_change(table: str, key: Hashable, row: Row | None, partition: int, offset: int) -> StateChanges:
    """The change of one row: its new value, or a tombstone, from input ``partition`` at ``offset``."""
    return StateChanges([encode_key(table, key)], [encode_row(row)], np.array([offset], np.int64),
                        np.array([partition], np.int32))


def row_record(table: str, key: Hashable, row: Row | None, partition: int,
               offset: int) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """``to_records(row_change(...))[0]`` without the detour: the changelog record of one row, for a producer."""
    return encode_key(table, key), encode_row(row), source_headers(partition, offset)


def live_rows(changes: StateChanges, committed: Mapping[int, int] | None = None) -> dict[str, dict[Any, Row]]:
    """The rows after replaying ``changes`` in log order, skipping changes whose source offset is
    at or beyond the committed input offset of their partition (an at-least-once batch whose offsets were not
    committed: the replay writes them again)."""
    tables: dict[str, dict[Any, Row]] = {}
    for key, (value, _, _) in KeyedStore.restore(changes, committed).data.items():
        table, row_key = decode_key(key)
        tables.setdefault(table, {})[row_key] = json.loads(value)
    return tables
