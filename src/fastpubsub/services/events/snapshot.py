"""Snapshots of the processor's state, for a restart that replays only what came after.

A snapshot holds the subscription state (``SubscriptionState.to_arrays``: the
live subscriptions as one columnar ``SubscriptionBatch``, their subscribers and
validity), the valid-event store (``ValidEventStore.to_arrays``), and the
offsets of ``pubsub.subscriptions`` the state reflects (next offset per
partition), and the matcher's built index (``engine.structure``: the dynamic
clustering's arrays as the bulk load and its maintenance left them).  On
restart the processor loads that index as it was, without a bulk load, and
reads the subscriptions topic from the offsets instead of from the beginning.

The index is an accelerator, the columns are the content: it is used only if
it was written by the same engine code (``engine.index_fingerprint``), the
same algorithm and ``runs``, and holds exactly the snapshot's subscriptions;
otherwise the log says why and the columns are bulk-loaded (one ``add_bulk``),
as for a snapshot written without it.

File: ``<dir>/processor.snapshot`` = magic, format version, body length,
SHA-256 of the body, body.  The body is a JSON header (the metadata, and the
name, dtype, shape and place of every array) and the flat arrays' bytes as
they are in memory, each at a 64-byte boundary: a load takes each array where
it lies in the file's bytes, with no archive to unpack (the index is one of
the arrays, read by ``engine.structure``).  Written by ``runtime.atomic_file`` (a temporary file created
exclusively under a random name, fsynced, renamed over the old one): a crash leaves either the old or the new
snapshot, and a link planted in a shared directory is neither followed nor overwritten.  A snapshot that is missing, truncated,
corrupt (checksum), of another format version, or for another partition count
is logged and ignored: the processor rebuilds from the topic.

A shard (``processor.shard``) writes ``<dir>/processor.shard-I-of-K.snapshot``
and records ``I`` and ``K`` inside; a snapshot of another shard, or of
another shard count, is refused even if renamed: it holds other subscriptions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fastpubsub.engine import ValidEventStore
from fastpubsub.runtime import write_atomically
from fastpubsub import engine  # its index functions are looked up at each call (tests replace them)

from .shard import UNSHARDED, Shard
from .subscriptions import SubscriptionState

log = logging.getLogger("pubsub")

MAGIC = b"PUBSUBSNAP"
VERSION = 2
FILE_NAME = "processor.snapshot"
_HEAD = struct.Struct(">IQ32s")  # version, body length, sha256(body)
_HEADER_LENGTH = struct.Struct("<Q")  # the body's JSON header, in bytes
_ALIGN = 64  # every array starts at a multiple of this (from the body's start): aligned for any dtype
INDEX = "engine.structure"  # the matcher's built index (engine.structure), beside the columns


class SnapshotError(ValueError):
    """A snapshot that cannot be used; the message says why."""


@dataclass
class Snapshot:
    state: SubscriptionState
    store: ValidEventStore
    offsets: dict[int, int]  # partition of pubsub.subscriptions -> next offset the state has not seen
    meta: dict[str, Any]


def path_of(directory: str | Path, shard: Shard = UNSHARDED) -> Path:
    """``processor.snapshot``, or ``processor.shard-I-of-K.snapshot`` for a shard (shards may share a directory)."""
    if not shard.sharded:
        return Path(directory) / FILE_NAME
    return Path(directory) / f"processor.shard-{shard.index}-of-{shard.count}.snapshot"


def write(directory: str | Path, state: SubscriptionState, store: ValidEventStore, offsets: dict[int, int],
          partitions: int, shard: Shard = UNSHARDED) -> dict[str, Any]:
    """Write a snapshot atomically; returns its metadata (sizes, seconds)."""
    started = time.monotonic()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    index = engine.dump_index(state.matcher)
    meta = {"version": VERSION, "partitions": partitions, "offsets": {str(p): o for p, o in sorted(offsets.items())},
            "algorithm": state.matcher.algorithm, "shard": [shard.index, shard.count], "subscriptions": len(state), "events": len(store),
            "index": {"engine": engine.index_fingerprint(), "algorithm": state.matcher.algorithm, "runs": state.runs,
                      "bytes": len(index)},
            "written_at_ms": int(time.time() * 1000)}  # wall clock: information only, never used to decide
    arrays = {**state.to_arrays(), **store.to_arrays(), INDEX: np.frombuffer(index, dtype=np.uint8)}
    body = _body(meta, arrays)
    digest = hashlib.sha256()
    for part in body:
        digest.update(part)
    target = path_of(directory, shard)
    size = sum(len(part) for part in body)
    write_atomically(target, [MAGIC + _HEAD.pack(VERSION, size, digest.digest()), *body])
    return {**meta, "bytes": size + len(MAGIC) + _HEAD.size, "seconds": round(time.monotonic() - started, 3)}


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _body(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> list[memoryview]:
    """The body in parts, the arrays' own bytes among them (nothing is copied into one buffer): the header
    (length, then JSON), padded, then each array at its aligned place, relative to the end of the header's padding."""
    flat = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    entries, end = [], 0
    for name, a in flat.items():
        place = _aligned(end)
        entries.append([name, a.dtype.str, list(a.shape), place])
        end = place + a.nbytes
    header = json.dumps({"meta": meta, "arrays": entries}).encode()
    start = _aligned(_HEADER_LENGTH.size + len(header))
    parts = [memoryview(_HEADER_LENGTH.pack(len(header)) + header + bytes(start - _HEADER_LENGTH.size - len(header)))]
    end = 0
    for (_, _, _, place), a in zip(entries, flat.values()):
        if place > end:
            parts.append(memoryview(bytes(place - end)))
        parts.append(memoryview(a.reshape(-1).view(np.uint8)))
        end = place + a.nbytes
    return parts


