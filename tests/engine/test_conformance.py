"""Every algorithm against the brute-force oracle (tests/support/oracles/engine.py): one suite, one case per algorithm
and configuration, each drawing the workload its index is built for (conformance.py).

Every algorithm takes the general workload; AMKH's configurations (MKH, AMKH(0,-), folding, value-range buckets,
the priced ``general="auto"``) take range-heavy subscriptions with a key attribute and reconfigurations mid-run; the
bit-parallel path and the catch-all on it take range-heavy subscriptions with forced rebuilds, its bit rows checked
against the naive ones.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given

from fastpubsub.engine import ALGORITHMS, Matcher
from fastpubsub.engine.columnar import SubscriptionBatch
from tests.engine.conformance import GENERAL, RANGES, RANGES_KEYED, Family
from tests.support.oracles.engine import OracleMatcher


class Case(NamedTuple):
    algorithm: str
    options: dict
    family: Family


AMKH = {
    "MKH": {"general": ("x", "y", "s"), "bucketing": "exact"},
    "AMKH(0,-)": {"general": ()},
    "AMKH(1,2)": {"general": ("x",), "bucketing": "fold", "buckets": 2},
    "AMKH(2,3)": {"general": ("x", "s"), "bucketing": "fold", "buckets": 3, "table_size": 7},
    "range2": {"general": ("x", "y"), "bucketing": "range", "buckets": 2},
    "range3-equality-k": {"general": ("y", "s"), "bucketing": "range", "buckets": 3, "equality": ("k",),
                          "table_size": 1},
    "auto": {"general": "auto"},
    "per-attribute": {"general": {"x": ("range", 3), "y": ("exact", 1), "s": ("fold", 2)}},
}
#: Matchers that put every subscription (bitmaps) or every catch-all one (static, dynamic) on the bit-parallel path.
BITMAPS = {
    "bitmaps-1cell": ("bitmaps", {"cells": 1}),
    "bitmaps-3cells": ("bitmaps", {"cells": 3}),
    "bitmaps": ("bitmaps", {}),
    "dynamic-catch-all": ("dynamic", {"catch_all": "bitmaps"}),
    "static-catch-all": ("static", {"catch_all": "bitmaps"}),
}

#: One case per name: an algorithm on the general workload, "amkh-" a configuration of AMKH, "ranges-" one on the
#: bit-parallel path.
CASES = {
    **{a: Case(a, {}, GENERAL) for a in ALGORITHMS},
    **{f"amkh-{name}": Case("amkh", options, RANGES_KEYED) for name, options in AMKH.items()},
    **{f"ranges-{name}": Case(algorithm, options, RANGES) for name, (algorithm, options) in BITMAPS.items()},
}
#: The interleavings run AMKH in the configurations whose reorganizations change most.
INTERLEAVED = [name for name in CASES
               if not name.startswith("amkh-") or name[5:] in ("MKH", "AMKH(1,2)", "range3-equality-k", "auto")]


@pytest.mark.parametrize("name", list(CASES))
def test_subscription_sets_agree_with_the_oracle(name):
    case = CASES[name]
    family = case.family

    @family.settings
    @given(subs=family.subscription_sets(), events=family.event_lists())
    def run(subs, events):
        m, o = Matcher(case.algorithm, **case.options), OracleMatcher()
        if family.bulk:
            m.add_bulk(SubscriptionBatch.from_lists(subs.items()))
        for sid, preds in subs.items():
            if not family.bulk:
                m.add(sid, preds)
            o.add(sid, preds)
        assert len(m) == len(o)
        family.check(m, o, events + family.edges(m))

    run()


@pytest.mark.parametrize("name", INTERLEAVED)
def test_interleaved_adds_removes_and_reorganizations_agree_with_the_oracle(name):
    """Adds, removes, matches and the family's reorganization (AMKH's reconfiguration, a rebuild of the bit rows)
    in any order; adding an id twice or removing an unknown one is refused and changes nothing."""
    case = CASES[name]
    family = case.family

    @family.settings
    @given(ops=family.operations())
    def run(ops):
        m, o = Matcher(case.algorithm, **case.options), OracleMatcher()
        for op in ops:
            if op[0] == "add":
                if op[1] in o:
                    with pytest.raises(ValueError, match="duplicate"):
                        m.add(op[1], op[2])
                else:
                    m.add(op[1], op[2])
                    o.add(op[1], op[2])
            elif op[0] == "remove":
                if op[1] in o:
                    m.remove(op[1])
                    o.remove(op[1])
                else:
                    with pytest.raises(KeyError):
                        m.remove(op[1])
            elif op[0] == "match":
                family.check(m, o, op[1])
            else:
                family.reorganize(m, case.options)
            assert len(m) == len(o)
            assert all(s in m for s in o._subs)
        family.check(m, o, family.last_events + family.edges(m))

    run()
