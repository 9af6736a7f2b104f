"""The JSON scanner (wire/json_kernel.py): the batch decoder gives every JSON record what codecs.decode_event gives.

The oracle is the per-record path (``codecs.decode_event_pairs``, under
``codecs.decode_event``): for every record, the same pairs in the same order,
each of the same kind and the same value to the bit (``-0`` is ``0.0``,
``-0.0`` is not), or the same reason.  Texts are generated from a grammar, so
that they also hold what a serializer never writes: duplicate keys, odd
spacing, numbers of every form, escapes, bytes that are not UTF-8, deep
nesting, and texts broken by a byte.
"""

from __future__ import annotations

import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from fastpubsub.engine import KIND_BOOL, KIND_STRING
from fastpubsub.wire.codecs import MAX_ATTRIBUTE_BYTES, MAX_JSON_DEPTH, DecodeError, decode_event, \
    decode_event_pairs, encode_event
from fastpubsub.wire.event_decoder import decode_events


def _value_key(value) -> tuple:
    """A value as the columns hold it, comparable to the bit: (kind, text or the double's bytes)."""
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, str):
        return "string", value
    return "number", struct.pack("<d", float(value))


def _decoded(values: list[bytes]) -> tuple[dict[int, list], dict[int, str], int]:
    """Per input index, its pairs as the batch decoder gives them; its errors; how many took the per-record path."""
    decoded = decode_events(values)
    assert len(set(decoded.attribute_names)) == len(decoded.attribute_names)
    return _filtered(decoded, None)


def _oracle(values: list[bytes]) -> tuple[dict[int, list], dict[int, str]]:
    pairs, errors = {}, {}
    for i, v in enumerate(values):
        try:
            pairs[i] = [(name, _value_key(x)) for name, x in decode_event_pairs(v)]
        except DecodeError as exc:
            errors[i] = str(exc)
    return pairs, errors


def _agree(values: list[bytes]) -> int:
    """Assert that the batch decoder and the oracle agree on every record; the count of per-record decodes."""
    got, errors, per_record = _decoded(values)
    want, want_errors = _oracle(values)
    assert errors == want_errors
    assert got == want
    def columns(event: dict) -> dict:  # (EventBatch.to_dicts gives a whole number as an int: -0.0 as 0)
        return {k: [x if isinstance(x, (bool, str)) else float(x) if x == x else "NaN"
                    for x in (v if type(v) is list else [v])] for k, v in event.items()}

    decoded = decode_events(values)  # and codecs.decode_event's dicts (which name an Avro event's keys unescaped)
    batch = decoded.event_batch().to_dicts()
    json_rows = [j for j, r in enumerate(decoded.rows.tolist()) if values[r][:1] == b"{"]
    assert [columns(batch[j]) for j in json_rows] == \
        [columns(decode_event(v)) for i, v in enumerate(values) if i not in errors and v[:1] == b"{"]
    return per_record


# --- a grammar of JSON texts ----------------------------------------------------------

_SPACE = st.sampled_from(["", "", "", " ", "\n", "\t ", "\r\n"])
_KEYS = st.one_of(
    st.sampled_from(["id", "a", "b", "sku", "qty", "price", "a.b", "$meta", "x$", "é", "名前", "😀", "k:v"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=4),
)
_BAD_KEYS = st.sampled_from(["", "\\", "\x00a", "tab\t"])  # refused, or escaped in the text


def _rarely(draw, usual, rare, one_in: int):
    return draw(rare if draw(st.integers(1, one_in)) == 1 else usual)


@st.composite
def _number_text(draw) -> str:
    """A JSON number by the grammar, often one that Python and C read alike only if rounded correctly."""
    form = draw(st.integers(0, 20))
    if form <= 1:
        return str(draw(st.integers(-(2**70), 2**70)))
    if form <= 3:
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    if form <= 5:
        return draw(st.sampled_from(["0", "-0", "-0.0", "0.1", "1e308", "1.7976931348623157e308",
                                     "2.2250738585072014e-308", "5e-324", "1e-400", "9007199254740993",
                                     "9007199254740993.0", "123456789012345678901234567890", "-1E+2", "1e22",
                                     "1e23", "0.30000000000000004", "1.5e0001", "0e5", "-0e-5"]))
    if form == 6:  # not a number to JSON, or not to a double
        return draw(st.sampled_from(["1e309", "1" * 400, "01", "1.", ".5", "+1", "-", "1e", "NaN", "Infinity",
                                     "-Infinity", "0x10", "1_000"]))
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.sampled_from(["0", *"123456789"])) + (draw(st.text("0123456789", max_size=22))
                                                           if form != 7 else "")
    frac = "." + draw(st.text("0123456789", min_size=1, max_size=25)) if draw(st.booleans()) else ""
    exp = draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "+", "-"])) + \
        str(draw(st.integers(0, 330) if form == 8 else st.integers(0, 30))) if draw(st.booleans()) else ""
    return sign + (whole if whole[0] != "0" else "0") + frac + exp


