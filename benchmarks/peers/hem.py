"""The published C++ matchers of the HEM repository beside the engine, on their interval workload.

    python -m benchmarks.peers.hem --hem-build 100000=/tmp/hem/b100k/run-b1000-l13 \\
        --hem-build 100000=/tmp/hem/b100k/run-b1000-l15:tama --be 4,5,6,7 --workloads interval,w0 --rounds 2

The peer is the ``run`` program of github.com/shiwanghua/HEM built outside this repository, one build per number
of subscriptions and per compile-time setting (``subs`` in their ``constant.h``; ``buks``, REIN's and HEM5DD's
buckets, and ``level``, TAMA's levels, in ``constant.cpp``), with ``main.cpp`` running ``run_rein`` (REIN),
``run_HEM5`` (HEM5DD), ``run_tama_forward_native`` (TAMA) and ``run_OpIndex`` (OpIndex) on one generated data
set, or those of them the environment's ``HEM_RUN`` lists, after a line of its compile-time settings
(benchmarks/peers/README.md gives the parameters and the build).  ``--hem-build SUBS=PATH[:ALGORITHMS]`` names a
build and the algorithms to run from it; HEM5DD runs once per bit exponent of ``--be`` (a command-line argument
of theirs), alone after the first.  Every row of the results carries the settings it ran at
(:data:`SETTING_KEYS`), read from the program's own settings line.  Their generator
(``intervalGenerator``, generator.cpp) makes ``cons`` ranges of ``width * valDom`` values on distinct
attributes drawn uniformly from ``atts``, low ends uniform so that a range fits in ``0..valDom-1``, and 1,000
events (``pubs``, a constant too) of ``m`` attributes with uniform values; each algorithm appends one line to its
result file (``Rein.txt``, ``HEM5.txt``, ``Tama.txt``, ``OpIndex2.txt``) in the working directory:
``<expID> memory= <MB> MB AvgMatchNum= .. AvgInsertTime= <ms> ms [InitTime= <ms> ms AvgConstructionTime= <ms>
ms] .. AvgMatchTime= <ms> ms ..`` (:func:`parse_result_line`).  BE-Tree is not in the repository at that commit.

Workloads (``--workloads``), each on both sides with the same distribution:

* ``interval``: their default (20 attributes, 10 ranges of 30 %, domain 0..1,000,000, events with all 20);
  ours is ``workloads.intervals.IntervalSpec()``.
* ``w0``: the closest form of Fabret's W0 their generator can make: ranges of width 0 (``lo <= x <= lo``, an
  equality) on 5 distinct attributes of 32, values 0..34, events with all 32.  It differs from W0 in one
  point: W0 puts two of the five predicates on ``a0`` and ``a1`` in every subscription, their generator draws all
  five attributes; ours runs the same form (W0 with no fixed predicates, values 0..34, ``=`` predicates).
* ``sparse``: not supported (:data:`SPARSE_REASON`).

Ours is ``Matcher("dynamic")`` in a child process (its own peak RSS): ``add_bulk`` of the columnar batch (build
time), 50 events matched once to compile or load its kernels, then ``match_encoded`` on the 1,000 events in one
call (theirs match one event per call, as their matchers are built to).  Our time is that call's wall time:
checking and encoding the events, matching them and the ids of each event's matches (CSR); theirs is the mean of
their timer around each event's ``match`` call, which only counts the matches (``AvgMatchTime``; the inserts, and
HEM5DD's ``initBits``, are their build time).  The algorithms of one run of their program run one after the other
in one process; their memory is their own count (``calMemory``, whole MB), and the process's resident memory is
sampled while each algorithm runs (the phases are told apart by the lines it prints).

The data differ (their generator and ``rand()`` against ours and numpy), so the matches cannot be compared set by
set: "the same matches" here means that the matches per event of every system agree with the analytic
expectation ``n * p ** k`` (every event carries every attribute; ``p`` the chance that a uniform value falls in
a range, exact for each generator's integer draws: :func:`predicate_probability`) within ``--z`` standard errors
of the mean over the events (:func:`agrees`; the standard deviation of an event's matches is ours, measured in
the same round: their program reports only the mean), and that the algorithms of one run of theirs report the same
number on its data set.  An algorithm's fastest setting (``fastest_setting``) is the one of least median time
among those whose matches agree; a run that fails is reported under ``errors`` and the others go on.

Rounds alternate the order (theirs then ours, ours then theirs) so that the shared machine's noise hits both;
each round draws new data on both sides.  The ratios (their ms per event over ours, their build time over ours)
are taken within a round, per algorithm and setting, then the median over rounds.  Results: ``--out`` (JSON), rewritten after every trial.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from benchmarks.harness.memory import status_kb
from benchmarks.harness.report import load_numbers
from benchmarks.workloads.intervals import _first
from benchmarks.workloads.opindex import load

#: The HEM repository's commit the driver was written against (their result lines and ``main`` arguments).
HEM_COMMIT = "e4fdbe73600b72823758a1d3442ce74af1b57018"
HEM_EVENTS = 1000  # their ``pubs`` (constant.cpp)
NICE = 19  # both sides run under ``nice -n NICE`` (``--nice``): the same priority, below other work by default
HEM_BE = (4, 7)  # HEM5DD's bit exponents tried by default: their README's setting, then their constant.cpp's
#: Their result file per algorithm, and a piece of the first line the algorithm prints (its phase starts there).
HEM_ALGORITHMS = {"rein": ("Rein.txt", "Rein"), "hem5dd": ("HEM5.txt", "HEM5DD"), "tama": ("Tama.txt", "Tama"),
                  "opindex": ("OpIndex2.txt", "OpIndex2")}
#: The settings of each algorithm that their code exposes (their names: ``constant.cpp``, ``main`` arguments).
SETTING_KEYS = {"rein": ("buks",), "hem5dd": ("be", "buks"), "tama": ("level",), "opindex": ("segments", "signatures")}
SPARSE_REASON = (
    "their generator cannot make it: subscription sizes vary (1..8) while events carry exactly 40 attributes, but "
    "their attNumType varies both sizes or neither; the predicates mix '=', '<=' and '>=', but their ranges all "
    "have one width; and at 20,000 attributes HEM5DD's index holds 2 * (2**be - 1) + 1 bitsets of n bits per "
    "attribute (80 GB at 1M subscriptions with be = 4, 7.7 GB at 100K), TAMA 2**13 vectors per attribute "
    "(3.9 GB before any subscription)")


def predicate_probability(width: int, domain_values: int) -> float:
    """Chance that a value uniform over ``domain_values`` integers falls in a range of ``width + 1`` of them.

    Exact for both generators: their ranges ``[x, x + width]`` and ours always lie inside the domain.
    """
    return (width + 1) / domain_values


def expected_matches(n: int, k: int, p: float) -> float:
    """Matches per event expected of ``n`` subscriptions of ``k`` ranges, events carrying every attribute."""
    return n * p ** k


def agrees(observed: float, expected: float, sd: float, events: int, z: float) -> bool:
    """Whether ``observed`` matches per event is within ``z`` standard errors of ``expected``.

    ``sd`` is the standard deviation of one event's matches (at least a Poisson count's): events near a
    domain's edges fall in fewer ranges, so it is well above the Poisson one on the interval workload.
    """
    return abs(observed - expected) <= z * max(sd, math.sqrt(expected)) / math.sqrt(events)


@dataclass(frozen=True)
class Workload:
    """One workload on both sides: their ``main`` arguments and our generator's, or why it cannot run."""

    name: str
    atts: int = 0
    cons: int = 0
    width: float = 0.0
    val_dom: int = 0
    reason: str = ""  # not empty: not supported

    @property
    def their_width(self) -> int:
        return int(self.val_dom * self.width)  # generator.cpp: fixedWidth = valDom * width

    def their_args(self, be: int = HEM_BE[0]) -> list[str]:
        """expID atts cons m alpha width be attrGroup valDom parallelDegree (main.cpp)."""
        return ["1", str(self.atts), str(self.cons), str(self.atts), "0", repr(self.width), str(be), "1",
                str(self.val_dom), "1"]

    def their_expected(self, n: int) -> float:
        return expected_matches(n, self.cons, predicate_probability(self.their_width, self.val_dom))

    def ours(self, n: int, events: int, seed: int):
        """(subscriptions, events, expected matches per event) of our generator."""
        if self.name == "interval":
            from fastpubsub.workloads.intervals import IntervalSpec, interval_events, interval_subscriptions

            spec = IntervalSpec(n_attributes=self.atts, n_ranges=self.cons, width=self.width,
                                domain=(0, self.val_dom))
            span = spec.domain[1] - spec.domain[0]
            p = predicate_probability(int(round(spec.width * span)), span + 1)
            return (interval_subscriptions(spec, n, seed), interval_events(spec, events, seed + 1),
                    expected_matches(n, self.cons, p))
        from fastpubsub.workloads.fabret import PRESETS, generate_events, generate_subscriptions

        spec = replace(PRESETS["W0"], name="W0-uniform", n_attributes=self.atts, n_event_pairs=self.atts,
                       subscription_attributes=(0, self.atts), n_predicates=self.cons, fixed=(),
                       domain=(0, self.val_dom - 1))
        return (generate_subscriptions(spec, n, seed), generate_events(spec, events, seed + 1),
                expected_matches(n, self.cons, predicate_probability(0, self.val_dom)))


