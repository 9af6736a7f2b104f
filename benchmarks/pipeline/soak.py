"""Memory under subscription churn: one service on Apache Kafka, its input and subscription changes at fixed rates.

    python -m benchmarks.pipeline.soak --minutes 60                      # pubsub run: 2,000 events/s, 50 changes/s, 50,000 subs
    python -m benchmarks.pipeline.soak --minutes 60 --changes-per-second 0   # the same without churn
    python -m benchmarks.pipeline.soak --minutes 2 --subscriptions 20000     # a quick look
    python -m benchmarks.pipeline.soak --service patterns --minutes 20   # pubsub patterns: ticks, 10,000 pattern subscriptions
    python -m benchmarks.pipeline.soak --service tables --minutes 20     # pubsub tables: row updates, 2,000 aggregates
    python -m benchmarks.pipeline.soak --plot-from a.json b.json --plot out.png   # one plot of runs written before

Runs ``pubsub warmup`` first (a service that compiles at its start keeps LLVM's memory), starts the embedded
broker (or uses ``--bootstrap``), writes the subscriptions, starts the service with its ``/metrics`` server and,
once it is ready, produces its input at ``--events-per-second`` and subscription changes at
``--changes-per-second`` (:class:`Churn`): a quarter tombstones of live ids, a quarter additions of removed or
never used ids (among twice as many as the first load wrote, :data:`ID_SPACE`), half replacements of live ids, each
with the definition of a random subscription.  The live population holds at the first load's size from the first
change on (were it to shrink or wander, the engine's bytes per live subscription and RSS would move with it by
design: arrays keep the size of the largest population, and every subscription holds its own memory).  The
services (``--service``, :data:`WORKLOADS`):

* ``events`` (``pubsub run``): sparse subscriptions and events (workloads.sparse, preset ``opindex``), JSON;
* ``patterns`` (``pubsub patterns``): the S1-S5 pattern templates over stock ticks (benchmarks.stateful.patterns), their
  windows a sixtieth of the templates' (:data:`PATTERN_TIME_SCALE`);
* ``tables`` (``pubsub tables``): ``min``/``sum``/``count``/``distinct`` aggregates with a range and a sector
  filter over one table of stock rows, updated at random.

Every ``--sample-seconds`` it records the service's RSS and threads (``/proc``) and, from ``/metrics``, the live
subscriptions and what the engine holds (``pubsub_engine_memory_bytes`` and by structure; the pattern rows and
instances, the aggregate groups and row filters).  Writes the samples and a summary as JSON (``--out``, rewritten
after every sample, so an interrupted soak keeps what it measured) and a plot (``--plot``).

Summary (:func:`summarise`): RSS growth after the first tenth (a least-squares
line through the later samples, its rise over that span relative to its start,
so one noisy sample neither hides nor fakes growth), the same through each
window's lowest sample (a leak raises the floor; a rebuild that briefly holds two
copies only lifts one sample), and the engine's bytes per live subscription over time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from prometheus_client.parser import text_string_to_metric_families

from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec, free_port
from fastpubsub.wire import topics
from fastpubsub.wire.codecs import Subscription, encode_event, encode_subscription
from fastpubsub.workloads.sparse import SPARSE_PRESETS, generate_sparse_events, generate_sparse_subscriptions

from benchmarks.harness import report

#: Distinct encoded events cycled through (the stream repeats after this many).
EVENT_POOL = 20_000
#: Changes pick their ids among this many times the first load's: half of them live, so the population holds.
ID_SPACE = 2
#: Rates are kept in slices of this many seconds (the producer is handed a slice's records at once).
SLICE = 0.1


#: What the pattern and table services' engines hold besides bytes (``pubsub_engine_<name>``), sampled too.
HELD = ("rows", "live_instances", "bound_events", "groups", "row_filters", "join_groups")


def process_memory(pid: int) -> tuple[int, int]:
    """(RSS in bytes, threads) of a process, from ``/proc/<pid>/status``."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def scrape(port: int) -> dict[str, Any]:
    """What the soak reads of ``/metrics``: subscriptions, the engine's bytes (all, by structure), events, changes."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, Any] = {"structures": {}}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "pubsub_subscriptions":
                out["subscriptions"] = int(s.value)
            elif s.name == "pubsub_engine_memory_bytes":
                out["engine_bytes"] = int(s.value)
            elif s.name == "pubsub_engine_structure_bytes":
                out["structures"][s.labels["structure"]] = int(s.value)
            elif s.name == "pubsub_events_total":
                out["events"] = int(s.value)
            elif s.name.removeprefix("pubsub_engine_") in HELD:
                out.setdefault("held", {})[s.name.removeprefix("pubsub_engine_")] = int(s.value)
            elif s.name == "pubsub_subscription_changes_total":
                out["changes"] = out.get("changes", 0) + int(s.value)
    return out


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def _floors(t: np.ndarray, rss: np.ndarray, window: float) -> tuple[np.ndarray, np.ndarray]:
    """Each ``window`` seconds' lowest sample (its time, its RSS), from the first sample's time on."""
    slot = ((t - t[0]) // window).astype(np.int64)
    low = [np.flatnonzero(slot == k)[np.argmin(rss[slot == k])] for k in np.unique(slot)]
    return t[low], rss[low]


def _line_rise(t: np.ndarray, y: np.ndarray) -> float:
    """The rise of a least-squares line through (t, y) over its span, relative to its value at the start."""
    if len(t) < 2:
        return 0.0
    slope, start = np.polyfit(t - t[0], y, 1)
    return float(slope * (t[-1] - t[0]) / start)


def summarise(samples: list[dict[str, Any]], warm_up: float = 0.1, window: float = 60.0) -> dict[str, Any]:
    """RSS growth after the first ``warm_up`` of the run, and the engine's bytes per live subscription.

    ``rss_growth``: the rise of a least-squares line through the RSS samples after the warm-up, over their span,
    relative to the line's value at its start, and that rise per subscription change produced.
    ``rss_floor_growth``: the same through each ``window``'s lowest sample: what a leak raises, where a transient
    (a rebuild or snapshot holding two copies for a moment) lifts single samples only.  ``bytes_per_live``: engine bytes / live subscriptions of each
    sample after the warm-up (min, max, first, last).
    """
    t_end = samples[-1]["t"]
    later = [s for s in samples if s["t"] >= warm_up * t_end]
    t = np.array([s["t"] for s in later], dtype=np.float64)
    rss = np.array([s["rss"] for s in later], dtype=np.float64)
    slope, start = np.polyfit(t - t[0], rss, 1) if len(later) >= 2 else (0.0, rss[0])
    floor = _line_rise(*_floors(t, rss, window))
    per_live = [s["engine_bytes"] / s["subscriptions"] for s in later if s.get("subscriptions") and s.get("engine_bytes")]
    return {
        "seconds": round(t_end, 1), "samples": len(samples),
        "rss_start_mib": round(samples[0]["rss"] / 2**20, 1), "rss_end_mib": round(samples[-1]["rss"] / 2**20, 1),
        "rss_growth": round(float(slope * (t[-1] - t[0]) / start), 4) if len(later) >= 2 else 0.0,
        "rss_floor_growth": round(floor, 4),
        "rss_bytes_per_change": round(float(slope * (t[-1] - t[0])) / max(later[-1]["changes_sent"]
                                                                           - later[0]["changes_sent"], 1), 1),
        "threads_max": max(s["threads"] for s in samples),
        "subscriptions_start": later[0].get("subscriptions"), "subscriptions_end": later[-1].get("subscriptions"),
        "bytes_per_live": {"first": round(per_live[0], 1), "last": round(per_live[-1], 1),
                           "min": round(min(per_live), 1), "max": round(max(per_live), 1)} if per_live else None,
        "held": {"first": later[0].get("held"), "last": later[-1]["held"]} if "held" in later[-1] else None,
        "behind_end": later[-1].get("events_sent", 0) - later[-1].get("events", 0),
    }


#: The table of the ``tables`` soak (``pubsub tables --table``) and its sectors.
STOCK_TABLE = "stock:pubsub.tables.stock:symbol:risk=number,per=number,sector=string"
SECTORS = 50


@dataclass
class Workload:
    """What one service's soak writes and runs: the subscriptions (id = index), the input records cycled at the
    input rate (topic, key, value), the topics it needs beside the five, and the service's command."""

    command: list[str]
    subscriptions: list[bytes]
    records: list[tuple[str, bytes, bytes]]
    topics: list[str] = field(default_factory=list)


