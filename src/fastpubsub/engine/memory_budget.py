"""Whether a bulk load fits in memory, decided before it allocates: a refusal instead of the kernel's OOM killer.

A load of N subscriptions needs about ``N * LOAD_BYTES[algorithm]`` bytes:
what the index keeps per subscription (its layout: clusters, lists, tables,
plus the matcher's id table and handles) and the build's transient peak above
it (the interned predicate ids, the sorted copies and the arena growth that
:meth:`Matcher.add_bulk` allocates and frees).  The free memory is
``MemAvailable`` of ``/proc/meminfo`` and, when the process runs in a cgroup
with a memory limit, that limit minus the cgroup's usage; the smaller counts.

The factors are peak resident-set growth per subscription of one ``add_bulk``
of W0 into an empty matcher, after the kernels are compiled, the batch
already built (the caller holds it), the larger of N = 1M and 3M, rounded up
(``python -m benchmarks.engine.load_memory --n 1000000,3000000``; docs/benchmarks.md,
"How much memory does it need?").  W0 subscriptions have 5 predicates on
average: a workload with more needs proportionally more, so the estimate
scales with predicates per subscription beyond W0's.

A load into a matcher that already holds subscriptions may move what it
holds: the cluster arena compacted into a new one, the id table grown into
a larger one, each old copy freed only once the new one is written.  So the
bytes it holds count once more: at 100M W0 subscriptions the matcher holds
several GB, and a 5M chunk's own estimate (about 2 GB) says nothing of them.
"""

from __future__ import annotations

import os

#: Peak bytes per W0 subscription of one bulk load into an empty matcher (steady state + transient), per algorithm:
#: the larger of N = 1M and 3M, rounded up, from ``python -m benchmarks.engine.load_memory --n 1000000,3000000`` (the
#: figures: docs/benchmarks.md, "How much memory does it need?").
LOAD_BYTES: dict[str, int] = {
    "counting": 700,
    "propagation": 420,
    "propagation-wp": 420,
    "static": 900,
    "dynamic": 440,
    "opindex": 850,
    "bitmaps": 580,
    "amkh": 440,
}
#: An algorithm registered elsewhere: the largest of the built-in factors.
DEFAULT_LOAD_BYTES = max(LOAD_BYTES.values())
#: Predicates per subscription of W0 (the measured workload): a batch with more scales its estimate up.
W0_PREDICATES = 5.0

_MEMINFO = "/proc/meminfo"
_CGROUP_ROOT = "/sys/fs/cgroup"
#: A cgroup v1 limit this large is "no limit" (the page-rounded maximum of a signed 64-bit counter).
_NO_LIMIT = 1 << 62


class InsufficientMemory(MemoryError):
    """A load refused because its estimate exceeds the free memory; nothing was allocated or changed."""

    def __init__(self, needed: int, available: int, mem_available: int | None, cgroup_free: int | None,
                 what: str) -> None:
        self.needed, self.available = needed, available
        self.mem_available, self.cgroup_free = mem_available, cgroup_free
        sources = []
        if mem_available is not None:
            sources.append(f"MemAvailable {mem_available / 1e6:,.0f} MB")
        if cgroup_free is not None:
            sources.append(f"cgroup limit minus usage {cgroup_free / 1e6:,.0f} MB")
        super().__init__(f"{what} needs about {needed / 1e6:,.0f} MB and {available / 1e6:,.0f} MB are free "
                         f"({', '.join(sources) or 'unknown'}): load fewer subscriptions at once, or shard")


def mem_available(path: str = _MEMINFO) -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where there is none)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # (cgroup v2 writes "max" for no limit)


def cgroup_free(root: str = _CGROUP_ROOT) -> int | None:
    """The memory limit of this process's cgroup minus its usage, in bytes; None without a limit.

    cgroup v2 (``memory.max``, ``memory.current``) or v1 (``memory/memory.limit_in_bytes``,
    ``memory.usage_in_bytes``), at the process's own cgroup path or, where that is not mounted (a container's
    namespace), at the root of the mount.
    """
    paths = {"v2": "", "v1": ""}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    paths["v2"] = path
                elif "memory" in controllers.split(","):
                    paths["v1"] = path
    except OSError:
        pass
    candidates = [(os.path.join(root, paths["v2"].lstrip("/"), "memory.max"),
                   os.path.join(root, paths["v2"].lstrip("/"), "memory.current")),
                  (os.path.join(root, "memory", paths["v1"].lstrip("/"), "memory.limit_in_bytes"),
                   os.path.join(root, "memory", paths["v1"].lstrip("/"), "memory.usage_in_bytes")),
                  (os.path.join(root, "memory.max"), os.path.join(root, "memory.current")),
                  (os.path.join(root, "memory", "memory.limit_in_bytes"),
                   os.path.join(root, "memory", "memory.usage_in_bytes"))]
    for limit_path, usage_path in candidates:
        if not os.path.exists(limit_path):
            continue
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is None or limit >= _NO_LIMIT:
            return None
        return max(limit - (usage or 0), 0)
    return None


def free_memory() -> tuple[int | None, int | None]:
    """(``MemAvailable``, cgroup limit minus usage), bytes; None for what this system does not say."""
    return mem_available(), cgroup_free()


def load_estimate(algorithm: str, n_subscriptions: int, n_predicates: int) -> int:
    """Bytes a bulk load of ``n_subscriptions`` with ``n_predicates`` predicates in all needs at its peak."""
    per_sub = LOAD_BYTES.get(algorithm, DEFAULT_LOAD_BYTES)
    scale = max(1.0, n_predicates / (W0_PREDICATES * max(n_subscriptions, 1)))
    return int(per_sub * n_subscriptions * scale)


def check_load(algorithm: str, n_subscriptions: int, n_predicates: int, held: int = 0) -> None:
    """Raise :class:`InsufficientMemory` if the load's estimate, plus ``held`` (the bytes of the structures the
    load may copy into larger ones while the old are still held), exceeds the free memory (when it is known)."""
    needed = load_estimate(algorithm, n_subscriptions, n_predicates) + held
    avail, cgroup = free_memory()
    known = [x for x in (avail, cgroup) if x is not None]
    if known and needed > min(known):
        what = f"loading {n_subscriptions:,} subscriptions ({algorithm})"
        if held:
            what += f" beside the {held / 1e6:,.0f} MB the matcher holds, which the load may move"
        raise InsufficientMemory(needed, min(known), avail, cgroup, what)
