# W0 at 30M and 100M in 5M chunks, dynamic, after the settle round; the second level on and off in one process
# (PYTHONPATH=. python <this script>); the output follows the script when it is kept.
"""30M and 100M W0 in 5M chunks: the second level the model chose, with it and without it (same process, alternating)."""
import os
import time

import numpy as np

from benchmarks.engine import warm_up
from benchmarks.scaling import chunk_makers
from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import W0, generate_events

events = generate_events(W0, n=20_000, seed=2)
warm_up("dynamic", events)
KEYS = ("level2_min", "level2_clusters", "level2_ints", "runs", "sorted_entries", "subscriptions", "memory_bytes")
loaded = {}
for n in (30_000_000, 100_000_000):
    m = Matcher("dynamic")
    t = time.perf_counter()
    for make in chunk_makers(W0, n, 5_000_000, seed=1):
        m.add_bulk(make())
    print(n, "load_s", round(time.perf_counter() - t, 1), flush=True)
    st = m.stats()
    print(" after the load", {k: st.get(k) for k in KEYS}, flush=True)
    m.match_encoded(events)  # 20,000 events with no change: the settle round merges the load's tails
    st = m.stats()
    print(" after 20,000 events", {k: st.get(k) for k in KEYS}, flush=True)
    loaded[n] = m
for n, m in loaded.items():
    store = m.index.store
    keep = store.c_sub
    res = {"with": [], "without": []}
    ref = m.match_encoded(events)
    for _ in range(5):
        for name in ("with", "without"):
            store.c_sub = keep if name == "with" else np.zeros(0, dtype=keep.dtype)
            t = time.perf_counter()
            r = m.match_encoded(events)
            res[name].append(time.perf_counter() - t)
            assert np.array_equal(r.ids, ref.ids) and np.array_equal(r.offsets, ref.offsets)
    store.c_sub = keep
    print(n, {k: round(20_000 / min(v)) for k, v in res.items()}, "events/s best of 5; load", os.getloadavg(), flush=True)
