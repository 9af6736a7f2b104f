"""The event processor beside a Kafka Streams application doing the same job on the same topics of one Apache Kafka.

    python -m benchmarks.peers.streams --sizes 1000,10000,100000,1000000

The peer is ``benchmarks/peers/kafka-streams`` (built with Maven when its jar is missing or older than its
sources), in two versions: ``streams-scan`` tests every subscription against every event, ``streams-indexed``
looks up the subscriptions with an equality predicate on ``a0`` under the event's value (every W0 subscription has
one) and tests the rest.  Ours is ``pubsub run`` (transactional delivery, what ``benchmarks.pipeline.e2e`` runs); the peer
runs ``exactly_once_v2``.  Both read the same Avro records and write Avro notifications.

For each size: Apache Kafka (``EmbeddedBroker``, one node on loopback), the topics, N W0 subscriptions and the
demo's three hand-written ones (``cli.demo.SHOWCASE``: W0's almost never match), all Avro.  Then ``--rounds``
rounds, each running every system once in turn (A/B/C, A/B/C: the shared machine's noise hits all of them), each
trial on the events and notifications topics made anew:

1. a backlog of W0 events (keys e0, e1, ...) is written, then the system started: it rebuilds its subscriptions
   and drains the backlog; maximum = events committed by its group from the first commit seen to the last, over
   the time between them (``benchmarks.pipeline.e2e.drain_rate``);
2. events offered at half that maximum for ``--latency-seconds``: latency = arrival of an event's first
   notification at a read_committed consumer minus the event's timestamp, percentiles over the notified events;
3. the system's peak resident memory (``VmHWM``) before it is stopped;
4. exactness: the notifications of the first ``--check-events`` backlog events against the engine's oracle
   (``tests/support/oracles/engine.py``), as sets of (subscription id, event id), duplicates counted.

A backlog is sized to last about ``--drain-seconds`` at the rate the system last reached (at this size, or the
one before), within ``--min-backlog`` and ``--backlog`` (``--first-backlog`` while no rate is known); a size's
figures are the medians over the trials whose drain lasted at least half of that (over all its trials if none
did).  A system whose maximum falls under 10 events/s is not
run again.  Results go to ``benchmarks/results/peers-streams-<date>.json``, written after every trial.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from fastpubsub.cli.demo import SHOWCASE, Demo, _stop_processor, _Watcher
from tests.support.oracles.engine import OracleMatcher
from fastpubsub.workloads import PRESETS, generate_events, generate_subscriptions
from fastpubsub.kafka import admin
from fastpubsub.kafka.broker import EmbeddedBroker, child_preexec
from fastpubsub.language import parse
from fastpubsub.wire import codecs, topics

from benchmarks.harness import report
from benchmarks.harness.cpu import CpuMeter
from benchmarks.pipeline.e2e import (ALGORITHM, Options, _encoded_events, _NotificationClock, _rate_limited, _wait_committed,
                                     await_quiet, drain_rate, latencies, percentiles, write_backlog)
from benchmarks.harness.timing import warm_up
from benchmarks.harness.memory import peak_rss_kb
from benchmarks.peers import maven

PEER = Path(__file__).resolve().parent / "kafka-streams"
JAR = PEER / "target" / "fastpubsub-streams-peer.jar"
SYSTEMS = ("fastpubsub", "streams-scan", "streams-indexed")
SLOWEST = 10.0  # events/s: a system whose maximum falls under it is not run again
#: The oracle tests every subscription against every checked event in plain Python (2 to 4 µs a pair): at most
#: this many pairs a size, and no fewer than MIN_CHECKED events, so that 1M subscriptions cost a minute, not ten.
ORACLE_PAIRS = 20_000_000
MIN_CHECKED = 20


@dataclass(frozen=True)
class Settings:
    systems: tuple[str, ...] = SYSTEMS
    rounds: int = 2
    backlog: int = 1_000_000  # most events of a backlog
    min_backlog: int = 2_000  # fewest (and never fewer than check_events)
    first_backlog: int = 50_000  # while the system's rate is unknown
    drain_seconds: float = 10.0  # a backlog lasts about this long at the rate the system last reached
    latency_seconds: float = 20.0
    common_rate: float = 0.0  # events/s: a second latency phase at this rate for every system faster than it
    check_events: int = 200  # at most (fewer at large sizes: ORACLE_PAIRS)
    threads: int = 1  # the peer's num.stream.threads
    java_opts: tuple[str, ...] = ()
    peer_config: tuple[str, ...] = ()  # KEY=VALUE Kafka Streams settings of the peer (its defaults otherwise)
    seed: int = 1
    processor_options: tuple[str, ...] = ()  # further `pubsub run` options of ours


def build(progress: Callable[[str], None] = print) -> Path:
    """The peer's jar, built with Maven when it is missing or older than its sources (or the schemas it packs)."""
    return maven.build(PEER, JAR, codecs.SCHEMA_DIR.glob("*.avsc"), progress)


