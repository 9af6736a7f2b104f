"""W0 subscriptions and events without a1: a workload whose statistics change the clustering (issue 4 tests).

Subscriptions like Fabret's W0 (equalities on a0 and a1 in every one) make the
dynamic clustering build an (a0, a1) hash table under uniform statistics; a
snapshot of events that never carry a1 makes that table worthless.
"""

from __future__ import annotations

from tests.support.kafka_helpers import send

from fastpubsub.engine.frontend.encoding import batch_from_dicts
from fastpubsub.engine.costmodel.statistics import EventStatistics, PartitionOffsets, SourceWindow, StatisticsCollector
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions
from fastpubsub.wire import codecs, topics

N_SUBSCRIPTIONS = 50_000  # enough that (a0, a1) clears the dynamic creation threshold (engine.costmodel.maintenance)


def w0_subscriptions(bootstrap: str, n: int = N_SUBSCRIPTIONS) -> None:
    records = [(str(sid).encode(), codecs.encode_subscription(codecs.Subscription(f"u{sid % 7}", preds)))
               for sid, preds in generate_subscriptions(PRESETS["W0"], n, seed=1).to_lists()]
    send(bootstrap, topics.SUBSCRIPTIONS, records)


def events_without_a1(n: int, seed: int = 2) -> list[dict]:
    events = generate_events(PRESETS["W0"], n, seed).to_dicts()
    for e in events:
        del e["a1"]
    return events


def snapshot_of(events: list[dict], offsets: int) -> EventStatistics:
    """A snapshot as the job would publish it, computed online (no Spark needed)."""
    collector = StatisticsCollector(sample_per_batch=len(events))
    collector.observe(batch_from_dicts(events))
    stats = collector.snapshot()
    stats.source = "spark"
    stats.window = SourceWindow(topics.EVENTS, [PartitionOffsets(0, 0, offsets)], computed_at_ms=1)
    return stats
