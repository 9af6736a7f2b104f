# W0 at 100M in 5M chunks, dynamic; the second level on and off in one process (PYTHONPATH=. python <this script>), 2026-11-28
# output:
# load_s 388.8
# {'level2_min': 28, 'level2_clusters': 1225, 'level2_ints': 117266748, 'runs': 1286250, 'sorted_entries': 96202333, 'clusters': 1225, 'memory_bytes': 7415991740}
# {'with': 95490, 'without': 102289} events/s best of 5; load (1.06005859375, 0.923828125, 0.89111328125)
"""100M W0 in 5M chunks: the second level the model chose, and matching with it and without it (same process)."""
import time, numpy as np, os
from fastpubsub.engine import Matcher
from fastpubsub.workloads.fabret import W0, generate_events
from benchmarks.scaling import chunk_makers
events = generate_events(W0, n=20_000, seed=2)
m = Matcher("dynamic")
t = time.perf_counter()
for make in chunk_makers(W0, 100_000_000, 5_000_000, seed=1):
    m.add_bulk(make())
print("load_s", round(time.perf_counter() - t, 1), flush=True)
st = m.stats()
print({k: st.get(k) for k in ("level2_min", "level2_clusters", "level2_ints", "runs", "sorted_entries", "clusters", "memory_bytes")}, flush=True)
store = m.index.store
keep = store.c_sub
res = {"with": [], "without": []}
ref = m.match_encoded(events)
for _ in range(5):
    for name in ("with", "without"):
        store.c_sub = keep if name == "with" else np.zeros(0, dtype=keep.dtype)
        t = time.perf_counter(); r = m.match_encoded(events); res[name].append(time.perf_counter() - t)
        assert np.array_equal(r.ids, ref.ids) and np.array_equal(r.offsets, ref.offsets)
store.c_sub = keep
print({k: round(20_000 / min(v)) for k, v in res.items()}, "events/s best of 5; load", os.getloadavg(), flush=True)
