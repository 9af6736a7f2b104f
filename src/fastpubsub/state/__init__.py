"""Keyed, restorable state for stateful subscriptions (patterns, aggregates); Kafka-free.

A state kind exports its changes as :class:`StateChanges` (key bytes -> value
bytes, ``None`` a tombstone, each tagged with the source partition and offset
of the record that caused it).  :mod:`.changelog` maps them to compacted-changelog records
and back; :class:`KeyedStore` applies them and restores, discarding changes at
or past the committed input offset: at-least-once delivery acknowledges them
before it commits the offsets, and a crash in between leaves them behind (on
Apache Kafka a read_committed restore of transactional changes never meets
one).  See docs/patterns.md section 4.
"""

from .changelog import OFFSET_HEADER, PARTITION_HEADER, StateChanges, from_records, source_headers, to_records
from .store import KeyedStore

__all__ = ["KeyedStore", "OFFSET_HEADER", "PARTITION_HEADER", "StateChanges", "from_records", "source_headers",
           "to_records"]