WORKLOADS = {
    "interval": Workload("interval", atts=20, cons=10, width=0.3, val_dom=1_000_000),
    "w0": Workload("w0", atts=32, cons=5, width=0.0, val_dom=35),
    "sparse": Workload("sparse", reason=SPARSE_REASON),
}


def parse_result_line(line: str) -> dict[str, float]:
    """``key= value`` pairs of one line of their result files (units after a value are skipped)."""
    tokens = line.split()
    out = {"expID": float(tokens[0])}
    for key, value in zip(tokens[1:], tokens[2:]):
        if key.endswith("=") and re.fullmatch(r"-?[\d.]+(?:e[-+]?\d+)?", value):
            out[key[:-1]] = float(value)
    return out


def parse_settings(line: str) -> dict[str, int]:
    """Their program's compile-time settings from the line it prints first (``settings: subs= .. buks= ..``)."""
    tokens = line.split()[1:]
    return {key[:-1]: int(value) for key, value in zip(tokens[::2], tokens[1::2])}


def label(name: str, settings: dict) -> str:
    """``hem5dd be=7 buks=1000``: an algorithm at its settings, the name rows and systems go by."""
    return " ".join([name, *(f"{k}={settings[k]}" for k in SETTING_KEYS[name] if k in settings)])


def their_figures(fields: dict[str, float]) -> dict:
    """Build time, ms per event, matches per event and memory of one parsed result line."""
    n = int(fields["numSub"])
    per_sub = fields.get("AvgConstructionTime", fields["AvgInsertTime"])  # ms, InitTime spread over the inserts
    return {"n": n, "build_s": round(per_sub * n / 1e3, 4), "ms_per_event": fields["AvgMatchTime"],
            "matches_per_event": fields["AvgMatchNum"], "memory_own_mb": fields["memory"]}


