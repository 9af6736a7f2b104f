"""Which events partition an event belongs to when events are placed by an attribute (docs/patterns.md 6.5).

A pattern correlated on an attribute (``next b: name = a.name``) sees the events of one partition only, so
it is exact when all events with one value of that attribute share a partition.  Producers get there by
choosing the partition from the attribute's value, rather than by keying the record with it: the record
key is the event id of plain notifications (``processor.inputs.event_id``), which a key shared by many
events would no longer identify.  Any producer can compute the same partition: the CRC-32 of the value's
JSON text (integral numbers written as integers, so 7 and 7.0 agree, as they do in comparisons) modulo the
number of partitions.
"""

from __future__ import annotations

import json
import math
import zlib
from typing import Any


def placement_text(value: Any) -> bytes:
    """The bytes hashed for ``value``: its JSON text, integral floats as integers."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def partition_for(value: Any, partitions: int) -> int:
    """The partition of the events whose placement attribute has ``value``."""
    if partitions < 1:
        raise ValueError("partitions must be positive")
    return zlib.crc32(placement_text(value)) % partitions
