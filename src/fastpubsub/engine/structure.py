"""A built matcher as bytes and back, so that a restart loads its index instead of bulk-loading and re-clustering.

A bulk load of a million subscriptions into ``dynamic`` takes seconds (the
maintenance rounds choose the clustering as chunks arrive); the structures it
ends with are a few dozen numpy arrays and small dicts, which are written and
read back in tens of milliseconds.  :func:`dump` writes them with the pickle
protocol 5 and :func:`load` reads them with an unpickler restricted to the
engine's own classes and numpy's array reconstruction: no other global can be
named, so no other code runs while loading.  The numba kernels an index holds
are not written; they are looked up again from their scan parameters.

The arrays mean something only to the engine code that wrote them:
:data:`fingerprint` (a hash of the engine's source files) goes with them, and
a reader whose engine differs must not use them (``processor.snapshot`` then
bulk-loads the snapshot's columnar subscriptions instead).
"""

from __future__ import annotations

import functools
import hashlib
import io
import pickle
from pathlib import Path
from typing import Any

from .kernels.batch import clustered_kernel, propagation_kernel
from .matcher import Matcher

#: Numba kernel factories an index's ``_kernel`` may come from (called again with its ``scan_options``).
_KERNELS = {"clustered": clustered_kernel, "propagation": propagation_kernel}

#: Globals numpy's own pickling names (arrays, dtypes, scalars), under numpy 1 and numpy 2 module names.
_NUMPY = {
    (m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("_reconstruct", "scalar")
} | {(m, "_frombuffer") for m in ("numpy.core.numeric", "numpy._core.numeric")} | {
    ("numpy", "ndarray"), ("numpy", "dtype"),
}


class StructureError(ValueError):
    """Bytes that are not a matcher this engine wrote; the message says why."""


@functools.cache
def fingerprint() -> str:
    """SHA-256 (hex, 16 digits) of the engine's source files: structures from another engine are not read."""
    root = Path(__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _rebuild_with_kernel(cls: type, state: dict[str, Any], kernel: str) -> Any:
    """An index whose numba kernel was left out: the state, and the kernel looked up from its scan options."""
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    obj._kernel = _KERNELS[kernel](*obj.scan_options)
    return obj


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        kernel = getattr(obj, "__dict__", {}).get("_kernel") if not isinstance(obj, type) else None
        if kernel is None:
            return NotImplemented
        for name, factory in _KERNELS.items():
            if kernel is factory(*obj.scan_options):
                state = {k: v for k, v in obj.__dict__.items() if k != "_kernel"}
                return _rebuild_with_kernel, (type(obj), state, name)
        raise StructureError(f"{type(obj).__name__} holds a kernel this module cannot look up again")


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _NUMPY:
            return super().find_class(module, name)
        if module == __name__ and name == "_rebuild_with_kernel":
            return _rebuild_with_kernel
        if module.startswith("fastpubsub.engine."):
            found = super().find_class(module, name)
            if isinstance(found, type) and found.__module__ == module:  # the engine's classes, nothing callable else
                return found
        raise StructureError(f"a matcher structure does not name {module}.{name}")


class _Bytes:
    """The unpickler's file over a buffer, read where it lies (``io.BytesIO`` would copy all of it first: the
    whole index, the largest part of a snapshot)."""

    def __init__(self, blob: bytes | memoryview) -> None:
        self._view, self._at = memoryview(blob).cast("B"), 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n is None or n < 0 else min(self._at + n, len(self._view))
        out, self._at = self._view[self._at:end].tobytes(), end
        return out

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        n = min(len(target), len(self._view) - self._at)
        target[:n] = self._view[self._at:self._at + n]
        self._at += n
        return n

    def readline(self) -> bytes:
        start = end = self._at
        while end < len(self._view):
            found = self._view[end:end + 4096].tobytes().find(b"\n")
            if found >= 0:
                end += found + 1
                break
            end += 4096
        self._at = min(end, len(self._view))
        return self._view[start:self._at].tobytes()


def dump(matcher: Matcher) -> bytes:
    """The matcher's structures (buffered single changes applied first)."""
    matcher.flush()
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(matcher)
    return buf.getvalue()


def load(blob: bytes | memoryview) -> Matcher:
    """The matcher :func:`dump` wrote; :class:`StructureError` if the bytes are anything else."""
    try:
        matcher = _Unpickler(_Bytes(blob)).load()
    except StructureError:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated, or written by other code: not usable
        raise StructureError(f"not a matcher structure: {type(exc).__name__}: {exc}") from None
    if not isinstance(matcher, Matcher):
        raise StructureError(f"not a matcher structure: a {type(matcher).__name__}")
    return matcher


def holds_exactly(matcher: Matcher, ids: Any, sample: int = 10_000) -> bool:
    """Whether ``matcher`` holds the subscriptions ``ids`` (repeats allowed: rows of one subscription): as many
    distinct ids, and a sample of ``sample`` of them (all if fewer) found.  A check against a writer that saved
    an index and columns that disagree; the bytes themselves are checksummed by the caller."""
    import numpy as np

    ordered = np.sort(np.asarray(ids, dtype=np.int64))  # (np.unique hashes: far slower than a sort)
    distinct = ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered
    if len(matcher) != len(distinct):
        return False
    if len(distinct) > sample:
        distinct = distinct[np.random.default_rng(len(distinct)).choice(len(distinct), sample, replace=False)]
    return bool(np.all(matcher.holds(distinct)))
