"""Latency side by side: the Kafka Streams peer and the event processor at the same offered rates, in one run.

    python -m benchmarks.peers.streams_latency --sizes 1000,100000 --rounds 3

"Half of each one's maximum" offers two systems different loads; here both are offered the same ones.  For each
size: Apache Kafka (``EmbeddedBroker``, one node on loopback), N W0 subscriptions and the demo's three hand-written
ones, all Avro (as ``benchmarks.peers.streams``).  Then ``--rounds`` rounds, each of two trials on fresh events and
notifications topics, the peer's first:

1. the peer (``--peer``, default ``streams-indexed``) drains a backlog: its maximum, which sets this round's
   rates: ``--base-rate`` (400 events/s), and each of ``--fractions`` (a tenth and half) of that maximum;
2. events are offered at each rate in turn for ``--latency-seconds``; latency = arrival of an event's first
   notification at a read_committed consumer minus the event's timestamp, percentiles over the notified events;
3. the processor (``pubsub run``, transactional, its defaults, as ``benchmarks.pipeline.e2e``) drains a backlog of its own
   (its maximum, reported) and is offered the same rates; its final statistics carry sampled batches followed to
   their commit (``runtime.trace``), so each of its phases also says where the time went
   (``benchmarks.pipeline.e2e.breakdown``: consumer, decode, match, produce, commit, visible to a reader).

``--processor-options`` runs the processor once per round with each set of further ``pubsub run`` options given,
their order turning from round to round, each compared with the same peer trial: two settings side by side in one
run (``--processor-options= --processor-options=--overlap-commits``).

``--pin-broker`` puts the broker's JVM on core 0 and everything else on the other cores: whether sharing the cores
with the broker makes a tail.

Reported per size and rate: every round's p50 / p99 of both, the ratio of the processor's p99 to the peer's in each
round and the medians; the checks of docs/benchmarks.md (at half the peer's maximum the median ratio at most 0.75
and no round above 1.0; at the base rate at most 0.5).  Results go to
``benchmarks/results/streams-latency-<date>.json`` (written after every trial) and the plot of latency against
the offered rate to ``docs/img/latency-vs-rate.png`` (``--plot``).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from fastpubsub.cli.demo import SHOWCASE, Demo, _stop_processor
from fastpubsub.kafka import admin
from fastpubsub.kafka.broker import EmbeddedBroker
from fastpubsub.workloads import PRESETS, generate_events

from benchmarks.harness import report
from benchmarks.harness.cpu import CpuMeter, pin_self_off_core_0, pin_to_core_0
from benchmarks.pipeline.e2e import (ALGORITHM, _encoded_events, _rate_limited, _wait_committed, await_quiet, breakdown,
                                     latencies, percentiles)
from benchmarks.harness.timing import warm_up
from benchmarks.peers import streams

PLOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "latency-vs-rate.png"
OURS = "fastpubsub"
#: The targets checked (docs/benchmarks.md): at half the peer's maximum, the median ratio of p99s and the worst
#: round's; at the base rate, the median ratio.
HALF_MEDIAN, HALF_WORST, BASE_MEDIAN = 0.75, 1.0, 0.5


@dataclass(frozen=True)
class Settings:
    peer: str = "streams-indexed"
    rounds: int = 3
    base_rate: float = 400.0  # events/s offered to both, whatever the maximum
    fractions: tuple[float, ...] = (0.1, 0.5)  # of the peer's maximum in the round
    latency_seconds: float = 20.0
    backlog: int = 1_000_000  # most events of a backlog
    min_backlog: int = 2_000
    first_backlog: int = 50_000  # while a system's rate is unknown
    drain_seconds: float = 10.0  # a backlog lasts about this long at the rate the system last reached
    threads: int = 1
    java_opts: tuple[str, ...] = ()
    peer_config: tuple[str, ...] = ()
    seed: int = 1
    pin_broker: bool = False  # the broker on core 0, everything else (both systems, the load) on the others
    #: the processor's runs in a round, each its further `pubsub run` options ("": its defaults)
    processor_options: tuple[str, ...] = ("",)

    def streams(self, system: str = OURS) -> streams.Settings:
        """The settings ``benchmarks.peers.streams`` starts ``system`` (the peer, or one of :meth:`ours`) and sizes
        a backlog with."""
        return streams.Settings(systems=(self.peer, OURS), backlog=self.backlog, min_backlog=self.min_backlog,
                                first_backlog=self.first_backlog, drain_seconds=self.drain_seconds,
                                threads=self.threads, java_opts=self.java_opts, peer_config=self.peer_config,
                                seed=self.seed, check_events=0, processor_options=tuple(options_of(system)))

    def ours(self, round_: int = 0) -> list[str]:
        """The names of the processor's runs, in their order in round ``round_`` (turned by one each round)."""
        names = [f"{OURS} {o}".strip() for o in self.processor_options]
        k = round_ % len(names)
        return names[k:] + names[:k]


