"""Event strings held as UTF-8 slices (engine/frontend/utf8.py): every kernel that reads their bytes against the
``str`` it stands for, and the matcher on such batches against the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fastpubsub.engine import ALGORITHMS, Matcher, Utf8Strings
from fastpubsub.engine.columnar import EventBatch
from fastpubsub.engine.frontend.encoding import SEARCH_FROM, StringDictionary
from fastpubsub.engine.frontend.lowering import derived_value
from fastpubsub.engine.frontend.utf8 import char_lengths, char_slices, fold, glob
from fastpubsub.engine.semantics import RESERVED_PREFIX, wildcard_parts, wildcard_regex
from tests.engine.test_ruler_operators import event, subscription
from tests.support.oracles.engine import OracleMatcher

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# text of every width, lone surrogates included (a constant may hold one; UTF-8 then as surrogatepass writes it)
text = st.text(st.one_of(st.characters(codec=None), st.sampled_from("aAzZß\u0130\u212a\ufb00\ud800\udfff\x00")),
               max_size=8)


def as_utf8(batch: EventBatch) -> EventBatch:
    """The same batch with its strings held as slices of one buffer."""
    return EventBatch(batch.attribute_names, batch.offsets, batch.attributes, batch.kinds, batch.numbers,
                      Utf8Strings.of(batch.strings))


@SETTINGS
@given(strings=st.lists(text, max_size=20))
def test_strings_read_back_as_given(strings):
    held = Utf8Strings.of(strings)
    assert len(held) == len(strings)
    assert [held[i] for i in range(len(strings))] == strings and list(held) == strings and held == tuple(strings)
    index = np.arange(len(strings))[::-1].copy()
    assert list(held.take(index)) == strings[::-1]


@SETTINGS
@given(strings=st.lists(text, max_size=20), n=st.integers(1, 6))
def test_slices_lengths_and_folds_are_pythons(strings, n):
    held = Utf8Strings.of(strings)
    assert char_lengths(held.data, held.start, held.length).tolist() == [len(s) for s in strings]
    for head in (True, False):
        for whole in (True, False):
            start, length = char_slices(held.data, held.start, held.length, n, head, whole)
            got = [None if w < 0 else held.data[a:a + w].tobytes().decode("utf-8", "surrogatepass")
                   for a, w in zip(start.tolist(), length.tolist())]
            kind = ("n" if whole else "") + ("prefix" if head else "suffix")
            assert got == [derived_value(kind, n, s) for s in strings]
    assert list(fold(held)) == [s.casefold() for s in strings]


small = st.text(st.sampled_from("ab*\\ß😀"), max_size=6)


@SETTINGS
@given(strings=st.lists(small, max_size=20), pattern=small)
@example(strings=["aba", "a", "ab", "ba", "abab", "😀a😀"], pattern="a*a")
@example(strings=["", "*", "a*b", "ab"], pattern="a\\*b")
def test_glob_is_the_wildcards_regex_and_contains(strings, pattern):
    held = Utf8Strings.of(strings)
    try:
        regex = wildcard_regex(pattern)
    except ValueError:  # a bad escape: no such pattern is filed
        regex = None
    if regex is not None:
        assert glob(held, wildcard_parts(pattern)).tolist() == [regex.fullmatch(s) is not None for s in strings]
    assert glob(held, ["", pattern, ""]).tolist() == [pattern in s for s in strings]


@SETTINGS
@given(constants=st.lists(text, max_size=40), events=st.lists(st.one_of(text, st.sampled_from(["", "a", "b"])),
                                                              max_size=3 * SEARCH_FROM),
       later=st.lists(text, max_size=5))
@example(constants=["b", "d"], events=["a", "b", "c", "e", ""] * SEARCH_FROM, later=["c"])
def test_event_strings_encode_as_the_str_path_does(constants, events, later):
    """Ids and order codes of strings given as slices are those of the same strings given as ``str``, before and
    after constants are added (the sorted text is rebuilt), placed one by one or by the search."""
    d = StringDictionary()
    d.intern(constants)
    for _ in range(2):
        for part in (events, events[:3]):
            want_ids, want_codes = d.encode_event_strings(tuple(part))
            got_ids, got_codes = d.encode_event_strings(Utf8Strings.of(part))
            assert got_ids.tolist() == want_ids.tolist() and got_codes.tolist() == want_codes.tolist()
        d.intern(later)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.dictionaries(st.integers(-20, 20), subscription, max_size=12),
       events=st.lists(event, min_size=1, max_size=8))
def test_matching_strings_held_as_bytes_agrees_with_the_oracle(algorithm, subs, events):
    m, o = Matcher(algorithm), OracleMatcher()
    for sid, sub in subs.items():
        m.add(sid, sub)
        o.add(sid, sub)
    want = [o.match(e).tolist() for e in events]
    assert [r.tolist() for r in m.match_encoded(as_utf8(EventBatch.from_dicts(events))).split()] == want


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subs=st.lists(subscription, min_size=1, max_size=16), events=st.lists(event, min_size=1, max_size=40))
@example(subs=[[("b", "suffix ignore case", "ab")], [("b", "prefix ignore case", "STRASSE")],
               [("a", "not suffix", "aB")]],
         events=[{"b": "Ab"}, {"b": ["straße", "a"]}, {"a": ["ß", "Ab"]}])
def test_derived_pairs_of_bytes_equal_derived_value_per_string(subs, events):
    """``derive_events`` on strings held as slices (sliced and folded as bytes, slices that are no constant
    dropped by the byte table) adds the pairs ``derived_value`` per string gives (tests/support/naive.py)."""
    from tests.support import naive

    m = Matcher("dynamic")
    for sid, sub in enumerate(subs):
        m.add(sid, sub)
    m.flush()
    batch = EventBatch.from_dicts(events)
    got = m.derived.derive_events(as_utf8(batch), m.strings)
    assert type(got.strings) is Utf8Strings or got is not batch
    derived = [sorted((p for p in pairs if p[0][0] == RESERVED_PREFIX), key=repr) for pairs in naive.event_pairs(got)]
    assert derived == naive.derived_pairs(m.derived, batch, m.strings.ids)
