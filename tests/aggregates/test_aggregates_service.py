"""S-UN notifications and S-CN clients, for every aggregate kind, against the brute-force oracle."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tests.support.oracles.aggregates import AggregateOracle

from fastpubsub.aggregates import AggregateSpec, JoinSpec
from fastpubsub.aggregates.client import RangeCountClient, RangeDistinctClient, RangeExtremumClient
from fastpubsub.aggregates.service import AggregateService, ReformulatedRecord, TableSchema

RANGES = [(0, 5), (1, 3), (2, 2), (-1, 0.5), (3, 9), (1.5, 4), (4, 4)]
FNS = ["min", "max", "count", "sum", "avg", "distinct"]
WHERES = [(), (("sector", "=", "tech"),)]

row = st.one_of(
    st.none(),
    st.fixed_dictionaries({"x": st.integers(0, 5), "y": st.integers(0, 4), "sector": st.sampled_from(["tech", "oil"])}),
    st.fixed_dictionaries({"x": st.integers(0, 5)}),  # lacks the value attribute
)
updates = st.lists(st.tuples(st.integers(0, 7), row), min_size=1, max_size=30)


def specs():
    out = {}
    for fn in FNS:
        for where in WHERES:
            for lo, hi in RANGES:
                out[f"{fn}{lo}-{hi}{'t' if where else ''}"] = AggregateSpec(
                    "stock", fn, None if fn == "count" else ("sector" if fn == "distinct" and where == () else "y"),
                    "x", lo, hi, where)
    return out


@settings(max_examples=30, deadline=None)
@given(updates, updates)
def test_s_un_and_s_cn_equal_the_oracle(before, ups):
    svc, oracle = AggregateService([TableSchema("stock", "k")]), AggregateOracle()
    for i, (k, r) in enumerate(before):
        svc.apply("stock", k, r, f"b{i}")
        oracle.apply("stock", k, r)
    clients = {}
    for sid, spec in specs().items():
        init = svc.subscribe(sid, spec, "s")
        assert init.value == oracle.subscribe(sid, spec), sid
        assert init.notification_id == f"{sid}/init/s"
        if spec.fn in ("min", "max"):
            clients[sid] = RangeExtremumClient(spec.low, spec.high, init.value)
        elif spec.fn == "distinct":
            clients[sid] = RangeDistinctClient(spec.low, spec.high, init.value)
        else:
            rows = [r for r in oracle.tables["stock"].values() if spec.low <= r["x"] <= spec.high
                    and (spec.fn == "count" or "y" in r) and (not spec.where or r.get("sector") == "tech")]
            clients[sid] = RangeCountClient(spec.fn, spec.low, spec.high, len(rows), float(sum(r.get("y", 0) for r in rows)))
    for i, (k, r) in enumerate(ups):
        out = svc.apply("stock", k, r, f"u{i}")
        expected = oracle.apply("stock", k, r)
        got = {n.subscription: n.value for n in out.notifications}
        assert got == expected
        ids = [n.notification_id for n in out.notifications]
        assert len(set(ids)) == len(ids) and all(n.startswith(f"{n.split('/')[0]}/u{i}/") for n in ids)
        # S-CN: each client sees only the public records of its own group
        for sid, c in clients.items():
            spec = svc._subs[sid][2]
            # what a client reads from the topic: the records' bytes
            recs = [ReformulatedRecord.from_bytes(rec.to_bytes()).payload for rec in out.records
                    if rec.group == svc._groups[spec.group].name]
            if spec.fn in ("min", "max"):
                ch = c.apply(np.array(recs).reshape(-1, 5))
            elif spec.fn == "distinct":
                ch = c.apply(recs)
            else:
                ch = None
                for rec in recs:
                    ch = c.apply(np.array(rec)) or ch
            assert (c.value == oracle.answers[sid]), (sid, c.value, oracle.answers[sid])
            assert (ch is not None) == (sid in expected)
        if r is not None and "y" not in r:
            assert out.rejected  # reported, so that a Kafka stage can dead-letter it


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["orders", "shipments"]), st.integers(0, 4),
                          st.one_of(st.none(), st.fixed_dictionaries({
                              "order_id": st.integers(0, 2), "amount": st.integers(50, 150),
                              "carrier": st.sampled_from(["ups", "dhl"])}))), min_size=1, max_size=30))
def test_select_join_equals_the_oracle(ups):
    svc = AggregateService([TableSchema("orders", "id"), TableSchema("shipments", "id")])
    oracle = AggregateOracle()
    subs = {
        "j1": JoinSpec(("orders", "o"), ("shipments", "s"), ("order_id", "order_id"),
                       (("o.amount", ">", 100), ("s.carrier", "=", "ups"))),
        "j2": JoinSpec(("orders", "o"), ("shipments", "s"), ("order_id", "order_id")),
    }
    half = len(ups) // 2
    for i, (t, k, r) in enumerate(ups[:half]):
        svc.apply(t, k, r, f"a{i}")
        oracle.apply(t, k, r)
    for sid, spec in subs.items():
        assert svc.subscribe(sid, spec).value == oracle.subscribe(sid, spec)
    for i, (t, k, r) in enumerate(ups[half:]):
        out = svc.apply(t, k, r, f"u{i}")
        assert {n.subscription: n.value for n in out.notifications} == oracle.apply(t, k, r)


def test_replay_gives_identical_notification_ids():
    ups = [(k % 5, {"x": (k * 7) % 6, "y": (k * 3) % 5}) for k in range(60)] + [(2, None), (3, None)]

    def run():
        svc = AggregateService([TableSchema("stock", "k")])
        for sid, spec in specs().items():
            svc.subscribe(sid, spec)
        return [n.notification_id for i, (k, r) in enumerate(ups) for n in svc.apply("stock", k, r, f"u{i}").notifications]

    a, b = run(), run()
    assert a == b and len(a) > 50


def test_bad_subscriptions_are_refused_with_the_reason():
    svc = AggregateService([TableSchema("stock", "symbol", {"symbol": "string", "risk": "number", "per": "number",
                                                               "sector": "string"}),
                            TableSchema("orders", "id", {"id": "string", "order_id": "number"}),
                            TableSchema("shipments", "id", {"id": "string", "order_id": "string"})])
    with pytest.raises(ValueError, match="unknown table 'bonds'"):
        svc.subscribe("a", AggregateSpec("bonds", "min", "per", "risk", 0, 1))
    with pytest.raises(ValueError, match="unknown attribute 'pe'"):
        svc.subscribe("a", AggregateSpec("stock", "min", "pe", "risk", 0, 1))
    with pytest.raises(ValueError, match="not a number"):
        svc.subscribe("a", AggregateSpec("stock", "min", "sector", "risk", 0, 1))
    with pytest.raises(ValueError, match="different kinds"):
        svc.subscribe("a", JoinSpec(("orders", "o"), ("shipments", "s"), ("order_id", "order_id")))
    with pytest.raises(ValueError, match="above range high"):
        AggregateSpec("stock", "min", "per", "risk", 60, 20)
    with pytest.raises(ValueError, match="NaN"):
        AggregateSpec("stock", "min", "per", "risk", float("nan"), 20)
    with pytest.raises(ValueError, match="unknown aggregate function"):
        AggregateSpec("stock", "median", "per", "risk", 0, 20)


def test_subscribe_many_behaves_like_one_by_one():
    ups = [(k % 9, {"x": (k * 5) % 7, "y": (k * 11) % 13, "sector": "tech"}) for k in range(80)] + [(4, None)]
    items = list(specs().items())
    one, many = AggregateService([TableSchema("stock", "k")]), AggregateService([TableSchema("stock", "k")])
    for i, (k, r) in enumerate(ups[:30]):
        one.apply("stock", k, r, f"a{i}")
        many.apply("stock", k, r, f"a{i}")
    a = [one.subscribe(sid, spec, "s") for sid, spec in items]
    b = many.subscribe_many(items, "s")
    assert [(n.notification_id, n.value) for n in a] == [(n.notification_id, n.value) for n in b]
    for i, (k, r) in enumerate(ups[30:]):
        x = sorted((n.notification_id, repr(n.value)) for n in one.apply("stock", k, r, f"u{i}").notifications)
        y = sorted((n.notification_id, repr(n.value)) for n in many.apply("stock", k, r, f"u{i}").notifications)
        assert x == y
    with pytest.raises(ValueError, match="already exists"):
        many.subscribe_many([items[0]])


def test_nan_row_is_refused_and_leaves_no_trace_and_unsubscribe_stops_notifications():
    svc = AggregateService([TableSchema("stock", "k")])
    svc.subscribe("m", AggregateSpec("stock", "min", "y", "x", 0, 10))
    svc.subscribe("c", AggregateSpec("stock", "count", None, "x", 0, 10))
    svc.apply("stock", "a", {"x": 1, "y": 5}, "u0")
    with pytest.raises(ValueError, match="NaN in attribute 'y'"):
        svc.apply("stock", "a", {"x": 1, "y": float("nan")}, "u1")
    assert svc.tables["stock"].get("a") == {"x": 1, "y": 5} and svc.answer("m") == 5 and svc.answer("c") == 1
    with pytest.raises(ValueError, match="unknown table 'bonds'"):
        svc.apply("bonds", "a", {"x": 1}, "u2")
    svc.unsubscribe("m")
    out = svc.apply("stock", "b", {"x": 2, "y": 1}, "u3")
    assert [n.subscription for n in out.notifications] == ["c"]
    svc.subscribe("m", AggregateSpec("stock", "min", "y", "x", 0, 10))  # the id can be reused
    assert svc.answer("m") == 1


POOL = list(specs().items())[::5] + [
    ("join-all", JoinSpec(("stock", "a"), ("sectors", "b"), ("sector", "name"))),
    ("join-hot", JoinSpec(("stock", "a"), ("sectors", "b"), ("sector", "name"), (("b.hot", "=", True),))),
]
op = st.one_of(
    st.tuples(st.just("sub"), st.integers(0, len(POOL) - 1), st.integers(0, 2)),
    st.tuples(st.just("unsub"), st.integers(0, len(POOL) - 1), st.integers(0, 2)),
    st.tuples(st.just("stock"), st.integers(0, 5), row),
    st.tuples(st.just("sectors"), st.sampled_from(["tech", "oil"]),
              st.one_of(st.none(), st.fixed_dictionaries({"name": st.sampled_from(["tech", "oil"]),
                                                          "hot": st.booleans()}))),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(op, min_size=1, max_size=60))
def test_subscription_churn_between_updates_equals_the_oracle(ops):
    # subscriptions come and go between updates; slots are reused; ids are (pool entry, copy)
    svc = AggregateService([TableSchema("stock", "k"), TableSchema("sectors", "name")])
    oracle = AggregateOracle()
    for i, o in enumerate(ops):
        if o[0] == "sub":
            sid = f"{POOL[o[1]][0]}#{o[2]}"
            if sid not in svc._subs:
                assert svc.subscribe(sid, POOL[o[1]][1], f"s{i}").value == oracle.subscribe(sid, POOL[o[1]][1])
        elif o[0] == "unsub":
            sid = f"{POOL[o[1]][0]}#{o[2]}"
            if sid in svc._subs:
                svc.unsubscribe(sid)
                oracle.unsubscribe(sid)
        else:
            table, key, r = o
            if table == "sectors" and r is not None:
                r = dict(r, name=key)
            got = {n.subscription: n.value for n in svc.apply(table, key, r, f"u{i}").notifications}
            assert got == oracle.apply(table, key, r)
    for sid in svc._subs:
        assert svc.answer(sid) == oracle.answers[sid]


def test_groups_and_row_filters_of_departed_subscriptions_are_reclaimed_under_churn():
    """Subscriptions created and deleted with fresh ids and ever new filters: what the service holds follows the
    live ones (a group copies the rows it aggregates), and a group made anew answers from the table as it is."""
    svc = AggregateService([TableSchema("stock", "k"), TableSchema("sectors", "name")])
    for k in range(50):
        svc.apply("stock", k, {"x": float(k), "y": float(k % 7), "sector": f"s{k % 5}"}, f"u{k}")
    for sid in range(600):
        svc.subscribe(sid, AggregateSpec("stock", ("min", "sum", "distinct")[sid % 3], "y", "x", 0, 40,
                                         (("sector", "=", f"s{sid % 200}"),)))
        svc.subscribe(f"j{sid}", JoinSpec(("stock", "a"), ("sectors", "b"), ("sector", "name"), (("a.x", ">", sid % 50),)))
        if sid >= 3:
            svc.unsubscribe(sid - 3)
            svc.unsubscribe(f"j{sid - 3}")
    held = svc.stats()  # what /metrics shows of the service (pubsub_engine_groups, ..._row_filters, ...)
    assert held["subscriptions"] == 6
    assert held["groups"] <= 4  # the live aggregate subscriptions' groups and the join's
    assert held["row_filters"] <= 3 and len(svc._filters["stock"][0]) <= 3
    assert 0 < held["memory_bytes"] == sum(held["memory"].values())
    for sid in (597, 598, 599):
        svc.unsubscribe(sid)
        svc.unsubscribe(f"j{sid}")
    assert svc.stats()["groups"] == svc.stats()["row_filters"] == svc.stats()["join_groups"] == 0
    answer = svc.subscribe("again", AggregateSpec("stock", "count", None, "x", 0, 40, (("sector", "=", "s1"),)))
    assert answer.value == 8  # k = 1, 6, ..., 36


FILTERED = [(f"{fn}-{sector}", AggregateSpec("stock", fn, None if fn == "count" else "y", "x", 0, 5,
                                             (("sector", "=", sector),)))
            for fn in ("min", "count", "sum") for sector in ("tech", "oil")] + [("count-all", specs()["count0-5"])]
run_op = st.one_of(
    st.tuples(st.just("sub"), st.integers(0, len(FILTERED) - 1)),
    st.tuples(st.just("unsub"), st.integers(0, len(FILTERED) - 1)),
    st.tuples(st.just("rows"), st.lists(st.tuples(st.integers(0, 5), row), min_size=1, max_size=8)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(run_op, min_size=1, max_size=40))
def test_an_update_visits_the_groups_its_old_or_new_row_passes_and_a_run_is_matched_at_once(ops):
    """A row moving between filters (tech to oil, to no sector, deleted) leaves the groups of the filter it passed
    and joins the other's; filters made and dropped between runs (new ids) are seen by the rows held before them;
    a run's rows matched against the filters in one batch (``filters_passed``) give the oracle's notifications."""
    svc, oracle = AggregateService([TableSchema("stock", "k")]), AggregateOracle()
    for i, o in enumerate(ops):
        if o[0] in ("sub", "unsub"):
            sid, spec = FILTERED[o[1]]
            if o[0] == "sub" and sid not in svc._subs:
                assert svc.subscribe(sid, spec, f"s{i}").value == oracle.subscribe(sid, spec)
            elif o[0] == "unsub" and sid in svc._subs:
                svc.unsubscribe(sid)
                oracle.unsubscribe(sid)
            continue
        rows = o[1]
        for (key, r), passing in zip(rows, svc.filters_passed("stock", [r for _, r in rows])):
            got = {n.subscription: n.value for n in svc.apply("stock", key, r, f"u{i}", passing=passing).notifications}
            assert got == oracle.apply("stock", key, r), (key, r)
    for sid in svc._subs:
        assert svc.answer(sid) == oracle.answers[sid]
