"""A record's metadata as attributes of its event, named so that no payload field can take their names.

A subscription tests where an event came from and what came with it through attributes that start with ``$``:

* ``$topic`` (string), ``$partition`` and ``$offset`` (numbers): where the record is;
* ``$key`` (string): the record key, when it has one and it is UTF-8;
* ``$timestamp`` (number): the record's timestamp in ms since the epoch (producer or broker time), when it has one;
* ``$header.NAME`` (string): the value of the header ``NAME`` (the last one of that name), when it is UTF-8.

A payload field whose name starts with ``$`` is escaped by the path rule (``wire.paths``: ``$price`` is ``\\$price``),
so that ``$topic`` always means the record's topic.
Only the metadata some subscription names is attached (:func:`attach`), so events cost nothing more when no
subscription uses it; the engine sees ordinary attributes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from fastpubsub.engine import KIND_NUMBER, KIND_STRING, parse_derived

from .paths import SIGIL

#: A record's timestamp type when it has none (librdkafka's ``TIMESTAMP_NOT_AVAILABLE``): the records here are
#: anything with a Kafka message's accessors, and the wire formats know nothing of the Kafka client.
NO_TIMESTAMP = 0
HEADER = "$header."
#: The metadata attributes besides headers, each with how it is read from a record (None: absent).
FIELDS: dict[str, Callable[[Any], Any]] = {
    "$topic": lambda m: m.topic(),
    "$partition": lambda m: m.partition(),
    "$offset": lambda m: m.offset(),
    "$key": lambda m: _text(m.key()),
    "$timestamp": lambda m: None if m.timestamp()[0] == NO_TIMESTAMP else m.timestamp()[1],
}


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_metadata(name: str) -> bool:
    """Whether an attribute name denotes record metadata (``$topic``, ``$header.X``), not a payload field."""
    return name in FIELDS or (name.startswith(HEADER) and len(name) > len(HEADER))


def referenced(names: Iterable[str]) -> tuple[str, ...]:
    """The metadata attributes among ``names`` (the attributes subscriptions test, with the attribute a derived one
    stands for: ``$topic prefix "a"`` is known to the engine as the first character of ``$topic``), in a stable
    order."""
    out = set()
    for name in names:
        derived = parse_derived(name)  # None for an ordinary name
        if derived is not None:
            name = derived[1]
        if name.startswith(SIGIL) and is_metadata(name):
            out.add(name)
    return tuple(sorted(out))


def _header(msg: Any, name: str) -> str | None:
    found = None
    for k, v in msg.headers() or ():
        if k == name:
            found = v
    return _text(found) if isinstance(found, bytes) else found if isinstance(found, str) else None


def values_of(msg: Any, name: str) -> Any:
    """The value of metadata attribute ``name`` for record ``msg`` (None: absent)."""
    if name in FIELDS:
        return FIELDS[name](msg)
    return _header(msg, name[len(HEADER):])


def attach(decoded, records: Sequence[Any], wanted: Sequence[str]):
    """``decoded`` (``wire.event_decoder.DecodedEvents`` of ``records``) with the ``wanted`` metadata attributes
    appended to each event's pairs.

    One pass per wanted attribute over the batch's records (a C call each), then one stable sort that puts each
    event's new pairs after its own: nothing per subscription.
    """
    if not wanted or not len(decoded):
        return decoded
    rows = decoded.rows.tolist()
    names = list(decoded.attribute_names)
    index = {n: i for i, n in enumerate(names)}
    ev, attr, kind, number, start, length = [], [], [], [], [], []
    chunks, pos = [decoded.buffer.tobytes()], len(decoded.buffer)
    for name in wanted:
        values = [values_of(records[r], name) for r in rows]
        present = [e for e, v in enumerate(values) if v is not None]
        if not present:
            continue
        a = index.setdefault(name, len(names))
        if a == len(names):
            names.append(name)
        events = np.array(present, np.int64)
        ev.append(events)
        attr.append(np.full(len(present), a, np.int32))
        if isinstance(values[present[0]], str):
            data = [values[e].encode("utf-8") for e in present]
            lens = np.fromiter((len(d) for d in data), np.int64, len(data))
            starts = pos + np.cumsum(lens) - lens
            chunks.append(b"".join(data))
            pos += int(lens.sum())
            kind.append(np.full(len(present), KIND_STRING, np.int8))
            number.append(np.zeros(len(present)))
            start.append(starts)
            length.append(lens.astype(np.int32))
        else:
            kind.append(np.full(len(present), KIND_NUMBER, np.int8))
            number.append(np.array([float(values[e]) for e in present]))
            start.append(np.zeros(len(present), np.int64))
            length.append(np.full(len(present), -1, np.int32))
    if not ev:
        return decoded
    n = len(rows)
    own = np.repeat(np.arange(n, dtype=np.int64), np.diff(decoded.offsets))
    all_ev = np.concatenate([own, *ev])
    order = np.argsort(all_ev, kind="stable")
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(all_ev, minlength=n), out=offsets[1:])
    return replace(decoded, attribute_names=tuple(names), offsets=offsets,
                   attributes=np.concatenate([decoded.attributes.astype(np.int32), *attr])[order],
                   kinds=np.concatenate([decoded.kinds, *kind])[order],
                   numbers=np.concatenate([decoded.numbers, *number])[order],
                   string_start=np.concatenate([decoded.string_start.astype(np.int64), *start])[order],
                   string_length=np.concatenate([decoded.string_length.astype(np.int32), *length])[order],
                   buffer=np.frombuffer(b"".join(chunks), np.uint8))
