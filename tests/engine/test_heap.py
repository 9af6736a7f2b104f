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


def test_periodic_release_hands_free_pages_back_once_per_interval(monkeypatch):
    """A service's loop calls it after every turn; it releases only when the interval has passed since the last
    release (a release every turn would walk the free lists thousands of times a second)."""
    from fastpubsub.engine import heap

    released = []
    monkeypatch.setattr(heap, "release_free_memory", lambda: released.append(1) or True)
    now = [100.0]
    release = heap.PeriodicRelease(30.0, clock=lambda: now[0])
    for t in (100.0, 110.0, 129.9):
        now[0] = t
        assert release() is False
    now[0] = 130.0
    assert release() is True
    now[0] = 159.0
    assert release() is False
    now[0] = 160.5
    assert release() is True
    assert len(released) == release.releases == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_release_hands_back_the_free_pages_between_long_lived_blocks():
    """Blocks below the mmap threshold freed between long-lived ones stay resident until released."""
    probe = textwrap.dedent("""
        import numpy as np
        from fastpubsub.engine import heap
        heap.map_large_blocks()
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * 4096
        blocks = [np.ones(64 << 10, np.uint8) for _ in range(1000)]  # 64 MiB on the heap, below the threshold
        del blocks[:-1:2]  # every other block freed: holes between the kept ones, nothing at the top to trim
        before = rss()
        heap.PeriodicRelease(0.0)()
        print(before - rss())
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 16 << 20
