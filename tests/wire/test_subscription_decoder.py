"""The batch subscription decoder agrees with the per-record path (key parser + codecs.decode_subscription)."""

import math
import struct

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from fastpubsub.engine import OPERATORS, KIND_BOOL, KIND_STRING
from fastpubsub.workloads.fabret import W0, generate_subscriptions
from fastpubsub.services.events.subscriptions import SubscriptionState
from fastpubsub.wire.codecs import framing
from fastpubsub.wire.codecs import (
    DecodeError, Subscription, decode_subscription, encode_subscription, is_aggregate_subscription, is_pattern_subscription,
)
from fastpubsub.wire.subscription_decoder import decode_subscriptions, parse_subscription_id
from tests.support.avro import avro_string, zigzag


def _avro(subscriber: bytes, predicates: list[bytes], tail: bytes = b"\x00\x00", schema_id: int = 1,
          negative_block: bool = False) -> bytes:
    """Hand-made subscription value: predicates already encoded; ``tail`` the two validity unions."""
    body = bytearray(b"\x00" + struct.pack(">I", schema_id) + avro_string(subscriber))
    if predicates:
        entries = b"".join(predicates)
        body += zigzag(-len(predicates)) + zigzag(len(entries)) if negative_block else zigzag(len(predicates))
        body += entries
    return bytes(body + b"\x00" + tail)


def _pred(attr: bytes, op: bytes, branch: int, value: bytes) -> bytes:
    return avro_string(attr) + avro_string(op) + zigzag(branch) + value


ODD = [
    (b"1", encode_subscription(Subscription("alice", [("a", "=", 1), ("b", "<", 2.5), ("c", "!=", "x"),
                                                      ("d", ">=", True), ("e", ">", -(2**63)), ("f", "<=", 2**63 - 1)],
                                            valid_until=10, valid_from=5))),
    (b"-2", encode_subscription(Subscription("héllo ✓ 😀", [("ñ", "=", "wörld 😀")], valid_until=3))),
    (b"3", encode_subscription(Subscription("bob", [("a", "=", 1)], valid_from=-7))),
    (b"4", encode_subscription(Subscription("bob", [("a", "=", 1)]), "json")),
    (b"5", b'{"subscriber": "x", "predicates": [["a", "~", 1]]}'),
    (b"6", None), (b"7", b""),
    (None, encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"+8", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"0009", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"1_0", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b" 11", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"-0", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"9223372036854775808", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"-9223372036854775808", encode_subscription(Subscription("a", [("a", "=", 1)]))),
    (b"\xff", b"x"),
    (b"12", encode_subscription(Subscription("a", [("a", "=", 1)]))[:-1]),  # truncated
    (b"13", encode_subscription(Subscription("a", [("a", "=", 1)])) + b"\x00"),  # trailing byte
    (b"14", b"\x00\x00\x00\x00\x02" + encode_subscription(Subscription("a", [("a", "=", 1)]))[5:]),  # event schema id
    (b"15", _avro(b"a", [])),  # no predicate
    (b"16", _avro(b"", [_pred(b"a", b"=", 0, zigzag(1))])),  # empty subscriber
    (b"17", _avro(b"a", [_pred(b"", b"=", 0, zigzag(1))])),  # empty attribute
    (b"18", _avro(b"a", [_pred(b"a", b"==", 0, zigzag(1))])),  # unknown operator
    (b"19", _avro(b"a", [_pred(b"a", b"=", 1, struct.pack("<d", math.nan))])),  # NaN
    (b"20", _avro(b"a", [_pred(b"a", b"=", 3, b"\x02")])),  # non-canonical boolean
    (b"21", _avro(b"a", [_pred(b"a", b"=", 7, b"\x00")])),  # union index out of range
    (b"22", _avro(b"a", [_pred(b"a", b"=", 2, avro_string(b"\xed\xa0\x80"))])),  # surrogate in a string
    (b"23", _avro(b"a" * 1025, [_pred(b"a", b"=", 0, zigzag(1))])),  # subscriber too long
    (b"24", _avro(b"a", [_pred(b"b" * 1025, b"=", 0, zigzag(1))])),  # attribute too long
    (b"25", _avro(b"a", [_pred(b"a", b"=", 0, zigzag(1))], tail=b"\x02\x0a\x02\x0a")),  # valid_from == valid_until
    (b"26", _avro(b"a", [_pred(b"a", b"=", 0, zigzag(1))], tail=b"\x04\x00")),  # bad null/long branch
    (b"27", _avro(b"a", [_pred(b"a", b"=", 0, zigzag(1))], tail=b"\x02\x0a")),  # written without valid_from
    (b"28", _avro(b"a", [_pred(b"a", b"=", 0, zigzag(1)), _pred(b"b", b"!=", 1, struct.pack("<d", 2.5))],
                  negative_block=True)),
    (b"29", _avro(b"a", [_pred(b"a", b"=", 0, b"\xff" * 9 + b"\x7f")])),  # varint wider than 64 bits
    (b"30", b"\x05garbage"),
    (b"31", b"\x00\x00\x00"),
    (b"32", _avro(b"a", [_pred(b"\x00x", b"=", 0, zigzag(1))])),  # attribute name reserved (starts with NUL)
]


