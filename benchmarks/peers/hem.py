"""The published C++ matchers of the HEM repository beside the engine, on their interval workload.

    python -m benchmarks.peers.hem --hem-build 100000=/tmp/hem/b100k/run --hem-build 1048576=/tmp/hem/b1m/run \\
        --workloads interval,w0,sparse --rounds 2

The peer is the ``run`` program of github.com/shiwanghua/HEM built outside this repository, one build per number
of subscriptions (``subs`` is a compile-time constant of their ``constant.h``), with ``main.cpp`` running
``run_rein`` (REIN), ``run_HEM5`` (HEM5DD), ``run_tama_forward_native`` (TAMA) and ``run_OpIndex`` (OpIndex)
on one generated data set (benchmarks/peers/README.md gives the parameters).  Their generator
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
HEM5DD's ``initBits``, are their build time).  Theirs run one after the other in one
process; their memory is their own count (``calMemory``, whole MB), and the process's resident memory is
sampled while each algorithm runs (the phases are told apart by the lines it prints).

The data differ (their generator and ``rand()`` against ours and numpy), so the matches cannot be compared set by
set: "the same matches" here means that the matches per event of every system agree with the analytic
expectation ``n * p ** k`` (every event carries every attribute; ``p`` the chance that a uniform value falls in
a range, exact for each generator's integer draws: :func:`predicate_probability`) within ``--z`` standard errors
of the mean over the events (:func:`agrees`; the standard deviation of an event's matches is ours, measured in
the same round: their program reports only the mean), and that their four algorithms report the same number on
their one data set.

Rounds alternate the order (theirs then ours, ours then theirs) so that the shared machine's noise hits both;
each round draws new data on both sides.  The ratios (their ms per event over ours, their build time over ours)
are taken within a round, then the median over rounds.  Results: ``--out`` (JSON), rewritten after every trial.
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

from benchmarks.intervals import _first, load_average
from benchmarks.opindex import load

#: The HEM repository's commit the driver was written against (their result lines and ``main`` arguments).
HEM_COMMIT = "e4fdbe73600b72823758a1d3442ce74af1b57018"
HEM_EVENTS = 1000  # their ``pubs`` (constant.cpp)
HEM_BE = 4  # HEM5DD's bit exponent, their README's setting for it
#: Their result file per algorithm, and a piece of the first line the algorithm prints (its phase starts there).
HEM_ALGORITHMS = {"rein": ("Rein.txt", "Rein"), "hem5dd": ("HEM5.txt", "HEM5DD"), "tama": ("Tama.txt", "Tama"),
                  "opindex": ("OpIndex2.txt", "OpIndex2")}
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

    def their_args(self) -> list[str]:
        """expID atts cons m alpha width be attrGroup valDom parallelDegree (main.cpp)."""
        return ["1", str(self.atts), str(self.cons), str(self.atts), "0", repr(self.width), str(HEM_BE), "1",
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


def their_figures(fields: dict[str, float]) -> dict:
    """Build time, ms per event, matches per event and memory of one parsed result line."""
    n = int(fields["numSub"])
    per_sub = fields.get("AvgConstructionTime", fields["AvgInsertTime"])  # ms, InitTime spread over the inserts
    return {"n": n, "build_s": round(per_sub * n / 1e3, 4), "ms_per_event": fields["AvgMatchTime"],
            "matches_per_event": fields["AvgMatchNum"], "memory_own_mb": fields["memory"]}


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
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


def run_theirs(binary: Path, workload: Workload) -> dict:
    """One run of their program: per algorithm, its figures and the process's resident memory while it ran."""
    with tempfile.TemporaryDirectory(prefix="hem-") as cwd:
        for file, _ in HEM_ALGORITHMS.values():
            Path(cwd, file).touch()
        Path(cwd, "tmpData").mkdir()
        t = time.perf_counter()
        proc = subprocess.Popen(["nice", "-n", "19", "stdbuf", "-oL", str(binary.resolve()), *workload.their_args()],
                                cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                errors="replace", preexec_fn=_unlimited_stack)
        order = list(HEM_ALGORITHMS)
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
        rows = {}
        for name, (file, _) in HEM_ALGORITHMS.items():
            text = Path(cwd, file).read_text(errors="replace").strip()
            if not text:
                continue
            row = their_figures(parse_result_line(text.splitlines()[0]))
            if name in peaks:
                row["rss_at_start_mb"], row["rss_peak_mb"] = (round(x, 1) for x in peaks[name])
            rows[name] = row
    return {"rows": rows, "process_peak_rss_mb": round(peak, 1), "wall_s": round(wall, 1)}


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
    cmd = ["nice", "-n", "19", sys.executable, "-m", "benchmarks.peers.hem", "--ours-only",
           f"{workload}:{n}:{events}:{seed}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    text = proc.stdout.read()
    rc, peak = _wait(proc)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {rc}")
    return {**json.loads(text.strip().splitlines()[-1]), "process_peak_rss_mb": round(peak, 1)}


def compare(size: int, workload: Workload, binary: Path, rounds: int, z: float, log) -> dict:
    """``rounds`` alternating runs of theirs and ours at ``size``, checked and summarised."""
    if workload.reason:
        return {"size": size, "workload": workload.name, "supported": False, "reason": workload.reason}
    trials = []
    for r in range(rounds):
        order = ("theirs", "ours") if r % 2 == 0 else ("ours", "theirs")
        trial = {"round": r, "load_average_before": load_average()}
        for side in order:
            if side == "theirs":
                trial["theirs"] = run_theirs(binary, workload)
            else:
                trial["ours"] = ours_in_child(workload.name, size, HEM_EVENTS, seed=r + 1)
        trial["load_average_after"] = load_average()
        trials.append(trial)
        log(json.dumps({"size": size, "workload": workload.name, **trial}))
    return summarise(size, workload, trials, z)


def summarise(size: int, workload: Workload, trials: list[dict], z: float) -> dict:
    """Medians over rounds, per-round ratios to ours, and the agreement of the matches."""
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
    agree_among = all(len({row["matches_per_event"] for row in t["theirs"]["rows"].values()}) == 1 for t in trials)
    for name in HEM_ALGORITHMS:
        rows = [(t["theirs"]["rows"][name], t["ours"]) for t in trials if name in t["theirs"]["rows"]]
        if not rows:
            continue
        out["systems"][f"hem:{name}"] = {
            "build_s": statistics.median(r["build_s"] for r, _ in rows),
            "ms_per_event": statistics.median(r["ms_per_event"] for r, _ in rows),
            "matches_per_event": [r["matches_per_event"] for r, _ in rows],
            "expected_matches_per_event": theirs_expected,
            "agrees_with_expectation": all(agrees(r["matches_per_event"], theirs_expected, o["matches_sd"], HEM_EVENTS, z)
                                           for r, o in rows),
            "memory_mb": statistics.median(r["memory_own_mb"] for r, _ in rows),
            "process_peak_rss_mb": statistics.median(t["theirs"]["process_peak_rss_mb"] for t in trials),
            "rss_phase_mb": statistics.median(r.get("rss_peak_mb", 0) - r.get("rss_at_start_mb", 0) for r, _ in rows),
            "time_ratio_to_ours": statistics.median(r["ms_per_event"] / o["ms_per_event"] for r, o in rows),
            "build_ratio_to_ours": statistics.median(r["build_s"] / o["build_s"] for r, o in rows),
        }
    out["their_algorithms_agree"] = agree_among
    out["all_agree"] = agree_among and all(s["agrees_with_expectation"] for s in out["systems"].values())
    return out


def _build(spec: str) -> tuple[int, Path]:
    size, _, path = spec.partition("=")
    if not path:
        raise argparse.ArgumentTypeError(f"expected SUBS=PATH, not {spec!r}")
    return int(size), Path(path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hem-build", type=_build, action="append", default=[], metavar="SUBS=PATH",
                    help="their program built with subs = SUBS in constant.h (one per size)")
    ap.add_argument("--workloads", default="interval,w0,sparse")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--z", type=float, default=5.0, help="standard errors allowed between matches and expectation")
    ap.add_argument("--hem-commit", default=HEM_COMMIT, help="the commit their program was built from (recorded)")
    ap.add_argument("--out", default=f"benchmarks/results/runs/{time.strftime('%Y-%m-%d')}-peers-hem.json")
    ap.add_argument("--ours-only", help=argparse.SUPPRESS)  # WORKLOAD:N:EVENTS:SEED, the child of ours_in_child
    args = ap.parse_args(argv)
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
              "load_average_at_start": load_average(), "cpus": os.cpu_count(), "comparisons": []}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {result['load_average_at_start']}", flush=True)
    for size, binary in args.hem_build:
        for name in names:
            c = compare(size, WORKLOADS[name], binary, args.rounds, args.z, lambda s: print(s, flush=True))
            result["comparisons"].append(c)
            print(json.dumps({k: v for k, v in c.items() if k != "trials"}, indent=1), flush=True)
            out.write_text(json.dumps(result, indent=1))
    result["load_average_at_end"] = load_average()
    out.write_text(json.dumps(result, indent=1))
    print(f"load average at end: {result['load_average_at_end']}; results in {out}", flush=True)
    if not all(c.get("all_agree", True) for c in result["comparisons"]):
        sys.exit("matches per event disagree (see all_agree in the results)")


if __name__ == "__main__":
    main()
