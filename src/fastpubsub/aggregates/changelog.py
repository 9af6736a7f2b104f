"""Aggregate state as keyed changelog records (key bytes -> value bytes, tombstones, source offsets).

Everything the reformulators and the S-UN answers hold derives from the tables' rows, so the
changelog holds one record per table row: key ``[table, row key]``, value the row, or a tombstone
when the row is deleted.  Each record names the input partition and offset of the update that
produced it, so that a restore can drop records written by a transaction that did not commit
(the embedded broker shows aborted records to read_committed readers: see docs/reliability.md).
A Kafka stage writes these records in the same transaction as the outputs, to a compacted topic,
and restores them before processing.

This interface is local to the aggregates package; a shared state module may replace it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Hashable, Iterable

from .table import Row


@dataclass(frozen=True)
class StateRecord:
    key: bytes
    value: bytes | None  # None = tombstone
    source_partition: int
    source_offset: int

    def headers(self) -> list[tuple[str, bytes]]:
        """Kafka record headers carrying the source position (tombstones have no value to carry it)."""
        return [("src", f"{self.source_partition}:{self.source_offset}".encode())]

    @staticmethod
    def source_from_headers(headers: Iterable[tuple[str, bytes]]) -> tuple[int, int]:
        for k, v in headers:
            if k == "src":
                p, o = v.decode().split(":")
                return int(p), int(o)
        raise ValueError("changelog record without a 'src' header")


def encode_key(table: str, key: Hashable) -> bytes:
    try:
        return json.dumps([table, key], separators=(",", ":")).encode()
    except TypeError:
        raise ValueError(f"table {table!r}: row key {key!r} is not a string or number") from None


def decode_key(b: bytes) -> tuple[str, Any]:
    table, key = json.loads(b)
    return table, key


def row_record(table: str, key: Hashable, row: Row | None, partition: int, offset: int) -> StateRecord:
    value = None if row is None else json.dumps(row, separators=(",", ":"), sort_keys=True).encode()
    return StateRecord(encode_key(table, key), value, partition, offset)


def live_rows(records: Iterable[StateRecord], committed: dict[int, int] | None = None
              ) -> dict[str, dict[Any, Row]]:
    """The rows after replaying ``records`` in log order, skipping records whose source offset is
    at or beyond the committed input offset of their partition (written by an aborted batch)."""
    tables: dict[str, dict[Any, Row]] = {}
    for r in records:
        if committed is not None and r.source_offset >= committed.get(r.source_partition, 0):
            continue
        table, key = decode_key(r.key)
        t = tables.setdefault(table, {})
        if r.value is None:
            t.pop(key, None)
        else:
            t[key] = json.loads(r.value)
    return tables
