"""On the benchmark's Table 1 workload (scaled down), the reformulator + S-UN stage report exactly the
subscriptions whose minimum changed, with the new minimum, against a numpy recomputation of all of them."""

import numpy as np

from benchmarks.stateful.aggregates import synthetic_rows, synthetic_subs, synthetic_updates
from fastpubsub.aggregates.reformulator import ExtremumReformulator
from fastpubsub.aggregates.stateless import ExtremumGroup
from fastpubsub.aggregates.table import Table


def test_table1_workload_against_recomputation():
    rng = np.random.default_rng(3)
    xs, ys = synthetic_rows(2000, rng)
    keys, new_y = synthetic_updates(ys, 400, rng, spike=0.05)
    lo, hi = synthetic_subs(5000, rng)
    table, ref = Table("t", "k"), ExtremumReformulator("x", "y")
    rows = [(i, {"x": float(a), "y": float(b)}) for i, (a, b) in enumerate(zip(xs, ys))]
    for k, r in rows:
        table.apply(k, r)
    ref.load(rows)
    group = ExtremumGroup("min")
    group.add_bulk(lo, hi, ref.answers(lo, hi))
    order = np.argsort(xs)
    first, last = np.searchsorted(xs[order], lo, "left"), np.searchsorted(xs[order], hi, "right")
    cur = ys.copy()

    def recompute():
        sy = cur[order]
        return np.array([sy[a:b].min() if b > a else np.inf for a, b in zip(first, last)])

    before, total = recompute(), 0
    for k, v in zip(keys, new_y):
        res = ref.apply(table.apply(int(k), {"x": float(xs[k]), "y": float(v)}))
        changed, values, _ = group.apply(res.messages)
        cur[k] = v
        after = recompute()
        expected = np.flatnonzero(after != before)
        assert sorted(changed.tolist()) == expected.tolist()
        assert np.array_equal(values, after[changed])
        total += len(expected)
        before = after
    assert total > 400  # the spikes reach many subscriptions: the test is not vacuous