def _rss_mb(pid: int) -> float | None:
    """``pid``'s resident set in MB, or None once it has exited."""
    try:
        return status_kb("VmRSS", pid) / 1024
    except (OSError, RuntimeError):
        return None


def _wait(proc: subprocess.Popen) -> tuple[int, float]:
    """Exit status and peak resident memory (MB) of one child process (``nice`` and ``stdbuf`` exec it)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024


def _unlimited_stack() -> None:
    """Their README runs the program under ``ulimit -s unlimited``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    resource.setrlimit(resource.RLIMIT_STACK, (hard, hard))


def run_theirs(binary: Path, workload: Workload, be: int = HEM_BE[0], algorithms: tuple[str, ...] = tuple(HEM_ALGORITHMS)) -> dict:
    """One run of their program at bit exponent ``be``, of ``algorithms`` (in their order): per algorithm, its
    figures at its settings and the process's resident memory while it ran."""
    with tempfile.TemporaryDirectory(prefix="hem-") as cwd:
        for file, _ in HEM_ALGORITHMS.values():
            Path(cwd, file).touch()
        Path(cwd, "tmpData").mkdir()
        t = time.perf_counter()
        order = [name for name in HEM_ALGORITHMS if name in algorithms]
        proc = subprocess.Popen(["nice", "-n", str(NICE), "stdbuf", "-oL", str(binary.resolve()), *workload.their_args(be)],
                                cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                errors="replace", preexec_fn=_unlimited_stack,
                                env={**os.environ, "HEM_RUN": ",".join(order)})
        settings: dict[str, int] = {}
        phase: list = [None]
        peaks: dict[str, list[float]] = {}
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                rss = _rss_mb(proc.pid)
                if rss is not None and phase[0] is not None:
                    peaks[phase[0]][1] = max(peaks[phase[0]][1], rss)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        log = []
        for line in proc.stdout:
            log.append(line)
            if line.startswith("settings:") and not settings:
                settings = parse_settings(line)
            nxt = order[len(peaks)] if len(peaks) < len(order) else None
            if nxt and HEM_ALGORITHMS[nxt][1] in line:
                rss = _rss_mb(proc.pid) or 0.0
                peaks[nxt] = [rss, rss]
                phase[0] = nxt
        done.set()
        rc, peak = _wait(proc)
        sampler.join()
        wall = time.perf_counter() - t
        if rc != 0:
            raise RuntimeError(f"{binary} exited with {rc}: {''.join(log[-5:])}")
        if not settings:
            raise RuntimeError(f"{binary} printed no settings line: not built as benchmarks/peers/README.md says")
        rows = {}
        for name in order:
            file = HEM_ALGORITHMS[name][0]
            text = Path(cwd, file).read_text(errors="replace").strip()
            if not text:
                continue
            row = their_figures(parse_result_line(text.splitlines()[0]))
            row["settings"] = {k: settings[k] for k in SETTING_KEYS[name] if k in settings}
            if name in peaks:
                row["rss_at_start_mb"], row["rss_peak_mb"] = (round(x, 1) for x in peaks[name])
            rows[name] = row
    return {"binary": str(binary), "be": be, "algorithms": order, "settings": settings, "rows": rows,
            "process_peak_rss_mb": round(peak, 1), "wall_s": round(wall, 1)}


