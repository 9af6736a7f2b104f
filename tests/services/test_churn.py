"""Churn at equilibrium: inserts, deletes and expiries keep pace while events flow; results exact, memory flat.

In process, on the processor's own state objects (``SubscriptionState`` fed
wire-format records, ``ValidEventStore``), so that every batch can be compared
with the oracle: through a broker the interleaving of the two topics would make
the expected answer depend on timing.  The second test runs the same churn
through the broker and a running processor, alternating changes and events so
that its answer is exact too.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from tests.support.kafka_helpers import notifications, producer, wait_processed
from tests.support.random_workload import random_events, random_subscriptions

from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.validity.event_store import ValidEventStore
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription
from fastpubsub.wire.dedup import deduplicate
from fastpubsub.services.events.subscriptions import SubscriptionState

ROUNDS, WARM_UP = 400, 100
STEP = 100  # ms of event time per round
INSERTS, DELETES, LIFETIME = 60, 6, 20  # live ~ INSERTS * LIFETIME / 2 once expiry keeps pace


def test_churn_at_equilibrium_stays_exact_and_flat():
    rng = random.Random(61)
    pool = [s.predicates for _, s in random_subscriptions(3000, seed=62)]
    events = random_events(ROUNDS * 20, seed=63)
    state, store = SubscriptionState("dynamic"), ValidEventStore(max_events=5_000)
    model: dict[int, Subscription] = {}
    next_id, sizes = 0, []
    for r in range(ROUNDS):
        now = r * STEP
        records = []
        for _ in range(INSERTS):
            end = now + STEP * rng.randint(1, LIFETIME)
            sub = Subscription(f"u{next_id % 13}", rng.choice(pool), valid_until=end,
                               valid_from=rng.choice([None, now + rng.randrange(STEP)]))
            records.append((str(next_id).encode(), codecs.encode_subscription(sub, rng.choice(["avro", "json"]))))
            model[next_id] = sub
            next_id += 1
        for sid in rng.sample(sorted(model), min(DELETES, len(model))):
            records.append((str(sid).encode(), None))
            del model[sid]
        assert state.apply_records(records, [now] * len(records)).errors == []

        batch = events[r * 20 : (r + 1) * 20]
        times = np.array([now + STEP // 2 + i for i in range(len(batch))], dtype=np.int64)
        state.expire(int(times.min()))
        store.expire(int(times.min()))
        model = {sid: s for sid, s in model.items() if s.valid_until > times.min()}
        res = state.matcher.match_encoded(EventBatch.from_dicts(batch))
        store.add(EventBatch.from_dicts(batch), [f"e{e['n']}" for e in batch], times + 5 * STEP, times)
        if r % 10 == 0:
            oracle = OracleMatcher()
            for sid, s in model.items():
                oracle.add(sid, s.predicates)
            for i, (e, t) in enumerate(zip(batch, times.tolist())):
                hits = res.ids[res.offsets[i] : res.offsets[i + 1]]
                got = hits[state.valid_mask(hits, np.full(len(hits), t))].tolist()
                want = [sid for sid in oracle.match(e).tolist()
                        if (model[sid].valid_from or 0) <= t < model[sid].valid_until]
                assert got == want, (r, i)
        assert len(state) == len(model)  # expiry kept pace: nothing expired stays behind
        if r >= WARM_UP:
            sizes.append((state.matcher.stats()["memory_bytes"], sum(len(b) for b in state._log),
                          len(state._deadlines._heap), store.stats()["bytes"]))

    live = INSERTS * LIFETIME / 2
    assert 0.5 * live < len(state) < 1.5 * live  # at equilibrium
    assert state.expired > (ROUNDS - WARM_UP) * INSERTS * 0.8  # most leave by expiry, in bulk
    first, last = np.array(sizes[: len(sizes) // 4]).max(axis=0), np.array(sizes[-len(sizes) // 4 :]).max(axis=0)
    # 300 rounds after warm-up insert ~15x the live set; a leak of even a tenth of that would break these bounds
    assert np.all(last <= 1.3 * first + 4096), (first, last)


BROKER_ROUNDS, BROKER_WARM_UP = 40, 10
EPOCH = 1_700_000_000_000  # event time of round 0 (ms); record timestamps must be plausible to the broker


@pytest.mark.broker
@pytest.mark.timeout(300)
def test_churn_through_the_broker_every_notification_exactly_once_memory_flat(bootstrap, group_id, start_processor):
    """The same churn through a running processor: changes and events alternate, so the oracle's answer is exact.

    Each round's subscription changes are applied (the processor's live count
    says so: inserts and deletes can only sum to the expected count once all
    are in) before the round's events are sent, all with one event time, so
    the processor's bulk expiry removes exactly what the model removes.
    """
    rng = random.Random(71)
    pool = [s.predicates for _, s in random_subscriptions(2000, seed=72)]
    events = random_events(BROKER_ROUNDS * 20, seed=73)
    p = start_processor(batch_size=50)
    prod = producer(bootstrap)
    model: dict[int, Subscription] = {}
    expected: set[str] = set()
    next_id, sizes = 0, []
    for r in range(BROKER_ROUNDS):
        now = EPOCH + r * STEP
        changes = [str(sid) for sid in rng.sample(sorted(model), min(DELETES, len(model)))]
        for sid in changes:
            prod.produce(topics.SUBSCRIPTIONS, None, sid, timestamp=now)
            del model[int(sid)]
        for _ in range(INSERTS // 2):
            sub = Subscription(f"u{next_id % 13}", rng.choice(pool), valid_until=now + STEP * rng.randint(1, LIFETIME))
            prod.produce(topics.SUBSCRIPTIONS, codecs.encode_subscription(sub, rng.choice(["avro", "json"])),
                         str(next_id), timestamp=now)
            model[next_id] = sub
            next_id += 1
        assert prod.flush(30) == 0
        p.wait_for(lambda: len(p.state) == len(model), what=f"round {r}'s subscription changes")

        t = now + STEP // 2
        batch = events[r * 20 : (r + 1) * 20]
        for e in batch:
            prod.produce(topics.EVENTS, codecs.encode_event(e), f"r{r}e{e['n']}", timestamp=t)
        assert prod.flush(30) == 0
        model = {sid: s for sid, s in model.items() if s.valid_until > t}  # what the processor's expiry leaves
        oracle = OracleMatcher()
        for sid, s in model.items():
            oracle.add(sid, s.predicates)
        expected |= {codecs.notification_id(f"r{r}e{e['n']}", sid) for e in batch for sid in oracle.match(e).tolist()}
        wait_processed(bootstrap, group_id)
        if r >= BROKER_WARM_UP:
            sizes.append(p.state.matcher.stats()["memory_bytes"])

    stats = p.stop()
    assert stats["task"]["subscriptions"] == len(model)
    notes = notifications(bootstrap)
    assert sorted(n["notification_id"] for n in deduplicate(notes)) == sorted(expected)  # none lost, none extra
    assert len(expected) > 100  # the run matched something
    first, last = max(sizes[: len(sizes) // 4]), max(sizes[-len(sizes) // 4 :])
    assert last <= 1.3 * first + 4096, (first, last)  # ~3x the live set inserted after warm-up: a leak would show