_STRINGS = st.one_of(
    st.sampled_from(["", "red", "groundhog day", "10:30", "héllo wörld ✓ 😀", "\u2028", "\x7f"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cc",)), max_size=6),
)
_ESCAPED = st.sampled_from(["a\"b", "tab\there", "back\\slash", "\x00", "\ud800"])  # escaped in the text


def _string(draw, text: str) -> str:
    """``text`` as a JSON string: raw UTF-8 where JSON allows it, or escaped (ASCII only)."""
    ascii_only = draw(st.integers(0, 15)) == 0 or any(0xD800 <= ord(c) < 0xE000 for c in text)
    if not ascii_only and not any(c in text for c in '"\\') and all(ord(c) >= 0x20 for c in text):
        return '"' + text + '"'
    return json.dumps(text, ensure_ascii=ascii_only)


@st.composite
def _value(draw, depth: int) -> str:
    choice = draw(st.integers(0, 9 if depth < 6 else 5))
    if choice <= 1:
        return draw(_number_text())
    if choice <= 3:
        return _string(draw, _rarely(draw, _STRINGS, _ESCAPED, 15))
    if choice == 4:
        return draw(st.sampled_from(["true", "false", "null"]))
    if choice == 5:
        return draw(_number_text()) if draw(st.booleans()) else str(draw(st.integers(-10**6, 10**6)))
    if choice <= 7:
        return draw(_object(depth + 1))
    items = [draw(_value(depth + 1)) for _ in range(draw(st.integers(0, 4)))]
    return "[" + ",".join(draw(_SPACE) + x + draw(_SPACE) for x in items) + "]"


@st.composite
def _object(draw, depth: int = 0) -> str:
    keys = [_rarely(draw, _KEYS, _BAD_KEYS, 30) for _ in range(draw(st.integers(0, 5)))]
    if keys and draw(st.integers(0, 19)) == 0:
        keys.append(draw(st.sampled_from(keys)))  # a duplicate key
    fields = [_string(draw, k) + draw(_SPACE) + ":" + draw(_SPACE) + draw(_value(depth)) for k in keys]
    return "{" + draw(_SPACE) + ("," + draw(_SPACE)).join(fields) + draw(_SPACE) + "}"


@st.composite
def _record(draw) -> bytes:
    text = draw(_object()).encode("utf-8")
    damage = draw(st.integers(0, 19))
    if damage == 0 and text:  # one byte changed, dropped or added
        at = draw(st.integers(0, len(text) - 1))
        byte = bytes([draw(st.sampled_from([0x22, 0x2C, 0x3A, 0x5B, 0x5D, 0x7B, 0x7D, 0x5C, 0x00, 0x80, 0xC3, 0xFF]))])
        how = draw(st.integers(0, 2))
        text = text[:at] + (byte if how != 1 else b"") + text[at + (how != 2):]
    elif damage == 1:
        text = text + draw(st.sampled_from([b" ", b"\n", b"x", b"}", b",", b" {}"]))
    elif damage == 2:
        text = b" " + text
    return text


@settings(max_examples=250, deadline=None)
@given(st.lists(_record(), min_size=1, max_size=6))
def test_every_json_record_decodes_as_codecs_decode_event_says(values):
    _agree(values)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(_record(), st.dictionaries(st.sampled_from(["a", "b.c", "$d", "e"]),
                                                     st.one_of(st.integers(-5, 5), st.text(max_size=3)),
                                                     max_size=3).map(encode_event)), min_size=1, max_size=8))
def test_json_and_avro_records_in_one_batch_decode_as_each_alone(values):
    _agree(values)


# --- which records take the kernel --------------------------------------------------------

SIMPLE = [
    b'{"movie": "groundhog day", "price": 8, "theater": "odeon", "vip": true, "promo": false}',
    b'{"customer": {"id": 7, "address": {"country": "FR"}}, "tags": ["vip", "new"], '
    b'"items": [{"sku": "A", "qty": 2}, {"sku": "B", "price": 0.1}], "note": null, "e": [], "o": {}}',
    b'{\n  "x": -0.0, "y": -0, "big": 123456789012345678901234567890, "max": 1.7976931348623157e308,\n'
    b'  "tiny": 5e-324, "r": 0.30000000000000004, "n": 9007199254740993, "k": "10:30"\n}\n',
    b'{"labels": {"app.io": "web", "$meta": 1}, "s": "h\xc3\xa9llo \xf0\x9f\x98\x80", "\xc3\xa9": [[1, [2]], {"z": 3}]}',
    b'{}',
]


