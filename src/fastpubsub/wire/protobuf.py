"""Protobuf records in a registered schema: the schema in either form registries hold, the message indexes, a walk.

A registry holds a Protobuf schema as ``.proto`` text (what Java clients and people register) or as a base64
``FileDescriptorProto`` (what confluent-kafka's Python serializer registers); both are accepted.  Text is compiled
with protoc (``grpcio-tools`` ships it, with the well-known types) into a descriptor set.  A referenced schema is an
imported file under its reference's name; ``google/protobuf/*`` and ``confluent/*`` imports come from the runtime's
own pool, as the serializers leave them out of the references.

After the Confluent header a record carries its message indexes (a zigzag varint count, then that many zigzag
varints; a single 0 for the file's first message): the path to its message among the file's messages and their
nested ones.  The decoded message becomes a nested dict by a walk over its descriptor, not ``MessageToDict``,
which turns 64-bit integers into text: fields a proto3 message does not carry keep their default (as readers see
them), a field with presence that is not set is absent, a ``oneof`` has only the member set, enums are their
names, maps are maps, ``google.protobuf.Timestamp`` is a ``datetime`` (then milliseconds, ``wire.registered``).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import tempfile
from typing import Any, Callable

from .codecs import DecodeError

#: A ``wire.registered.RegisteredSchema`` (its ``text`` and ``references``); that module calls this one.
RegisteredSchema = Any

_WELL_KNOWN = ("google/protobuf/", "google/type/", "confluent/")


def _file_protos(schema: RegisteredSchema, name: str, out: dict[str, Any]) -> None:
    """Every file the schema needs, references first, as ``FileDescriptorProto`` by file name."""
    from google.protobuf import descriptor_pb2

    for ref in schema.references:
        if ref.name not in out and not ref.name.startswith(_WELL_KNOWN):
            _file_protos(ref.schema, ref.name, out)
    raw = _base64(schema.text)
    if raw is not None:
        proto = descriptor_pb2.FileDescriptorProto()
        try:
            proto.ParseFromString(raw)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and kin
            raise DecodeError(f"its Protobuf descriptor does not parse: {exc}") from None
        if not proto.name:
            proto.name = name
        out[name] = proto
        return
    for proto in _compile(schema, name):
        out.setdefault(proto.name, proto)


def _base64(text: str) -> bytes | None:
    stripped = text.strip()
    if not stripped or any(c in stripped for c in " ;{}\n"):
        return None  # .proto text has spaces, braces and semicolons; base64 has none
    try:
        return base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None


def _compile(schema: RegisteredSchema, name: str) -> list[Any]:
    """``.proto`` text (and its references' texts) compiled by protoc into descriptors, imports included."""
    try:
        from grpc_tools import protoc
    except ImportError:
        raise DecodeError("its Protobuf schema is .proto text, which needs protoc: pip install grpcio-tools "
                          "(fastpubsub[registry])") from None
    from importlib import resources

    from google.protobuf import descriptor_pb2

    with tempfile.TemporaryDirectory(prefix="fastpubsub-proto-") as tmp:
        def write(s: RegisteredSchema, path: str) -> None:
            target = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(s.text)
            for ref in s.references:
                if not ref.name.startswith(_WELL_KNOWN):
                    write(ref.schema, ref.name)

        write(schema, name)
        out = os.path.join(tmp, "descriptors.pb")
        include = str(resources.files("grpc_tools") / "_proto")
        code = protoc.main(["protoc", f"-I{tmp}", f"-I{include}", "--include_imports",
                            f"--descriptor_set_out={out}", name])
        if code != 0 or not os.path.exists(out):
            raise DecodeError(f"its .proto text does not compile (protoc exit {code})")
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read()).file
    return list(files)


