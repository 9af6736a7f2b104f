"""The pattern language (docs/patterns.md section 2): text and JSON compile to the same checked pattern."""

import pytest
from hypothesis import given, settings, strategies as st

from fastpubsub.patterns import MAX_STEPS, PatternError, Ref, from_json, parse, to_json

S2 = 'seq a: name = "IBM" and price > 100 next b: name = "MSFT" where b.price < 25 within 1h'
S3 = "seq a: price > 0 next b: name = a.name where b.price > 1.05 * a.price within 1d"
S4 = ("seq a: volume > 10000 fold r: name = a.name while r.price >= r.last.price "
      "agg n = count(), lo = min(price) until dur >= 30m within 2h")
S5 = ('seq a: name = "IBM" fold r: name = "IBM" agg avg = avg(price) until dur >= 52w '
      'next b: name = "IBM" where b.price > r.avg within 53w')


def test_s2_compiles_to_static_parts():
    p = parse(S2)
    assert p.start == (("name", "=", "IBM"), ("price", ">", 100))
    assert p.within_ms == 3_600_000
    (b,) = p.steps
    assert b.op == "next" and [a.static_triple for a in b.correlate] == [("name", "=", "MSFT")]
    assert [a.static_triple for a in b.where] == [("price", "<", 25)]


def test_s3_parameterised():
    (b,) = parse(S3).steps
    (corr,) = b.correlate
    assert corr.left.ref == Ref("event", -1, "name") and corr.right.ref == Ref("bound", 0, "name")
    (w,) = b.where
    assert w.right.ref == Ref("bound", 0, "price") and w.right.mul == 1.05 and w.right.arith


def test_s4_fold_with_last_and_aggregates():
    (r,) = parse(S4).steps
    assert r.op == "fold" and [a.name for a in r.aggregates] == ["n", "lo"]
    (w,) = r.where
    assert w.left.ref == Ref("event", -1, "price") and w.right.ref == Ref("bound", 1, "price")
    (u,) = r.until
    assert u.left.ref == Ref("dur") and u.right.const == 1_800_000


def test_s5_aggregate_read_in_a_later_step():
    r, b = parse(S5).steps
    assert b.where[0].right.ref == Ref("agg", 1, "avg")


@pytest.mark.parametrize("text", [S2, S3, S4, S5, "seq a: name = 'x' within 1ms",
                                  "seq a: 100 < price next b: a.price * 2 + 1 <= price and x != 'y' within 90s"])
def test_json_round_trip(text):
    p = parse(text)
    assert from_json(to_json(p)) == p
    import json
    assert from_json(json.dumps(to_json(p))) == p


def test_constant_on_the_left_is_flipped():
    assert parse("seq a: 100 < price within 1s").start == (("price", ">", 100),)


@pytest.mark.parametrize("text, column, words", [
    ('seq a: name = "IBM" next b: name = "MSFT"', 42, "within"),
    ("seq a: price > 0 next b: name = c.name within 1h", 33, "unknown binding 'c'"),
    ("seq a: price > 0 next b: price > a.price * 'x' within 1h", 42, "type error"),
    ('seq a: price > 0 next b: price > "x" + 1 within 1h', 38, "type error"),
    ('seq a: price > 0 fold r: name = a.name until dur >= "x" within 1h', 46, "type error"),
    ("seq a: price > 0 next b: price > a.price / 0 within 1h", 42, "division by zero"),
    ("seq a: price > 0 next b: price > a.price + b.x within 1h", 42, "linear"),
    ("seq a: price > a.price within 1h", 8, "constant"),
    ("seq a: price > 0 next b: name = a.name where r.last.price > 1 within 1h", 46, "unknown binding 'r'"),
    ("seq a: price > 0 next b: price > a.last.price within 1h", 34, ".last"),
    ("seq a: price > 0 next b: dur > 5 within 1h", 26, "dur"),
    ("seq a: price > 0 within 0ms", 25, "positive"),
    ("seq a: price > 0 within 1h next", 28, "after the within"),
    ("seq a: price > 0 next a: x = 1 within 1h", 18, "already used"),
    ("seq a: price >> 0 within 1h", 15, "expected a value"),
])
def test_errors_name_the_column(text, column, words):
    with pytest.raises(PatternError) as err:
        parse(text)
    assert f"column {column}" in str(err.value)
    assert words in str(err.value)


def test_too_many_steps():
    steps = " ".join(f"next s{i}: name = a.name" for i in range(MAX_STEPS + 1))
    with pytest.raises(PatternError, match=f"column .*too many steps .*at most {MAX_STEPS}"):
        parse(f"seq a: price > 0 {steps} within 1h")
    parse(f"seq a: price > 0 {' '.join(f'next s{i}: name = a.name' for i in range(MAX_STEPS))} within 1h")


@pytest.mark.parametrize("doc, words", [
    ({"start": {"bind": "a", "predicates": [["x", "=", 1]]}, "steps": []}, "within"),
    ({"start": {"bind": "a", "predicates": [["x", "=", 1]]}, "within_ms": 5,
      "steps": [{"op": "next", "bind": "b", "correlate": [["x", "=", {"ref": "c.x"}]]}]}, "steps[0].correlate[0]: unknown binding"),
    ({"start": {"bind": "a", "predicates": [["x", "=", 1]]}, "within_ms": 5,
      "steps": [{"op": "next", "bind": "b", "correlate": [["x", "~", 1]]}]}, "steps[0].correlate[0]: unknown operator"),
    ({"start": {"bind": "a", "predicates": [["x", "=", 1]]}, "within_ms": 5, "extra": 1}, "unknown field"),
    ({"start": {"bind": "a", "predicates": [["x", "=", 1]]}, "within_ms": 5,
      "steps": [{"op": "fold", "bind": "r", "correlate": [["x", "=", 1]], "aggregates": [["n", "median", "x"]]}]},
     "unknown aggregate function"),
])
def test_json_errors_name_the_path(doc, words):
    with pytest.raises(PatternError, match=words.replace("[", r"\[").replace("]", r"\]")):
        from_json(doc)


_names = st.sampled_from(["price", "volume", "name"])
_consts = st.one_of(st.integers(-5, 200), st.sampled_from(['"IBM"', '"MSFT"']))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_names, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _consts), min_size=1, max_size=3),
       st.floats(0.5, 2.0, allow_nan=False).map(lambda x: round(x, 3)), st.integers(1, 10_000))
def test_random_texts_round_trip(start, factor, within):
    text = "seq a: " + " and ".join(f"{n} {o} {c}" for n, o, c in start)
    text += f" next b: name = a.name where price >= {factor} * a.price - 1 within {within}s"
    p = parse(text)
    assert from_json(to_json(p)) == p
