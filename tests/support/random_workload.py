"""Random subscriptions and events over every operator and value kind, with the oracle's answer."""

from __future__ import annotations

import random

from tests.support.kafka_helpers import send

from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.semantics import OPERATORS
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription

# Attribute -> kind of the values events usually carry; predicates and events
# sometimes use another kind, so "not comparable" is exercised too.
ATTRIBUTES = {"price": "int", "rating": "float", "movie": "str", "theater": "str", "kids": "bool", "seats": "int"}


def _value(rng: random.Random, kind: str):
    if rng.random() < 0.1:
        kind = rng.choice(["int", "float", "str", "bool"])
    if kind == "int":
        return rng.randint(0, 9)
    if kind == "float":
        return rng.choice([0.5, 1.5, 2.0, 2.5, 4.0])
    if kind == "str":
        return rng.choice(["a", "b", "c", "odeon", "rex"])
    return rng.random() < 0.5


def random_subscriptions(n: int, seed: int) -> list[tuple[int, Subscription]]:
    rng = random.Random(seed)
    out = []
    for sid in range(n):
        attrs = rng.sample(sorted(ATTRIBUTES), rng.randint(1, 3))
        preds = [(a, rng.choice(OPERATORS), _value(rng, ATTRIBUTES[a])) for a in attrs]
        out.append((sid, Subscription(f"user{sid % 17}", preds)))
    return out


def random_events(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    events = []
    for i in range(n):
        attrs = rng.sample(sorted(ATTRIBUTES), rng.randint(1, len(ATTRIBUTES)))
        events.append({"n": i, **{a: _value(rng, ATTRIBUTES[a]) for a in attrs}})  # "n": no subscription uses it
    return events


def expected_matches(subs, events) -> dict[int, set[int]]:
    oracle = OracleMatcher()
    for sid, sub in subs:
        oracle.add(sid, sub.predicates)
    return {e["n"]: set(oracle.match(e).tolist()) for e in events}


def by_event(notes) -> dict[int, set[int]]:
    got: dict[int, set[int]] = {}
    for n in notes:
        got.setdefault(n["event"]["n"], set()).add(n["subscription_id"])
    return got


def send_subscriptions(bootstrap, subs, fmt_of=lambda sid: "avro" if sid % 2 else "json", topic=topics.SUBSCRIPTIONS):
    send(bootstrap, topic, [(str(sid), codecs.encode_subscription(s, fmt_of(sid))) for sid, s in subs])


def send_events(bootstrap, events, topic=topics.EVENTS):
    """Avro and JSON alternately; every third event without a key."""
    send(bootstrap, topic, [
        (None if e["n"] % 3 == 0 else f"k{e['n']}", codecs.encode_event(e, "avro" if e["n"] % 2 else "json"))
        for e in events
    ])
