"""The text form compiles to the JSON form of docs/aggregates.md; bad text names the offending piece."""

import pytest

from fastpubsub.aggregates import AggregateSpec, JoinSpec, parse_subscription, spec_from_json


@pytest.mark.parametrize("text, expected", [
    ("min(per) over stock where risk between 20 and 60",
     AggregateSpec("stock", "min", "per", "risk", 20, 60)),
    ('max(per) over stock where risk between 20 and 60 and sector = "tech"',
     AggregateSpec("stock", "max", "per", "risk", 20, 60, (("sector", "=", "tech"),))),
    ("count(*) over stock where risk between -1.5 and 2e3 and active = true and per >= 3",
     AggregateSpec("stock", "count", None, "risk", -1.5, 2000, (("active", "=", True), ("per", ">=", 3)))),
    ("sum(per) over stock where risk between 0 and 10", AggregateSpec("stock", "sum", "per", "risk", 0, 10)),
    ("AVG(per) over stock where risk between 0 and 10", AggregateSpec("stock", "avg", "per", "risk", 0, 10)),
    ("distinct(sector) over stock where risk between 0 and 10",
     AggregateSpec("stock", "distinct", "sector", "risk", 0, 10)),
    ('join orders o, shipments s on o.order_id = s.order_id where o.amount > 100 and s.carrier = "ups"',
     JoinSpec(("orders", "o"), ("shipments", "s"), ("order_id", "order_id"),
              (("o.amount", ">", 100), ("s.carrier", "=", "ups")))),
    ("join orders o, shipments s on s.order_id = o.id", JoinSpec(("orders", "o"), ("shipments", "s"), ("id", "order_id"))),
])
def test_text_compiles_and_round_trips_through_json(text, expected):
    spec = parse_subscription(text)
    assert spec == expected
    assert spec_from_json(spec.to_json()) == spec


@pytest.mark.parametrize("text, reason", [
    ("min(per) over stock where risk between 60 and 20", "above range high"),
    ("median(per) over stock where risk between 1 and 2", "unknown aggregate function 'median'"),
    ("min(per) over stock where risk between 1", "expected 'and'"),
    ("min(per) over stock where risk between 1 and 2 and sector ~ 3", "unexpected character"),
    ("min(per) over stock where risk between 1 and 2 or x = 1", "unexpected 'or'"),
    ("min(*) over stock where risk between 1 and 2", "min needs an attribute"),
    ('min(per) over stock where risk between "a" and 2', "range low must be a number"),
    ("join orders o, shipments s on o.id < s.id", "equi-joins"),
    ("join orders o, shipments s on o.id = s.id where amount > 1", "must be prefixed"),
    ("join orders o, orders p on o.id = p.id", "self-joins"),
])
def test_bad_text_is_refused_with_the_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_subscription(text)
