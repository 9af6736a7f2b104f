"""Dead-letter records: the reason an input record was refused and the record itself, bounded to fit the
topic's record limit (schema id 4)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, replace

from .framing import SCHEMAS, _avro_read, _avro_write, _json_read, _sniff, _wire


@dataclass(frozen=True)
class DeadLetter:
    """An input record that could not be processed, and why.

    ``key`` and ``value`` are the original bytes, or prefixes of them when
    ``truncated``: a dead letter must fit the dead-letter topic's record
    limit like every other output, or the record that caused it would stall
    the pipeline (:func:`encode_dead_letter` with ``max_bytes``).
    ``original_size`` and ``value_sha256`` describe the whole original.
    """

    reason: str
    source_topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    original_size: int | None = None
    value_sha256: str | None = None
    truncated: bool = False

    @property
    def record_key(self) -> str:
        # Deterministic: replays (restarts, other instances) of the same input give the same key.
        return f"{self.source_topic}:{self.partition}:{self.offset}"


def dead_letter(reason: str, source_topic: str, partition: int, offset: int, key: bytes | None,
                value: bytes | None) -> DeadLetter:
    """A dead letter of the whole record, with its size and the SHA-256 of its value."""
    size = len(key or b"") + len(value or b"")
    digest = None if value is None else hashlib.sha256(value).hexdigest()
    return DeadLetter(reason, source_topic, partition, offset, key, value, size, digest)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


#: At most this many bytes of a reason are kept in a dead letter (reasons quote at most a few hundred bytes of input).
MAX_REASON_CHARS = 2000
#: A truncated dead letter keeps at most this much of the original key, the rest of the room goes to the value.
TRUNCATED_KEY_BYTES = 1024


def _encode_dead_letter(dl: DeadLetter, fmt: str) -> bytes:
    datum = {
        "reason": dl.reason,
        "source_topic": dl.source_topic,
        "partition": dl.partition,
        "offset": dl.offset,
        "key": dl.key,
        "value": dl.value,
        "original_size": dl.original_size,
        "value_sha256": dl.value_sha256,
        "truncated": dl.truncated,
    }
    if fmt == "json":  # bytes as base64 so the value stays valid JSON
        return json.dumps({**datum, "key": _b64(dl.key), "value": _b64(dl.value)}).encode()
    return _wire("dead_letter", _avro_write(SCHEMAS["dead_letter"], datum))


def encode_dead_letter(dl: DeadLetter, fmt: str = "avro", max_bytes: int | None = None) -> bytes:
    """The dead letter's value; with ``max_bytes``, key and value are cut to prefixes so that it fits."""
    return fit_dead_letter(dl, fmt, max_bytes)[0]


def fit_dead_letter(dl: DeadLetter, fmt: str = "avro", max_bytes: int | None = None) -> tuple[bytes, bool]:
    """(value, truncated): the dead letter encoded in at most ``max_bytes`` bytes.

    The cut is computed from the encoding of the dead letter without value
    (base64 takes 4 bytes per 3 in JSON; Avro adds a length of at most 10
    bytes), then checked; ``truncated`` is set in the record when anything was cut.
    """
    if len(dl.reason) > MAX_REASON_CHARS:
        dl = replace(dl, reason=dl.reason[:MAX_REASON_CHARS] + "...")
    carried = len(dl.key or b"") + len(dl.value or b"")
    if max_bytes is None or carried < max_bytes:  # else it cannot fit: never encode a large record whole
        out = _encode_dead_letter(dl, fmt)
        if max_bytes is None or len(out) <= max_bytes:
            return out, False
    key = dl.key if dl.key is None or len(dl.key) <= TRUNCATED_KEY_BYTES else dl.key[:TRUNCATED_KEY_BYTES]
    bare = replace(dl, key=key, value=None if dl.value is None else b"", truncated=True)
    room = max_bytes - len(_encode_dead_letter(bare, fmt)) - 16
    if room < 0:
        raise ValueError(f"a dead letter needs more than {max_bytes} bytes even without the record's bytes")
    keep = room * 3 // 4 if fmt == "json" else room
    while True:
        out = _encode_dead_letter(replace(bare, value=None if dl.value is None else dl.value[:keep]), fmt)
        if len(out) <= max_bytes:
            return out, True
        keep -= len(out) - max_bytes


def decode_dead_letter(value: bytes) -> DeadLetter:
    if _sniff(value, "dead letter") == "json":
        d = _json_read(value)
        for field in ("key", "value"):
            d[field] = None if d[field] is None else base64.b64decode(d[field])
    else:
        d = _avro_read("dead_letter", value)
    return DeadLetter(**d)
