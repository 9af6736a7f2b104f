"""A filter of the subscription ids a matcher holds: "certainly not held" in one Python step.

A single add must refuse an id already filed; asking the id table costs a
kernel call (its dispatch alone a few tenths of a microsecond, a tenth of the
whole add).  One bit per slot, set for every id inserted (a Bloom filter with
one hash): a clear bit means the id is not in the table, a set one sends the
caller to the table.  At most about one slot in eight is set, so seven adds
in eight of a new id or more never call a kernel.  Removals leave their bits set; the bits are
rebuilt from the live ids (16 to 32 slots each) once as many ids were
inserted since the last rebuild as there are slots / 8, so the work stays
O(1) per insertion and the filter 1 to 4 bytes per id (the id table beside
it: 21 or more).
"""

from __future__ import annotations

import numpy as np

#: Fibonacci hashing's multiplier (2**64 / golden ratio): consecutive or strided ids land on scattered slots.
_MULTIPLIER = 0x9E3779B97F4A7C15
_LOW64 = (1 << 64) - 1
#: Slots per inserted id before a rebuild.
_SLOTS_PER_ID = 8


class IdFilter:
    """Bits over int64 ids: :meth:`may_hold` is false only for an id never inserted since the last rebuild."""

    __slots__ = ("bits", "shift", "inserted")

    def __init__(self) -> None:
        self.inserted = 0  # ids inserted since the last rebuild
        self._resize(1 << 13)

    def _resize(self, slots: int) -> None:
        self.bits = bytearray(slots >> 3)
        self.shift = 64 - slots.bit_length() + 1  # the slot: the top bits of the product's low 64 bits

    @property
    def nbytes(self) -> int:
        return len(self.bits)

    def may_hold(self, sid: int) -> bool:
        """False: ``sid`` is certainly not held.  (Python ints: the single-add path.)"""
        h = (sid * _MULTIPLIER & _LOW64) >> self.shift
        return bool(self.bits[h >> 3] >> (h & 7) & 1)

    def _set(self, ids: np.ndarray) -> None:
        with np.errstate(over="ignore"):
            h = (np.asarray(ids, dtype=np.int64).view(np.uint64) * np.uint64(_MULTIPLIER)) >> np.uint64(self.shift)
        np.bitwise_or.at(np.frombuffer(self.bits, dtype=np.uint8), (h >> np.uint64(3)).astype(np.int64),
                         (np.uint8(1) << (h & np.uint64(7)).astype(np.uint8)))

    def insert(self, ids: np.ndarray, live) -> None:
        """Note ``ids`` inserted; ``live()`` gives every id held (called only to rebuild)."""
        self.inserted += len(ids)
        if self.inserted * _SLOTS_PER_ID <= len(self.bits) * 8:
            self._set(ids)
            return
        held = live()
        slots = 1 << 13
        while slots < 2 * _SLOTS_PER_ID * len(held):
            slots <<= 1
        self._resize(slots)
        self.inserted = len(held)
        self._set(held)