def options_of(system: str) -> list[str]:
    """The further `pubsub run` options a run of ours is named by (``fastpubsub --overlap-commits``); the peer: none."""
    return shlex.split(system[len(OURS):]) if system.startswith(OURS) else []


def rates_of(peer_max: float, settings: Settings) -> list[float]:
    """The rates offered in a round: the base rate, then each fraction of the peer's maximum, lowest first."""
    return sorted([settings.base_rate, *(peer_max * f for f in settings.fractions)])


def trial(broker: EmbeddedBroker, system: str, group: str, backlog: list[bytes], n: int, settings: Settings,
          workdir: Path, progress: Callable[[str], None], offered_events: Callable[[int, int], list[bytes]],
          rates: Callable[[float], list[float]]) -> dict:
    """One system on fresh topics: its maximum, then each rate of ``rates(maximum)`` offered in turn."""
    phases: list[dict] = []
    started_as = OURS if system.startswith(OURS) else system
    with streams.drained(broker, started_as, group, backlog, n, settings.streams(system), workdir, progress) as d:
        producer, clock, process, watcher, max_rate = d.producer, d.clock, d.process, d.watcher, d.max_rate
        done = len(backlog)
        for k, rate in enumerate(rates(max_rate)):
            key = f"R{k}-"
            meter = CpuMeter({"broker": broker.pids()[0], "system": process.pid})
            meter.start()
            stamps = _rate_limited(producer, offered_events(int(rate * settings.latency_seconds) + 1, k), rate,
                                   settings.latency_seconds, key)
            cpu = meter.stop()
            if producer.flush(60):
                raise RuntimeError("the broker did not acknowledge the offered events")
            done += len(stamps)
            _wait_committed(watcher, done, process, 300 + n / 1000, progress)
            phases.append({"offered": rate, "key": key, "stamps": stamps, "cpu_s": cpu["cpu"],
                           "machine_cpu_s": cpu["machine"]})
        await_quiet(clock)
        stats = _stop_processor(process)
    out = []
    for ph in phases:
        at, _ = latencies(clock.first, ph["stamps"], ph["key"])
        lat = percentiles(np.array(at))
        row = {"offered_events_per_s": round(ph["offered"], 1), "events": len(ph["stamps"]), "notified": len(at),
               **{f"latency_{k}_ms": round(v, 1) for k, v in lat.items()}, "cpu_s": ph["cpu_s"],
               "machine_cpu_s": ph["machine_cpu_s"]}
        if started_as == OURS:
            row["breakdown"] = breakdown((stats or {}).get("latency_samples", []), clock.first, ph["key"])
        out.append(row)
        progress(f"  {system}: p50 {lat['p50']:,.1f} ms, p99 {lat['p99']:,.1f} ms at {ph['offered']:,.0f} events/s")
    final = {k: v for k, v in (stats or {}).items() if k != "latency_samples"}
    return {"system": system, "group": group, "backlog_events": len(backlog), "max_events_per_s": round(max_rate, 1),
            "drain_seconds": round(d.seconds, 2), "phases": out, "final_stats": final}


def summary(trials: list[dict], settings: Settings, ours: str = OURS) -> list[dict]:
    """Per offered rate (by its place in the round): the peer's and ``ours`` (one of ``settings.ours()``) p50 / p99
    in every round and their medians, the ratios of the processor's p99 to the peer's, and whether the targets are
    met."""
    rounds: dict[int, dict[str, dict]] = {}
    for t in trials:
        if "error" not in t:
            rounds.setdefault(t["round"], {})[t["system"]] = t
    complete = [r for _, r in sorted(rounds.items()) if settings.peer in r and ours in r]
    rows = []
    for k in range(len(settings.fractions) + 1):
        pairs = [(r[settings.peer]["phases"][k], r[ours]["phases"][k]) for r in complete
                 if len(r[settings.peer]["phases"]) > k and len(r[ours]["phases"]) > k]
        if not pairs:
            continue
        ratios = [mine["latency_p99_ms"] / peer["latency_p99_ms"] if peer["latency_p99_ms"] > 0 else float("nan")
                  for peer, mine in pairs]
        offered = [peer["offered_events_per_s"] for peer, _ in pairs]
        row = {"place": k, "offered_events_per_s": [round(o, 1) for o in offered],
               "median_offered_events_per_s": round(statistics.median(offered), 1),
               "p99_ratio": [round(x, 3) for x in ratios], "median_p99_ratio": round(statistics.median(ratios), 3)}
        for name, which in ((settings.peer, 0), (ours, 1)):
            for q in ("p50", "p99"):
                values = [p[which][f"latency_{q}_ms"] for p in pairs]
                row[f"{name}_{q}_ms"] = values
                row[f"{name}_median_{q}_ms"] = round(statistics.median(values), 1)
        rows.append(row)
    half = next((r for r in rows if r["place"] == len(rows) - 1), None)  # the highest rate: half the maximum
    base = next((r for r in rows if abs(r["median_offered_events_per_s"] - settings.base_rate) < 1e-6), None)
    if half is not None and 0.5 in settings.fractions:
        half["target"] = {"median_at_most": HALF_MEDIAN, "worst_at_most": HALF_WORST,
                          "met": half["median_p99_ratio"] <= HALF_MEDIAN and max(half["p99_ratio"]) <= HALF_WORST}
    if base is not None:
        base["target"] = {"median_at_most": BASE_MEDIAN, "met": base["median_p99_ratio"] <= BASE_MEDIAN}
    return rows


