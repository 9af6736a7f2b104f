"""The reference interpreter (tests/support/oracles/patterns.py) on hand-written streams: the paper's S1-S5 and the edge cases of docs/patterns.md."""

import pytest
from hypothesis import given, strategies as st
from tests.support.oracles.patterns import OraclePatterns, compare

from fastpubsub.engine import OPERATORS
from fastpubsub.engine.semantics import compare as engine_compare

from fastpubsub.patterns import parse
from fastpubsub.patterns.engine import Limits

MIN = 60_000
S1 = 'seq a: name = "IBM" and price > 100 within 1ms'
S2 = 'seq a: name = "IBM" and price > 100 next b: name = "MSFT" where b.price < 25 within 1h'
S3 = "seq a: price > 0 next b: name = a.name where b.price > 1.05 * a.price within 1d"
S4 = ("seq a: volume > 10000 fold r: name = a.name while r.price >= r.last.price "
      "agg n = count(), lo = min(price) until dur >= 30m within 2h")
S5 = ('seq a: name = "IBM" and volume > 100 fold r: name = "IBM" agg avg = avg(price) until dur >= 2s '
      'next b: name = "IBM" where b.price > r.avg within 1h')


def tick(i, ts, name, price, volume=0):
    return (i, ts, {"name": name, "price": price, "volume": volume})


def run(text, events, limits=None, since=0):
    o = OraclePatterns(limits)
    o.subscribe(7, parse(text), since)
    return o, o.process(events)


def ids(witnesses):
    return [w.notification_id for w in witnesses]


def test_s1_stateless():
    _, w = run(S1, [tick(0, 1, "IBM", 101), tick(1, 2, "IBM", 99), tick(2, 3, "MSFT", 200), tick(3, 4, "IBM", 150)])
    assert ids(w) == ["7/0", "7/3"]


def test_s2_next_msft_skips_other_symbols():
    _, w = run(S2, [tick(0, 1, "IBM", 101), tick(1, 2, "AAPL", 5), tick(2, 3, "MSFT", 24)])
    assert ids(w) == ["7/0|2"]
    assert w[0].start_ts == 1 and w[0].end_ts == 3


def test_s2_failing_post_selection_kills():
    o, w = run(S2, [tick(0, 1, "IBM", 101), tick(1, 2, "MSFT", 30), tick(2, 3, "MSFT", 20)])
    assert w == [] and o.counters.killed == 1 and o.live() == 0


def test_s2_every_start_starts_an_instance():
    _, w = run(S2, [tick(0, 1, "IBM", 101), tick(1, 2, "IBM", 105), tick(2, 3, "IBM", 90), tick(3, 4, "MSFT", 20)])
    assert ids(w) == ["7/0|3", "7/1|3"]


def test_within_is_inclusive_and_expiry_needs_no_event_on_the_key():
    _, w = run(S2, [tick(0, 0, "IBM", 101), tick(1, 3_600_000, "MSFT", 20)])
    assert ids(w) == ["7/0|1"]
    o, w = run(S2, [tick(0, 0, "IBM", 101), tick(1, 3_600_001, "MSFT", 20)])
    assert w == [] and o.counters.expired == 1
    o, w = run(S2, [tick(0, 0, "IBM", 101), tick(1, 3_600_001, "AAPL", 1)])  # another key moves event time
    assert o.live() == 0 and o.counters.expired == 1


def test_simultaneous_events_never_chain_nor_kill():
    _, w = run(S2, [tick(0, 5, "IBM", 101), tick(1, 5, "MSFT", 20)])
    assert w == []
    _, w = run(S2, [tick(0, 5, "IBM", 101), tick(1, 5, "MSFT", 30), tick(2, 6, "MSFT", 20)])
    assert ids(w) == ["7/0|2"]  # MSFT 30 at the same timestamp is invisible, so it does not kill


def test_s3_same_stock_next_sale_above_105_percent():
    events = [tick(0, 1, "IBM", 100), tick(1, 2, "MSFT", 50), tick(2, 3, "IBM", 106), tick(3, 4, "MSFT", 52),
              tick(4, 5, "IBM", 112)]
    o, w = run(S3, events)
    # IBM 100 -> 106 (> 105); MSFT 50 -> 52 fails (killed); IBM 106 -> 112 (> 111.3); MSFT 52, IBM 112 wait
    assert ids(w) == ["7/0|2", "7/2|4"]
    assert o.counters.killed == 1 and o.live() == 2


