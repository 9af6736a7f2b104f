"""An S-CN follower (``aggregates.client.Follower``) reproduces its subscription's S-UN notifications, ids included."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from fastpubsub.aggregates import AggregateService, TableSchema, parse_subscription
from fastpubsub.aggregates.client import Follower
from fastpubsub.aggregates.service import ReformulatedRecord

FNS = ("min", "max", "count", "sum", "avg", "distinct")


def run(seed: int, n_updates: int):
    rng = random.Random(seed)
    svc = AggregateService([TableSchema("t", "k")])
    for i in range(20):
        svc.apply("t", f"k{i}", {"k": f"k{i}", "x": rng.randint(0, 30), "y": rng.randint(0, 9), "c": rng.choice("abc")},
                  f"t:0:{i}")
    followers = {}
    for j in range(30):
        fn = FNS[j % len(FNS)]
        lo = rng.randint(0, 25)
        text = f"{fn}({'*' if fn == 'count' else 'c' if fn == 'distinct' else 'y'}) over t where x between {lo} and {lo + rng.randint(0, 10)}"
        spec = parse_subscription(text)
        init = svc.subscribe(j, spec, "s")
        # what the table service puts in an initial notification
        followers[j] = Follower(j, spec, {"value": init.value, "position": {"t:0": 20}, **svc.client_state(j)})
    for i in range(20, 20 + n_updates):
        key = f"k{rng.randint(0, 25)}"
        row = None if rng.random() < 0.15 else {"k": key, "x": rng.randint(0, 30), "y": rng.randint(0, 9),
                                                  "c": rng.choice("abc")}
        out = svc.apply("t", key, row, f"t:0:{i}")
        records = [ReformulatedRecord.from_bytes(r.to_bytes()) for r in out.records]  # as read from the topic
        want = {n.notification_id: n.value for n in out.notifications}
        got = {}
        for sid, f in followers.items():
            change = f.apply(records)
            if change is not None:
                got[change[1]] = change[0]
        assert got.keys() == want.keys(), (i, sorted(got), sorted(want))
        for nid, v in want.items():
            assert got[nid] == pytest.approx(v) if isinstance(v, float) else got[nid] == v, nid


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_followers_reproduce_the_s_un_notifications(seed):
    run(seed, 150)


def test_a_follower_skips_updates_before_its_initial_answer():
    svc = AggregateService([TableSchema("t", "k")])
    spec = parse_subscription("min(y) over t where x between 0 and 10")
    init = svc.subscribe(1, spec, "s")
    f = Follower(1, spec, {"value": init.value, "position": {"t:0": 5}})
    early = svc.apply("t", "a", {"k": "a", "x": 1, "y": 3}, "t:0:4")
    assert f.apply(early.records) is None and f.value is None
    late = svc.apply("t", "b", {"k": "b", "x": 1, "y": 2}, "t:0:5")
    assert f.apply(late.records) == (2.0, "1/t:0:5/0")


def test_joins_have_no_follower():
    with pytest.raises(ValueError, match="S-UN"):
        Follower(1, parse_subscription("join a x, b y on x.k = y.k"), {"value": []})


@given(st.lists(st.one_of(st.floats(), st.integers(-10**6, 10**6).map(float)), min_size=1, max_size=6),
       st.text(max_size=8), st.integers(0, 10))
def test_a_record_is_the_json_of_its_fields_and_reads_back(payload, update, index):
    r = ReformulatedRecord('["t","min","y","x",[]]', f"t:0:{update}", index, tuple(payload))
    m = [None if v != v else {"inf": 1 if v > 0 else -1} if v in (math.inf, -math.inf) else v for v in payload]
    assert json.loads(r.to_bytes()) == json.loads(json.dumps({"group": r.group, "id": f"{r.update_id}/{index}", "m": m}))
    back = ReformulatedRecord.from_bytes(r.to_bytes())
    assert (back.group, back.update_id, back.index) == (r.group, r.update_id, r.index)
    assert all((a != a and b != b) or a == b for a, b in zip(back.payload, payload))


def test_a_changelog_record_is_the_row_change():
    from fastpubsub.aggregates.changelog import row_change, row_record
    from fastpubsub.state import to_records
    for row in ({"k": "a", "x": 1.5}, None):
        assert row_record("t", "a", row, 3, 17) == to_records(row_change("t", "a", row, 3, 17))[0]


@given(st.one_of(st.none(), st.floats(), st.integers(-10**20, 10**20)),
       st.sampled_from(["IBM", "a b", 'q"uote', "é", "t:0:1"]), st.sampled_from(["7/t:0:1/0", "7/x y/0"]))
def test_a_notification_is_the_json_of_its_fields(value, key, nid):
    from fastpubsub.aggregates import Notification
    n = Notification(nid, 7, value, "t:0:1", "stock", key)
    plain = None if isinstance(value, float) and (value != value or value in (math.inf, -math.inf)) else value
    assert json.loads(n.to_bytes()) == {"notification_id": nid, "subscription": 7, "value": plain, "update_id": "t:0:1",
                                        "table": "stock", "key": key}