def _parse(body: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(metadata, arrays) of a body :func:`_body` wrote; the arrays are read-only views of ``body``."""
    (length,) = _HEADER_LENGTH.unpack_from(body)
    header = json.loads(bytes(memoryview(body)[_HEADER_LENGTH.size:_HEADER_LENGTH.size + length]))
    start = _aligned(_HEADER_LENGTH.size + length)
    arrays = {}
    for name, dtype, shape, place in header["arrays"]:
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        if dtype.hasobject:
            raise SnapshotError(f"array {name} holds Python objects (a snapshot holds none)")
        if place < 0 or start + place + count * dtype.itemsize > len(body):
            raise SnapshotError(f"array {name} ({dtype}, {shape}) does not lie within the body")
        arrays[name] = np.frombuffer(body, dtype, count, start + place).reshape(shape)
    return header["meta"], arrays


def _read_file(path: Path) -> tuple[bytes, bytes, bytes] | OSError:
    """(head, body, SHA-256 of the body), or the error reading it.  The head and the body are read apart, so the
    body is hashed and parsed without a copy; reading and hashing release the GIL (see :class:`Prefetch`)."""
    head = len(MAGIC) + _HEAD.size
    try:
        with open(path, "rb") as f:
            data, body = f.read(head), f.read()
    except OSError as exc:
        return exc
    return data, body, hashlib.sha256(body).digest()


def offsets_of(directory: str | Path, shard: Shard = UNSHARDED) -> dict[int, int]:
    """The offsets the snapshot file's header records, read without the body (unchecked: :func:`read` checks the
    whole file); ``{}`` if there is no readable header."""
    head = len(MAGIC) + _HEAD.size
    try:
        with open(path_of(directory, shard), "rb") as f:
            data = f.read(head + _HEADER_LENGTH.size)
            if len(data) < head + _HEADER_LENGTH.size or not data.startswith(MAGIC) or \
                    _HEAD.unpack_from(data, len(MAGIC))[0] != VERSION:
                return {}
            (length,) = _HEADER_LENGTH.unpack_from(data, head)
            offsets = json.loads(f.read(length))["meta"]["offsets"]
        return {int(p): int(o) for p, o in offsets.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


class Prefetch:
    """The snapshot file read and hashed on a thread, while the processor starts its clients and loads its
    kernels (together about as long as the read and the checksum of a million subscriptions' snapshot)."""

    def __init__(self, directory: str | Path, shard: Shard = UNSHARDED) -> None:
        self.path = path_of(directory, shard)
        self._result: tuple[bytes, bytes, bytes] | OSError | None = None
        self._thread = threading.Thread(target=self._run, name="snapshot-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._result = _read_file(self.path)

    def result(self) -> tuple[bytes, bytes, bytes] | OSError:
        self._thread.join()
        result, self._result = self._result, None  # read once: the bytes are not kept beyond the load
        return result


def read(directory: str | Path, partitions: int, algorithm: str, store: ValidEventStore, runs: int | None = None,
         shard: Shard = UNSHARDED, prefetched: Prefetch | None = None) -> Snapshot:
    """Load the snapshot of ``directory`` into a new state and ``store``; ``SnapshotError`` says why it cannot be.

    ``prefetched``: the file as :class:`Prefetch` read it (else it is read now)."""
    path = path_of(directory, shard)
    head = len(MAGIC) + _HEAD.size
    raw = prefetched.result() if prefetched is not None and prefetched.path == path else None
    raw = raw if raw is not None else _read_file(path)
    if isinstance(raw, FileNotFoundError):
        raise SnapshotError(f"no snapshot at {path}")
    if isinstance(raw, OSError):
        raise SnapshotError(f"cannot read {path}: {raw}")
    data, body, body_digest = raw
    if len(data) < head or not data.startswith(MAGIC):
        raise SnapshotError(f"{path} is not a snapshot (bad magic or too short)")
    version, length, digest = _HEAD.unpack_from(data, len(MAGIC))
    if version != VERSION:
        raise SnapshotError(f"{path} has format version {version}; this processor reads version {VERSION}")
    if len(body) != length:
        raise SnapshotError(f"{path} is truncated or padded: body of {len(body)} bytes, header says {length}")
    if body_digest != digest:
        raise SnapshotError(f"{path} is corrupt: checksum mismatch")
    try:
        meta, arrays = _parse(body)
        if meta.get("partitions") != partitions:
            raise SnapshotError(f"{path} is for {meta.get('partitions')} partitions of the subscriptions topic, "
                                f"which now has {partitions}")
        written = Shard(*meta.get("shard", (0, 1)))  # snapshots from before sharding are unsharded
        if written != shard:
            raise SnapshotError(f"{path} is of shard {written}, this processor is shard {shard}: it holds "
                                f"other subscriptions")
        matcher, why = _index(arrays, meta, algorithm, runs)
        if why:
            log.info("snapshot %s: %s; bulk-loading its %s subscriptions instead", path.name, why,
                     meta.get("subscriptions"))
        # the state's own copies of the columns: views would keep the whole body alive, the index's bytes too
        columns = {name: a.copy() for name, a in arrays.items() if name != INDEX}
        del arrays
        state = SubscriptionState.from_arrays(columns, algorithm, runs, shard, matcher=matcher)
        store.load_arrays(columns)
    except SnapshotError:
        raise
    except Exception as exc:  # noqa: BLE001 - any inconsistency means: do not trust it
        raise SnapshotError(f"{path} cannot be loaded: {type(exc).__name__}: {exc}") from None
    offsets = {int(p): int(o) for p, o in meta["offsets"].items()}
    return Snapshot(state, store, offsets, meta)


def _index(arrays: Any, meta: dict[str, Any], algorithm: str, runs: int | None) -> tuple[Any, str | None]:
    """The snapshot's built index if this processor can use it as it is, else (None, why not)."""
    info = meta.get("index")
    if info is None or INDEX not in arrays:
        return None, "it holds no built index"
    if info.get("engine") != engine.index_fingerprint():
        return None, f"its index was built by another engine version ({info.get('engine')}, this one is " \
                     f"{engine.index_fingerprint()})"
    if (info.get("algorithm"), info.get("runs")) != (algorithm, runs):
        return None, f"its index is {info.get('algorithm')} with runs={info.get('runs')}, this processor matches " \
                     f"with {algorithm} and runs={runs}"
    try:
        return engine.load_index(memoryview(arrays[INDEX])), None
    except engine.StructureError as exc:
        return None, f"its index cannot be loaded ({exc})"