def events_workload(n: int, preset: str, seed: int) -> Workload:
    """``pubsub run``: sparse subscriptions and events (workloads.sparse), JSON."""
    spec = SPARSE_PRESETS[preset]
    subs = [encode_subscription(Subscription(f"user{sid % 97}", preds), "json")
            for sid, preds in generate_sparse_subscriptions(spec, n, seed=1).to_lists()]
    events = [(topics.EVENTS, str(k).encode(), encode_event(e, "json"))
              for k, e in enumerate(generate_sparse_events(spec, EVENT_POOL, seed=seed).to_dicts())]
    return Workload(["run"], subs, events)


#: the pattern templates' windows and durations (up to ten minutes) scaled down: the events carry wall-clock
#: timestamps, and at full length the live instances would grow for the first ten minutes by design, hiding churn
PATTERN_TIME_SCALE = 1 / 60


def patterns_workload(n: int, preset: str, seed: int) -> Workload:
    """``pubsub patterns``: pattern subscriptions of the S1-S5 templates over stock ticks, keyed by symbol."""
    from benchmarks.stateful.patterns import Ticks, subscriptions

    ticks = Ticks(EVENT_POOL, seed=seed)
    subs = [json.dumps({"subscriber": f"user{sid % 97}", "pattern": text}).encode()
            for sid, text in subscriptions(n, ticks, seed=seed + 1, time_scale=PATTERN_TIME_SCALE)]
    records = [(topics.EVENTS, e["name"].encode(), encode_event(e, "json")) for _, _, e in ticks.events(0, len(ticks))]
    return Workload(["patterns"], subs, records)


