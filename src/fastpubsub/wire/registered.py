"""Events in a producer's own registered schema: Confluent-framed records decoded with the schema their id names.

A value in the Confluent wire format (a zero byte, a 4-byte schema id, the body) whose id is not fastpubsub's own
event schema is read with the schema a Schema Registry holds under that id: Avro, JSON Schema or Protobuf.  The
schema is looked up once per id (the lookup is the caller's: ``kafka.schema_registry`` asks the registry, a test a
dict) and compiled into a reader kept for the life of the process, so a producer moving to a new version mid-stream
only adds an id: nothing restarts.  The body is decoded with fastavro and the standard JSON and Protobuf runtimes,
not with confluent-kafka's deserializers, which cost several times a header parse plus a cached reader.

The decoded value is nested; its leaves become attributes named by their path (``wire.paths``).  Values the
matcher cannot compare become comparable scalars, the same for every format:

* timestamps (Avro ``timestamp-millis``/``-micros``, Protobuf ``Timestamp``): milliseconds since the epoch, UTC;
* dates: the ISO text ``YYYY-MM-DD`` (its order is the dates' order); times of day: milliseconds since midnight;
* decimals: doubles; UUIDs and enums: their text;
* bytes and fixed: not comparable, left out of the event.  Subscriptions are accepted before any schema is known (a
  path may be bytes in one topic and text in another), so one that names such a field cannot be refused; the first
  time a registered Avro schema meets a subscribed path that is bytes or fixed, a warning names the schema id and
  the field (:meth:`RegisteredDecoders.program`).
"""

from __future__ import annotations

import datetime
import decimal
import json
import logging
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import fastavro

import numpy as np

from .avro_program import _LEAVES, BYTES, FIXED, NULL, AvroProgram, NotCompiled, compile_schema
from .codecs.framing import MAX_ATTRIBUTE_BYTES, DecodeError, _avro_body, _json_read
from .paths import flatten

log = logging.getLogger(__name__)
_HEADER = struct.Struct(">bI")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
TYPES = ("AVRO", "JSON", "PROTOBUF")


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: its type, its text, and the schemas it references (resolved)."""

    schema_type: str  # AVRO, JSON or PROTOBUF (the registry's names; AVRO when it gives none)
    text: str
    references: tuple["Reference", ...] = ()


@dataclass(frozen=True)
class Reference:
    """A referenced schema under the name the referring one uses (Avro: a full record name; Protobuf: an import)."""

    name: str
    schema: RegisteredSchema


class UnknownSchema(DecodeError):
    """The registry holds no schema under the record's id: the record is dead-lettered with this reason."""


class RegistryUnavailable(RuntimeError):
    """The registry did not answer: nothing about the record is known yet, so it must be neither matched nor
    dead-lettered; the caller waits."""


def schema_id(value: bytes) -> int | None:
    """The schema id of a Confluent-framed value, None for anything else."""
    if len(value) >= 5 and value[0] == 0:
        return _HEADER.unpack_from(value)[1]
    return None


