"""Where an event's time goes: sampled batches followed from their first record's timestamp to their commit
(runtime.trace), split into parts by the benchmarks (benchmarks.pipeline.e2e.breakdown), and the side-by-side summary of
the Kafka Streams peer and the processor at the same offered rates (benchmarks.peers.streams_latency)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, strategies as st

from benchmarks.harness.cpu import pin_to_core_0
from benchmarks.pipeline.e2e import PARTS, breakdown, slowest
from benchmarks.peers.streams_latency import OURS, Settings, options_of, rates_of, summary
from fastpubsub.runtime.trace import LatencyTrace


def test_a_batch_is_sampled_at_most_once_per_interval_and_only_with_a_timestamp():
    trace = LatencyTrace(every=0.05, kept=10)
    assert trace.start(b"L0", 1_000, consumed=100.0) is not None
    assert trace.start(b"L1", 1_000, consumed=100.04) is None  # too soon after the last one
    assert trace.start(b"L2", 0, consumed=100.06) is None  # no timestamp: nothing to measure from
    assert trace.start(b"L3", 1_000, consumed=100.06).key == "L3"
    assert LatencyTrace(kept=0).start(b"L0", 1_000, consumed=100.0) is None  # not asked for: nothing sampled


def test_a_sample_splits_its_latency_into_its_parts():
    trace = LatencyTrace(every=0.0, kept=10)
    s = trace.start(b"L7", 10_000, consumed=10.020)  # stamped at 10.000 s, out of the consumer 20 ms later
    s.decode, s.match, s.produced = 0.001, 0.002, 10.025
    trace.committed([s], at=10.040)
    (parts,) = trace.stats()
    assert parts["key"] == "L7"
    assert parts["consumer_ms"] == pytest.approx(20.0)
    assert (parts["decode_ms"], parts["match_ms"]) == (pytest.approx(1.0), pytest.approx(2.0))
    assert parts["produce_ms"] == pytest.approx(2.0)  # 5 ms from the consumer to produced, less decode and match
    assert parts["commit_ms"] == pytest.approx(15.0)


@given(st.integers(1, 50), st.integers(1, 20))
def test_only_the_most_recent_samples_are_kept(n, kept):
    trace = LatencyTrace(every=0.0, kept=kept)
    samples = [trace.start(f"L{i}".encode(), 1_000, consumed=float(i)) for i in range(n)]
    trace.committed(samples, at=n + 1.0)
    assert [s["key"] for s in trace.stats()] == [f"L{i}" for i in range(max(0, n - kept), n)]


def test_the_breakdown_adds_the_visibility_at_a_reader_and_names_what_bounds_the_tail():
    samples = []
    first = {}
    for i in range(20):
        commit_wait = 100.0 if i >= 18 else 5.0  # the slowest tenth waited for its commit
        samples.append({"key": f"L{i}", "stamp": 1.0, "consumer_ms": 2.0, "decode_ms": 0.1, "match_ms": 0.2,
                        "produce_ms": 0.3, "commit_ms": commit_wait, "committed": 1.0 + (2.6 + commit_wait) / 1e3})
        first[f"L{i}"] = (1.0 + (2.6 + commit_wait + 4.0) / 1e3, 0)  # seen 4 ms after the commit: the parts add up
    samples.append({**samples[0], "key": "L1-0"})  # another phase's: not counted
    b = breakdown(samples, first, "L")
    assert b["samples"] == b["notified"] == 20
    assert set(PARTS) <= set(b) and b["visible_ms"]["p50"] == pytest.approx(4.0)
    assert b["tail_bound"] == "commit_ms" and b["tail"]["commit_ms"] == pytest.approx(100.0)
    assert b["tail"]["total_ms"] == pytest.approx(2.0 + 0.6 + 100.0 + 4.0, abs=0.1)


def _trial(system, rnd, p99s, maximum=10_000.0):
    phases = [{"offered_events_per_s": rate, "latency_p50_ms": p / 2, "latency_p99_ms": p}
              for rate, p in zip(rates_of(maximum, Settings()), p99s)]
    return {"system": system, "round": rnd, "max_events_per_s": maximum, "phases": phases}


def test_the_rates_are_the_base_rate_and_fractions_of_the_peers_maximum():
    assert rates_of(10_000, Settings()) == [400.0, 1_000.0, 5_000.0]
    assert rates_of(2_000, Settings()) == [200.0, 400.0, 1_000.0]  # lowest first, whatever the maximum


def test_the_summary_pairs_each_round_and_checks_the_targets():
    peer = Settings().peer
    trials = [t for r in range(3) for t in (_trial(peer, r, [100, 110, 120]), _trial(OURS, r, [40, 60, 80]))]
    rows = summary(trials, Settings())
    assert [r["median_offered_events_per_s"] for r in rows] == [400.0, 1_000.0, 5_000.0]
    base, _, half = rows
    assert base["p99_ratio"] == [0.4] * 3 and base["target"]["met"]
    assert half["median_p99_ratio"] == pytest.approx(80 / 120, abs=1e-3) and half["target"]["met"]
    worse = trials + [_trial(peer, 3, [100, 110, 60]), _trial(OURS, 3, [40, 60, 80])]  # one round above 1.0x
    assert not summary(worse, Settings())[-1]["target"]["met"]
    alone = summary([_trial(peer, 0, [100, 110, 120])], Settings())  # a round without the processor: no pairs
    assert alone == []


def test_runs_of_the_processor_with_other_options_are_each_paired_with_the_same_peer_trial():
    settings = Settings(processor_options=("", "--overlap-commits"))
    overlapped = f"{OURS} --overlap-commits"
    assert settings.ours(0) == [OURS, overlapped] and settings.ours(1) == [overlapped, OURS]  # the order turns
    assert options_of(overlapped) == ["--overlap-commits"] and options_of(OURS) == options_of(settings.peer) == []
    assert settings.streams(overlapped).processor_options == ("--overlap-commits",)
    trials = [t for r in range(3) for t in (_trial(settings.peer, r, [100, 110, 120]), _trial(OURS, r, [40, 60, 90]),
                                            _trial(overlapped, r, [40, 60, 140]))]
    default, other = summary(trials, settings, OURS)[-1], summary(trials, settings, overlapped)[-1]
    assert default["p99_ratio"] == [0.75] * 3 and default["target"]["met"]
    assert other["median_p99_ratio"] == pytest.approx(140 / 120, abs=1e-3) and not other["target"]["met"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pinning needs two cores")
def test_pinning_puts_every_thread_of_the_broker_on_core_0():

    child = subprocess.Popen([sys.executable, "-c", "import threading, time; threading.Thread(target=time.sleep, "
                                                    "args=(30,)).start(); time.sleep(30)"])
    try:
        time.sleep(0.3)
        pin_to_core_0([child.pid])
        tasks = os.listdir(f"/proc/{child.pid}/task")
        assert len(tasks) >= 2 and all(os.sched_getaffinity(int(t)) == {0} for t in tasks)
    finally:
        child.kill()
        child.wait()


def test_the_slowest_events_of_a_phase_say_when_they_were_offered():
    stamps = [1_000_000 + 10 * i for i in range(100)]  # 100 events/s for a second
    first = {f"L{i}": ((ms + 5) / 1000, ms + 4) for i, ms in enumerate(stamps)}  # 5 ms each...
    first["L7"] = ((stamps[7] + 250) / 1000, stamps[7] + 249)  # ...but one waited 250 ms, 70 ms into the phase
    first["L90"] = ((stamps[90] + 40) / 1000, stamps[90] + 39)
    del first["L3"]  # never notified: not among them
    top = slowest(first, stamps, "L", n=3)
    assert top[:2] == [[0.07, 250.0], [0.9, 40.0]] and top[2][1] == 5.0
    assert slowest({}, [], "L") == []