def start_peer(bootstrap: str, application_id: str, matcher: str, log_path: Path, state_dir: Path, threads: int = 1,
               java_opts: tuple[str, ...] = (), config: tuple[str, ...] = ()) -> subprocess.Popen:
    """The peer in its own JVM; on SIGTERM it closes and prints its counts as a JSON line (``_stop_processor``)."""
    cmd = ["java", *java_opts, "-jar", str(JAR), "--bootstrap-servers", bootstrap, "--application-id", application_id,
           "--matcher", matcher, "--threads", str(threads), "--state-dir", str(state_dir)]
    for setting in config:
        cmd += ["--config", setting]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log_path, "wb"), stdin=subprocess.DEVNULL,
                            preexec_fn=child_preexec)


def subscriptions(n: int, seed: int) -> list[tuple[int, list]]:
    """(id, predicates) of what ``Demo._load_subscriptions`` writes: n W0 ones (ids 0 to n - 1), then SHOWCASE's."""
    out = generate_subscriptions(PRESETS["W0"], n, seed).to_lists()
    return out + [(n + k, parse(text)) for k, (_, text) in enumerate(SHOWCASE)]


def oracle_pairs(subs: list[tuple[int, list]], events: list[dict]) -> set[tuple[int, str]]:
    """(subscription id, event id) of every match among ``events`` (ids e0, e1, ...), by the engine's oracle."""
    oracle = OracleMatcher()
    for sid, predicates in subs:
        oracle.add(sid, predicates)
    return {(int(sid), f"e{i}") for i, event in enumerate(events) for sid in oracle.match(event).tolist()}


def exactness(notified: list[tuple[int, str]], expected: set[tuple[int, str]], sample: set[str]) -> dict:
    """The notifications of the ``sample`` events against the oracle's (subscription id, event id) pairs."""
    got = [(sid, eid) for sid, eid in notified if eid in sample]
    seen = set(got)
    return {"events_checked": len(sample), "expected": len(expected), "notified": len(got),
            "missing": len(expected - seen), "extra": len(seen - expected), "duplicates": len(got) - len(seen),
            "exact": seen == expected and len(got) == len(seen)}


def memory_kb(pid: int) -> dict[str, int]:
    """Peak and current resident memory of a process (``VmHWM``, ``VmRSS``), in KiB."""
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return {"peak_rss_kb": peak_rss_kb(pid), "rss_kb": rss}


def _start(system: str, bootstrap: str, group: str, workdir: Path, n: int, settings: Settings) -> subprocess.Popen:
    log = workdir / f"{group}.log"
    if system == "fastpubsub":
        demo = Demo(n, 0, "W0", settings.seed)
        demo.run_options = [*Options().run_options(), *settings.processor_options]
        return demo._start_processor(bootstrap, log, group)
    return start_peer(bootstrap, group, system.removeprefix("streams-"), log, workdir / f"{group}-state",
                      settings.threads, settings.java_opts, settings.peer_config)