def _expected(key, value):
    """What the per-record path says: ("key", reason) | ("tombstone",) | ("error", reason) | ("ok", id, sub)."""
    try:
        sid = parse_subscription_id(key)
    except DecodeError as exc:
        return ("key", str(exc))
    if not value:
        return ("tombstone", sid)
    try:
        sub = decode_subscription(value)
    except DecodeError as exc:
        return ("error", sid, str(exc))
    return ("ok", sid, _normal(sub))


def _normal(sub: Subscription):
    """A subscription as the engine sees it: numbers as floats, kinds kept apart."""
    preds = tuple((a, op, v if isinstance(v, (bool, str)) else float(v)) for a, op, v in sub.predicates)
    return sub.subscriber, preds, sub.valid_until, sub.valid_from


def _got(decoded, i):
    if i in decoded.key_errors:
        return ("key", decoded.key_errors[i])
    sid = int(decoded.ids[i])
    if decoded.tombstone[i]:
        return ("tombstone", sid)
    if i in decoded.errors:
        return ("error", sid, decoded.errors[i])
    assert decoded.valid[i]
    (_, preds), = decoded.batch(np.array([i])).to_lists()
    preds = tuple((a, op, v if isinstance(v, (bool, str)) else float(v)) for a, op, v in preds)
    until = int(decoded.valid_until[i]) if decoded.has_until[i] else None
    since = int(decoded.valid_from[i]) if decoded.has_from[i] else None
    return ("ok", sid, (decoded.subscribers[decoded.owner[i]], preds, until, since))


def _check(records):
    decoded = decode_subscriptions([k for k, _ in records], [v for _, v in records])
    for i, (key, value) in enumerate(records):
        assert _got(decoded, i) == _expected(key, value), (i, key, value)


def test_odd_records_decode_as_one_by_one():
    _check(ODD)
    fast = decode_subscriptions([k for k, _ in ODD[:3]], [v for _, v in ODD[:3]])
    assert fast.slow == 0  # strings, booleans, doubles, extreme longs and validity bounds all on the fast path


def test_the_fast_path_takes_plain_avro_records():
    batch = generate_subscriptions(W0, 500, seed=3)
    records = [(str(sid).encode(), encode_subscription(Subscription(f"user{sid % 7}", preds)))
               for sid, preds in batch.to_lists()]
    decoded = decode_subscriptions([k for k, _ in records], [v for _, v in records])
    assert decoded.valid.all() and not decoded.errors and not decoded.key_errors and decoded.slow == 0
    assert decoded.batch(np.arange(len(records))).to_lists() == batch.to_lists()
    assert sorted(decoded.subscribers) == sorted({f"user{sid % 7}" for sid in batch.ids.tolist()})


names = st.text(min_size=0, max_size=6)
values = st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True), st.text(max_size=5), st.booleans())
subscriptions = st.builds(
    lambda who, preds, until, since: Subscription(who, preds, until, since),
    names, st.lists(st.tuples(names, st.sampled_from(OPERATORS + ("~",)), values), max_size=4),
    st.none() | st.integers(-(2**63), 2**63 - 1), st.none() | st.integers(-(2**63), 2**63 - 1))
keys = st.one_of(st.integers(-(2**64), 2**64).map(lambda i: str(i).encode()), st.none(), st.binary(max_size=4),
                 st.sampled_from([b"+1", b"01", b"-0", b"1_0", b" 2", b"3 "]))


@st.composite
def record_values(draw):
    sub = draw(subscriptions)
    fmt = draw(st.sampled_from(["avro", "avro", "json", "old"]))
    if fmt == "old":  # written with the schema before valid_from
        old = framing._PREVIOUS["subscription"][0]
        datum = {"subscriber": sub.subscriber, "valid_until": sub.valid_until,
                 "predicates": [{"attribute": a, "operator": o, "value": framing._avro_number(v)}
                                for a, o, v in sub.predicates]}
        value = framing._wire("subscription", framing._avro_write(old, datum))
    else:
        try:
            value = encode_subscription(sub, fmt)
        except (ValueError, UnicodeEncodeError):  # e.g. a lone surrogate: encoders refuse it
            value = b'{"subscriber": 1}'
    cut = draw(st.sampled_from([None, None, None, "truncate", "append", "flip"]))
    if cut == "truncate" and value:
        value = value[:draw(st.integers(0, len(value) - 1))]
    elif cut == "append":
        value += draw(st.binary(min_size=1, max_size=3))
    elif cut == "flip" and value:
        i = draw(st.integers(0, len(value) - 1))
        value = value[:i] + bytes([draw(st.integers(0, 255))]) + value[i + 1:]
    return draw(st.sampled_from([value, value, value, None, b""]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(keys, record_values()), max_size=12))
