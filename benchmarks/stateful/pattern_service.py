"""The pattern service end to end through the embedded broker: events per second through ``pubsub patterns``.

    python -m benchmarks.stateful.pattern_service --subscriptions 1000 --events 100000

What runs: Apache Kafka on loopback (``pubsub broker``, one node) with the five topics (4 partitions); the stock-tick workload
of ``benchmarks.stateful.patterns`` (Zipf symbols, random-walk prices, increasing timestamps: the record timestamps)
placed by symbol (``wire.placement``, as ``pubsub publish --partition-by name``); ``--subscriptions`` patterns
from its S1-S5 templates, JSON on ``pubsub.subscriptions``, written before the events.  The events are written
while the service is down; then ``pubsub patterns`` starts (default batch size), loads the patterns, joins the
group, restores the partitions (empty changelog) and works through the backlog: decode, match, notify, write
the state changes, commit the transaction.  The rate is taken between the first commit and the last, from
the committed offsets of the service's group.
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


from benchmarks.stateful.patterns import Ticks, subscriptions
from benchmarks.harness.report import load_average
from benchmarks.harness.records import produce, wait_committed
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.placement import partition_for

GROUP = "bench-patterns"
BASE_TS = 1_700_000_000_000
PARTITIONS = 4


def run(n_subs: int, n_events: int, seed: int = 0, batch: int = 1000, progress=print) -> dict:
    ticks = Ticks(n_events, seed=seed)
    subs = subscriptions(n_subs, ticks, seed=seed + 1)
    workdir = Path(tempfile.mkdtemp(prefix="pubsub-bench-patterns-"))
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        admin.create_topics(bootstrap, partitions=PARTITIONS)
        producer = ClientFactory(bootstrap).producer({"linger.ms": 20}, **{"enable.idempotence": True})
        for sid, text in subs:
            produce(producer, topics.SUBSCRIPTIONS, json.dumps({"subscriber": f"s{sid % 100}", "pattern": text}).encode(),
                     str(sid).encode(), timestamp=BASE_TS)
        for i in range(n_events):
            name = str(ticks.symbols[ticks.sym[i]])
            produce(producer, topics.EVENTS, codecs.encode_event(
                {"name": name, "price": float(ticks.price[i]), "volume": float(ticks.volume[i])}, "avro"),
                partition=partition_for(name, PARTITIONS), timestamp=BASE_TS + int(ticks.ts[i]))
        if producer.flush(300):
            raise RuntimeError("the broker did not acknowledge the workload")
        progress(f"patterns: {n_subs:,} subscriptions and {n_events:,} events written; starting pubsub patterns")
        watch = ClientFactory(bootstrap).consumer(GROUP, **{"enable.auto.commit": False})
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", "patterns", "-b", bootstrap, "--group-id", GROUP,
                                 "--batch-size", str(batch), "--progress-interval", "10"],
                                stdout=subprocess.PIPE, stderr=open(workdir / "patterns.log", "a"), text=True,
                                preexec_fn=child_preexec)
        samples = wait_committed(watch, topics.EVENTS, PARTITIONS, n_events, proc, 3600,
                                 f"the events (log: {workdir / 'patterns.log'})")
        proc.terminate()
        out, _ = proc.communicate(timeout=600)
        stats = json.loads(out.strip().splitlines()[-1])["task"]  # the pattern task's own counts
        watch.close()
    first = next(i for i, s in enumerate(samples) if s[1] > 0)
    (t_a, c_a), (t_b, c_b) = samples[max(first - 1, 0)], samples[-1]
    rate = (c_b - c_a) / max(t_b - t_a, 1e-9)
    result = {"subscriptions": n_subs, "events": n_events, "batch_size": batch, "events_per_s": rate,
              "start_s": t_a - started, "notifications": stats["notifications"],
              "changelog_records": stats["changelog_records"], "load": load_average()}
    progress(f"  {rate:,.0f} events/s end to end ({c_b - c_a:,} events in {t_b - t_a:.1f}s); start to first commit "
             f"{result['start_s']:.1f}s; {stats['notifications']:,} notifications, {stats['changelog_records']:,} "
             f"changelog records; {result['load']}")
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subscriptions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=1000, help="pubsub patterns --batch-size")
    ap.add_argument("--json", action="store_true", help="Print the result as one JSON line at the end.")
    args = ap.parse_args(argv)
    r = run(args.subscriptions, args.events, args.seed, args.batch_size)
    cmd = " ".join(["python -m benchmarks.stateful.pattern_service", *(argv if argv is not None else sys.argv[1:])])
    print(f"\n| subscriptions | events | batch | events/s | notifications | changelog records |\n|---|---|---|---|---|---|\n"
          f"| {r['subscriptions']:,} | {r['events']:,} | {r['batch_size']} | {r['events_per_s']:,.0f} | "
          f"{r['notifications']:,} | {r['changelog_records']:,} |\n\n`{cmd}`, {r['load']}, {os.cpu_count()} CPUs")
    if args.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
