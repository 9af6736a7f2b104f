"""Processor restart time: from a snapshot vs a rebuild from the subscriptions topic.

    python -m benchmarks.pipeline.restart                      # 1M W0 subscriptions, 3 starts of each kind
    python -m benchmarks.pipeline.restart --n 100000 --repeat 1

Starts the embedded broker, writes N W0 subscriptions to pubsub.subscriptions
(Avro, as `pubsub demo` does), then times `pubsub run` from process start to
its "ready" log line: without a snapshot (read and decode the whole topic,
bulk-load the matcher) and with ``--snapshot-dir`` (load the snapshot, replay
nothing).  Times include interpreter start-up and loading numba's cache.
``--read-only`` also times a bare consumer that reads the topic to its end
and counts the records (the broker's share of a rebuild).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from fastpubsub.kafka import admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec
from fastpubsub.cli.demo import Demo

from benchmarks.harness.cpu import cpu_seconds
from benchmarks.harness.records import read_to_end


#: the embedded broker's process id, for the CPU it spends serving a start (set by main)
BROKER_PID: int | None = None
#: CPU seconds of the last start up to its ready line: the processor (all threads) and the broker
LAST_CPU: dict[str, float] = {}


def start_once(bootstrap: str, *options: str) -> tuple[float, list[str]]:
    """Seconds from spawning `pubsub run` to its ready line, and its log up to then; stops it cleanly."""
    broker_cpu = cpu_seconds(BROKER_PID) if BROKER_PID else 0.0
    began, wall = time.monotonic(), time.time()
    proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", "run", "-b", bootstrap, "--group-id", "bench-restart",
                             "--progress-interval", "600", *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=child_preexec)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(f"{time.time() - wall:5.2f} {line.rstrip()}")  # when it came, after the spawn
            if " ready: " in line:
                took = time.monotonic() - began
                LAST_CPU["processor"] = round(cpu_seconds(proc.pid), 2)
                # the loop's thread (the main one), which applies the rebuild's chunks; the rest is the
                # read-and-decode thread and librdkafka's
                LAST_CPU["processor_loop_thread"] = round(cpu_seconds(proc.pid, proc.pid), 2)
                if BROKER_PID:
                    LAST_CPU["broker"] = round(cpu_seconds(BROKER_PID) - broker_cpu, 2)
                break
        else:
            raise RuntimeError("the processor exited before it was ready:\n" + "\n".join(lines[-10:]))
        # let a snapshot written after the rebuild finish before stopping
        while options and not any("snapshot written" in x or "snapshot loaded" in x for x in lines):
            lines.append(proc.stderr.readline().rstrip())
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return took, lines


def read_once(bootstrap: str, partitions: int) -> tuple[float, int]:
    """Seconds for a consumer that only counts records to read every partition of the topic to its end."""
    from fastpubsub.kafka import ClientFactory

    consumer = ClientFactory(bootstrap).consumer("bench-read", {"queued.max.messages.kbytes": 65536},
                                                 **{"enable.auto.commit": False, "enable.partition.eof": True,
                                                    "isolation.level": "read_committed"})
    began = time.monotonic()
    n = read_to_end(consumer, "pubsub.subscriptions", range(partitions), poll_s=0.5)
    took = time.monotonic() - began
    consumer.close()
    return took, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="W0 subscriptions")
    ap.add_argument("--repeat", type=int, default=3, help="starts of each kind")
    ap.add_argument("--read-only", action="store_true", help="also time a bare read of the topic")
    args = ap.parse_args()
    if args.n < 0 or args.repeat <= 0:
        ap.error("--n must be >= 0 and --repeat positive")
    global BROKER_PID
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="pubsub-restart-") as snapdir:
        bootstrap = broker.bootstrap_servers
        BROKER_PID = broker.pids()[0]
        admin.create_topics(bootstrap, partitions=4)
        total = Demo(args.n, 0)._load_subscriptions(bootstrap)
        results: dict = {"subscriptions": total, "topic": [], "snapshot": []}
        if args.read_only:
            took, n = read_once(bootstrap, 4)
            results["read_only"] = round(took, 2)
            print(f"a bare read of the topic: {n:,} records in {took:.1f}s", flush=True)
        for i in range(args.repeat):
            took, lines = start_once(bootstrap)
            results["topic"].append(round(took, 2))
            results.setdefault("topic_cpu", []).append(dict(LAST_CPU))
            print(f"from the topic: ready in {took:.1f}s  ({[x for x in lines if 'ready:' in x][-1].split(' INFO ')[-1]}); "
                  f"CPU seconds until ready: processor {LAST_CPU['processor']} (its loop's thread "
                  f"{LAST_CPU['processor_loop_thread']}), broker {LAST_CPU.get('broker')}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        took, lines = start_once(bootstrap, "--snapshot-dir", snapdir)  # no snapshot yet: rebuild, then write one
        written = [x for x in lines if "snapshot written" in x]
        print(f"first start with --snapshot-dir: ready in {took:.1f}s; {written[-1].split(' INFO ')[-1] if written else ''}",
              flush=True)
        for i in range(args.repeat):
            took, lines = start_once(bootstrap, "--snapshot-dir", snapdir)
            results["snapshot"].append(round(took, 2))
            results.setdefault("snapshot_cpu", []).append(dict(LAST_CPU))
            loaded = [x for x in lines if "snapshot loaded" in x][-1]
            print(f"from the snapshot: ready in {took:.1f}s  ({loaded.split(' INFO ')[-1]})", flush=True)
            results["snapshot_load_seconds"] = float(re.search(r"loaded in ([\d.]+)s", loaded).group(1))
        print("the last start from the snapshot, seconds after the spawn by log line:")
        for line in lines:
            print(f"  {line}")
        print(json.dumps(results))


if __name__ == "__main__":
    main()
