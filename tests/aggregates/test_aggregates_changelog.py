"""Aggregate state as changelog records: a restored service continues exactly like one that never stopped."""

import pytest

from fastpubsub.aggregates import AggregateSpec
from fastpubsub.aggregates.changelog import decode_key, encode_key, live_rows, row_change
from fastpubsub.state import StateChanges, from_records, to_records
from fastpubsub.aggregates.service import AggregateService, TableSchema

SPECS = {"m": AggregateSpec("stock", "min", "per", "risk", 20, 60),
         "c": AggregateSpec("stock", "count", None, "risk", 0, 50),
         "d": AggregateSpec("stock", "distinct", "sector", "risk", 10, 90)}


def ups(n, seed):
    return [(f"k{(i * 7 + seed) % 13}", None if i % 11 == 5 else
             {"risk": (i * 37 + seed) % 100, "per": (i * 53) % 40, "sector": "tech" if i % 3 else "oil"})
            for i in range(n)]


def test_records_round_trip_and_tombstones():
    r = row_change("stock", "IBM", {"per": 1, "risk": 2}, 3, 17)
    assert decode_key(r.keys[0]) == ("stock", "IBM")
    back = from_records(to_records(r))  # through the changelog record format, source position in headers
    assert list(back.sources()) == list(r.sources()) == [(r.keys[0], r.values[0], 3, 17)]
    t = row_change("stock", "IBM", None, 3, 18)
    assert t.values == [None] and t.keys == [encode_key("stock", "IBM")]
    assert live_rows(StateChanges.concat([r, t])) == {}
    assert live_rows(r) == {"stock": {"IBM": {"per": 1, "risk": 2}}}
    with pytest.raises(ValueError, match="not a string or number"):
        encode_key("stock", ("a", object()))


def test_restore_then_continue_equals_uninterrupted():
    first, second = ups(200, 1), ups(150, 4)

    def fresh():
        svc = AggregateService([TableSchema("stock", "symbol")])
        return svc

    whole = fresh()
    log = []
    for i, (k, r) in enumerate(first):
        log.append(whole.apply("stock", k, r, f"u{i}", source=(0, i)).state)
    # a batch that was written to the changelog but whose transaction aborted: offsets >= 200
    log.append(row_change("stock", "k1", {"risk": 30, "per": -99, "sector": "x"}, 0, 200))
    restored = fresh()
    assert restored.restore(StateChanges.concat(log), committed={0: 200}) == len(whole.tables["stock"])
    for svc in (whole, restored):
        for sid, spec in SPECS.items():
            svc.subscribe(sid, spec, "s")
    for sid in SPECS:
        assert restored.answer(sid) == whole.answer(sid)
    for i, (k, r) in enumerate(second):
        a = whole.apply("stock", k, r, f"v{i}", source=(0, 200 + i))
        b = restored.apply("stock", k, r, f"v{i}", source=(0, 200 + i))
        assert [(n.notification_id, n.value) for n in a.notifications] == \
               [(n.notification_id, n.value) for n in b.notifications]
        assert [x.to_bytes() for x in a.records] == [x.to_bytes() for x in b.records]


def test_restore_after_subscribe_is_refused():
    svc = AggregateService([TableSchema("stock", "symbol")])
    svc.subscribe("m", SPECS["m"])
    with pytest.raises(ValueError, match="before registering"):
        svc.restore(StateChanges())
