"""Byte strings by their FNV-1a hash in open-addressing tables: the hash, the comparison, the filing and the look-up.

The engine's string constants (``frontend.utf8``) and the wire decoders'
name and path tables (``wire.avro_binary``, ``wire.json_kernel``,
``wire.avro_program``) hold text as slices of a byte buffer and find it by
its hash without making a ``str``; this is the one copy of what they share.
A table's ``slots`` (a power of two, under half full, -1: free) hold indexes
into the strings' ``hashes``, ``start`` and ``length``; a probe steps to the
next slot until it meets the string or a free slot.

The hash and the comparison run once per byte or per probe inside the
decoders' loops, so they are inlined into their callers (``inline="always"``);
they allocate nothing, so kernels without numba's reference counting
(``_nrt=False``) call them.  numba checks a cached kernel against its
own source file only: the default cache directory changes with every edit
of the package (``fastpubsub.numba_cache_dir``), one named by
``NUMBA_CACHE_DIR`` has to be cleared (``pubsub warmup --clear``) after an
edit here, or the kernels that inline these would keep the old code.
"""

from __future__ import annotations

import numba
import numpy as np

FNV_OFFSET, FNV_PRIME = np.uint64(14695981039346656037), np.uint64(1099511628211)


@numba.njit(cache=True, inline="always")
def fnv1a(h, data, start, end):
    """FNV-1a of ``data[start:end]`` continued from ``h`` (``FNV_OFFSET`` for the hash of that slice alone)."""
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * FNV_PRIME
    return h


@numba.njit(cache=True, inline="always")
def same_bytes(a, i, b, j, n):
    """Whether ``a[i:i+n]`` equals ``b[j:j+n]`` (without array views: the kernels run without reference counting)."""
    for k in range(n):
        if a[i + k] != b[j + k]:
            return False
    return True


@numba.njit(cache=True, inline="always")
def find_text(slots, hashes, text, start, length, data, s, n):
    """The index in the table of ``data[s:s+n]`` (string ``i`` being ``text[start[i]:start[i]+length[i]]``), or -1."""
    mask = len(slots) - 1
    h = fnv1a(FNV_OFFSET, data, s, s + n)
    slot = np.int64(h & np.uint64(mask))
    while slots[slot] >= 0:
        c = slots[slot]
        if hashes[c] == h and length[c] == n and same_bytes(text, start[c], data, s, n):
            return c
        slot = (slot + 1) & mask
    return -1


@numba.njit(cache=True)
def file_texts(slots, hashes, text, start, length, first):
    """File the strings ``first..`` (indexes into ``start`` and ``length``) into ``slots``, their hashes into
    ``hashes``."""
    mask = len(slots) - 1
    for i in range(first, len(start)):
        h = fnv1a(FNV_OFFSET, text, start[i], start[i] + length[i])
        hashes[i] = h
        slot = np.int64(h & np.uint64(mask))
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = i