def tables_workload(n: int, preset: str, seed: int) -> Workload:
    """``pubsub tables``: aggregates over one table of 1,000 stock rows, each with a range and a sector filter."""
    rng = random.Random(seed)
    table_topic = STOCK_TABLE.split(":")[1]
    subs = []
    for sid in range(n):
        low = rng.randrange(90)
        fn = ("min(per)", "sum(per)", "count(*)", "distinct(sector)")[sid % 4]
        text = f'{fn} over stock where risk between {low} and {low + 10} and sector = "s{rng.randrange(SECTORS)}"'
        subs.append(json.dumps({"subscriber": f"user{sid % 97}", "aggregate": text}).encode())
    records = []
    for _ in range(EVENT_POOL):
        symbol = f"S{rng.randrange(1000):04d}"
        row = {"symbol": symbol, "risk": float(rng.randrange(100)), "per": float(rng.randrange(50)),
               "sector": f"s{rng.randrange(SECTORS)}"}
        records.append((table_topic, symbol.encode(), json.dumps(row).encode()))
    return Workload(["tables", "--table", STOCK_TABLE], subs, records, [table_topic])


#: Per service: its workload, and its default subscriptions and input rate.
WORKLOADS: dict[str, tuple[Callable[[int, str, int], Workload], int, float]] = {
    "events": (events_workload, 50_000, 2000.0),
    "patterns": (patterns_workload, 10_000, 2000.0),
    "tables": (tables_workload, 2_000, 500.0),
}


def load_subscriptions(bootstrap: str, values: list[bytes]) -> None:
    """Write the subscriptions (ids 0..n-1); the churn re-uses their values."""
    p = ClientFactory(bootstrap).producer(**{"linger.ms": 20})
    for sid, value in enumerate(values):
        p.produce(topics.SUBSCRIPTIONS, value, str(sid).encode())
        if sid % 10_000 == 9_999:
            p.poll(0)
    if p.flush(120):
        raise RuntimeError("the subscriptions were not all written")


