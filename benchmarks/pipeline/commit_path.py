"""What the processor's commit path costs on the embedded broker, part by part, and what reading lag costs after it.

    python -m benchmarks.pipeline.commit_path                       # 100 records per transaction, 50 transactions
    python -m benchmarks.pipeline.commit_path --records 1000 --transactions 20
    python -m benchmarks.pipeline.commit_path --retry-backoff-ms 100,10 --transactions 200   # the retry backoff's cost
    python -m benchmarks.pipeline.commit_path --retry-backoff-ms 10 --rounds 1 --transactions 400 --explain-slower-than 60

A read_committed consumer in a group takes its records from pubsub.events
and a transactional producer (the processor's settings: ``acks=all``,
``linger.ms`` 5) writes ``--records`` notification-sized records per
transaction with the consumer's offsets, in two orders:

* ``flush first``: ``flush()`` (every output acknowledged), then
  ``send_offsets_to_transaction``, then ``commit_transaction``;
* ``no flush``: ``send_offsets_to_transaction`` at once, then
  ``commit_transaction`` (which flushes what is still queued itself).

After each commit it times what reading the group's lag costs:
``consumer.committed()`` (a request to the group coordinator; a
read_committed consumer is told the offsets are not yet stable just after a
transaction, and librdkafka asks again later) against the local state
(``position()`` and the watermarks cached from fetch responses).  Medians,
99th percentiles and maxima in milliseconds, as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from confluent_kafka import TopicPartition

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.wire.topics import EVENTS, NOTIFICATIONS

from benchmarks.harness import report
from benchmarks.harness.options import positive

WARM_UP = 5


def _summary(ms: list[float]) -> dict[str, float]:
    a = np.array(ms)
    return {"p50": round(float(np.percentile(a, 50)), 2), "p99": round(float(np.percentile(a, 99)), 2),
            "max": round(float(a.max()), 2)}


def measure(bootstrap: str, records: int, transactions: int, flush_first: bool, retry_backoff_ms: int | None = None,
            explain_ms: float | None = None) -> dict:
    """Each part's p50/p99/max in ms; with ``explain_ms``, also what the transactions slower than that waited for
    (:func:`_explain`)."""
    if explain_ms is not None:
        with _librdkafka_log() as log_path:
            got = _measure(bootstrap, records, transactions, flush_first, retry_backoff_ms, debug=True)
        got["slow transactions"] = _explain(got.pop("_windows"), log_path.read_text(errors="replace"), explain_ms)
        log_path.unlink()
        return got
    return _measure(bootstrap, records, transactions, flush_first, retry_backoff_ms)


def _measure(bootstrap: str, records: int, transactions: int, flush_first: bool, retry_backoff_ms: int | None,
             debug: bool = False) -> dict:
    clients = ClientFactory(bootstrap)
    name = ("flush" if flush_first else "noflush") + (f"-backoff{retry_backoff_ms}" if retry_backoff_ms else "")
    feeder = clients.producer(**{"linger.ms": 0})
    for i in range(WARM_UP + transactions):
        feeder.produce(EVENTS, b"e" * 100, f"k{i}".encode(), partition=0)
    feeder.flush(10)
    consumer = clients.consumer(f"bench-commit-path-{name}", **{"isolation.level": "read_committed",
                                                               "enable.auto.commit": False,
                                                               "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(EVENTS, 0)])
    backoff = {"retry.backoff.ms": retry_backoff_ms} if retry_backoff_ms else {}
    if debug:
        backoff["debug"] = "eos,protocol"  # the transaction manager's steps and every request's rtt, timestamped
    producer = clients.producer(**{"linger.ms": 5, "acks": "all", "delivery.report.only.error": True,
                                   "transactional.id": f"bench-commit-path-{name}", **backoff})
    producer.init_transactions(10)
    parts: dict[str, list[float]] = {"produce": [], "flush": [], "offsets": [], "commit": [], "transaction": [],
                                     "committed()": [], "local lag": []}
    windows: list[tuple[float, float]] = []  # wall-clock span of each timed transaction (librdkafka's log clock)
    done = 0
    while done < WARM_UP + transactions:
        msgs = consumer.consume(1, 1.0)
        if not msgs or msgs[0].error():
            continue
        msg = msgs[0]
        wall = time.time()
        t0 = time.perf_counter()
        producer.begin_transaction()
        for j in range(records):
            producer.produce(NOTIFICATIONS, b"x" * 200, f"user{j % 13}".encode())
        t1 = time.perf_counter()
        if flush_first:
            producer.flush(10)
        t2 = time.perf_counter()
        producer.send_offsets_to_transaction([TopicPartition(EVENTS, 0, msg.offset() + 1)],
                                             consumer.consumer_group_metadata(), 10)
        t3 = time.perf_counter()
        producer.commit_transaction(10)
        t4 = time.perf_counter()
        consumer.committed([TopicPartition(EVENTS, 0)], timeout=10)
        t5 = time.perf_counter()
        for tp in consumer.position([TopicPartition(EVENTS, 0)]):
            consumer.get_watermark_offsets(tp, cached=True)
        t6 = time.perf_counter()
        if done >= WARM_UP:
            windows.append((wall, wall + (t4 - t0)))
            for part, seconds in (("produce", t1 - t0), ("flush", t2 - t1), ("offsets", t3 - t2), ("commit", t4 - t3),
                                  ("transaction", t4 - t0), ("committed()", t5 - t4), ("local lag", t6 - t5)):
                parts[part].append(seconds * 1e3)
        done += 1
    consumer.close()
    producer.flush(10)
    out: dict = {part: _summary(ms) for part, ms in parts.items()}
    if debug:
        out["_windows"] = windows
    return out


@contextlib.contextmanager
def _librdkafka_log():
    """librdkafka's own log (it writes to file descriptor 2) into a file for the block's duration."""
    fd, name = tempfile.mkstemp(prefix="commit-path-", suffix=".log")
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield Path(name)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _explain(windows: list[tuple[float, float]], log: str, slower_than_ms: float) -> dict:
    """For the transactions that took longer than ``slower_than_ms``: which request answered slowest (its round trip,
    from librdkafka's ``Received ...Response (..., rtt N ms)`` lines), and how often and for how long the coordinator
    answered CONCURRENT_TRANSACTIONS (it is still writing the previous transaction's markers).  librdkafka's debug
    lines carry their wall-clock time."""
    refusals: list[float] = []
    answers: list[tuple[float, str, float]] = []  # (time, request, rtt ms)
    for line in log.splitlines():
        if not line.startswith("%7|"):
            continue
        at = float(line.split("|")[1])
        if "CONCURRENT_TRANSACTIONS" in line or "another concurrent operation" in line:
            refusals.append(at)
        elif "Received " in line and "Response (" in line and "rtt " in line:
            name = line.split("Received ", 1)[1].split("Response", 1)[0]
            answers.append((at, name, float(line.rsplit("rtt ", 1)[1].split("ms", 1)[0])))
    slow = [(a, b) for a, b in windows if (b - a) * 1e3 > slower_than_ms]
    waited, counts, slowest = [], [], {}
    for a, b in slow:
        inside = [t for t in refusals if a <= t <= b]
        counts.append(len(inside))
        waited.append((inside[-1] - a) * 1e3 if inside else 0.0)
        mine = [(rtt, name) for t, name, rtt in answers if a <= t <= b]
        if mine:
            rtt, name = max(mine)
            slowest.setdefault(name, []).append(rtt)
    return {"slower than ms": slower_than_ms, "count": len(slow), "of": len(windows),
            "with CONCURRENT_TRANSACTIONS": sum(1 for c in counts if c),
            "ms waiting for the previous markers": _summary(waited) if waited else None,
            "slowest answer": {name: {"transactions": len(v), **_summary(v)} for name, v in sorted(slowest.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=positive, default=100, help="records per transaction")
    ap.add_argument("--transactions", type=positive, default=50, help="transactions timed per order")
    ap.add_argument("--retry-backoff-ms", default="",
                    help="comma-separated retry.backoff.ms values of the transactional producer, timed in turn in the "
                         "'no flush' order over --rounds rounds (e.g. 100,10: librdkafka's default against ours)")
    ap.add_argument("--rounds", type=positive, default=3, help="rounds of the --retry-backoff-ms comparison")
    ap.add_argument("--explain-slower-than", type=float, default=None, metavar="MS",
                    help="with librdkafka's transaction log (debug=eos): for the transactions slower than MS, how "
                         "long the coordinator kept answering CONCURRENT_TRANSACTIONS (writing the previous "
                         "transaction's markers)")
    args = ap.parse_args()
    try:
        backoffs = [int(v) for v in args.retry_backoff_ms.split(",") if v.strip()]
    except ValueError:
        ap.error(f"--retry-backoff-ms takes whole milliseconds, got {args.retry_backoff_ms!r}")
    results: dict = {"records": args.records, "transactions": args.transactions, "load": report.load_average()}
    with EmbeddedBroker() as broker:
        admin.create_topics(broker.bootstrap_servers)
        if backoffs:
            for r in range(args.rounds):
                for ms in backoffs:
                    got = measure(broker.bootstrap_servers, args.records, args.transactions, False, ms,
                                  args.explain_slower_than)
                    results.setdefault(f"retry.backoff.ms={ms}", []).append(got["transaction"])
                    print(f"round {r + 1}, retry.backoff.ms={ms}: transaction {got['transaction']}", flush=True)
                    if "slow transactions" in got:
                        results.setdefault(f"slow, retry.backoff.ms={ms}", []).append(got["slow transactions"])
                        print(f"  slow: {got['slow transactions']}", flush=True)
        else:
            for flush_first in (True, False):
                key = "flush first" if flush_first else "no flush"
                results[key] = measure(broker.bootstrap_servers, args.records, args.transactions, flush_first,
                                       explain_ms=args.explain_slower_than)
    results["load after"] = report.load_average()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
