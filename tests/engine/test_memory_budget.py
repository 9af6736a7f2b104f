"""A bulk load that its own estimate says will not fit is refused before it allocates (engine/memory_budget.py)."""

from __future__ import annotations

import tracemalloc

import pytest

import fastpubsub.engine.memory_budget as budget
from fastpubsub.engine import ALGORITHMS, InsufficientMemory, Matcher
from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions


@pytest.fixture(scope="module")
def batch():
    return generate_subscriptions(PRESETS["W0"], 50_000, seed=1)


def free(mem_available, cgroup=None):
    return lambda: (mem_available, cgroup)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_has_a_measured_factor(algorithm):
    assert budget.LOAD_BYTES[algorithm] > 0


def test_a_load_beyond_the_free_memory_is_refused_before_anything_big_is_allocated(monkeypatch, batch):
    m = Matcher("dynamic")
    m.add_bulk(generate_subscriptions(PRESETS["W0"], 100, seed=2, first_id=10**9))
    need = budget.load_estimate("dynamic", len(batch), len(batch.operators)) + m.stats()["memory_bytes"]
    monkeypatch.setattr(budget, "free_memory", free(need // 2))
    tracemalloc.start()
    try:
        with pytest.raises(InsufficientMemory) as refused:
            m.add_bulk(batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10 < need // 100  # (nothing: the refusal comes before the batch is validated)
    assert refused.value.needed == need and refused.value.available == need // 2
    assert "MemAvailable" in str(refused.value) and f"{need / 1e6:,.0f} MB" in str(refused.value)
    assert len(m) == 100  # the matcher is as it was
    assert not m.holds(batch.ids[:10]).any()


def test_the_cgroup_limit_counts_when_it_is_the_smaller(monkeypatch, batch):
    need = budget.load_estimate("counting", len(batch), len(batch.operators))
    monkeypatch.setattr(budget, "free_memory", free(100 * need, need - 1))
    with pytest.raises(InsufficientMemory) as refused:
        Matcher("counting").add_bulk(batch)
    assert refused.value.available == need - 1 and "cgroup" in str(refused.value)


def test_a_load_that_fits_passes_and_matches(monkeypatch, batch):
    need = budget.load_estimate("dynamic", len(batch), len(batch.operators))
    monkeypatch.setattr(budget, "free_memory", free(need + 1, None))
    m = Matcher("dynamic")
    m.add_bulk(batch)
    assert len(m) == len(batch)
    assert len(m.match_encoded(generate_events(PRESETS["W0"], 10, seed=3))) == 10


def test_unknown_free_memory_refuses_nothing(monkeypatch, batch):
    monkeypatch.setattr(budget, "free_memory", free(None, None))
    Matcher("propagation").add_bulk(batch)


def test_what_the_matcher_holds_counts_again_since_a_load_may_move_it(monkeypatch, batch):
    """A chunk that fits on its own is refused when the matcher's own structures, which the load may copy into
    larger ones, would not fit beside it; an empty matcher counts nothing more."""
    m = Matcher("dynamic")
    m.add_bulk(batch)
    held = m.stats()["memory_bytes"]
    chunk = generate_subscriptions(PRESETS["W0"], 5_000, seed=4, first_id=10**9)
    alone = budget.load_estimate("dynamic", len(chunk), len(chunk.operators))
    monkeypatch.setattr(budget, "free_memory", free(alone + held - 1))
    with pytest.raises(InsufficientMemory) as refused:
        m.add_bulk(chunk)
    assert refused.value.needed == alone + held and "the matcher holds" in str(refused.value)
    assert len(m) == len(batch)
    monkeypatch.setattr(budget, "free_memory", free(alone + held))
    m.add_bulk(chunk)
    assert len(m) == len(batch) + len(chunk)
    monkeypatch.setattr(budget, "free_memory", free(alone))
    Matcher("dynamic").add_bulk(chunk)  # (empty: the chunk alone)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_the_matchers_own_memory_count_is_the_one_stats_gives(algorithm):
    """``Matcher.memory_bytes`` (asked before every chunk of a load) says what ``stats()`` says, without its
    per-subscription counts, for every algorithm, also after removals."""
    m = Matcher(algorithm)
    m.add_bulk(generate_subscriptions(PRESETS["W0"], 3_000, seed=5))
    assert m.memory_bytes() == m.stats()["memory_bytes"] > 0
    m.remove_bulk(list(range(0, 3_000, 3)))
    assert m.memory_bytes() == m.stats()["memory_bytes"]


def test_subscriptions_with_more_predicates_than_w0_scale_the_estimate():
    base = budget.load_estimate("dynamic", 1000, 5000)
    assert budget.load_estimate("dynamic", 1000, 10_000) == 2 * base
    assert budget.load_estimate("dynamic", 1000, 2000) == base  # (fewer: not below the measured factor)


def test_the_free_memory_of_this_machine_is_read():
    available, _ = budget.free_memory()
    assert available is None or available > 0


def test_cgroup_v1_and_v2_limits_are_read(tmp_path):
    (tmp_path / "memory.max").write_text("1000000\n")
    (tmp_path / "memory.current").write_text("300000\n")
    assert budget.cgroup_free(str(tmp_path)) == 700_000
    (tmp_path / "memory.max").write_text("max\n")
    assert budget.cgroup_free(str(tmp_path)) is None
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (v1 / "memory" / "memory.usage_in_bytes").write_text("5\n")
    assert budget.cgroup_free(str(v1)) is None
    (v1 / "memory" / "memory.limit_in_bytes").write_text("2000\n")
    assert budget.cgroup_free(str(v1)) == 1995
