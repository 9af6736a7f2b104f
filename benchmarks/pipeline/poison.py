"""The processor's peak memory under a poison run: large and malformed records mixed with good ones.

``python -m benchmarks.pipeline.poison`` starts the embedded broker and a ``pubsub run``
process, produces good events around bad records whose sizes are spread
log-uniformly from 1 KB to 10 MB (random bytes, unterminated JSON, lone
surrogates, valid events above the record limit, valid events just under it
whose notifications must refer to them), waits until every event is
committed, and reads the processor's peak resident memory (``VmHWM``).

What bounds it: records above ``--max-record-bytes`` are dead-lettered
before they are decoded, every output is at most the topic's limit, and the
consumer's fetch queue is bounded (``--consumer-queue-kbytes``); so the
peak is the process at rest plus a few largest records, not the sum of them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec
from fastpubsub.wire import codecs, topics

from benchmarks.harness.memory import peak_rss_kb
from benchmarks.harness.records import wait_committed


def bad_record(rng: random.Random, size: int) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return os.urandom(size)
    if kind == 1:
        return b'{"n": 1, "s": "' + b"x" * size
    if kind == 2:
        return b'{"n": 1, "s": "\\ud800' + b"y" * size + b'"}'
    if kind == 3:
        return codecs.encode_event({"n": 1, "s": "z" * size})
    return codecs.encode_event({"n": 1, "s": "z" * min(size, 1_040_000)})  # valid, near the limit: by reference


def run(good: int, bad: int, seed: int, extra: list[str]) -> dict:
    rng = random.Random(seed)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        b = broker.bootstrap_servers
        admin.create_topics(b, partitions=4)
        clients = ClientFactory(b)
        producer = clients.producer({"linger.ms": 5, "message.max.bytes": 50_000_000, "batch.size": 50_000_000})
        producer.produce(topics.SUBSCRIPTIONS, codecs.encode_subscription(codecs.Subscription("alice", [("n", ">=", 0)])), "1")
        producer.flush(30)
        log = open(Path(tmp) / "processor.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", "run", "-b", b, "--group-id", "poison",
                                 "--progress-interval", "10", *extra],
                                stdout=subprocess.PIPE, stderr=log, text=True, preexec_fn=child_preexec)
        try:
            time.sleep(2)
            baseline = peak_rss_kb(proc.pid)
            slots = [True] * good + [False] * bad
            rng.shuffle(slots)
            sizes = []
            started = time.monotonic()
            for i, is_good in enumerate(slots):
                if is_good:
                    producer.produce(topics.EVENTS, codecs.encode_event({"n": i}), f"g{i}")
                else:
                    size = int(math.exp(rng.uniform(math.log(1_000), math.log(10_000_000))))
                    sizes.append(size)
                    producer.produce(topics.EVENTS, bad_record(rng, size), f"b{i}")
                    producer.flush(60)
                producer.poll(0)
            producer.flush(120)
            produced = time.monotonic() - started
            c = clients.consumer("poison", {"enable.auto.commit": False})
            wait_committed(c, topics.EVENTS, 4, good + bad, proc, 600, "the events (see the processor log)", every=0.5)
            c.close()
            peak = peak_rss_kb(proc.pid)
            proc.send_signal(2)
            out, _ = proc.communicate(timeout=60)
            stats = json.loads(out.strip().splitlines()[-1])
        finally:
            if proc.poll() is None:
                proc.kill()
    return {"good": good, "bad": bad, "bad_bytes": sum(sizes), "largest": max(sizes, default=0), "produce_seconds": round(produced, 1),
            "rss_at_start_mb": round(baseline / 1024), "peak_rss_mb": round(peak / 1024),
            "dead_letters": stats["dead_letters"], "truncated": stats["dead_letters_truncated"],
            "by_reference": stats["task"]["notifications_by_reference"], "notifications": stats["notifications"]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pipeline.poison", description=__doc__.splitlines()[0])
    ap.add_argument("--good", type=int, default=10_000, help="good events")
    ap.add_argument("--bad", type=int, default=500, help="bad or oversized records, 1 KB to 10 MB")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("processor_args", nargs="*", help="extra `pubsub run` options (after --)")
    args = ap.parse_args(argv)
    print(json.dumps(run(args.good, args.bad, args.seed, args.processor_args), indent=1))


if __name__ == "__main__":
    main()
