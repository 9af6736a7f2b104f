"""How long the processor's start waits for pubsub.statistics: the statistics feed's read to the end of the topic.

    python -m benchmarks.pipeline.statistics_catch_up            # 3 feeds on an empty topic, one after the other

An embedded broker with the four topics and no statistics snapshot yet (a
processor's usual start): the time to build ``processor.statistics_feed.StatisticsFeed``,
which assigns the topic and reads it to its end-of-partition before the processor
goes on.
"""

from __future__ import annotations

import json
import time

from fastpubsub.engine import Matcher
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.services.events.statistics_feed import StatisticsFeed


def main(repeat: int = 3) -> None:
    took = []
    with EmbeddedBroker() as broker:
        admin.create_topics(broker.bootstrap_servers)
        matcher = Matcher("dynamic")
        for _ in range(repeat):
            started = time.perf_counter()
            feed = StatisticsFeed(ClientFactory(broker.bootstrap_servers), lambda: matcher)
            took.append(round(time.perf_counter() - started, 2))
            feed.close()
            print(f"read to the end of the statistics topic in {took[-1]:.2f}s", flush=True)
    print(json.dumps({"seconds": took}))


if __name__ == "__main__":
    main()