def test_simple_records_take_the_kernel_and_decode_as_the_per_record_path():
    assert _agree(SIMPLE * 3) == 0


def test_records_the_kernel_cannot_prove_take_the_per_record_path():
    escaped = b'{"a": "line\\nbreak"}'
    duplicate = b'{"c": {"a": 1, "a": 2}}'
    infinite = b'{"a": 1e400}'
    long_path = b'{"' + b"k" * MAX_ATTRIBUTE_BYTES + b'": 1}'
    deep = b'{"a": ' + b"[" * (MAX_JSON_DEPTH - 1) + b"1" + b"]" * (MAX_JSON_DEPTH - 1) + b"}"
    too_deep = b'{"a": ' + b"[" * MAX_JSON_DEPTH + b"1" + b"]" * MAX_JSON_DEPTH + b"}"
    assert _agree([long_path, deep]) == 0  # the longest path and the deepest nesting allowed
    assert _agree([escaped, duplicate, infinite, long_path, too_deep, SIMPLE[0]]) == 4
    assert _agree([b'{"' + b"k" * (MAX_ATTRIBUTE_BYTES + 1) + b'": 1}']) == 1


def test_attribute_names_are_those_of_the_per_record_path_in_the_same_order():
    values = [b'{"b": null, "c": {"d": 1}}', b'{"b": 2, "a": [true]}', b'{"c": {"d": 3}, "a": []}']
    assert decode_events(values).attribute_names == ("c.d", "b", "a")
    mixed = [encode_event({"a": 1, "z": "x"}), *values]
    assert decode_events(mixed).attribute_names == ("a", "z", "c.d", "b")


def test_many_and_long_distinct_names_grow_the_tables():
    values = [json.dumps({f"{'n' * 200}{i}": i, "group": {f"k{i % 3000}": str(i)}}).encode() for i in range(6000)]
    assert _agree(values) == 0


# --- only the wanted paths ----------------------------------------------------------------


def _filtered(decoded, wanted) -> tuple[dict[int, list], dict[int, str], int]:
    """Per input index, the pairs whose attribute is in ``wanted`` (in order); the errors; the per-record count."""
    raw = decoded.buffer.tobytes()
    out = {}
    for j, r in enumerate(decoded.rows.tolist()):
        pairs = []
        for p in range(decoded.offsets[j], decoded.offsets[j + 1]):
            name = decoded.attribute_names[decoded.attributes[p]]
            if wanted is not None and name not in wanted:
                continue
            kind, number = int(decoded.kinds[p]), float(decoded.numbers[p])
            if kind == KIND_STRING:
                start, length = int(decoded.string_start[p]), int(decoded.string_length[p])
                value = raw[start:start + length].decode("utf-8")
            else:
                value = bool(number) if kind == KIND_BOOL else number
            pairs.append((name, _value_key(value)))
        out[r] = pairs
    return out, decoded.errors, decoded.per_record


@settings(max_examples=250, deadline=None)
@given(st.lists(_record(), min_size=1, max_size=6), st.data())
def test_the_kernel_skips_the_values_of_paths_not_wanted_and_proves_the_same_records(values, data):
    """With ``wanted`` the kernel writes no pair of another path (nor reads its number, when finite by its form),
    yet proves and refuses the records it proves and refuses without it: the same pairs, errors and per-record
    count as every path decoded and the others dropped."""
    everything = decode_events(values)
    names = sorted(everything.attribute_names)
    wanted = frozenset(data.draw(st.lists(st.sampled_from(names), unique=True)) if names else []) | \
        frozenset(data.draw(st.lists(st.sampled_from(["a", "b", "a.b", "\\$meta", "nope"]), unique=True)))
    assert _filtered(decode_events(values, None, wanted), None) == _filtered(everything, wanted)


def test_numbers_of_paths_not_wanted_are_refused_as_before():
    """A number at a path no one wants still makes its record the per-record path's when not finite, or too long."""
    values = [b'{"a": 1, "b": 1e400}', b'{"a": 2, "b": [1.5, -0.25e1, 7]}', b'{"a": 3, "b": ' + b"1" * 400 + b"}",
              b'{"a": 4, "b": 0.' + b"0" * 400 + b"1}", b'{"a": 5, "b": 01}', b'{"a": 6, "b": {"c": "x", "d": null}}']
    for wanted in (frozenset(["a"]), frozenset()):
        got = decode_events(values, None, wanted)
        want = decode_events(values)
        assert _filtered(got, None) == _filtered(want, wanted)
        assert got.per_record == want.per_record == 4


