"""``Matcher.remove_bulk``: removing many subscriptions at once equals removing them one by one (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.engine.conformance import agree, bulk_load, bulk_remove
from tests.engine.test_engine import SETTINGS, event, subscription_sets

from fastpubsub.engine import ALGORITHMS, Matcher
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.columnar import SubscriptionBatch


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@SETTINGS
@given(subs=subscription_sets, data=st.data(), events=st.lists(event, min_size=1, max_size=6))
def test_remove_bulk_agrees_with_oracle(algorithm, subs, data, events):
    m, o = Matcher(algorithm), OracleMatcher()
    bulk_load(m, o, subs)
    for _ in range(2):  # two rounds: the second removes from structures the first one changed
        gone = data.draw(st.lists(st.sampled_from(sorted(subs)), unique=True) if subs else st.just([]))
        gone = [s for s in gone if s in o]
        bulk_remove(m, o, np.array(gone, dtype=np.int64))
        assert len(m) == len(o) and all(s in m for s in o._subs) and not any(s in m for s in gone)
        agree(m, o, events)
    again = data.draw(st.sampled_from(sorted(subs))) if subs else None
    if again is not None:  # re-adding a removed id works; the freed structures are reused
        if again in o:
            m.remove(again)
            o.remove(again)
        m.add(again, subs[again])
        o.add(again, subs[again])
        agree(m, o, events)


def test_remove_bulk_is_all_or_nothing():
    m = Matcher("propagation")
    m.add_bulk(SubscriptionBatch.from_lists([(1, [("a", "=", 1)]), (2, [("a", "=", 1)])]))
    with pytest.raises(KeyError):
        m.remove_bulk([1, 99])
    with pytest.raises(ValueError, match="repeated"):
        m.remove_bulk([1, 1])
    assert len(m) == 2 and m.match({"a": 1}).tolist() == [1, 2]
    m.remove_bulk([])
    m.remove_bulk([2, 1])
    assert len(m) == 0 and m.stats()["predicates"] == 0


@pytest.mark.parametrize("algorithm", ["dynamic", "counting"])
def test_holds_asks_in_of_every_id_at_once_buffered_single_changes_included(algorithm):
    m = Matcher(algorithm)
    m.add_bulk(SubscriptionBatch.from_lists([(i, [("a", "=", i % 3)]) for i in range(100)]))
    m.add(500, [("a", "=", 1)])  # buffered single changes count as made
    m.remove(7)
    ids = np.array([0, 7, 99, 100, 500, -1], dtype=np.int64)
    assert m.holds(ids).tolist() == [i in m for i in ids.tolist()] == [True, False, True, False, True, False]
    assert m.holds(np.zeros(0, np.int64)).tolist() == []