def comparable(value: Any) -> Any:
    """A decoded value with every leaf the matcher cannot compare turned into one it can (module docstring)."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        delta = value - _EPOCH
        ms = (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) / 1000
        return int(ms) if ms == int(ms) else ms
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        ms = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond / 1000
        return int(ms) if ms == int(ms) else ms
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return None  # bytes, fixed: no order a predicate could use


# --- one reader per schema ----------------------------------------------------------------------------------------


def _avro_reader(schema: RegisteredSchema) -> Callable[[bytes], Any]:
    named: dict[str, Any] = {}

    def parse(s: RegisteredSchema) -> Any:
        for ref in s.references:
            parse(ref.schema)
        return fastavro.parse_schema(json.loads(s.text), named_schemas=named)

    try:
        parsed = parse(schema)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the schema's, said once per record
        raise DecodeError(f"its Avro schema does not parse: {exc}") from None

    def read(value: bytes) -> Any:
        return _avro_body(parsed, None, value)

    try:
        read.program = compile_schema(parsed, named, MAX_ATTRIBUTE_BYTES)  # type: ignore[attr-defined]
    except NotCompiled:
        read.program = None  # type: ignore[attr-defined]  # every record of it goes through ``read``
    return read


def _json_reader(schema: RegisteredSchema) -> Callable[[bytes], Any]:
    def read(value: bytes) -> Any:
        return _json_read(value[5:])

    return read


def _protobuf_reader(schema: RegisteredSchema) -> Callable[[bytes], Any]:
    from . import protobuf

    return protobuf.reader(schema)


_READERS = {"AVRO": _avro_reader, "JSON": _json_reader, "PROTOBUF": _protobuf_reader}


@dataclass
class RegisteredDecoders:
    """Records framed with registered schema ids -> attribute pairs, one compiled reader per id.

    ``lookup(id)`` gives the schema registered under ``id``; it raises :class:`UnknownSchema` for an id the registry
    does not hold and :class:`RegistryUnavailable` when the registry does not answer (then nothing is cached and
    the record is asked about again).  ``native_event_id``: the id of fastpubsub's own event schema, read by the
    batch decoder's kernel, never by this.
    """

    lookup: Callable[[int], RegisteredSchema]
    native_event_id: int
    #: How long an id the registry said it does not hold is taken as unknown without asking again: a stream of
    #: such records costs one request per interval, and an id registered meanwhile is read soon after.
    unknown_seconds: float = 10.0
    _readers: dict[int, Callable[[bytes], Any]] = field(default_factory=dict)
    _masks: dict[int, tuple[Any, np.ndarray]] = field(default_factory=dict)
    _every: dict[int, np.ndarray] = field(default_factory=dict)
    _broken: dict[int, str] = field(default_factory=dict)
    _unknown: dict[int, tuple[float, str]] = field(default_factory=dict)
    #: (schema id, path) of every subscribed bytes or fixed field met, each told once (:meth:`_tell_uncomparable`)
    uncomparable: list[tuple[int, str]] = field(default_factory=list)
    _checked: dict[int, frozenset[str]] = field(default_factory=dict)  # :meth:`check_paths`' last ``wanted`` per id

    def reader(self, sid: int) -> Callable[[bytes], Any]:
        found = self._readers.get(sid)
        if found is not None:
            return found
        if sid in self._broken:
            raise DecodeError(self._broken[sid])
        known = self._unknown.get(sid)
        if known is not None and time.monotonic() - known[0] < self.unknown_seconds:
            raise UnknownSchema(known[1])
        try:
            schema = self.lookup(sid)  # RegistryUnavailable: nothing cached, the caller waits
        except UnknownSchema as exc:
            self._unknown[sid] = (time.monotonic(), str(exc))
            raise
        kind = schema.schema_type or "AVRO"
        try:
            if kind not in _READERS:
                raise DecodeError(f"its type {kind!r} is none of {', '.join(TYPES)}")
            found = _READERS[kind](schema)
        except DecodeError as exc:
            self._broken[sid] = f"schema id {sid}: {exc}"
            raise DecodeError(self._broken[sid]) from None
        self._readers[sid] = found
        return found

    def program(self, sid: int, wanted: frozenset[str] | None = None) -> tuple[AvroProgram, np.ndarray] | None:
        """The compiled program of the Avro schema under ``sid`` and which of its nodes lead to a name in
        ``wanted`` (None: all; ``AvroProgram.wanted``, kept while ``wanted`` is the same object), or None when
        its records go through the per-record path (another type, a shape the kernel does not walk, an unknown
        id: that path gives the reason)."""
        try:
            prog = getattr(self.reader(sid), "program", None)
        except DecodeError:
            return None
        if prog is None:
            return None
        if wanted is None:  # every node (the notifications' event parts): kept apart from the subscriptions' mask
            every = self._every.get(sid)
            if every is None:
                every = self._every[sid] = prog.wanted(None)
            return prog, every
        cached = self._masks.get(sid)
        if cached is None or cached[0] is not wanted:
            cached = self._masks[sid] = (wanted, prog.wanted(wanted))
            self._tell_uncomparable(sid, prog, wanted)
        return prog, cached[1]

    def _tell_uncomparable(self, sid: int, prog: AvroProgram, wanted: frozenset[str] | None) -> None:
        """A subscribed path whose every value in this schema is bytes or fixed (a union with a string branch may
        still match) never holds on its events: the operator's clear error, once per schema id and field."""
        if not wanted:
            return
        leaves: dict[str, set[int]] = {}
        for n, p in enumerate(prog.node_path):
            if p in wanted and prog.op[n] in _LEAVES and prog.op[n] != NULL:
                leaves.setdefault(p, set()).add(int(prog.op[n]))
        self._tell(sid, {p: " or ".join(sorted("bytes" if o == BYTES else "fixed" for o in ops))
                         for p, ops in leaves.items() if ops <= {BYTES, FIXED}})

    def check_paths(self, sid: int, wanted: frozenset[str] | None) -> None:
        """:meth:`_tell_uncomparable` for a schema read by the per-record path (Protobuf: its reader's
        ``uncomparable``, path -> type), once per ``wanted`` (the same object while the subscriptions' names are)."""
        if not wanted or self._checked.get(sid) is wanted:
            return
        self._checked[sid] = wanted
        try:
            paths = getattr(self.reader(sid), "uncomparable", None)
        except DecodeError:
            return
        if paths:
            self._tell(sid, {p: kind for p, kind in paths.items() if p in wanted})

    def _tell(self, sid: int, paths: Mapping[str, str]) -> None:
        for p, kind in paths.items():
            if (sid, p) not in self.uncomparable:
                self.uncomparable.append((sid, p))
                log.warning("schema id %d: field %r is %s, which no predicate can compare: subscriptions that name "
                            "it never match events of this schema", sid, p, kind)

    def decode(self, value: bytes) -> Any:
        """The nested value of one framed record (its scalars made comparable)."""
        sid = schema_id(value)
        if sid is None:
            raise DecodeError("not in the Confluent wire format (a zero byte, then a 4-byte schema id)")
        reader = self.reader(sid)
        try:
            return comparable(reader(value))
        except DecodeError as exc:
            raise DecodeError(f"record of schema id {sid} does not decode: {exc}") from None

    def pairs(self, value: bytes) -> list[tuple[str, Any]]:
        """The record's attributes: (dotted path, scalar) per leaf, arrays as repeated pairs."""
        decoded = self.decode(value)
        if not isinstance(decoded, Mapping):
            raise DecodeError(f"record of schema id {schema_id(value)} is a {type(decoded).__name__}, not a "
                              f"record or object: an event needs named fields")
        try:
            return flatten(decoded)
        except ValueError as exc:  # a key the path rule refuses (an empty one), a value it cannot compare
            raise DecodeError(f"invalid event: {str(exc)[:500]}") from None

    def handles(self, value: bytes | None) -> bool:
        """Whether ``value`` is framed with an id other than fastpubsub's own event schema."""
        if not value:
            return False
        sid = schema_id(value)
        return sid is not None and sid != self.native_event_id


def indexed_attributes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Pairs as one flat map: a path met once keeps its name, the elements of a repeated one (an array's) are
    ``path[0]``, ``path[1]``, ... in order."""
    counts: dict[str, int] = {}
    for name, _ in pairs:
        counts[name] = counts.get(name, 0) + 1
    out: dict[str, Any] = {}
    seen: dict[str, int] = {}
    for name, value in pairs:
        if counts[name] == 1:
            out[name] = value
        else:
            i = seen.get(name, 0)
            seen[name] = i + 1
            out[f"{name}[{i}]"] = value
    return out
