"""Fabret et al.'s equilibrium experiments (section 6.2.2, figure 4), scaled to this machine.

    python -m benchmarks.figures.equilibrium --out benchmarks/results --img docs/img   # 1M subscriptions, ~20 min
    python -m benchmarks.figures.equilibrium --quick --out /tmp/eq                  # 20K subscriptions, < 1 min
    python -m benchmarks.figures.equilibrium --n 300000 --scenarios W5-W6 --strategies dynamic

The system is loaded with ``n`` subscriptions of the first workload (W3, or
W5), then runs at *equilibrium*: every tick (one simulated second) the
``per_tick`` = 50 oldest subscriptions are deleted and 50 new ones inserted,
and events are matched.  After ``lifetime / 8`` ticks (the paper's 2 hours of
a 16-hour lifetime) new subscriptions and events follow the second workload
(W4: the other 16 attributes; W6: the first fixed attribute skewed to 2
values, subscriptions and events alike; W3's and W4's events have the same
distribution, all 32 attributes uniform, as in the paper).  The run goes on
until the whole population has turned over (``lifetime = n / per_tick``
ticks), then ``lifetime / 8`` ticks more.

Two strategies, both ``Matcher("dynamic")`` loaded the same way:

* ``dynamic``: the maintenance of section 4 keeps adapting the clustering;
* ``no-change``: :meth:`engine.Matcher.freeze_clustering` right after the
  load keeps the initial (adapted to the first workload) configuration, with
  the same cluster layout as ``dynamic`` (runs, the engine's default);
* ``no-change-plain``: the paper's no-change, on plain clusters (``runs=0``).

With ``dynamic``, a third matcher, ``dynamic at the shift``, takes the same
ticks as ``dynamic`` until the shift and is frozen there; after the
turnover, in the same ticks as the others, it matches as many events of
the first workload (its own conditions before the shift).  Its matching
time is dynamic's "before the shift" measured at the same moment as
dynamic's end, so the ratio of the two does not depend on how fast the
shared machine happened to run an hour earlier (``end_over_shift_state``).

With ``dynamic``, ``static rebuilt`` is the best configuration the cost
model finds for the final population: at the turnover, a ``static`` matcher
is bulk-loaded with the subscriptions live at that moment (all of the second
workload) under the statistics of the second workload's events, and from
then on it matches the same events in the same ticks, without changes.  It
tells whether dynamic's end is short of what the workload allows
(``end_over_rebuilt``) and whether the state at the shift is within reach at
all (``rebuilt_over_shift_state``).

Timing: every tick, after the changes and a first match that applies the
maintenance and the oracle check, each matcher matches the tick's events
``passes - 1`` more times, the matchers alternating within each pass; the
tick's time per event is the best of its passes, and a window's is the
median of its ticks.  A burst of another process's load then hits a single
pass of one matcher, not the comparison: two matchers in the same state
time alike.  The extra passes feed the online statistics like any event
batch (the same events again) and are not counted towards
``refresh_events``.

Throughput is the paper's: each tick is one second in which the
subscription changes and the maintenance run first, and "we use the
remaining time before the next second tick to send events to the system";
``events_per_s`` = (seconds of the window - update and maintenance seconds)
/ matching seconds per event, the per-event matching time measured on
``events_per_tick`` real events per tick, so the window's maintenance is
charged to it.  ``match_events_per_s`` is matching alone (1 / that time),
with the maintenance reported apart (``maintenance_seconds``).  ``busy_events_per_s`` is the raw
rate of the ticks as run (events / all the time spent), which also counts
the 50 deletions and insertions against only ``events_per_tick`` events.
Rows average ``window`` ticks (the paper averages every two hours).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from fastpubsub.engine import Matcher
from fastpubsub.engine.costmodel.maintenance import Thresholds
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.engine.columnar import concat_subscriptions
from fastpubsub.engine.costmodel.statistics import StatisticsCollector
from fastpubsub.workloads.fabret import PRESETS, WorkloadSpec, generate_events, generate_subscriptions

SCENARIOS: dict[str, tuple[str, str]] = {"W3-W4": ("W3", "W4"), "W5-W6": ("W5", "W6")}
STRATEGIES = ("dynamic", "no-change", "no-change-plain")
#: The paper's no-change: frozen after the load, on plain clusters (no runs).
PLAIN = "no-change-plain"
#: The rows of dynamic's twin frozen at the shift (see the module docstring).
AT_SHIFT = "dynamic at the shift"
#: The rows of a static matcher bulk-loaded at the turnover with the live population (see the module docstring).
REBUILT = "static rebuilt"
#: Matchers that only match after the turnover (no changes), on the events of their own workload.
REFERENCES = (AT_SHIFT, REBUILT)
#: Events observed to give ``static rebuilt`` the second workload's statistics.
STATISTICS_EVENTS = 10_240
FIELDS = ("scenario", "strategy", "n", "phase", "tick", "sim_hours", "turned_over", "events_per_s",
          "match_events_per_s", "busy_events_per_s", "match_us_per_event", "update_seconds", "maintenance_seconds", "tables",
          "moved", "tables_created", "tables_dropped", "events", "verified_events")
#: Fabret et al.'s figure 4 (3M subscriptions, 2001 hardware), events/s, where the text gives them.
PAPER = {
    "W3-W4": "no change ends at half its initial throughput; in the last two hours dynamic 350 events/s, no change 200",
    "W5-W6": "no change loses 20%; dynamic ends at almost its initial throughput",
}
QUICK_N = 20_000


@dataclass(frozen=True)
class Setup:
    """How an equilibrium run is scaled (see the module docstring)."""

    per_tick: int = 50  # subscriptions deleted and inserted per tick
    events_per_tick: int = 200  # events matched per tick (measures the matching time per event)
    before: int = 2_500  # ticks before the shift
    lifetime: int = 20_000  # ticks for the whole population to turn over (n / per_tick)
    after: int = 2_500  # ticks after the turnover
    window: int = 500  # ticks per row
    verify_every: int = 0  # check matches against tests/support/oracles/engine.py every this many ticks (0: never)
    verify_events: int = 3  # events checked per verified tick
    passes: int = 3  # timing passes per tick, the matchers alternating; a tick's time is the best pass
    thresholds: Thresholds | None = None  # the dynamic maintenance's (None: engine defaults)

    @property
    def ticks(self) -> int:
        return self.before + self.lifetime + self.after


def setup_for(n: int, quick: bool = False) -> Setup:
    """The paper's proportions: 2 h before the shift, a 16 h lifetime, 2 h after; 50 rows per run.

    ``quick``: 100-tick lifetime (more changes per tick), oracle checks on 6 ticks.
    """
    if n < 1000:
        raise ValueError(f"n must be at least 1000, got {n}")
    if quick:
        per_tick = max(50, n // 100)
        lifetime = n // per_tick
        return Setup(per_tick=per_tick, events_per_tick=100, before=lifetime // 8, lifetime=lifetime,
                     after=lifetime // 8, window=5, verify_every=max(1, (lifetime * 5 // 4) // 6), passes=2)
    lifetime = n // 50
    total = lifetime + 2 * (lifetime // 8)
    return Setup(before=lifetime // 8, lifetime=lifetime, after=lifetime // 8, window=max(1, total // 50))


class _Run:
    """One strategy's matcher and the measurements of its current window."""

    def __init__(self, strategy: str, m: Matcher) -> None:
        self.strategy, self.m = strategy, m
        self.rows: list[dict] = []
        self.moved0 = m.index.moved
        self.reset()

    def reset(self) -> None:
        self.update = self.maint = self.match = 0.0
        self.events = self.verified = 0
        self.per_event: list[float] = []

    def seconds(self) -> float:
        """Maintenance seconds so far (a static matcher has no maintenance)."""
        mnt = self.m.maintenance
        return mnt.seconds if mnt is not None else 0.0

    def tick(self, old: np.ndarray, new, events) -> object:
        m = self.m
        s0, a = self.seconds(), time.perf_counter()
        m.remove_bulk(old)
        m.add_bulk(new)
        s1, b = self.seconds(), time.perf_counter()
        self.update += (b - a) - (s1 - s0)
        self.maint += s1 - s0
        return self.match_only(events)

    def match_only(self, events) -> object:
        """Match and time ``events``; maintenance that runs meanwhile is counted apart.  Alone, a tick without
        changes (the references after the turnover)."""
        s1, b = self.seconds(), time.perf_counter()
        res = self.m.match_encoded(events)
        s2, c = self.seconds(), time.perf_counter()
        match = (c - b) - (s2 - s1)
        self.maint += s2 - s1
        self.match += match
        self.events += len(events)
        self.per_event.append(match / len(events))
        return res

    def time_again(self, events) -> None:
        """One more timing pass of this tick's events: the tick keeps its best (the matches were checked already).

        The pass is not counted towards the maintenance's ``refresh_events``, so the rounds come when they
        would without it."""
        mnt = self.m.maintenance
        counted, s1, b = mnt.events if mnt is not None else 0, self.seconds(), time.perf_counter()
        self.m.match_encoded(events)
        s2, c = self.seconds(), time.perf_counter()
        if mnt is not None:
            mnt.events = counted
        self.maint += s2 - s1
        self.per_event[-1] = min(self.per_event[-1], ((c - b) - (s2 - s1)) / len(events))


