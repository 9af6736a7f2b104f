"""What one transaction costs on the embedded broker, alone on it: produce, flush (acknowledgements), commit.

    python -m benchmarks.pipeline.commit_cost                    # 100 records per transaction, 50 transactions
    python -m benchmarks.pipeline.commit_cost --records 1000 --transactions 20

A transactional producer (``acks=all``, as the processor's) writes
``--records`` notification-sized records (200 bytes, 13 keys) per transaction
to pubsub.notifications, then ``flush()`` and ``commit_transaction()``, with
``linger.ms`` 5 (the processor's) and 0.  Medians after 10 warm-up
transactions.  Compare with the commit time by part the processor reports
(``commit_seconds``; ``python -m benchmarks.suite e2e`` at half load): what the broker
takes when nothing else competes for the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from benchmarks.harness.options import positive
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.wire.topics import NOTIFICATIONS

WARM_UP = 10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=positive, default=100, help="records per transaction")
    ap.add_argument("--transactions", type=positive, default=50, help="transactions timed per setting")
    args = ap.parse_args()
    results: dict = {"records": args.records}
    with EmbeddedBroker() as broker:
        admin.create_topics(broker.bootstrap_servers)
        clients = ClientFactory(broker.bootstrap_servers)
        for linger in (5, 0):
            producer = clients.producer(**{"linger.ms": linger, "acks": "all", "delivery.report.only.error": True,
                                           "transactional.id": f"bench-commit-cost-{linger}"})
            producer.init_transactions(10)
            parts: dict[str, list[float]] = {"produce": [], "flush": [], "commit": []}
            for i in range(WARM_UP + args.transactions):
                producer.begin_transaction()
                t0 = time.perf_counter()
                for j in range(args.records):
                    producer.produce(NOTIFICATIONS, b"x" * 200, f"user{j % 13}".encode())
                t1 = time.perf_counter()
                producer.flush(10)
                t2 = time.perf_counter()
                producer.commit_transaction(10)
                t3 = time.perf_counter()
                if i >= WARM_UP:
                    parts["produce"].append(t1 - t0)
                    parts["flush"].append(t2 - t1)
                    parts["commit"].append(t3 - t2)
            medians = {k: round(statistics.median(v) * 1e3, 2) for k, v in parts.items()}
            results[f"linger_ms_{linger}"] = medians
            print(f"linger.ms={linger}: " + ", ".join(f"{k} {v} ms" for k, v in medians.items()), flush=True)
            producer = None
    print(json.dumps(results))


if __name__ == "__main__":
    main()
