"""The Esper peer of the pattern engine (benchmarks/peers/esper) finds exactly the engine's matches, both ways.

Its figures beside the engine's (``benchmarks.peers.patterns --peers esper``) mean something only if its EPL
statements mean what the S1-S3 templates mean: the same (subscription, a, b) triples on a random tick stream
dense in matches, and at the edges where a translation would most easily differ: a b tick at exactly the start
plus ``within`` (bound) and one millisecond later (not), the first following b failing the post-selection (no
match, though a later b would pass it), and S2 with X = Y (a tick completes one instance and starts the next, but
is never its own b).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from benchmarks.peers import patterns as pattern_peers
from benchmarks.peers import maven
from fastpubsub.patterns import parse

pytestmark = pytest.mark.slow
MODES = ["statements", "contexts"]  # a statement per subscription; a context partition per subscription


@pytest.fixture(scope="module")
def jar():
    if shutil.which("mvn") is None:
        pytest.skip("Maven (mvn) is not on PATH: it builds the Esper peer")
    return maven.build(pattern_peers.ESPER, pattern_peers.ESPER / "target" / "fastpubsub-esper-peer.jar")


def _matches(ticks, texts: list[tuple[int, str]], warmup: int, tmp_path, mode: str) -> tuple[set, set]:
    """(this engine's, Esper's) match triples over every tick."""
    ticks_csv = tmp_path / "ticks.csv"
    pattern_peers._write_ticks(ticks, ticks_csv)
    _, ours = pattern_peers.run_engine(ticks, texts, warmup, batch=500)
    row, theirs = pattern_peers.run_esper(ticks_csv, [(sid, parse(t)) for sid, t in texts], warmup, tmp_path, "1g",
                                         mode)
    assert row["statements"] == len(texts) and row["events"] == len(ticks) - warmup
    return ours, theirs


def _hand_ticks(rows: list[tuple[int, str, float]]) -> pattern_peers.Ticks:
    """Ticks of (ts, symbol, price), ids 0, 1, ... in that order."""
    ticks = pattern_peers.Ticks(len(rows), symbols=2, seed=0)
    ticks.symbols = np.array(["A", "B"])
    ticks.sym = np.array([0 if name == "A" else 1 for _, name, _ in rows])
    ticks.price = np.array([price for _, _, price in rows], dtype=float)
    ticks.volume = np.full(len(rows), 100.0)
    ticks.ts = np.array([ts for ts, _, _ in rows], dtype=np.int64)
    return ticks


@pytest.mark.parametrize("mode", MODES)
def test_esper_matches_equal_the_engines_on_random_ticks(jar, tmp_path, mode):
    ticks = pattern_peers.strict_ticks(4000, symbols=6, seed=5, step_sd=0.01)
    texts = pattern_peers.peer_subscriptions(30, ticks, seed=6)
    ours, theirs = _matches(ticks, texts, warmup=1000, tmp_path=tmp_path, mode=mode)
    assert {sid % 5 for sid, _, _ in ours} == {0, 1, 2}  # every template matches
    assert len(ours) > 500
    assert theirs == ours


@pytest.mark.parametrize("mode", MODES)
def test_esper_matches_equal_the_engines_at_the_edges(jar, tmp_path, mode):
    minute = 60_000
    texts = [
        (1, 'seq a: name = "A" and price > 10 next b: name = "B" where b.price < 5 within 1m'),
        (2, 'seq a: name = "A" and price > 10 next b: name = "A" within 1m'),
        (3, 'seq a: name = "A" and price > 10 next b: name = a.name where b.price > 1.5 * a.price within 1m'),
        (4, 'seq a: name = "B" and price > 3 within 1ms'),
    ]
    rows = [
        (1_000, "A", 11.0),  # 0: starts 1, 2, 3
        (1_000 + minute, "B", 4.0),  # 1: exactly at the bound: 1 binds it (0, 1)
        (1_000 + minute + 1, "A", 20.0),  # 2: past 0's bound for 2 and 3; starts 1, 2, 3 anew
        (2_000 + minute, "B", 6.0),  # 3: 1's first b fails b.price < 5: instance 2 dies
        (3_000 + minute, "B", 1.0),  # 4: would pass, but 1's instance 2 is dead
        (4_000 + minute, "A", 31.0),  # 5: 2 completes (2, 5) and starts; 3 completes (2, 5) (31 > 30)
        (5_000 + minute, "A", 12.0),  # 6: 2 completes (5, 6); 3: 12 < 46.5 kills (5, ...)
        (5_000 + 2 * minute + 1, "A", 99.0),  # 7: 6's instances expired a millisecond ago; 7 starts anew
    ]
    ours, theirs = _matches(_hand_ticks(rows), texts, warmup=0, tmp_path=tmp_path, mode=mode)
    assert ours == {(1, 0, 1), (2, 2, 5), (3, 2, 5), (2, 5, 6), (4, 1, -1), (4, 3, -1)}
    assert theirs == ours