def test_every_record_decodes_as_one_by_one(records):
    _check(records)


# --- the state built from a batch is the state built record by record --------------------------------


def _reference(records):
    """The state's meaning, record by record: latest value per id; bad values remove; errors in record order.

    An aggregate or pattern subscription, valid or not, is another service's to refuse: it only removes a plain
    subscription of its id, and a bad key of such a record is not reported here.
    """
    live, errors = {}, []
    for i, (key, value) in enumerate(records):
        got = _expected(key, value)
        if is_aggregate_subscription(value) or is_pattern_subscription(value):
            if got[0] != "key":
                live.pop(got[1], None)
            continue
        if got[0] == "key":
            errors.append((i, got[1]))
            continue
        live.pop(got[1], None)
        if got[0] == "error":
            errors.append((i, got[2]))
        elif got[0] == "ok":
            live[got[1]] = got[2]
    return live, errors


def _engine_view(lists):
    return sorted((sid, tuple((a, op, v if isinstance(v, (bool, str)) else float(v)) for a, op, v in preds))
                  for sid, preds in lists)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(st.integers(0, 6).map(lambda i: str(i).encode()) | keys, record_values()),
                         max_size=8), max_size=3))
def test_applying_batches_gives_the_state_of_one_by_one(batches):
    state = SubscriptionState()
    everything = []
    for records in batches:
        applied = state.apply_records(records, [100 + i for i in range(len(records))])
        everything += records
        live, errors = _reference(records)
        assert [(i, str(e)) for i, e in applied.errors] == errors
        # the added subscriptions are the batch's live ones, each with the time of its latest record
        latest = {}
        for i, (key, _) in enumerate(records):
            if _expected(key, b"")[0] != "key":
                latest[parse_subscription_id(key)] = i
        assert _engine_view(applied.added.to_lists()) == sorted((sid, sub[1]) for sid, sub in live.items())
        assert applied.times.tolist() == [100 + latest[sid] for sid in applied.added.ids.tolist()]
    live, _ = _reference(everything)
    assert state.subscribers == {sid: sub[0] for sid, sub in live.items()}
    assert len(state.matcher) == len(live) and all(sid in state.matcher for sid in live)
    if live:
        assert _engine_view(state.live_batch().to_lists()) == sorted((sid, sub[1]) for sid, sub in live.items())
    for sid, (_, _, until, since) in live.items():
        assert state._deadlines.get(sid) == until and state._starts.get(sid) == since


def test_or_and_the_extended_operators_take_the_per_record_path_and_keep_their_rows():
    """Records the kernel does not read (schema v2, JSON ``any``) are lowered by the engine exactly as
    ``SubscriptionBatch.from_lists`` lowers what the per-record decoder gives; mixed with plain records."""
    from fastpubsub.engine import AnyOf, SubscriptionBatch
    from tests.support.oracles.engine import OracleMatcher

    subs = {
        1: Subscription("a", [("x", "=", 1), ("y", "<", 2.5)]),
        2: Subscription("b", AnyOf([[("x", "=", 1)], [("z", "in", [3, 4])]])),
        3: Subscription("c", [("t", "prefix", "ha"), ("x", "between", [0, 5])]),
        4: Subscription("d", [("s", "=", "w"), ("b", "=", True)]),
        5: Subscription("e", AnyOf([[("x", "not in", [1, 2])], [("t", "exists", None)]])),
    }
    keys = [str(i).encode() for i in subs]
    values = [encode_subscription(sub, "json" if i == 5 else "avro") for i, sub in subs.items()]
    decoded = decode_subscriptions(keys, values)
    rows = np.flatnonzero(decoded.valid)
    assert rows.tolist() == [0, 1, 2, 3, 4]
    expected = SubscriptionBatch.from_lists((i, decode_subscription(v).predicates) for i, v in zip(subs, values))
    got = decoded.batch(rows)
    assert got.to_lists() == expected.to_lists()
    assert decoded.batch(np.array([0, 3])).to_lists() == [(1, subs[1].predicates), (4, subs[4].predicates)]

    state = SubscriptionState("dynamic")
    applied = state.apply_records(list(zip(keys, values)), times=[10, 20, 30, 40, 50])
    assert not applied.errors and len(state.subscribers) == 5
    heads = np.flatnonzero(applied.added.disjunct_flags() == 0)
    assert applied.added.ids[heads].tolist() == [1, 2, 3, 4, 5]
    assert len(applied.times) == len(applied.added)  # a time per row, each its record's
    assert set(applied.times.tolist()) == {10, 20, 30, 40, 50}
    oracle = OracleMatcher()
    for i, sub in subs.items():
        oracle.add(i, sub.predicates)
    events = [{"x": 1}, {"z": 4, "x": 9}, {"t": "harry", "x": 3}, {"t": "potter"}, {"s": "w", "b": True, "x": 2},
              {"x": 1.0, "y": 0}, {}]
    for e in events:
        assert sorted(state.matcher.match(e)) == sorted(oracle.match(e)), e