def own_topics_afresh(bootstrap: str, names: list[str], timeout: float = 60.0) -> None:
    """A user's own topics (the table's rows), new and empty as the five are: deleted, then created again once the
    broker has let them go (deleting is asynchronous)."""
    admin.delete_topics(bootstrap, names)
    client, deadline = ClientFactory(bootstrap).admin(), time.monotonic() + timeout
    for name in names:
        while True:
            try:
                client.create_topics([NewTopic(name, 1, 1)])[name].result(30)
                break
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def service_env(source: str | None) -> dict[str, str] | None:
    """The environment of the service's processes: with ``source`` (a checkout of another commit), its ``src``
    first on the path, so that the same soak measures the service as it was there (a fix shown by its absence)."""
    if source is None:
        return None
    src = Path(source) / "src"
    if not (src / "fastpubsub").is_dir():
        raise ValueError(f"{source} is not a fastpubsub checkout (no src/fastpubsub)")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])}


def warm_kernel_cache(echo: bool = True, env: dict[str, str] | None = None) -> None:
    """``pubsub warmup`` first: a processor that compiles its kernels at its start keeps LLVM's memory (about 690
    MiB of RSS at the start against 262 from a warm cache), and the soak would measure compiling, not churn."""
    done = subprocess.run([sys.executable, "-m", "fastpubsub", "warmup"], capture_output=True, text=True, timeout=1800,
                          env=env)
    if done.returncode != 0:
        raise RuntimeError(f"pubsub warmup failed: {done.stderr[-2000:]}")
    if echo:
        print(done.stdout.strip(), flush=True)


