"""End to end through the embedded broker on sparse attributes: thousands of attributes, events of a few dozen.

The subscriptions are OpIndex's synthetic ones with every operator (workloads.sparse, preset
"opindex-operators"): most have no equality to key on, so the processor's matcher files them under presence
keys or the catch-all list (dynamic, whose short lists are packed over this many fields) or under their pivot
attribute (opindex). The notifications must be the oracle's, whichever algorithm the processor runs.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.support.kafka_helpers import notifications, wait_processed
from tests.support.random_workload import by_event, expected_matches, send_events, send_subscriptions

from fastpubsub.workloads import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions
from fastpubsub.wire.codecs import Subscription

SPEC = replace(SPARSE_PRESETS["opindex-operators"], n_attributes=5000)


@pytest.mark.parametrize("algorithm", ["dynamic", "opindex"])
def test_a_sparse_workload_end_to_end_equals_the_oracle(bootstrap, group_id, start_processor, algorithm):
    subs = [(sid, Subscription(f"user{sid % 17}", preds))
            for sid, preds in generate_sparse_subscriptions(SPEC, 3000, seed=1).to_lists()]
    events = [{"n": i, **e} for i, e in enumerate(generate_sparse_events(SPEC, 300, seed=2).to_dicts())]
    send_subscriptions(bootstrap, subs, fmt_of=lambda sid: "avro")  # the lowered rows hold -inf: Avro only
    p = start_processor(algorithm=algorithm)
    assert len(p.state) == len(subs)
    if algorithm == "dynamic":
        assert p.state.matcher.stats()["lists"] == "packed"  # engine/algorithms/packed.py: over 4,096 fields
    assert len({a for e in events for a in e}) > 3000
    send_events(bootstrap, events)
    wait_processed(bootstrap, group_id)
    notes = notifications(bootstrap)
    p.stop()
    expected = {n: sids for n, sids in expected_matches(subs, events).items() if sids}
    assert sum(map(len, expected.values())) > 150
    assert by_event(notes) == expected
