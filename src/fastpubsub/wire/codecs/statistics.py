"""Statistics snapshot records (schema id 5)."""

from __future__ import annotations

from typing import Any

from .framing import SCHEMAS, _avro_read, _avro_write, _json_read, _sniff, _wire


def encode_statistics(record: dict[str, Any]) -> bytes:
    """An ``EventStatistics.to_record()`` dict -> value of pubsub.statistics (always Avro)."""
    return _wire("statistics", _avro_write(SCHEMAS["statistics"], record))


def decode_statistics(value: bytes) -> dict[str, Any]:
    """A pubsub.statistics value -> the record (``EventStatistics.from_record`` takes it)."""
    if _sniff(value, "statistics") == "json":
        return _json_read(value)
    return _avro_read("statistics", value)
