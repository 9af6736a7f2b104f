"""Freed heap memory handed back to the operating system after a bulk change.

A bulk load allocates and frees temporaries of tens of megabytes (sort
orders, payloads, the arena before it grows).  glibc's malloc raises its mmap
threshold after each large block it frees, so later blocks of that size
come from the heap, and the pages they leave free stay resident: after a W0
load the process held about twice what its structures hold
(``python -m benchmarks.engine.chunked_load`` reports both).  ``malloc_trim(0)``
releases every free page of the heap (``madvise``); it walks the free lists
once, little next to the load.  Elsewhere (another C library, another
system) this does nothing.

A long-running service also fixes the mmap threshold (:func:`map_large_blocks`).
Left to glibc, the threshold follows the largest block freed (up to 32 MiB), so
after the first large temporaries every engine array and batch temporary comes
from the heap; under subscription churn they are reallocated in ever-different
places and the heap grows around the free holes between long-lived blocks,
which ``malloc_trim`` cannot give back (docs/benchmarks.md, the soak).  With a
fixed threshold a large block is its own mapping, returned whole when freed.

Below the threshold, a service's batches free pages between its long-lived blocks all the time; without a bulk
change nothing hands them back, so its RSS rises with them.  The service's loop releases them at most every
:data:`RELEASE_SECONDS` (:class:`PeriodicRelease`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time


def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()

#: Blocks of at least this many bytes get their own mapping (:func:`map_large_blocks`): large enough that the
#: arrays of one event batch stay on the heap (a mapping costs a system call and fresh pages), small enough that
#: every structure of a large engine and every bulk temporary is mapped.
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)


def map_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (which also stops it from moving); whether it was set.

    Not set where the operator chose one (``MALLOC_MMAP_THRESHOLD_`` or a ``glibc.malloc.mmap_threshold``
    tunable), nor outside glibc.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt  # glibc only
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, int(threshold)))


def release_free_memory() -> bool:
    """Return the heap's free pages to the system; whether anything was released (False where unsupported)."""
    return bool(_TRIM(0)) if _TRIM is not None else False


#: How often a long-running service hands its free heap pages back (:class:`PeriodicRelease`): often enough that
#: the pages a minute of batches frees around long-lived blocks do not pile up, rarely enough to cost nothing (a
#: release walks the free lists once).
RELEASE_SECONDS = 30.0


class PeriodicRelease:
    """:func:`release_free_memory` at most every ``seconds``, called from a service's loop after each turn."""

    def __init__(self, seconds: float = RELEASE_SECONDS, clock=time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.last = clock()
        self.releases = 0

    def __call__(self) -> bool:
        """Release now if the interval has passed since the last release; whether it did."""
        now = self.clock()
        if now - self.last < self.seconds:
            return False
        self.last = now
        release_free_memory()
        self.releases += 1
        return True