def test_s4_rising_run_emits_at_30_minutes_and_after():
    events = [tick(0, 0, "X", 10, 20_000), tick(1, 10 * MIN, "X", 11), tick(2, 15 * MIN, "Y", 1),
              tick(3, 20 * MIN, "X", 12), tick(4, 30 * MIN, "X", 12), tick(5, 40 * MIN, "X", 13),
              tick(6, 45 * MIN, "X", 12.5), tick(7, 50 * MIN, "X", 14)]
    o, w = run(S4, events)
    assert ids(w) == ["7/0|4#3", "7/0|5#4"]
    assert [dict(x.aggregates) for x in w] == [{"r.n": 4.0, "r.lo": 10.0}, {"r.n": 5.0, "r.lo": 10.0}]
    assert o.counters.killed == 1 and o.live() == 0  # 12.5 < 13 ends the run


def test_s4_last_starts_at_the_entry_event():
    _, w = run(S4.replace("30m", "0ms"), [tick(0, 0, "X", 10, 20_000), tick(1, 1, "X", 9)])
    assert w == []  # 9 < 10: the first iteration compares with a's price


def test_s5_next_ibm_above_running_average():
    events = [tick(0, 0, "IBM", 10, 200), tick(1, 1000, "IBM", 20), tick(2, 2000, "IBM", 30),
              tick(3, 3000, "IBM", 25), tick(4, 4000, "IBM", 15)]
    o, w = run(S5, events)
    # outputs at 2000 (avg 20) and 3000 (avg 21.25); 25 > 20 completes the first; 15 < 21.25 kills the second
    assert ids(w) == ["7/0|2#2|3"]
    assert dict(w[0].aggregates) == {"r.avg": 20.0}
    assert o.counters.killed == 1


def test_aggregates_skip_missing_values():
    text = "seq a: k = 1 fold r: k = 1 agg s = sum(x), m = max(x), c = count() within 1h"
    _, w = run(text, [(0, 1, {"k": 1}), (1, 2, {"k": 1, "x": "s"}), (2, 3, {"k": 1, "x": 4})])
    assert [dict(x.aggregates) for x in w] == [
        {"r.s": None, "r.m": None, "r.c": 2.0}, {"r.s": 4.0, "r.m": 4.0, "r.c": 3.0},  # a's fold
        {"r.s": 4.0, "r.m": 4.0, "r.c": 2.0}]  # the fold started at event 1


def test_missing_aggregate_value_fails_comparisons():
    text = "seq a: k = 1 fold r: k = 1 agg m = min(x) until m < 100 within 1h"
    _, w = run(text, [(0, 1, {"k": 1}), (1, 2, {"k": 2}), (2, 3, {"k": 1}), (3, 4, {"k": 1, "x": 5})])
    assert ids(w) == ["7/0|3#2", "7/2|3#1"]


def test_per_subscription_cap_refuses_all_new_instances_of_an_event():
    o, w = run(S3, [tick(i, i, f"S{i}", 100) for i in range(5)], limits=Limits(max_per_subscription=3))
    assert o.live() == 3 and o.counters.refused == 2 and o.counters.started == 3


def test_global_bound():
    o = OraclePatterns(Limits(max_instances=2))
    o.subscribe(1, parse(S3))
    o.subscribe(2, parse(S3))
    o.process([tick(0, 1, "A", 1), tick(1, 1, "B", 1)])
    assert o.live() == 2 and o.counters.refused == 2


def test_patterns_start_only_at_events_not_older_than_the_subscription():
    _, w = run(S2, [tick(0, 99, "IBM", 101), tick(1, 100, "IBM", 102), tick(2, 101, "MSFT", 1)], since=100)
    assert ids(w) == ["7/1|2"]


def test_replacing_or_deleting_a_subscription_drops_its_instances():
    o, _ = run(S3, [tick(0, 1, "IBM", 100)])
    assert o.live() == 1
    o.subscribe(7, parse(S3))
    assert o.live() == 0 and o.counters.dropped == 1
    o.process([tick(1, 2, "IBM", 100)])
    o.unsubscribe(7)
    assert o.live() == 0 and o.process([tick(2, 3, "IBM", 200)]) == []
    with pytest.raises(KeyError):
        o.unsubscribe(7)


def test_string_ordering_between_bindings_is_false_but_static_ordering_works():
    text = 'seq a: name >= "M" next b: x = 1 where b.name > a.name within 1h'
    _, w = run(text, [(0, 1, {"name": "N"}), (1, 2, {"name": "Z", "x": 1})])
    assert w == []
    _, w = run('seq a: name >= "M" next b: x = 1 where b.name != a.name within 1h',
               [(0, 1, {"name": "N"}), (1, 2, {"name": "Z", "x": 1})])
    assert ids(w) == ["7/0|1"]


_values = st.one_of(st.integers(-3, 3), st.floats(allow_infinity=True), st.booleans(),
                    st.sampled_from(["", "a", "b", "IBM"]), st.integers(2**53, 2**53 + 3))


@given(st.sampled_from(OPERATORS), _values, _values)
def test_the_oracles_comparison_is_the_engines(op, x, c):
    assert compare(op, x, c) == engine_compare(op, x, c)
