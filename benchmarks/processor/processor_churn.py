"""The processor's path in process, under the soak's churn, without Kafka: decode -> match -> encode of JSON events.

    python -m benchmarks.processor.processor_churn --seconds 40 --every 40            # the time it takes, and what it holds
    python -m benchmarks.processor.processor_churn --seconds 40 --every 40 --mapped   # the same with large blocks mapped apart

Loads the soak's 50,000 sparse subscriptions (benchmarks.pipeline.soak.events_workload) into a ``ProcessorState`` and runs
``--seconds`` simulated seconds: ``--events`` JSON events a second in batches of ``--batch`` through the
processor's Decode, Match and Encode stages, and ``--changes`` subscription changes a second (half tombstones, half
re-adds of random ids among twice the first load's, as the soak makes them) applied between the batches in
groups of ``--group``, with new subscriptions matched against the stored events.  Every ``--every`` simulated
seconds it prints the RSS, glibc's view (mallinfo2: in use, free, mapped) and the engine's bytes by structure;
at the end the wall time of the loop (``WALL``).  Run with another checkout's ``src`` first on ``PYTHONPATH`` for a
side-by-side before and after.
"""
import argparse
import ctypes
import gc
import json
import random
import sys
import time

import numpy as np
from confluent_kafka import Message
from benchmarks.harness.memory import status_kb
from benchmarks.pipeline.soak import events_workload, ID_SPACE
from fastpubsub.runtime.counters import PipelineCounters
from fastpubsub.services.events.state import ProcessorState
from fastpubsub.services.events.decode import Decode, ReferencedAttributes
from fastpubsub.services.events.match import Match
from fastpubsub.services.events.encode import Encode
from fastpubsub.wire import topics

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--changes", type=float, default=50)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--group", type=int, default=5)
    ap.add_argument("--subs", type=int, default=50000)
    ap.add_argument("--every", type=int, default=60)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--mapped", action="store_true")
    a = ap.parse_args()

    libc = ctypes.CDLL("libc.so.6")
    class MI2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = MI2
    def rss():
        return status_kb("VmRSS") * 1024
    def nrt():
        try:
            from numba.core.runtime import rtsys
            s = rtsys.get_allocation_stats()
            return s.alloc - s.free, s.mi_alloc - s.mi_free
        except Exception as e:
            return str(e)

    if a.mapped:
        from fastpubsub.engine.heap import map_large_blocks; print("mapped", map_large_blocks())
    work = events_workload(a.subs, "opindex", 7)
    values = work.subscriptions
    off = [0]
    def msg(topic, key, value):
        off[0] += 1
        return Message(topic=topic, key=key, value=value, partition=0, offset=off[0], timestamp=(1, int(time.time()*1000)))
    state = ProcessorState("dynamic")
    recs = [msg(topics.SUBSCRIPTIONS, str(i).encode(), v) for i, v in enumerate(values)]
    state.apply(recs)
    del recs
    c = PipelineCounters()
    dec = Decode(c, True, tuple, None, ReferencedAttributes(lambda: state.subscriptions.matcher))
    match = Match(state, c)
    enc = Encode("avro", "auto", c)
    events = [msg(t, k, v) for t, k, v in work.records]
    rng = random.Random(7)
    k = 0
    samples = []
    if a.trace:
        import tracemalloc
    t0 = time.perf_counter()
    for sec in range(a.seconds + 1):
        if sec % a.every == 0:
            gc.collect()
            m = libc.mallinfo2()
            s = {"sec": sec, "rss_mib": round(rss()/2**20, 1), "blocks": sys.getallocatedblocks(), "in_use_mib": round(m.uordblks/2**20, 1),
                 "free_mib": round(m.fordblks/2**20, 1), "mmap_mib": round(m.hblkhd/2**20, 1), "nrt": nrt(),
                 "engine": state.subscriptions.matcher.memory_by_structure(), "live": len(state.subscriptions),
                 "log": state.subscriptions._logged, "wall": round(time.perf_counter()-t0, 1)}
            if a.trace:
                if sec == a.every:
                    tracemalloc.start(6); base = tracemalloc.take_snapshot()
                elif sec > a.every:
                    snap = tracemalloc.take_snapshot()
                    st = snap.compare_to(base, "traceback")
                    st = [x for x in st if x.size_diff > 0]
                    st.sort(key=lambda x: -x.size_diff)
                    s["top"] = [(round(x.size_diff/1024, 1), x.count_diff, " > ".join(f"{f.filename.split('/src/')[-1].split('site-packages/')[-1]}:{f.lineno}" for f in x.traceback)) for x in st[:8]]
            samples.append(s)
            print(json.dumps(s), flush=True)
        if sec == a.seconds:
            break
        n_ch = int((sec + 1) * a.changes) - int(sec * a.changes)
        per = a.events // a.batch
        chs = []
        for _ in range(n_ch):
            sid = rng.randrange(ID_SPACE * a.subs)
            v = None if rng.random() < 0.5 else values[rng.randrange(a.subs)]
            chs.append(msg(topics.SUBSCRIPTIONS, str(sid).encode(), v))
        for b in range(per):
            batch = events[k:k + a.batch]
            k = (k + a.batch) % len(events)
            for o in enc(match.events(dec(batch))):
                pass
            g = chs[b * a.group:(b + 1) * a.group] if b < per - 1 else chs[b * a.group:]
            if g:
                applied = state.apply(g)
                for o in enc(match.stored(applied)):
                    pass
    print("WALL", round(time.perf_counter()-t0, 2), "mapped" if a.mapped else "glibc", flush=True)
    if a.out:
        json.dump(samples, open(a.out, "w"))


if __name__ == "__main__":
    main()