def run_ours(workload: Workload, n: int, events: int, seed: int) -> dict:
    """Our engine on our generator's data (in this process: run it in a child, as :func:`ours_in_child` does)."""
    subs, evs, expected = workload.ours(n, events, seed)
    rss0 = _rss_mb(os.getpid())
    m, build, _ = load("dynamic", subs)  # kernels compiled (or loaded from numba's cache) before timing
    rss1 = _rss_mb(os.getpid())
    m.match_encoded(_first(evs, 50))
    t, cpu = time.perf_counter(), time.process_time()
    out = m.match_encoded(evs)
    secs, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {"n": n, "build_s": round(build, 3), "ms_per_event": round(secs * 1e3 / events, 6),
            "cpu_ms_per_event": round(cpu * 1e3 / events, 6),
            "matches_per_event": len(out.ids) / events, "matches_sd": float(np.std(np.diff(out.offsets))),
            "expected_matches_per_event": expected,
            "memory_bytes": m.stats()["memory_bytes"], "rss_at_start_mb": round(rss0, 1),
            "rss_after_build_mb": round(rss1, 1)}


def ours_in_child(workload: str, n: int, events: int, seed: int) -> dict:
    """:func:`run_ours` in a fresh interpreter, under ``nice`` as theirs runs."""
    cmd = ["nice", "-n", str(NICE), sys.executable, "-m", "benchmarks.peers.hem", "--ours-only",
           f"{workload}:{n}:{events}:{seed}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    text = proc.stdout.read()
    rc, peak = _wait(proc)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {rc}")
    return {**json.loads(text.strip().splitlines()[-1]), "process_peak_rss_mb": round(peak, 1)}


def their_plan(builds: list[tuple[Path, tuple[str, ...]]], bes: tuple[int, ...]) -> list[tuple[Path, int, tuple[str, ...]]]:
    """The runs of their program in one round: each build with its algorithms at the first bit exponent, then
    HEM5DD alone at each other one (the others do not read it)."""
    plan = []
    for binary, algorithms in builds:
        plan.append((binary, bes[0], algorithms))
        if "hem5dd" in algorithms:
            plan += [(binary, be, ("hem5dd",)) for be in bes[1:]]
    return plan


def run_or_fail(binary: Path, workload: Workload, be: int, algorithms: tuple[str, ...]) -> dict:
    """:func:`run_theirs`, or the reason it failed (a setting their code does not take is reported, not fatal)."""
    try:
        return run_theirs(binary, workload, be, algorithms)
    except RuntimeError as e:
        return {"binary": str(binary), "be": be, "algorithms": list(algorithms), "error": str(e)[-500:]}


def compare(size: int, workload: Workload, builds: list[tuple[Path, tuple[str, ...]]], rounds: int, z: float, log,
            bes: tuple[int, ...] = HEM_BE) -> dict:
    """``rounds`` alternating runs of theirs (every build and setting) and ours at ``size``, checked and
    summarised."""
    if workload.reason:
        return {"size": size, "workload": workload.name, "supported": False, "reason": workload.reason}
    trials = []
    for r in range(rounds):
        order = ("theirs", "ours") if r % 2 == 0 else ("ours", "theirs")
        trial = {"round": r, "load_average_before": load_numbers()}
        for side in order:
            if side == "theirs":
                trial["theirs"] = [run_or_fail(binary, workload, be, algorithms)
                                   for binary, be, algorithms in their_plan(builds, bes)]
            else:
                trial["ours"] = ours_in_child(workload.name, size, HEM_EVENTS, seed=r + 1)
        trial["load_average_after"] = load_numbers()
        trials.append(trial)
        log(json.dumps({"size": size, "workload": workload.name, **trial}))
    return summarise(size, workload, trials, z)


def their_runs(trial: dict) -> list[dict]:
    """The runs of their program in one trial (a file written before settings were tried holds one)."""
    theirs = trial["theirs"]
    return [theirs] if isinstance(theirs, dict) else theirs


def summarise(size: int, workload: Workload, trials: list[dict], z: float) -> dict:
    """Medians over rounds per algorithm and setting, per-round ratios to ours, the agreement of the matches, and
    each algorithm's fastest setting among those whose matches agree."""
    ours = [t["ours"] for t in trials]
    theirs_expected = workload.their_expected(size)
    out = {"size": size, "workload": workload.name, "supported": True, "their_args": workload.their_args(),
           "events": HEM_EVENTS, "trials": trials, "systems": {}}
    out["systems"]["fastpubsub-dynamic"] = {
        "build_s": statistics.median(o["build_s"] for o in ours),
        "ms_per_event": statistics.median(o["ms_per_event"] for o in ours),
        "cpu_ms_per_event": statistics.median(o["cpu_ms_per_event"] for o in ours),
        "matches_per_event": [o["matches_per_event"] for o in ours],
        "expected_matches_per_event": ours[0]["expected_matches_per_event"],
        "agrees_with_expectation": all(agrees(o["matches_per_event"], o["expected_matches_per_event"],
                                              o["matches_sd"], HEM_EVENTS, z) for o in ours),
        "memory_mb": statistics.median(o["memory_bytes"] for o in ours) / 2**20,
        "rss_build_mb": statistics.median(o["rss_after_build_mb"] - o["rss_at_start_mb"] for o in ours),
        "process_peak_rss_mb": statistics.median(o["process_peak_rss_mb"] for o in ours),
    }
    runs = [(run, t["ours"]) for t in trials for run in their_runs(t)]
    out["errors"] = [{k: v for k, v in run.items() if k != "rows"} for run, _ in runs if "error" in run]
    agree_among = all(len({row["matches_per_event"] for row in run["rows"].values()}) == 1
                      for run, _ in runs if "error" not in run)
    per_label: dict[str, list[tuple[str, dict, dict, dict]]] = {}
    for run, o in runs:
        for name, row in run.get("rows", {}).items():
            per_label.setdefault(label(name, row.get("settings", {})), []).append((name, row, run, o))
    for key, rows in per_label.items():
        out["systems"][f"hem:{key}"] = {
            "algorithm": rows[0][0], "settings": rows[0][1].get("settings", {}),
            "build_s": statistics.median(r["build_s"] for _, r, _, _ in rows),
            "ms_per_event": statistics.median(r["ms_per_event"] for _, r, _, _ in rows),
            "matches_per_event": [r["matches_per_event"] for _, r, _, _ in rows],
            "expected_matches_per_event": theirs_expected,
            "agrees_with_expectation": all(agrees(r["matches_per_event"], theirs_expected, o["matches_sd"], HEM_EVENTS, z)
                                           for _, r, _, o in rows),
            "memory_mb": statistics.median(r["memory_own_mb"] for _, r, _, _ in rows),
            "process_peak_rss_mb": statistics.median(run["process_peak_rss_mb"] for _, _, run, _ in rows),
            "rss_phase_mb": statistics.median(r.get("rss_peak_mb", 0) - r.get("rss_at_start_mb", 0) for _, r, _, _ in rows),
            "time_ratio_to_ours": statistics.median(r["ms_per_event"] / o["ms_per_event"] for _, r, _, o in rows),
            "build_ratio_to_ours": statistics.median(r["build_s"] / o["build_s"] for _, r, _, o in rows),
        }
    best: dict[str, str] = {}
    for key, system in out["systems"].items():
        name = system.get("algorithm")
        if name and system["agrees_with_expectation"] and (
                name not in best or system["ms_per_event"] < out["systems"][best[name]]["ms_per_event"]):
            best[name] = key
    out["fastest_setting"] = best
    out["their_algorithms_agree"] = agree_among
    out["all_agree"] = agree_among and all(s["agrees_with_expectation"] for s in out["systems"].values())
    return out


def _build(spec: str) -> tuple[int, Path, tuple[str, ...]]:
    """``SUBS=PATH[:ALGORITHMS]``: a build of their program and the algorithms to run from it (default all)."""
    size, _, rest = spec.partition("=")
    path, _, names = rest.partition(":")
    if not path or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected SUBS=PATH[:ALGORITHMS], not {spec!r}")
    algorithms = tuple(names.split(",")) if names else tuple(HEM_ALGORITHMS)
    unknown = set(algorithms) - set(HEM_ALGORITHMS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown algorithm(s) {', '.join(sorted(unknown))} in {spec!r}; expected "
                                         f"some of {', '.join(HEM_ALGORITHMS)}")
    return int(size), Path(path), algorithms


def _bes(text: str) -> tuple[int, ...]:
    try:
        bes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bit exponents such as 4,7, not {text!r}") from None
    if not bes or any(be < 0 for be in bes):
        raise argparse.ArgumentTypeError(f"bit exponents are 0 or more, not {text!r}")
    return bes


def main(argv: list[str] | None = None) -> None:
    global NICE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hem-build", type=_build, action="append", default=[], metavar="SUBS=PATH[:ALGORITHMS]",
                    help="their program built with subs = SUBS in constant.h (one or more per size, one per "
                         "compile-time setting), and the algorithms to run from it (rein,hem5dd,tama,opindex: all)")
    ap.add_argument("--be", type=_bes, default=HEM_BE, metavar="BE,...",
                    help="HEM5DD's bit exponents (2 * 2**be bitsets per attribute), one run each; the first is also "
                         "the one the other algorithms run beside (default: %(default)s)")
    ap.add_argument("--workloads", default="interval,w0,sparse")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--nice", type=int, default=NICE,
                    help="niceness of both sides' processes (0: the priority of other work on the machine)")
    ap.add_argument("--z", type=float, default=5.0, help="standard errors allowed between matches and expectation")
    ap.add_argument("--hem-commit", default=HEM_COMMIT, help="the commit their program was built from (recorded)")
    ap.add_argument("--out", default=f"benchmarks/results/runs/{time.strftime('%Y-%m-%d')}-peers-hem.json")
    ap.add_argument("--ours-only", help=argparse.SUPPRESS)  # WORKLOAD:N:EVENTS:SEED, the child of ours_in_child
    args = ap.parse_args(argv)
    NICE = args.nice
    if args.ours_only:
        name, n, events, seed = args.ours_only.split(":")
        print(json.dumps(run_ours(WORKLOADS[name], int(n), int(events), int(seed))))
        return
    if not args.hem_build:
        ap.error("give at least one --hem-build SUBS=PATH")
    names = args.workloads.split(",")
    for name in names:
        if name not in WORKLOADS:
            ap.error(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    result = {"hem_commit": args.hem_commit, "command": " ".join(["python -m benchmarks.peers.hem", *sys.argv[1:]]),
              "load_average_at_start": load_numbers(), "cpus": os.cpu_count(), "comparisons": []}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {result['load_average_at_start']}", flush=True)
    builds: dict[int, list[tuple[Path, tuple[str, ...]]]] = {}
    for size, binary, algorithms in args.hem_build:
        builds.setdefault(size, []).append((binary, algorithms))
    result["be"] = list(args.be)
    result["nice"] = NICE
    for size, size_builds in builds.items():
        for name in names:
            c = compare(size, WORKLOADS[name], size_builds, args.rounds, args.z, lambda s: print(s, flush=True),
                        bes=args.be)
            result["comparisons"].append(c)
            print(json.dumps({k: v for k, v in c.items() if k != "trials"}, indent=1), flush=True)
            out.write_text(json.dumps(result, indent=1))
    result["load_average_at_end"] = load_numbers()
    out.write_text(json.dumps(result, indent=1))
    print(f"load average at end: {result['load_average_at_end']}; results in {out}", flush=True)
    if not all(c.get("all_agree", True) for c in result["comparisons"]):
        sys.exit("matches per event disagree (see all_agree in the results)")


if __name__ == "__main__":
    main()
