"""A process's memory as Linux reports it (``/proc``): resident now, its peak, and after freed pages go back.

glibc keeps freed heap pages mapped, so a benchmark that asks what a structure
holds trims the heap first (``malloc_trim``) and reads the resident set after.
"""

from __future__ import annotations

import ctypes
import gc
import os


def status_kb(field: str, pid: int | str = "self") -> int:
    """A ``/proc/<pid>/status`` field in kB: ``VmRSS`` (resident now), ``VmHWM`` (the resident peak)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def peak_rss_kb(pid: int | str = "self") -> int:
    """The resident set's peak (``VmHWM``) in kB."""
    return status_kb("VmHWM", pid)


def rss_bytes() -> int:
    """This process's resident set size after returning freed heap pages to the OS (glibc keeps them otherwise)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