def checked_events(n: int, settings: Settings) -> int:
    """Backlog events whose notifications are checked against the oracle at ``n`` subscriptions."""
    return min(settings.check_events, max(MIN_CHECKED, ORACLE_PAIRS // max(n, 1)))


@dataclass
class Drained:
    """A system started on a backlog and through it (:func:`drained`): what the later phases of a trial use."""

    producer: object  # writes the offered events
    clock: _NotificationClock  # when each notification was first seen
    process: subprocess.Popen
    watcher: _Watcher  # the system's committed offsets
    max_rate: float  # events/s over the backlog
    t0: float  # when the backlog's drain began (monotonic)
    seconds: float  # how long it lasted
    started: float  # when the system was started (monotonic)


@contextmanager
def drained(broker: EmbeddedBroker, system: str, group: str, backlog: list[bytes], n: int, settings: Settings,
            workdir: Path, progress: Callable[[str], None]) -> Iterator[Drained]:
    """One system on fresh events and notifications topics, started on ``backlog`` and waited for until it has
    committed it all (its maximum); stopped in the end if it still runs, its watcher and clock closed."""
    bootstrap = broker.bootstrap_servers
    admin.delete_topics(bootstrap, (topics.EVENTS, topics.NOTIFICATIONS))
    admin.create_afresh(bootstrap, names=(topics.EVENTS, topics.NOTIFICATIONS))
    producer = write_backlog(bootstrap, backlog, Options.producer_linger_ms)
    clock = _NotificationClock(bootstrap)
    clock.start()
    started = time.monotonic()
    process = _start(system, bootstrap, group, workdir, n, settings)
    watcher = _Watcher(bootstrap, group)
    try:
        timeout = max(600.0, 30 * settings.drain_seconds) + n / 1000
        samples = _wait_committed(watcher, len(backlog), process, timeout, progress)
        max_rate, t0, count, seconds = drain_rate(samples)
        progress(f"  {system}: maximum {max_rate:,.0f} events/s ({count:,} events in {seconds:.1f} s)")
        yield Drained(producer, clock, process, watcher, max_rate, t0, seconds, started)
    finally:
        if process.poll() is None:
            _stop_processor(process)
        watcher.close()
        clock.stop()


def trial(broker: EmbeddedBroker, system: str, group: str, backlog: list[bytes], expected: set[tuple[int, str]],
          checked: int, n: int, settings: Settings, workdir: Path, progress: Callable[[str], None],
          offered_events: Callable[[int], list[bytes]]) -> dict:
    """One system on fresh events and notifications topics: maximum, latency at half of it, memory, exactness."""
    with drained(broker, system, group, backlog, n, settings, workdir, progress) as d:
        producer, clock, process, watcher, max_rate = d.producer, d.clock, d.process, d.watcher, d.max_rate
        offered = max_rate / 2
        values = offered_events(int(offered * settings.latency_seconds) + 1)
        meter = CpuMeter({"broker": broker.pids()[0], "system": process.pid})
        meter.start()
        stamps = _rate_limited(producer, values, offered, settings.latency_seconds)
        cpu = meter.stop()
        if producer.flush(60):
            raise RuntimeError("the broker did not acknowledge the latency phase's events")
        _wait_committed(watcher, len(backlog) + len(stamps), process, 300 + n / 1000, progress)
        common: list[int] = []
        if settings.common_rate and settings.common_rate < max_rate:  # the same load for every system
            common = _rate_limited(producer, offered_events(int(settings.common_rate * settings.latency_seconds) + 1),
                                   settings.common_rate, settings.latency_seconds, key="C")
            if producer.flush(60):
                raise RuntimeError("the broker did not acknowledge the common-rate phase's events")
            _wait_committed(watcher, len(backlog) + len(stamps) + len(common), process, 300 + n / 1000, progress)
        await_quiet(clock)
        memory = memory_kb(process.pid)
        stats = _stop_processor(process)
    at, _ = latencies(clock.first, stamps, "L")
    lat = percentiles(np.array(at))
    at_common = percentiles(np.array(latencies(clock.first, common, "C")[0])) if common else {}
    check = exactness(clock.notified, expected, {f"e{i}" for i in range(checked)})
    progress(f"  {system}: p99 {lat['p99']:,.1f} ms at {offered:,.0f} events/s offered, peak RSS "
             f"{memory['peak_rss_kb'] / 1024:,.0f} MiB, {'exact' if check['exact'] else 'NOT EXACT'} on "
             f"{check['events_checked']} events ({check['expected']} notifications)"
             + (f"; p99 {at_common['p99']:,.1f} ms at {settings.common_rate:,.0f} events/s" if common else ""))
    return {"system": system, "group": group, "backlog_events": len(backlog), "max_events_per_s": round(max_rate, 1),
            "drain_seconds": round(d.seconds, 2), "drain_long_enough": d.seconds >= settings.drain_seconds / 2,
            "rebuild_and_join_s": round(d.t0 - d.started, 1),
            "offered_events_per_s": round(offered, 1), "latency_events": len(stamps),
            "achieved_events_per_s": round(len(stamps) / settings.latency_seconds, 1), "events_notified": len(at),
            **{f"latency_{k}_ms": round(v, 1) for k, v in lat.items()},
            **{f"common_rate_{k}_ms": round(v, 1) for k, v in at_common.items()}, **memory, "exactness": check,
            "latency_phase_cpu_s": cpu["cpu"], "latency_phase_machine_cpu_s": cpu["machine"],
            "final_stats": {k: v for k, v in (stats or {}).items() if k != "latency_samples"}}


def backlog_size(rate: float | None, settings: Settings) -> int:
    """Events that last about ``drain_seconds`` at ``rate`` (``first_backlog`` when no rate is known yet)."""
    least = max(settings.min_backlog, settings.check_events)
    wanted = settings.first_backlog if rate is None else rate * settings.drain_seconds
    return int(min(max(wanted, least), settings.backlog))


def summary(trials: list[dict]) -> dict[str, dict]:
    """Per system: the median of the maximum and the p99 over its trials whose drain lasted long enough (over all if
    none did), the largest peak RSS, whether all were exact."""
    out: dict[str, dict] = {}
    for system in dict.fromkeys(t["system"] for t in trials):
        done = [t for t in trials if t["system"] == system and "error" not in t]
        if not done:
            out[system] = {"error": next(t["error"] for t in trials if t["system"] == system)}
            continue
        exact = all(t["exactness"]["exact"] for t in done)
        done = [t for t in done if t["drain_long_enough"]] or done
        out[system] = {"rounds": len(done),
                       "max_events_per_s": round(statistics.median(t["max_events_per_s"] for t in done), 1),
                       "latency_p99_ms": round(statistics.median(t["latency_p99_ms"] for t in done), 1),
                       "peak_rss_mib": round(max(t["peak_rss_kb"] for t in done) / 1024, 1),
                       **({"common_rate_p99_ms": round(statistics.median(t["common_rate_p99_ms"] for t in common), 1)}
                          if (common := [t for t in done if "common_rate_p99_ms" in t]) else {}),
                       "exact": exact}
    return out


def run(sizes: list[int], settings: Settings, out: Path, command: str = "",
        progress: Callable[[str], None] = print) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="pubsub-peers-"))
    result = {"benchmark": "peers-streams", "command": command, "machine": report.machine(),
              "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "settings": asdict(settings),
              "workdir": str(workdir), "sizes": []}
    if any(s != "fastpubsub" for s in settings.systems):
        build(progress)
    if "fastpubsub" in settings.systems:
        warm_up(ALGORITHM, generate_events(PRESETS["W0"], 100, settings.seed))  # numba's cache, as benchmarks.pipeline.e2e
    events = _encoded_events(max(settings.backlog, settings.check_events), settings.seed + 1)
    offered: list[bytes] = []  # the latency phases' events, encoded once for the largest phase so far

    def offered_events(count: int) -> list[bytes]:
        if count > len(offered):
            offered[:] = _encoded_events(count, settings.seed + 2)
        return offered[:count]

    rates: dict[str, float] = {}  # the maximum each system last reached
    active = list(settings.systems)
    for n in sizes:
        if not active:
            break
        with EmbeddedBroker() as broker:
            bootstrap = broker.bootstrap_servers
            admin.create_topics(bootstrap)
            demo = Demo(n, 0, "W0", settings.seed)
            demo.showcase_format = "avro"  # the peer reads Avro records only
            progress(f"{n:,} W0 subscriptions + {len(SHOWCASE)} hand-written; broker {bootstrap}; "
                     f"{report.load_average()}")
            loaded = demo._load_subscriptions(bootstrap)
            subs = subscriptions(n, settings.seed)
            assert len(subs) == loaded, (len(subs), loaded)
            began = time.monotonic()
            checked = checked_events(n, settings)
            expected = oracle_pairs(subs, [codecs.decode_event(v) for v in events[:checked]])
            row = {"subscriptions": loaded, "events_checked": checked,
                   "oracle_seconds": round(time.monotonic() - began, 1), "trials": []}
            result["sizes"].append(row)
            for r in range(settings.rounds):
                for system in [s for s in active]:
                    group = f"peers-{system}-{n}-{r}"
                    progress(f" round {r + 1}: {system}")
                    try:
                        t = trial(broker, system, group, events[:backlog_size(rates.get(system), settings)],
                                  expected, checked, n, settings, workdir, progress, offered_events)
                    except (RuntimeError, TimeoutError) as exc:
                        t = {"system": system, "group": group, "error": str(exc)}
                        progress(f"  {system}: {exc}; not run again")
                        active.remove(system)
                    row["trials"].append(t)
                    if "error" not in t:
                        rates[system] = t["max_events_per_s"]
                        if t["max_events_per_s"] < SLOWEST:
                            progress(f"  {system}: under {SLOWEST:g} events/s; not run again")
                            active.remove(system)
                    row["summary"] = summary(row["trials"])
                    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def table(result: dict) -> str:
    rows = [{"n": f"{size['subscriptions']:,}", "system": system, "max": f"{s['max_events_per_s']:,.0f}",
             "p99": f"{s['latency_p99_ms']:,.1f}", "rss": f"{s['peak_rss_mib']:,.0f}",
             "common": s.get("common_rate_p99_ms", "–"), "exact": "yes" if s["exact"] else "NO"} if "error" not in s else
            {"n": f"{size['subscriptions']:,}", "system": system, "max": s["error"][:60]}
            for size in result["sizes"] for system, s in size.get("summary", {}).items()]
    return report.markdown_table(rows, [("n", "subscriptions"), ("system", "system"), ("max", "max events/s"),
                                        ("p99", "p99 ms at half"), ("common", "p99 ms at --common-rate"),
                                        ("rss", "peak RSS MiB"), ("exact", "exact")])