# --- subtrees that hold no wanted path -----------------------------------------------------


def _agree_wanted(values: list[bytes], wanted: frozenset[str]) -> int:
    """With ``wanted`` the batch decoder proves and refuses what it does without, with the same pairs of the wanted
    paths (the oracle: every path decoded, the others dropped); the per-record count."""
    got = _filtered(decode_events(values, None, wanted), None)
    want = _filtered(decode_events(values), wanted)
    assert got == want
    return got[2]


_FEW_KEYS = st.sampled_from(["x", "y", "z", "a.b", "$m", "é", "k"])


@st.composite
def _wide(draw, depth: int = 0) -> str:
    """An object of up to 24 keys from a small set (duplicates likely), values nested a few levels."""
    keys = draw(st.lists(_FEW_KEYS | st.text("pqrstuvw", min_size=1, max_size=3), max_size=24,
                         unique=draw(st.integers(0, 3)) > 0))

    def value() -> str:
        choice = draw(st.integers(0, 5 if depth < 3 else 2))
        if choice <= 1:
            return draw(_number_text())
        if choice == 2:
            return _string(draw, draw(_STRINGS))
        if choice <= 4:
            return draw(_wide(depth + 1))
        return "[" + ",".join(draw(_wide(depth + 1)) for _ in range(draw(st.integers(0, 3)))) + "]"

    return "{" + ",".join(_string(draw, k) + draw(_SPACE) + ":" + value() for k in keys) + "}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_wide(), st.integers(-5, 5)), min_size=1, max_size=5),
       st.sampled_from([frozenset(["w"]), frozenset(["g.x"]), frozenset(["g.pq.x", "w"]), frozenset(["nope.x"])]))
def test_a_subtree_that_holds_no_wanted_path_is_checked_as_the_walk_checks_it(subtrees, wanted):
    """The kernel skips an object or array whose path leads to no wanted path without interning its keys; it still
    refuses what the walk refuses (duplicate keys, in objects wider than it compares pairwise too, bad values,
    depth), and proves the same records with the same wanted pairs."""
    values = [f'{{"w": {w}, "g": {g}}}'.encode() for g, w in subtrees]
    _agree_wanted(values, wanted)
    _agree(values)


def test_what_a_skipped_subtree_refuses_and_proves():
    wanted = frozenset(["w"])
    wide = ",".join(f'"k{i}": {i}' for i in range(20))
    g = [b'{"x": 1, "y": [{"z": 0}, {"z": 1}]}',  # proved
         b'{"x": 1, "x": 2}',  # a duplicate key
         b'[{"x": 1, "y": 2}, {"x": 3, "x": 4}]',  # one in an array's element
         b'{' + wide.encode() + b'}',  # wider than the pairwise check: walked
         b'{' + wide.encode() + b', "k3": 0}',  # a duplicate past it
         b'{"x": {"y": 1}, "x": {"y": 1}}',
         b'{"x": 1e400}', b'{"x": 01}', b'{"x": "a\\"b"}', b'{"": 1}', b'{"x": tru}', b'{"x": 1,}', b'[1 2]',
         b'[' * (MAX_JSON_DEPTH - 1) + b']' * (MAX_JSON_DEPTH - 1),  # the deepest allowed under the top object
         b'[' * MAX_JSON_DEPTH + b']' * MAX_JSON_DEPTH]
    values = [b'{"w": 1, "g": ' + x + b'}' for x in g]
    assert _agree_wanted(values, wanted) == 12
    assert _agree(values) == 12


def test_the_path_length_of_a_key_in_a_skipped_subtree_counts_its_escapes():
    """``g.`` and the key, each ``.`` and a leading ``$`` escaped: the longest path allowed is proved, one more refused."""
    room = MAX_ATTRIBUTE_BYTES - len("g.")
    keys = ["k" * room, "$" + "k" * (room - 2), "a." + "k" * (room - 3), "k" * (room + 1), "$" + "k" * (room - 1),
            "a." + "k" * (room - 2)]
    values = [json.dumps({"w": 1, "g": {"h": 0, key: 1}}).encode() for key in keys]
    assert _agree_wanted(values, frozenset(["w"])) == 3
    assert _agree(values) == 3
