"""The subscription state follows the latest value per key of the subscriptions topic."""

import pytest

from fastpubsub.wire.codecs import DecodeError, Subscription, encode_subscription
from fastpubsub.services.events.subscriptions import SubscriptionState, parse_subscription_id


def value(subscriber="alice", preds=(("a", "=", 1),), valid_until=None, fmt="avro"):
    return encode_subscription(Subscription(subscriber, list(preds), valid_until), fmt)


def test_add_replace_remove():
    s = SubscriptionState()
    s.apply(b"7", value())
    assert s.matcher.match({"a": 1}).tolist() == [7] and s.subscribers[7] == "alice"
    s.apply(b"7", value("bob", [("a", "=", 2)], fmt="json"))
    assert s.matcher.match({"a": 1}).tolist() == [] and s.matcher.match({"a": 2}).tolist() == [7]
    assert s.subscribers[7] == "bob"
    s.apply(b"7", None)
    assert len(s) == 0 and 7 not in s.subscribers
    s.apply(b"7", b"")  # removing an unknown id is not an error
    assert s.stats() == {"subscriptions": 0, "added": 1, "replaced": 1, "removed": 1, "expired": 0}


def test_an_invalid_update_removes_the_old_subscription():
    s = SubscriptionState()
    s.apply(b"1", value())
    with pytest.raises(DecodeError, match="unknown operator"):
        s.apply(b"1", b'{"subscriber": "a", "predicates": [["a", "~", 1]]}')
    assert 1 not in s.matcher


def test_expiry_in_event_time():
    s = SubscriptionState()
    s.apply(b"1", value(valid_until=1_000))
    s.apply(b"2", value(valid_until=500))
    s.apply(b"3", value(valid_until=2_000))
    s.apply(b"3", value(valid_until=None))  # replaced without expiry
    assert s.valid_at(1, 999) and not s.valid_at(1, 1_000) and s.valid_at(3, 10**15)
    assert s.expire(499) == 0 and s.expire(1_000) == 2 and s.expire(10_000) == 0
    assert sorted(s.subscribers) == [3] and s.expired == 2 and 1 not in s.matcher


@pytest.mark.parametrize("key, ok", [(b"42", 42), (b"-3", -3), (b"9223372036854775807", 2**63 - 1)])
def test_keys_are_decimal_ids(key, ok):
    assert parse_subscription_id(key) == ok


@pytest.mark.parametrize("key", [None, b"", b"abc", b" 1", b"1.0", b"9223372036854775808", b"\xff"])
def test_bad_keys_are_rejected(key):
    with pytest.raises(DecodeError, match="key"):
        parse_subscription_id(key)


def test_changes_applied_a_few_at_a_time_keep_little_beside_the_live_subscriptions():
    """A live processor applies a few records per poll: the columnar log of what was added holds O(log n) chunks,
    not one batch object per apply (each kilobytes beside its rows), so memory follows the subscriptions."""
    import random
    import tracemalloc

    rng = random.Random(3)
    s = SubscriptionState()
    s.apply_many([(str(i).encode(), value(f"u{i % 5}", [("a", "=", i % 50), ("b", "<=", i % 7)], fmt="json"))
                  for i in range(2000)])

    def churn(n):
        for _ in range(n):  # an apply of one or two records: tombstones, re-adds and replacements of existing ids
            s.apply_many([(str(rng.randrange(2000)).encode(),
                           None if rng.random() < 0.5 else value("v", [("a", "=", rng.randrange(50))], fmt="json"))
                          for _ in range(rng.randint(1, 2))])

    churn(200)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        churn(1500)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(s._log) <= 2 * 12 + 1  # log2 of the rows logged, twice, and the base
    assert grown < 1500 * 1000, f"{grown / 1500:.0f} bytes per apply"
    live = s.live_batch()  # the log still gives the latest value of every live subscription, nothing else
    assert sorted(live.ids.tolist()) == sorted(s.subscribers)
