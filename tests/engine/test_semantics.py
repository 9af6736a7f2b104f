"""The predicate semantics every matcher follows, stated as examples."""

import math

import numpy as np
import pytest

from fastpubsub.engine.columnar import EventBatch, SubscriptionBatch
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.semantics import compare, validate_predicates


@pytest.mark.parametrize(
    "op, x, c, expected",
    [
        ("=", 8, 8.0, True),
        ("<=", 8, 10, True),
        (">", 8, 10, False),
        ("!=", "odeon", "rex", True),
        ("<", "abc", "abd", True),
        ("=", True, True, True),
        ("<", False, True, True),
        ("=", 1, True, False),  # numbers and booleans are not comparable
        ("!=", 1, True, False),  # not comparable fails != too
        ("!=", "8", 8, False),
        ("!=", math.nan, 3, False),  # NaN in an event is comparable with nothing
        ("=", 2**53 + 1, 2**53, True),  # numbers compare as doubles
    ],
)
def test_compare(op, x, c, expected):
    assert compare(op, x, c) is expected


@pytest.mark.parametrize(
    "preds, message",
    [
        ([], "at least one predicate"),
        ([("a", "~", 1)], "unknown operator"),
        ([("", "=", 1)], "non-empty string"),
        ([("a", "=", None)], "unsupported value type"),
        ([("a", "=", [1])], "unsupported value type"),
        ([("a", "=", math.nan)], "NaN"),
        ([("a", "=")], "expected (attribute, operator, value)"),
    ],
)
def test_invalid_predicates_are_rejected_with_a_reason(preds, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_predicates(preds)


def test_oracle_missing_attribute_fails_every_predicate():
    m = OracleMatcher()
    m.add(1, [("price", "!=", 3)])
    m.add(2, [("movie", "=", "groundhog day"), ("price", "<=", 10), ("price", ">", 5)])
    assert m.match({"movie": "groundhog day"}).tolist() == []
    assert m.match({"movie": "groundhog day", "price": 8}).tolist() == [1, 2]
    assert m.match({"movie": "groundhog day", "price": 3}).tolist() == []
    with pytest.raises(ValueError, match="duplicate"):
        m.add(1, [("a", "=", 1)])
    m.remove(1)
    with pytest.raises(KeyError):
        m.remove(1)
    assert len(m) == 1 and 2 in m and 1 not in m


def test_columnar_round_trip():
    events = [{"a": 1, "b": "x", "c": True}, {}, {"d": 2.5, "a": -7}]
    batch = EventBatch.from_dicts(events)
    batch.validate()
    assert batch.to_dicts() == events
    subs = [(1, [("a", "=", 1), ("b", "<", "y")]), (2**63 - 1, [("c", "!=", False)])]
    sb = SubscriptionBatch.from_lists(subs)
    sb.validate()
    assert sb.to_lists() == subs
    assert sb.ids.dtype == np.int64
