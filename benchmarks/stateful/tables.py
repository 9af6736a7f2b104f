"""The table service end to end through the embedded broker: table updates per second, S-CN and S-UN.

    python -m benchmarks.stateful.tables --mode s-cn --subscriptions 1000000 --updates 100000
    python -m benchmarks.stateful.tables --mode s-un --subscriptions 1000000 --updates 5000

What runs: Apache Kafka on loopback (``pubsub broker``, one node); a 10,000-row table (``pubsub.tables.stock``, one
partition) with the workload of ``benchmarks.stateful.aggregates`` (X uniform in [0, 10000], Y a reflected random
walk with spikes); ``--subscriptions`` range-min subscriptions of Table 1 (range length N(1000, 1000),
midpoint N(5000, 1500)) on ``pubsub.subscriptions``.  Phase 1 (not timed): ``pubsub tables`` loads the
rows and the subscriptions (large batches) and is stopped.  Phase 2: the updates are written to the
table topic while the service is down, then ``pubsub tables`` starts with its default batch size,
restores its state (the changelog and the subscriptions: timed separately) and works through the
backlog: consume, reformulate (and in S-UN match and notify), produce the reformulated messages or the
notifications and the changelog records, commit the transaction.  The rate is taken between the first
commit past the start and the last one, from the committed offsets of the service's group.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from confluent_kafka.admin import NewTopic

from benchmarks.stateful.aggregates import synthetic_rows, synthetic_subs, synthetic_updates
from benchmarks.harness.report import load_average
from benchmarks.harness.records import produce_all, wait_committed
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec
from fastpubsub.wire import topics

TABLE = "stock:pubsub.tables.stock:symbol:symbol=number,risk=number,per=number"
TOPIC = "pubsub.tables.stock"
GROUP = "bench-tables"


def _service(bootstrap: str, mode: str, batch: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fastpubsub", "tables", "-b", bootstrap, "--table", TABLE,
                             "--mode", mode, "--group-id", GROUP, "--batch-size", str(batch), "--progress-interval", "10"],
                            stdout=subprocess.PIPE, stderr=open(log, "a"), text=True, preexec_fn=child_preexec)


def _stop(proc: subprocess.Popen) -> dict:
    proc.terminate()
    out, _ = proc.communicate(timeout=600)
    return json.loads(out.strip().splitlines()[-1])


def run(mode: str, n_subs: int, n_rows: int, n_updates: int, seed: int = 7, batch: int = 1000, progress=print) -> dict:
    rng = np.random.default_rng(seed)
    xs, ys = synthetic_rows(n_rows, rng)
    upd_k, upd_y = synthetic_updates(ys, n_updates, rng)
    lows, highs = synthetic_subs(n_subs, rng)
    workdir = Path(tempfile.mkdtemp(prefix="pubsub-bench-tables-"))
    log = workdir / "tables.log"
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        admin.create_topics(bootstrap)
        client = ClientFactory(bootstrap).admin()
        for f in client.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            f.result(30)
        producer = ClientFactory(bootstrap).producer({"linger.ms": 20}, **{"enable.idempotence": True})
        produce_all(producer, TOPIC, ((str(i).encode(), json.dumps({"symbol": i, "risk": float(x), "per": float(y)}).encode())
                                       for i, (x, y) in enumerate(zip(xs, ys))))
        produce_all(producer, topics.SUBSCRIPTIONS, (
            (str(i).encode(), ('{"subscriber":"s%d","aggregate":{"kind":"aggregate","table":"stock","fn":"min",'
                               '"value":"per","range":{"attribute":"risk","low":%r,"high":%r}}}' % (i, lo, hi)).encode())
            for i, (lo, hi) in enumerate(zip(lows.tolist(), highs.tolist()))))
        sub_parts = admin.partitions_of(bootstrap, topics.SUBSCRIPTIONS)
        progress(f"tables {mode}: {n_rows:,} rows and {n_subs:,} subscriptions written; loading them")
        watch = ClientFactory(bootstrap).consumer(GROUP, **{"enable.auto.commit": False})
        t0 = time.monotonic()
        proc = _service(bootstrap, mode, 100_000, log)
        wait_committed(watch, TOPIC, 1, n_rows, proc, 1800, "the rows")
        wait_committed(watch, topics.SUBSCRIPTIONS, sub_parts, n_subs, proc, 3600, "the subscriptions")
        load_s = time.monotonic() - t0
        _stop(proc)
        progress(f"  loaded in {load_s:.0f}s (initial answers included); writing {n_updates:,} updates")
        produce_all(producer, TOPIC, ((str(int(k)).encode(),
                                        json.dumps({"symbol": int(k), "risk": float(xs[k]), "per": float(y)}).encode())
                                       for k, y in zip(upd_k, upd_y)))
        started = time.monotonic()
        proc = _service(bootstrap, mode, batch, log)
        samples = wait_committed(watch, TOPIC, 1, n_rows + n_updates, proc, 3600, "the updates")
        stats = _stop(proc)["task"]  # the table task's own counts
        watch.close()
    (t_a, c_a) = next(s for s in samples if s[1] > n_rows)
    (t_b, c_b) = samples[-1]
    rate = (c_b - c_a) / max(t_b - t_a, 1e-9)
    restore_s = t_a - started
    result = {"mode": mode, "batch_size": batch, "subscriptions": n_subs, "rows": n_rows, "updates": n_updates,
              "updates_per_s": rate, "restore_and_first_batch_s": restore_s, "load_s": load_s,
              "notifications": stats["notifications"], "reformulated": stats["reformulated"],
              "notifications_per_update": stats["notifications"] / n_updates,
              "reformulated_per_update": stats["reformulated"] / n_updates, "load": load_average()}
    progress(f"  {rate:,.0f} updates/s end to end ({c_b - c_a:,} updates in {t_b - t_a:.1f}s); restore and first "
             f"batch {restore_s:.1f}s; {result['notifications_per_update']:.2f} notifications and "
             f"{result['reformulated_per_update']:.2f} reformulated records per update; {result['load']}")
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("s-cn", "s-un"), default="s-cn")
    ap.add_argument("--subscriptions", type=int, default=1_000_000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--updates", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch-size", type=int, default=1000, help="pubsub tables --batch-size while timed")
    ap.add_argument("--json", action="store_true", help="Print the result as one JSON line at the end.")
    args = ap.parse_args(argv)
    result = run(args.mode, args.subscriptions, args.rows, args.updates, args.seed, args.batch_size)
    batch = args.batch_size
    cmd = " ".join(["python -m benchmarks.stateful.tables", *(argv if argv is not None else sys.argv[1:])])
    print(f"\n| mode | batch | rows | subscriptions | updates | updates/s | notifications/update | reformulated/update | "
          f"restore s |\n|---|---|---|---|---|---|---|---|---|\n| {result['mode'].upper()} | {batch} | {result['rows']:,} | "
          f"{result['subscriptions']:,} | {result['updates']:,} | {result['updates_per_s']:,.0f} | "
          f"{result['notifications_per_update']:.2f} | {result['reformulated_per_update']:.2f} | "
          f"{result['restore_and_first_batch_s']:.1f} |\n\n`{cmd}`, {result['load']}, {os.cpu_count()} CPUs")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
