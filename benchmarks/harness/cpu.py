"""CPU seconds by process (and by thread of this process) over a phase of a benchmark, from Linux's /proc.

On a machine whose cores the broker, the processor and the load generator
share, a latency figure means little without what each of them used: the sum
against cores x phase length says whether the machine was saturated.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a process (all its threads), or of one of its threads, so far."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy_seconds() -> float:
    """CPU seconds every process of the machine has used so far, all cores (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


def pin_self_off_core_0() -> None:
    """This process and every child started after (a peer's JVM, the processor) on the cores but the first.

    With the broker alone on core 0 (:func:`pin_to_core_0`), a latency figure tells the processor's own tail from
    the time it waits for a broker that shares its cores (a production cluster runs on machines of its own)."""
    others = set(range(1, os.cpu_count() or 1))
    if not others:
        raise RuntimeError("--pin-broker needs at least two cores")
    os.sched_setaffinity(0, others)


def pin_to_core_0(pids: list[int]) -> None:
    """Every thread of the broker's JVMs on core 0 (``taskset -a``: a JVM's threads each have an affinity)."""
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True, capture_output=True)


def _thread_seconds(pid: int) -> dict[int, float]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = cpu_seconds(pid, int(tid))
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            pass
    return out


class CpuMeter:
    """CPU seconds of named processes between :meth:`start` and :meth:`stop`; this process split by thread.

    ``threads`` names threads of this process (``threading.Thread`` objects,
    by their ``native_id``); the rest of this process's CPU (librdkafka's own
    threads, threads that ended) is reported as ``<this> (other threads)``.
    """

    def __init__(self, processes: dict[str, int], this: str = "bench", threads: dict[str, list] | None = None,
                 cores: int | None = None) -> None:
        self.processes, self.this, self.threads = processes, this, threads or {}
        self.cores = cores or os.cpu_count() or 1
        self._before: dict[str, float] = {}
        self._tids: dict[int, float] = {}

    def _now(self) -> dict[str, float]:
        out = {}
        for name, pid in self.processes.items():
            try:
                out[name] = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                out[name] = float("nan")
        out[self.this] = cpu_seconds(os.getpid())
        return out

    def start(self) -> None:
        self._before = self._now()
        self._tids = _thread_seconds(os.getpid())
        self._machine = machine_busy_seconds()
        self._began = time.monotonic()

    def stop(self) -> dict:
        """``{"seconds": wall, "cores": n, "cpu": {name: seconds}, "threads": {name: seconds}, "total": their sum,
        "busy": that sum's share of cores x seconds, "machine": CPU seconds of every process of the machine}``
        (the machine's figure shows what other work took from the cores meanwhile)."""
        after, tids, wall = self._now(), _thread_seconds(os.getpid()), time.monotonic() - self._began
        machine = machine_busy_seconds() - self._machine
        cpu = {name: round(after[name] - self._before[name], 2) for name in after}
        split: dict[str, float] = {}
        for name, thread_list in self.threads.items():
            total = 0.0
            for t in thread_list:
                tid = t.native_id if isinstance(t, threading.Thread) else t
                if tid in tids:
                    total += tids[tid] - self._tids.get(tid, 0.0)
            split[name] = round(total, 2)
        split[f"{self.this} (other threads)"] = round(cpu[self.this] - sum(split.values()), 2)
        total = sum(v for v in cpu.values() if v == v)
        return {"seconds": round(wall, 2), "cores": self.cores, "cpu": cpu, "threads": split,
                "total": round(total, 2), "busy": round(total / (self.cores * wall), 3) if wall > 0 else 0.0,
                "machine": round(machine, 2)}


def table(measured: dict) -> str:
    """One line: each process's CPU seconds and the sum against cores x seconds."""
    parts = [f"{name} {seconds:.1f}" for name, seconds in measured["cpu"].items()]
    inner = ", ".join(f"{name} {seconds:.1f}" for name, seconds in measured["threads"].items())
    return (f"CPU s over {measured['seconds']:.1f} s: {', '.join(parts)} ({inner}); sum {measured['total']:.1f} "
            f"of {measured['cores']} x {measured['seconds']:.1f} = {measured['cores'] * measured['seconds']:.1f} "
            f"({measured['busy']:.0%}); the whole machine {measured.get('machine', float('nan')):.1f}")
