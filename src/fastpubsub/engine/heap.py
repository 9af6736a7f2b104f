"""Freed heap memory handed back to the operating system after a bulk change.

A bulk load allocates and frees temporaries of tens of megabytes (sort
orders, payloads, the arena before it grows).  glibc's malloc raises its mmap
threshold after each large block it frees, so later blocks of that size
come from the heap, and the pages they leave free stay resident: after a W0
load the process held about twice what its structures hold
(``python -m benchmarks.chunked_load`` reports both).  ``malloc_trim(0)``
releases every free page of the heap (``madvise``); it walks the free lists
once, little next to the load.  Elsewhere (another C library, another
system) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys


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


def release_free_memory() -> bool:
    """Return the heap's free pages to the system; whether anything was released (False where unsupported)."""
    return bool(_TRIM(0)) if _TRIM is not None else False