def soak(bootstrap: str, minutes: float, events_per_second: float = 2000, changes_per_second: float = 50,
         subscriptions: int = 50_000, sample_seconds: float = 10.0, preset: str = "opindex", seed: int = 7,
         log_path: str | None = None, echo: bool = True,
         on_sample: Callable[[dict[str, Any]], None] | None = None, service: str = "events",
         source: str | None = None) -> dict[str, Any]:
    """Run one service for ``minutes`` under the load; the samples and their summary.  ``on_sample`` gets the run
    so far after every sample (the caller writes it: an interrupted soak keeps what it measured); ``source``: run
    the service of that checkout (:func:`service_env`)."""
    env = service_env(source)
    work = WORKLOADS[service][0](subscriptions, preset, seed)
    if work.topics:
        own_topics_afresh(bootstrap, work.topics)
    values = work.subscriptions
    load_subscriptions(bootstrap, values)
    events = work.records
    warm_kernel_cache(echo, env)
    port = free_port()
    log = open(log_path or os.devnull, "w")
    proc = subprocess.Popen([sys.executable, "-m", "fastpubsub", *work.command, "-b", bootstrap, "--group-id", "soak",
                             "--metrics-port", str(port), "--progress-interval", "60"],
                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=child_preexec, env=env)
    samples: list[dict[str, Any]] = []
    config = {"service": service, "command": f"pubsub {work.command[0]}", "minutes": minutes, "events_per_second": events_per_second,
              "changes_per_second": changes_per_second, "subscriptions": subscriptions, "preset": preset,
              "sample_seconds": sample_seconds, "source": source}
    try:
        deadline = time.monotonic() + 600
        while not ready(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{config['command']} did not become ready (exit code {proc.poll()})")
            time.sleep(0.5)
        churn = Churn(subscriptions, values, seed)
        p = ClientFactory(bootstrap).producer(**{"linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
        began = time.monotonic()
        end = began + 60 * minutes
        next_sample, n_events, n_changes, k = began, 0, 0, 0
        while True:
            now = time.monotonic()
            if now >= next_sample:
                rss, threads = process_memory(proc.pid)
                sample = {"t": round(now - began, 1), "rss": rss, "threads": threads, "events_sent": n_events,
                          "changes_sent": n_changes, **scrape(port)}
                samples.append(sample)
                if on_sample is not None and len(samples) >= 2:
                    on_sample({"config": config, "summary": summarise(samples), "samples": samples})
                if echo:
                    per = sample.get("engine_bytes", 0) / max(sample.get("subscriptions", 0), 1)
                    print(f"t={sample['t']:7.1f}s rss={rss / 2**20:7.1f} MiB threads={threads} "
                          f"live={sample.get('subscriptions')} engine={sample.get('engine_bytes', 0) / 2**20:.1f} MiB "
                          f"({per:.0f} B/live) load={os.getloadavg()[0]:.1f}", flush=True)
                next_sample += sample_seconds
                if now >= end:
                    break
            if proc.poll() is not None:
                raise RuntimeError(f"{config['command']} exited with {proc.returncode}")
            elapsed = now - began
            for _ in range(int(elapsed * events_per_second) - n_events):
                topic, key, value = events[k % len(events)]
                p.produce(topic, value, key)
                k += 1
                n_events += 1
            for _ in range(int(elapsed * changes_per_second) - n_changes):
                sid, value = churn.next(n_changes)
                p.produce(topics.SUBSCRIPTIONS, value, str(sid).encode())
                n_changes += 1
            p.poll(0)
            time.sleep(max(0.0, min(SLICE, next_sample - time.monotonic())))
        p.flush(30)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return {"config": config, "summary": summarise(samples), "samples": samples}


class Churn:
    """The subscription changes, in cycles of four: a tombstone of a live id, an addition of a dead one, two
    replacements of live ones, each with the definition of a random subscription of the first load.  The ids are
    among :data:`ID_SPACE` times the first load's (ids 0..n-1 live at the start), so removed ids come back; the live
    population stays at the first load's size to within one, so what the service holds is compared at one
    population (a random walk of it would move RSS by its own subscriptions' worth)."""

    def __init__(self, n: int, values: list[bytes], seed: int) -> None:
        self.rng, self.values = random.Random(seed), values
        self.live, self.dead = list(range(n)), list(range(n, ID_SPACE * n))

    def _take(self, ids: list[int]) -> int:
        i = self.rng.randrange(len(ids))
        ids[i], ids[-1] = ids[-1], ids[i]
        return ids.pop()

    def next(self, k: int) -> tuple[int, bytes | None]:
        """The ``k``-th change: (id, value; None for a tombstone)."""
        value = self.values[self.rng.randrange(len(self.values))]
        step = k % 4
        if step == 0:
            sid = self._take(self.live)
            self.dead.append(sid)
            return sid, None
        if step == 1:
            sid = self._take(self.dead)
            self.live.append(sid)
            return sid, value
        return self.live[self.rng.randrange(len(self.live))], value


def runs_from(paths: list[Path]) -> list[dict[str, Any]]:
    """The runs of result files written by :func:`main` (each holds one or, with ``--both``, two), labelled by
    their file when several files are drawn together (two runs of the same rates would otherwise share a label)."""
    runs = []
    for path in paths:
        for run in json.loads(Path(path).read_text())["runs"]:
            runs.append(dict(run, file=Path(path).stem) if len(paths) > 1 else run)
    if not runs:
        raise ValueError(f"no runs in {', '.join(map(str, paths))}")
    return runs


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """RSS and engine bytes per live subscription over time, one line per run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    commands = {r["config"].get("command", "pubsub run") for r in runs}
    per_live: list[float] = []
    for run in runs:
        c = run["config"]
        label = f"{c['changes_per_second']:g} changes/s, {c['events_per_second']:g} events/s"
        if len(commands) > 1:  # several services in one plot: each line says which
            label = f"{c.get('command', 'pubsub run')}, {c['subscriptions']:,} subscriptions, {label}"
        elif "file" in run:
            label = f"{run['file']}: {label}"
        t = [s["t"] / 60 for s in run["samples"]]
        a.plot(t, [s["rss"] / 2**20 for s in run["samples"]], label=label)
        live = [s.get("engine_bytes", 0) / max(s.get("subscriptions", 0), 1) for s in run["samples"]]
        b.plot(t, live, label=label)
        per_live += [x for x in live if x > 0]
    a.set_ylabel("service RSS (MiB)")
    b.set_ylabel("engine bytes per live subscription")
    if per_live and max(per_live) > 20 * min(per_live):
        b.set_yscale("log")  # services whose subscriptions differ in size by orders of magnitude
    b.set_xlabel("minutes")
    a.legend(fontsize="small", loc="lower right")
    c = runs[0]["config"]
    what = {"events": "sparse", "patterns": "pattern", "tables": "aggregate"}[c.get("service", "events")]
    a.set_title(f"{c.get('command', 'pubsub run')} under subscription churn ({c['subscriptions']:,} {what} subscriptions)"
                if len(commands) == 1 else "The services under subscription churn")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--service", default="events", choices=sorted(WORKLOADS),
                    help="pubsub run (events), pubsub patterns or pubsub tables")
    ap.add_argument("--events-per-second", type=float, default=None,
                    help="input records per second (events 2,000, patterns 2,000, tables 500)")
    ap.add_argument("--changes-per-second", type=float, default=50.0, help="0: no churn")
    ap.add_argument("--subscriptions", type=int, default=None, help="events 50,000, patterns 10,000, tables 2,000")
    ap.add_argument("--sample-seconds", type=float, default=10.0)
    ap.add_argument("--preset", default="opindex", choices=sorted(SPARSE_PRESETS))
    ap.add_argument("--both", action="store_true", help="run without churn first, then with it (one plot)")
    ap.add_argument("--bootstrap", help="an existing broker (default: start the embedded one)")
    ap.add_argument("--out", type=Path, default=report.RESULTS / "soak.json")
    ap.add_argument("--plot", type=Path, default=report.RESULTS / "soak.png")
    ap.add_argument("--log", help="the service's log file")
    ap.add_argument("--source", help="run the service of this checkout (e.g. `git worktree add /tmp/old <commit>`)")
    ap.add_argument("--plot-from", type=Path, nargs="+", metavar="JSON",
                    help="draw --plot from these result files (of runs made before, perhaps at once) and exit")
    args = ap.parse_args(argv)
    if args.plot_from:
        missing = [str(p) for p in args.plot_from if not p.exists()]
        if missing:
            ap.error(f"no such result file: {', '.join(missing)}")
        plot(runs_from(args.plot_from), args.plot)
        print(f"wrote {args.plot}")
        return
    _, default_subscriptions, default_rate = WORKLOADS[args.service]
    args.subscriptions = default_subscriptions if args.subscriptions is None else args.subscriptions
    args.events_per_second = default_rate if args.events_per_second is None else args.events_per_second
    if args.minutes <= 0 or args.subscriptions <= 0 or args.events_per_second < 0 or args.changes_per_second < 0:
        ap.error("minutes and subscriptions must be positive, rates non-negative")
    rates = [0.0, args.changes_per_second] if args.both else [args.changes_per_second]
    runs: list[dict[str, Any]] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    started_load = os.getloadavg()

    def write(current: dict[str, Any]) -> None:  # after every sample: an interrupted soak keeps what it measured
        args.out.write_text(json.dumps({"load_average": started_load, "load_average_now": os.getloadavg(),
                                        "runs": [*runs, current]}, indent=1))

    for changes in rates:
        def one(bootstrap: str) -> dict[str, Any]:
            admin.create_afresh(bootstrap, partitions=4)  # (deletes them first: each run starts empty)
            return soak(bootstrap, args.minutes, args.events_per_second, changes, args.subscriptions,
                        args.sample_seconds, args.preset, log_path=args.log, on_sample=write, service=args.service,
                        source=args.source)
        if args.bootstrap:
            runs.append(one(args.bootstrap))
        else:
            with EmbeddedBroker() as broker:
                runs.append(one(broker.bootstrap_servers))
        print(json.dumps(runs[-1]["summary"]), flush=True)
    args.out.write_text(json.dumps({"load_average": started_load, "load_average_now": os.getloadavg(), "runs": runs},
                                   indent=1))
    plot(runs, args.plot)
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