def add_backlog_and_peer_options(ap: argparse.ArgumentParser, d) -> None:
    """The options of the :class:`Settings` that size a trial's backlog and start the peer (defaults from ``d``)."""
    ap.add_argument("--backlog", type=int, default=d.backlog, help="most events of a backlog")
    ap.add_argument("--min-backlog", type=int, default=d.min_backlog, help="fewest events of a backlog")
    ap.add_argument("--first-backlog", type=int, default=d.first_backlog,
                    help="events of a backlog while the system's rate is unknown")
    ap.add_argument("--drain-seconds", type=float, default=d.drain_seconds,
                    help="a backlog lasts about this long at the rate the system last reached")
    ap.add_argument("--threads", type=int, default=d.threads, help="the peer's num.stream.threads")
    ap.add_argument("--java-opts", default="", help="JVM options of the peer, e.g. --java-opts=-Xmx4g")
    ap.add_argument("--peer-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a Kafka Streams setting of the peer (repeatable), e.g. commit.interval.ms=1000")


def backlog_and_peer_settings(a: argparse.Namespace) -> dict:
    """The :class:`Settings` fields that :func:`add_backlog_and_peer_options` parsed into ``a``."""
    return dict(backlog=a.backlog, min_backlog=a.min_backlog, first_backlog=a.first_backlog,
                drain_seconds=a.drain_seconds, threads=a.threads, java_opts=tuple(a.java_opts.split()),
                peer_config=tuple(a.peer_config))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Settings()
    ap.add_argument("--sizes", default="1000,10000,100000,1000000", help="subscription counts, comma-separated")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}, comma-separated")
    ap.add_argument("--rounds", type=int, default=d.rounds, help="trials of each system per size, alternated")
    add_backlog_and_peer_options(ap, d)
    ap.add_argument("--latency-seconds", type=float, default=d.latency_seconds,
                    help="duration of the phase at half the maximum")
    ap.add_argument("--common-rate", type=float, default=d.common_rate,
                    help="events/s of a second latency phase, the same for every system whose maximum exceeds it")
    ap.add_argument("--check-events", type=int, default=d.check_events,
                    help="backlog events whose notifications are checked against the oracle (at most: "
                         f"{ORACLE_PAIRS:,} subscription-event pairs a size, but {MIN_CHECKED} events at least)")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--out", type=Path, default=None,
                    help="results file (default benchmarks/results/peers-streams-<date>.json)")
    a = ap.parse_args(argv)
    systems = tuple(s for s in a.systems.split(",") if s)
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown systems {', '.join(sorted(unknown))}; of {', '.join(SYSTEMS)}")
    settings = Settings(systems=systems, rounds=a.rounds, latency_seconds=a.latency_seconds,
                        check_events=a.check_events, seed=a.seed, common_rate=a.common_rate,
                        **backlog_and_peer_settings(a))
    out = a.out or report.RESULTS / f"peers-streams-{time.strftime('%Y-%m-%d')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.peers.streams " + " ".join(sys.argv[1:] if argv is None else argv)
    result = run([int(s) for s in a.sizes.split(",") if s], settings, out, command)
    print(table(result))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
