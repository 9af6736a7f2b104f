"""Churn at equilibrium: inserts, deletes and expiries keep pace while events flow; results exact, memory flat.

In process, on the processor's own state objects (``SubscriptionState`` fed
wire-format records, ``ValidEventStore``), so that every batch can be compared
with the oracle: through a broker the interleaving of the two topics would make
the expected answer depend on timing.  The broker-level wiring is covered by
test_validity_intervals.py and test_crash.py.
"""

from __future__ import annotations

import random

import numpy as np
from random_workload import random_events, random_subscriptions

from engine.columnar import EventBatch
from engine.event_store import ValidEventStore
from engine.oracle import OracleMatcher
from processor import codecs
from processor.codecs import Subscription
from processor.subscriptions import SubscriptionState

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