def plot(result: dict, path: Path) -> None:
    """p99 (solid) and p50 (dashed) against the offered rate, one panel a size: every round's point, medians joined."""
    sizes = [s for s in result["sizes"] if s.get("summary")]
    if not sizes:
        return
    fig, axes = report.subplots(len(sizes), width=5)
    axes = list(np.atleast_1d(axes))
    peer = result["settings"]["peer"]
    colours = ("tab:blue", "tab:green", "tab:purple", "tab:red")
    for ax, size in zip(axes, sizes):
        summaries = size.get("summaries") or {OURS: size["summary"]}
        runs = [(peer, "tab:orange", next(iter(summaries.values())))]  # the peer's figures are in every summary
        runs += [(ours, colours[k % len(colours)], rows) for k, (ours, rows) in enumerate(summaries.items())]
        for name, colour, rows in runs:
            x = [r["median_offered_events_per_s"] for r in rows]
            for q, style in (("p99", "-"), ("p50", "--")):
                ax.plot(x, [r[f"{name}_median_{q}_ms"] for r in rows], style, color=colour, marker="o",
                        label=f"{name} {q}")
                for r in rows:
                    ax.scatter(r["offered_events_per_s"], r[f"{name}_{q}_ms"], color=colour, s=8, alpha=0.4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{size['subscriptions']:,} subscriptions")
        ax.set_xlabel("offered events/s (400, a tenth and half of the peer's maximum)")
        ax.set_ylabel("ms, event timestamp to notification at a reader")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    report.save(fig, path)


def run(sizes: list[int], settings: Settings, out: Path, command: str = "",
        progress: Callable[[str], None] = print) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="pubsub-streams-latency-"))
    result = {"benchmark": "streams-latency", "command": command, "machine": report.machine(),
              "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_at_start": report.load_average(),
              "settings": asdict(settings), "workdir": str(workdir), "sizes": []}
    streams.build(progress)
    warm_up(ALGORITHM, generate_events(PRESETS["W0"], 100, settings.seed))  # numba's cache, as benchmarks.pipeline.e2e
    events = _encoded_events(settings.backlog, settings.seed + 1)
    offered: dict[int, list[bytes]] = {}  # per place in the round: events encoded once, for the largest phase

    def offered_events(count: int, place: int) -> list[bytes]:
        if count > len(offered.get(place, ())):
            offered[place] = _encoded_events(count, settings.seed + 2 + place)
        return offered[place][:count]

    sized = settings.streams()
    if settings.pin_broker:
        pin_self_off_core_0()
    for n in sizes:
        last: dict[str, float] = {}  # the maximum each system last reached at this size: sizes its next backlog
        with EmbeddedBroker() as broker:
            if settings.pin_broker:
                pin_to_core_0(broker.pids())
            admin.create_topics(broker.bootstrap_servers)
            demo = Demo(n, 0, "W0", settings.seed)
            demo.showcase_format = "avro"  # the peer reads Avro records only
            progress(f"{n:,} W0 subscriptions + {len(SHOWCASE)} hand-written; {report.load_average()}")
            loaded = demo._load_subscriptions(broker.bootstrap_servers)
            row = {"subscriptions": loaded, "trials": []}
            result["sizes"].append(row)
            for r in range(settings.rounds):
                peer_max: list[float] = []
                for system in (settings.peer, *settings.ours(r)):  # the peer first: its maximum sets the rates
                    if system != settings.peer and not peer_max:
                        break
                    group = f"latency-{re.sub('[^A-Za-z0-9]+', '-', system)}-{n}-{r}"
                    progress(f" round {r + 1}: {system} ({report.load_average()})")

                    def rates(maximum: float, system: str = system) -> list[float]:
                        if system == settings.peer:
                            peer_max.append(maximum)
                        return rates_of(peer_max[0], settings)

                    try:
                        t = trial(broker, system, group, events[:streams.backlog_size(last.get(system), sized)], n,
                                  settings, workdir, progress, offered_events, rates)
                        last[system] = t["max_events_per_s"]
                    except (RuntimeError, TimeoutError) as exc:
                        t = {"system": system, "group": group, "error": str(exc)}
                        progress(f"  {system}: {exc}")
                    t["round"], t["load"] = r, report.load_average()
                    row["trials"].append(t)
                    row["summaries"] = {ours: summary(row["trials"], settings, ours) for ours in settings.ours()}
                    row["summary"] = row["summaries"][settings.ours()[0]]
                    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def table(result: dict) -> str:
    peer = result["settings"]["peer"]
    rows = [{"n": f"{size['subscriptions']:,}", "rate": f"{r['median_offered_events_per_s']:,.0f}", "run": ours,
             "peer": f"{r[f'{peer}_median_p50_ms']:,.1f} / {r[f'{peer}_median_p99_ms']:,.1f}",
             "ours": f"{r[f'{ours}_median_p50_ms']:,.1f} / {r[f'{ours}_median_p99_ms']:,.1f}",
             "ratio": f"{r['median_p99_ratio']:.2f} ({', '.join(f'{x:.2f}' for x in r['p99_ratio'])})",
             "met": ("yes" if r["target"]["met"] else "NO") if "target" in r else "–"}
            for size in result["sizes"] for ours, of_ours in size.get("summaries", {}).items() for r in of_ours]
    return report.markdown_table(rows, [("n", "subscriptions"), ("rate", "offered events/s (median)"), ("run", "run"),
                                        ("peer", f"{peer} p50 / p99 ms"), ("ours", "p50 / p99 ms"),
                                        ("ratio", "p99 ratio, median (rounds)"), ("met", "target met")])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Settings()
    ap.add_argument("--sizes", default="1000,100000", help="subscription counts, comma-separated")
    ap.add_argument("--peer", default=d.peer, choices=[s for s in streams.SYSTEMS if s != OURS])
    ap.add_argument("--rounds", type=int, default=d.rounds, help="rounds of both systems per size (at least 3 for "
                                                                 "the figures)")
    ap.add_argument("--base-rate", type=float, default=d.base_rate, help="events/s offered to both in every round")
    ap.add_argument("--fractions", default=",".join(f"{f:g}" for f in d.fractions),
                    help="further rates, as fractions of the peer's maximum in the round, comma-separated")
    ap.add_argument("--latency-seconds", type=float, default=d.latency_seconds, help="duration of each rate's phase")
    streams.add_backlog_and_peer_options(ap, d)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--pin-broker", action="store_true",
                    help="the broker's JVM on core 0, both systems and the load on the other cores (does sharing the "
                         "cores with the broker make the tail?)")
    ap.add_argument("--out", type=Path, default=None,
                    help="results file (default benchmarks/results/streams-latency-<date>.json)")
    ap.add_argument("--processor-options", action="append", default=None, metavar="OPTIONS",
                    help="further `pubsub run` options of a run of the processor in every round (repeatable, one run "
                         "each, their order turning from round to round; give them after '=', "
                         "e.g. --processor-options= --processor-options=--overlap-commits); default: one run, its "
                         "defaults")
    ap.add_argument("--plot", type=Path, default=PLOT, help="the plot of latency against the offered rate")
    a = ap.parse_args(argv)
    fractions = tuple(float(f) for f in a.fractions.split(",") if f)
    if a.rounds < 1 or a.latency_seconds <= 0 or a.base_rate <= 0 or any(not 0 < f <= 1 for f in fractions):
        ap.error("--rounds must be at least 1, --latency-seconds and --base-rate positive, fractions in (0, 1]")
    settings = Settings(peer=a.peer, rounds=a.rounds, base_rate=a.base_rate, fractions=fractions,
                        latency_seconds=a.latency_seconds, seed=a.seed, pin_broker=a.pin_broker,
                        processor_options=tuple(a.processor_options or ("",)), **streams.backlog_and_peer_settings(a))
    out = a.out or report.RESULTS / f"streams-latency-{time.strftime('%Y-%m-%d')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.peers.streams_latency " + " ".join(sys.argv[1:] if argv is None else argv)
    result = run([int(s) for s in a.sizes.split(",") if s], settings, out, command)
    plot(result, a.plot)
    print(table(result))
    print(f"results: {out}; plot: {a.plot}")


if __name__ == "__main__":
    main()