def simulate(scenario: str, strategies: Sequence[str], n: int, setup: Setup, *, seed: int = 0,
             progress: Callable[[str], None] | None = None, cluster_runs: int | None = None,
             at_shift: bool = True, rebuilt: bool = True) -> list[dict]:
    """Equilibrium runs of several strategies in lockstep; one row per strategy and ``setup.window`` ticks.

    The strategies take turns tick by tick (alternating who goes first) on
    the same subscriptions and events, so that bursts of load from other
    processes on the shared machine hit them alike; each tick is timed in
    ``setup.passes`` alternating passes (the module docstring).  ``cluster_runs``: the matchers'
    sorted-run threshold (engine/structures/sorted_runs.py; None, the default: the engine's; 0: the paper's plain
    clusters); ``no-change-plain`` always has plain clusters.
    ``at_shift`` (with ``dynamic``): also run dynamic's twin frozen at the shift
    (``AT_SHIFT`` rows, before the shift and after the turnover); ``rebuilt``
    (with ``dynamic``): from the turnover on, a ``static`` matcher loaded with the live population
    (``REBUILT`` rows, after the turnover).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {', '.join(SCENARIOS)}")
    for strategy in strategies:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    first, second = (PRESETS[w] for w in SCENARIOS[scenario])
    n = setup.per_tick * (n // setup.per_tick)
    subs = generate_subscriptions(first, n, seed=[seed, 0])
    layout = {} if cluster_runs is None else {"runs": cluster_runs}
    runs = []
    twin = at_shift and "dynamic" in strategies
    rebuild = rebuilt and "dynamic" in strategies
    for strategy in list(strategies) + ([AT_SHIFT] if twin else []):
        t0 = time.perf_counter()
        m = Matcher("dynamic", thresholds=setup.thresholds, **({"runs": 0} if strategy == PLAIN else layout))
        m.add_bulk(subs)
        m.match_encoded(generate_events(first, setup.events_per_tick, seed=[seed, 9]))  # numba dispatch warm-up
        if strategy in ("no-change", PLAIN):
            m.freeze_clustering()
        runs.append(_Run(strategy, m))
        if progress:
            progress(f"{scenario} {strategy}: loaded {n:,} {first.name} subscriptions in "
                     f"{time.perf_counter() - t0:.1f} s, {len(m.index.schemas)} multi-attribute tables")
    oracle = None
    if setup.verify_every:
        oracle = OracleMatcher()
        for sid, preds in subs.to_lists():
            oracle.add(sid, preds)
    del subs
    inserted: list = []  # the second workload's subscriptions, for the rebuilt reference

    start = last_report = time.perf_counter()
    turnover = setup.before + setup.lifetime
    for tick in range(setup.ticks):
        spec = first if tick < setup.before else second
        old = np.arange(tick * setup.per_tick, (tick + 1) * setup.per_tick, dtype=np.int64)
        new = generate_subscriptions(spec, setup.per_tick, seed=[seed, 1, tick], first_id=n + tick * setup.per_tick)
        events = generate_events(spec, setup.events_per_tick, seed=[seed, 2, tick])
        if twin and tick == setup.before:
            runs[-1].m.freeze_clustering()  # the twin keeps dynamic's state at the shift from here on
        if rebuild and tick == turnover:
            runs.append(_rebuilt(second, inserted, setup, seed, progress, scenario, layout))
            inserted = []
        after = tick >= turnover
        live = [r for r in runs if r.strategy not in REFERENCES or after or (r.strategy == AT_SHIFT
                                                                                 and tick < setup.before)]
        order = live if tick % 2 == 0 else live[::-1]
        # after the turnover the twin matches events of the first workload: its own "before" conditions
        own = generate_events(first, setup.events_per_tick, seed=[seed, 2, tick]) if twin and after else None
        batch = {r.strategy: own if r.strategy == AT_SHIFT and after else events for r in live}
        results = {r.strategy: r.match_only(batch[r.strategy]) if r.strategy in REFERENCES and after
                   else r.tick(old, new, batch[r.strategy]) for r in order}
        for p in range(1, setup.passes):
            for r in (order if p % 2 == 0 else order[::-1]):
                r.time_again(batch[r.strategy])
        if rebuild and setup.before <= tick < turnover:
            inserted.append(new)
        if oracle is not None:
            for sid in old.tolist():
                oracle.remove(sid)
            for sid, preds in new.to_lists():
                oracle.add(sid, preds)
            if (tick + 1) % setup.verify_every == 0:
                k = min(setup.verify_events, len(events))
                want = [w.tolist() for w in oracle.match_batch(events.to_dicts()[:k])]
                for r in (r for r in runs if r.strategy in results and r.strategy != AT_SHIFT):
                    if r.strategy == REBUILT:  # loaded at the turnover: the oracle's population has moved on
                        continue
                    got = [g.tolist() for g in results[r.strategy].split()[:k]]
                    if got != want:
                        raise AssertionError(f"{scenario} {r.strategy}: tick {tick}: matcher {got} != oracle {want}")
                    r.verified += k
        if (tick + 1) % setup.window == 0 or tick + 1 == setup.ticks:
            for r in runs:
                if r.per_event:  # (the references have no ticks between the shift and the end of the turnover)
                    r.rows.append(_row(scenario, n, setup, tick + 1, r))
                r.reset()
                r.moved0 = r.m.index.moved
        if progress and time.perf_counter() - last_report >= 5.0:
            last_report = time.perf_counter()
            progress(f"{scenario}: tick {tick + 1:,}/{setup.ticks:,}, {_turned_over(setup, tick + 1):.0%} turned over, "
                     + ", ".join(f"{r.strategy} {r.rows[-1]['events_per_s'] if r.rows else 0:,.0f} events/s "
                                 f"({len(r.m.index.schemas)} tables)" for r in runs)
                     + f", {time.perf_counter() - start:.0f} s")
    return [row for r in runs for row in r.rows]


def _rebuilt(spec: WorkloadSpec, inserted: list, setup: Setup, seed: int, progress, scenario: str,
             layout: dict) -> _Run:
    """``static`` bulk-loaded with the population live at the turnover, under the second workload's statistics."""
    t0 = time.perf_counter()
    collector = StatisticsCollector()
    for i in range(STATISTICS_EVENTS // 256):
        collector.observe(generate_events(spec, 256, seed=[seed, 8, i]))
    m = Matcher("static", **layout)
    m.set_statistics(collector.snapshot())
    population = concat_subscriptions(inserted)
    m.add_bulk(population)
    m.match_encoded(generate_events(spec, setup.events_per_tick, seed=[seed, 9]))  # numba dispatch warm-up
    if progress:
        progress(f"{scenario} {REBUILT}: loaded the {len(population):,} live {spec.name} subscriptions in "
                 f"{time.perf_counter() - t0:.1f} s, {len(m.index.schemas)} multi-attribute tables")
    run = _Run(REBUILT, m)
    return run


def _turned_over(setup: Setup, ticks: int) -> float:
    return min(1.0, max(0, ticks - setup.before) / setup.lifetime)


def _row(scenario: str, n: int, setup: Setup, ticks: int, r: _Run) -> dict:
    """The window's figures; matching time per event is the median tick's (robust to other processes' bursts)."""
    n_ticks = (ticks - 1) % setup.window + 1
    per_event = float(np.median(r.per_event))
    busy = r.update + r.maint
    phase = "before" if ticks <= setup.before else "after" if ticks > setup.before + setup.lifetime else "transition"
    return {
        "scenario": scenario,
        "strategy": r.strategy,
        "n": n,
        "phase": phase,
        "tick": ticks,
        "sim_hours": round(ticks / 3600, 4),
        "turned_over": round(_turned_over(setup, ticks), 4),
        "events_per_s": round(max(0.0, n_ticks - busy) / n_ticks / per_event, 1) if per_event > 0 else 0.0,
        "match_events_per_s": round(1.0 / per_event, 1) if per_event > 0 else 0.0,
        "busy_events_per_s": round(r.events / max(busy + r.match, 1e-12), 1),
        "match_us_per_event": round(per_event * 1e6, 3),
        "update_seconds": round(r.update, 4),
        "maintenance_seconds": round(r.maint, 4),
        "tables": len(r.m.index.schemas),
        "moved": int(r.m.index.moved - r.moved0),
        "tables_created": r.m.maintenance.created if r.m.maintenance is not None else 0,
        "tables_dropped": r.m.maintenance.dropped if r.m.maintenance is not None else 0,
        "events": int(r.events),
        "verified_events": int(r.verified),
    }


def run(scenario: str, strategy: str, n: int, *, quick: bool = False, seed: int = 0,
        progress: Callable[[str], None] | None = None) -> list[dict]:
    """One scenario ("W3-W4", "W5-W6") under one strategy ("dynamic", "no-change"): rows over time.

    ``quick``: a 100-tick lifetime with matches checked against the oracle
    (meant for small ``n``; the test suite runs it).
    """
    return simulate(scenario, [strategy], n, setup_for(n, quick), seed=seed, progress=progress)


def _mean(rows: list[dict], phase: str) -> float:
    vals = [r["events_per_s"] for r in rows if r["phase"] == phase]
    return float(np.mean(vals)) if vals else math.nan


def _after_us(rows: list[dict], scenario: str, strategy: str) -> list[float]:
    """Matching time per event of a strategy's windows after the turnover."""
    return [r["match_us_per_event"] for r in rows if r["scenario"] == scenario and r["strategy"] == strategy
            and r["phase"] == "after"]


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per scenario: throughput before the shift and after the turnover per strategy, ratios, targets.

    Targets: after the turnover dynamic at least 1.0x no-change (same cluster
    layout) at every window (``min_ratio_after``), in both scenarios; on W3-W4
    at least 1.5x the paper's no-change (plain clusters) at the end
    (``end_ratio_plain``); and at least 0.9x its own state at the shift, timed
    in the same ticks (``end_over_shift_state``).  Also: the lowest window
    on matching alone, the maintenance left out (``min_match_ratio_after``);
    dynamic's end against the static configuration rebuilt at the turnover
    (``end_over_rebuilt``) and that configuration against the state at the
    shift (``rebuilt_over_shift_state``, what the final workload allows).
    """
    out: dict[str, dict] = {}
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        s: dict = {}
        for strategy in STRATEGIES:
            rs = [r for r in rows if r["scenario"] == scenario and r["strategy"] == strategy]
            if rs:
                s[strategy] = {"before": _mean(rs, "before"), "end": _mean(rs, "after"),
                               "tables_end": rs[-1]["tables"], "tables_created": rs[-1]["tables_created"],
                               "tables_dropped": rs[-1]["tables_dropped"]}
        if "dynamic" in s:
            d = s["dynamic"]
            d["end_over_before"] = d["end"] / d["before"]
            mine = _after_us(rows, scenario, "dynamic")
            twin = _after_us(rows, scenario, AT_SHIFT)
            rebuilt = _after_us(rows, scenario, REBUILT)
            if twin and mine:
                d["end_over_shift_state"] = float(np.mean(twin)) / float(np.mean(mine))
            if rebuilt and mine:  # (the rebuilt reference's windows after the turnover are dynamic's)
                d["end_over_rebuilt"] = float(np.mean(rebuilt)) / float(np.mean(mine[-len(rebuilt):]))
            if rebuilt and twin:
                d["rebuilt_over_shift_state"] = float(np.mean(twin[-len(rebuilt):])) / float(np.mean(rebuilt))
        if "dynamic" in s and "no-change" in s:
            s["end_ratio"] = s["dynamic"]["end"] / s["no-change"]["end"]
            after = {r["tick"]: r["events_per_s"] for r in rows if r["scenario"] == scenario
                     and r["strategy"] == "no-change" and r["phase"] == "after"}
            mine = [(r["events_per_s"], after[r["tick"]]) for r in rows if r["scenario"] == scenario
                    and r["strategy"] == "dynamic" and r["phase"] == "after" and r["tick"] in after]
            s["min_ratio_after"] = min((d / c for d, c in mine if c > 0), default=math.nan)
            us = {r["tick"]: r["match_us_per_event"] for r in rows if r["scenario"] == scenario
                  and r["strategy"] == "no-change" and r["phase"] == "after"}
            s["min_match_ratio_after"] = min((us[r["tick"]] / r["match_us_per_event"] for r in rows
                                              if r["scenario"] == scenario and r["strategy"] == "dynamic"
                                              and r["phase"] == "after" and r["tick"] in us
                                              and r["match_us_per_event"] > 0), default=math.nan)
            met = s["min_ratio_after"] >= 1.0
            if PLAIN in s:
                s["end_ratio_plain"] = s["dynamic"]["end"] / s[PLAIN]["end"]
                if scenario == "W3-W4":
                    met = met and s["end_ratio_plain"] >= 1.5
            if "end_over_shift_state" in s["dynamic"]:
                met = met and s["dynamic"]["end_over_shift_state"] >= 0.9
            s["target_met"] = bool(met)
        out[scenario] = s
    return out


def plot(rows: list[dict], path: str) -> None:
    """Throughput over simulated time, one line per strategy (PNG, like the paper's figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("plot: no rows")
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for scenario in scenarios:
        for strategy, style in zip(STRATEGIES + REFERENCES, ("-", "--", "-.", ":", (0, (1, 3)))):
            rs = [r for r in rows if r["scenario"] == scenario and r["strategy"] == strategy
                  and (strategy != AT_SHIFT or r["phase"] == "after")]  # (before the shift it is dynamic)
            if rs:
                label = strategy if len(scenarios) == 1 else f"{scenario} {strategy}"
                ax.plot([r["sim_hours"] for r in rs], [r["events_per_s"] / 1000 for r in rs], linestyle=style, marker=".",
                        label=label)
    first = [r for r in rows if r["scenario"] == scenarios[0]]
    shift = max((r["sim_hours"] for r in first if r["phase"] == "before"), default=None)
    done = max((r["sim_hours"] for r in first if r["phase"] != "after"), default=None)
    for x, text in ((shift, "shift"), (done, "turned over")):
        if x is not None:
            ax.axvline(x, color="grey", linewidth=0.8, linestyle=":")
            ax.text(x, 0.02, f" {text}", transform=ax.get_xaxis_transform(), color="grey", fontsize=8)
    n = first[0]["n"]
    ax.set_title(f"{' / '.join(s.replace('-', ' to ') for s in scenarios)} at equilibrium, "
                 f"{n:,} subscriptions, 50 changes/s")
    ax.set_xlabel("simulated hours (one tick = one second)")
    ax.set_ylabel("thousand events/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(rows: list[dict], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def image_name(scenario: str) -> str:
    return f"equilibrium-{scenario.lower()}.png"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=None, help=f"subscriptions (default 1,000,000; --quick: {QUICK_N:,})")
    ap.add_argument("--quick", action="store_true", help="100-tick lifetime, oracle checks (< 1 minute)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results", help="directory of equilibrium.csv (and the plots)")
    ap.add_argument("--img", default=None, help="directory of the PNG plots (default: --out)")
    ap.add_argument("--passes", type=int, default=None,
                    help="timing passes per tick, the matchers alternating; a tick's time is the best (default 3)")
    ap.add_argument("--no-rebuilt", action="store_true",
                    help="skip the static matcher rebuilt at the turnover (its load takes a while at 1M)")
    ap.add_argument("--runs", type=int, default=None,
                    help="dynamic and no-change: clusters of at least this many entries keep sorted runs (default: "
                         "the engine's; 0: plain clusters); no-change-plain always has plain clusters")
    args = ap.parse_args(argv)
    n = args.n if args.n is not None else QUICK_N if args.quick else 1_000_000
    scenarios = [s for s in args.scenarios.split(",") if s]
    strategies = [s for s in args.strategies.split(",") if s]
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s!r}; expected {', '.join(SCENARIOS)}")
    for s in strategies:
        if s not in STRATEGIES:
            ap.error(f"unknown strategy {s!r}; expected {', '.join(STRATEGIES)}")
    setup = setup_for(n, args.quick)
    if args.passes is not None:
        if args.passes < 1:
            ap.error(f"--passes must be at least 1, got {args.passes}")
        setup = replace(setup, passes=args.passes)
    _stderr(f"# equilibrium: n={n:,}, {setup.ticks:,} ticks of {setup.per_tick} changes and {setup.events_per_tick} "
            f"events ({setup.passes} timing passes), load average {os.getloadavg()[0]:.2f}")
    rows: list[dict] = []
    t0 = time.perf_counter()
    for scenario in scenarios:  # strategies in lockstep (see simulate)
        rows += simulate(scenario, strategies, n, setup, seed=args.seed, progress=_stderr, cluster_runs=args.runs,
                         rebuilt=not args.no_rebuilt)
    out, img = Path(args.out), Path(args.img or args.out)
    write_csv(rows, out / "equilibrium.csv")
    for scenario in scenarios:
        plot([r for r in rows if r["scenario"] == scenario], str(img / image_name(scenario)))
    summary = summarize(rows)
    for scenario, s in summary.items():
        print(f"{scenario}: " + "; ".join(
            f"{k} before {v['before']:,.0f} end {v['end']:,.0f} events/s ({v['tables_end']} tables)"
            for k, v in s.items() if isinstance(v, dict)))
        if "end_ratio" in s:
            print(f"  dynamic / no-change at the end: {s['end_ratio']:.2f} (lowest window after the turnover "
                  f"{s['min_ratio_after']:.3f}, on matching alone {s['min_match_ratio_after']:.3f}); "
                  f"dynamic end / before: {s['dynamic']['end_over_before']:.2f}")
            if "end_ratio_plain" in s:
                print(f"  dynamic / no-change on plain clusters at the end: {s['end_ratio_plain']:.2f}")
            print(f"  targets met: {s['target_met']}")
        if "end_over_shift_state" in s.get("dynamic", {}):
            print(f"  dynamic's matching at the end / its state at the shift, timed in the same ticks: "
                  f"{s['dynamic']['end_over_shift_state']:.2f}")
        if "end_over_rebuilt" in s.get("dynamic", {}):
            print(f"  dynamic's matching at the end / static rebuilt at the turnover: "
                  f"{s['dynamic']['end_over_rebuilt']:.2f}")
        if "rebuilt_over_shift_state" in s.get("dynamic", {}):
            print(f"  static rebuilt at the turnover / dynamic's state at the shift (what the final workload "
                  f"allows): {s['dynamic']['rebuilt_over_shift_state']:.2f}")
        print(f"  paper: {PAPER[scenario]}")
    print(f"# {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.2f}; "
          f"wrote {out / 'equilibrium.csv'} and {', '.join(str(img / image_name(s)) for s in scenarios)}")


if __name__ == "__main__":
    main()
