"""The allocator settings a service runs with (engine/heap.py): large blocks mapped apart from the heap."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    from fastpubsub.engine import heap

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Info
    if sys.argv[1] == "host":
        from fastpubsub.runtime.host import Host, HostConfig
        from fastpubsub.runtime.task import TaskBase
        class Idle(TaskBase):
            name = "idle"
        Host(Idle(), HostConfig(bootstrap_servers="127.0.0.1:1", group_id="probe"))
    big = np.ones(16 << 20, np.uint8)  # mapped, then freed: glibc's own threshold rises to its size
    del big
    before = libc.mallinfo2().hblkhd
    kept = np.ones(2 << 20, np.uint8)  # an engine array of 2 MiB
    print(libc.mallinfo2().hblkhd - before)
""")


def _mapped_bytes(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_service_host_maps_large_blocks_even_after_larger_ones_were_freed():
    """Without a fixed threshold a 2 MiB array comes from the heap once a 16 MiB one was freed (the heap then
    grows around the holes churn leaves); a service's host fixes it, so the array is a mapping of its own."""
    assert _mapped_bytes("bare") == 0  # glibc's moving threshold, as a plain interpreter has it
    assert _mapped_bytes("host") >= 2 << 20


def test_map_large_blocks_leaves_an_operators_choice(monkeypatch):
    from fastpubsub.engine import heap

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert heap.map_large_blocks() is False