def reader(schema: RegisteredSchema) -> Callable[[bytes], Any]:
    """A reader of Confluent-framed records of ``schema``: value -> nested dict."""
    from google.protobuf import descriptor_pool, message_factory
    from google.protobuf import timestamp_pb2  # noqa: F401 - the well-known types into the default pool

    name = "schema.proto"
    files: dict[str, Any] = {}
    _file_protos(schema, name, files)
    pool = descriptor_pool.DescriptorPool()
    default = descriptor_pool.Default()
    try:
        added: set[str] = set()

        def add(proto: Any) -> None:
            if proto.name in added:
                return
            for dep in proto.dependency:
                if dep in by_name:
                    add(by_name[dep])
                elif dep.startswith(_WELL_KNOWN):
                    from google.protobuf import descriptor_pb2

                    wk = descriptor_pb2.FileDescriptorProto()
                    default.FindFileByName(dep).CopyToProto(wk)
                    add(wk)
            pool.Add(proto)
            added.add(proto.name)

        by_name = {p.name: p for p in files.values()}
        for proto in files.values():
            add(proto)
        top_proto = files[name]
        top = pool.FindFileByName(top_proto.name)
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a pool refusing a file says why
        raise DecodeError(f"its Protobuf files do not load: {exc}") from None
    classes: dict[tuple[int, ...], Any] = {}

    def message_class(indexes: tuple[int, ...]) -> Any:
        found = classes.get(indexes)
        if found is None:
            try:
                if indexes[0] < 0:
                    raise IndexError
                desc = top.message_types_by_name[top_proto.message_type[indexes[0]].name]  # declaration order
                for i in indexes[1:]:
                    desc = desc.nested_types[i]
            except (IndexError, KeyError):
                raise DecodeError(f"message indexes {list(indexes)} name no message of the schema") from None
            found = classes[indexes] = message_factory.GetMessageClass(desc)
        return found

    def read(value: bytes) -> Any:
        indexes, pos = _indexes(value, 5)
        msg = message_class(indexes)()
        try:
            msg.ParseFromString(value[pos:])
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError
            raise DecodeError(f"Protobuf: {exc}") from None
        return _walk(msg)

    read.uncomparable = bytes_paths(top.message_types_by_name.values())  # type: ignore[attr-defined]
    return read


def bytes_paths(messages: Any, prefix: str = "", seen: tuple = ()) -> dict[str, str]:
    """Path -> ``"bytes"`` for every ``bytes`` field reachable from ``messages`` (a map's values are named by their
    keys, unknown here, so they are left out): no predicate compares bytes, and ``wire.registered`` tells the
    operator when a subscription names one.  A message that contains itself is walked once along each path."""
    out: dict[str, str] = {}
    for desc in messages:
        if desc.full_name in seen:
            continue
        for field in desc.fields:
            path = prefix + field.name
            if field.message_type is not None:
                if not field.message_type.GetOptions().map_entry:
                    out.update(bytes_paths([field.message_type], path + ".", (*seen, desc.full_name)))
            elif field.type == field.TYPE_BYTES:
                out[path] = "bytes"
    return out


def _varint(value: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(value) or shift > 63:
            raise DecodeError("Protobuf message indexes cut short")
        b = value[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _indexes(value: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    count, pos = _varint(value, pos)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 64:
        raise DecodeError(f"Protobuf message indexes: a count of {count}")
    out = []
    for _ in range(count):
        i, pos = _varint(value, pos)
        out.append(i)
    return tuple(out), pos


def _walk(msg: Any) -> Any:
    desc = msg.DESCRIPTOR
    if desc.full_name == "google.protobuf.Timestamp":
        return datetime.datetime.fromtimestamp(msg.seconds, datetime.timezone.utc) + \
            datetime.timedelta(microseconds=msg.nanos // 1000)
    out: dict[str, Any] = {}
    for field in desc.fields:
        if field.is_repeated:
            items = getattr(msg, field.name)
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                vfield = field.message_type.fields_by_name["value"]
                out[field.name] = {str(k): _scalar(vfield, v) for k, v in items.items()}
            else:
                out[field.name] = [_scalar(field, v) for v in items]
        elif field.has_presence and not msg.HasField(field.name):
            continue
        else:
            out[field.name] = _scalar(field, getattr(msg, field.name))
    return out


def _scalar(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return _walk(value)
    if field.enum_type is not None:
        number = field.enum_type.values_by_number.get(value)
        return number.name if number is not None else value
    return value  # bytes: left out by wire.registered.comparable
