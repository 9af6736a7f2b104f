"""Pattern subscriptions side by side: this engine, Siddhi, Esper and Flink SQL MATCH_RECOGNIZE on the same ticks and patterns.

    python -m benchmarks.peers.patterns --subs 1000 --peers siddhi esper flink --peer-python /path/to/peers/bin/python

The peers are not dependencies of the package; install Siddhi and Flink in a separate
virtualenv (they pull hundreds of MB and pin their own libraries):

    python3 -m venv peers && peers/bin/pip install apache-flink==2.3.0
    peers/bin/pip install --no-deps pysiddhi && peers/bin/pip install pyjnius future

Siddhi runs from pysiddhi's bundled jars (siddhi-core 5.1.7), driven by
``benchmarks/peers/siddhi/SiddhiDriver.java`` (compiled here with ``javac``): the Python
bridge of pysiddhi crosses JNI once per event, which would measure the bridge,
not Siddhi.  Esper 9.0.0 comes from Maven Central, driven by
``benchmarks/peers/esper`` (built with Maven when its jar is missing or stale):
the same input and output as Siddhi's driver, a context partition (or, with
``--esper-mode statements``, a statement) per subscription, event time advanced
by hand to each tick's timestamp.  Flink runs PyFlink's
Table API in streaming mode, parallelism 1, the ticks from a CSV file (event
time ``rt`` with a watermark).

The workload is the one of ``benchmarks.stateful.patterns`` with strictly increasing
timestamps (Cayuga's non-overlap rule and the peers' arrival order agree only
without ties) and the S1-S3 templates, which all four express with the same
meaning (docs/patterns.md section 5):

* S1 ``seq a: name = "X" and price > c within 1ms``: a filter (Siddhi:
  ``from Ticks[...]``; Esper: ``from Tick(...)``; Flink: ``WHERE``);
* S2 ``... next b: name = "Y" where b.price < c2 within w``: Siddhi
  ``every a=Ticks[...] -> b=Ticks[name == 'Y'] within w ... having``
  (followed-by binds the first matching event; the having drops the match as
  Cayuga's post-selection kills the instance); Esper the same pattern,
  ``every a=Tick(...) -> (b=Tick(name = 'Y') where timer:within(w + 1 msec))``
  and the statement's ``where`` for the post-selection; Flink
  ``PATTERN (A N* B)``, ``N AS NOT (name = 'Y')``, ``B AS name = 'Y' AND price < c2``,
  ``AFTER MATCH SKIP TO NEXT ROW``;
* S3 ``... next b: name = a.name where b.price > f * a.price within w``: Siddhi
  ``b=Ticks[name == a.name]`` plus having; Esper ``b=Tick(name = a.name)`` plus
  where; Flink ``PARTITION BY name``, ``PATTERN (A B)``.

S4 and S5 (folds) are not translated: Cayuga's iteration dies at the first
correlated event failing ``while`` and outputs at every iteration once
``until`` holds, while Siddhi's counting patterns and ``A B+`` in
MATCH_RECOGNIZE skip or stop greedily (different match sets, not a faster way
to the same answer); no translation for Esper has been checked either.  This
engine runs without its per-subscription cap here (the peers have none).
Matches are compared as sets of (subscription, a's id, b's id) over all events,
warm-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fastpubsub.patterns import parse
from fastpubsub.patterns.language import Pattern

from benchmarks.stateful.patterns import Ticks, build, subscriptions
from benchmarks.peers import maven

HERE = Path(__file__).resolve().parent
ESPER = HERE / "esper"
_SIDDHI_OP = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_SQL_OP = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def peer_subscriptions(m: int, ticks: Ticks, seed: int = 1) -> list[tuple[int, str]]:
    """``m`` subscriptions of the S1-S3 templates (``benchmarks.stateful.patterns.subscriptions``, S4/S5 left out)."""
    drawn = subscriptions(m * 5 // 3 + 5, ticks, seed)
    return [(sid, text) for sid, text in drawn if sid % 5 < 3][:m]


def strict_ticks(n: int, symbols: int, seed: int, step_sd: float = 0.0005) -> Ticks:
    ticks = Ticks(n, symbols, seed, step_sd=step_sd)
    ticks.ts = ticks.ts + np.arange(n, dtype=np.int64)  # strictly increasing: no simultaneous events
    return ticks


# -- translation ------------------------------------------------------------------------------------------
def _const(v) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(float(v))


def _shape(p: Pattern):
    """(start triples, None or (static correlation triples, dynamic equality attr, where atom)), or ValueError."""
    if not p.steps:
        return list(p.start), None
    if len(p.steps) > 1 or p.steps[0].op != "next" or len(p.steps[0].where) > 1:
        raise ValueError("only S1-S3 shapes (at most one next step, at most one where atom) are translated")
    s = p.steps[0]
    static, dyn = [], None
    for a in s.correlate:
        if a.static_triple is not None:
            static.append(a.static_triple)
        elif a.op == "=" and a.left.ref.kind == "event" and a.right.ref is not None and a.right.ref.kind == "bound" \
                and a.right.ref.attr == a.left.ref.attr and not a.right.arith:
            dyn = a.left.ref.attr
        else:
            raise ValueError("correlation not translated")
    return list(p.start), (static, dyn, s.where[0] if s.where else None)


def _side(o, binding: str, event: str) -> str:
    """An operand as an expression of the peers: ``m * ref + d``; a bound ref reads ``binding``."""
    if o.ref is None:
        return _const(o.const)
    r = o.ref
    name = f"{event}.{r.attr}" if r.kind == "event" else f"{binding}.{r.attr}"
    if r.kind not in ("event", "bound"):
        raise ValueError("only event and bound references are translated")
    out = name
    if o.arith and o.mul != 1:
        out = f"{float(o.mul)!r} * {out}"
    if o.arith and o.add != 0:
        out = f"{out} + {float(o.add)!r}"
    return out


def siddhi_app(subs: list[tuple[int, Pattern]]) -> str:
    lines = ["@app:name('patterns')", "@app:playback",
             "define stream Ticks (id long, name string, price double, volume double);",
             "define stream Out (sid long, a long, b long, x double, y double);"]
    for sid, p in subs:
        start, step = _shape(p)
        cond = " and ".join(f"{a} {_SIDDHI_OP[op]} {_const(v)}" for a, op, v in start)
        if step is None:
            lines.append(f"from Ticks[{cond}] select {sid}L as sid, id as a, -1L as b, 0.0 as x, 0.0 as y "
                         "insert into Out;")
            continue
        static, dyn, where = step
        corr = [f"{a} {_SIDDHI_OP[op]} {_const(v)}" for a, op, v in static] + ([f"{dyn} == a.{dyn}"] if dyn else [])
        sel, having = "0.0 as x, 0.0 as y", ""
        if where is not None:
            sel = f"{_side(where.left, 'a', 'b')} as x, {_side(where.right, 'a', 'b')} as y"
            having = f" having x {_SIDDHI_OP[where.op]} y"
        lines.append(f"from every a=Ticks[{cond}] -> b=Ticks[{' and '.join(corr) or 'true'}] "
                     f"within {p.within_ms} milliseconds select {sid}L as sid, a.id as a, b.id as b, {sel}"
                     f"{having} insert into Out;")
    return "\n".join(lines)


class _Parameters:
    """Esper substitution parameters: each constant of a statement becomes ``?:pK:type``, its value a typed field
    of the driver's statement file (``EsperDriver``), so that subscriptions of one template share one compilation."""

    def __init__(self) -> None:
        self.fields: list[str] = []

    def __call__(self, value, kind: str | None = None) -> str:
        k = len(self.fields)
        if kind == "long":
            self.fields.append(f"l:{int(value)}")
        elif isinstance(value, str):
            kind = "string"
            self.fields.append("s:" + value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n"))
        else:
            kind = "double"
            self.fields.append(f"d:{float(value)!r}")
        return f"?:p{k}:{kind}"


def _esper_side(o, params: _Parameters) -> str:
    """An operand in EPL: ``m * ref + d``, the constants as parameters; a bound ref reads ``a``, the event ``b``."""
    if o.ref is None:
        return params(o.const)
    if o.ref.kind not in ("event", "bound"):
        raise ValueError("only event and bound references are translated")
    out = f"{'b' if o.ref.kind == 'event' else 'a'}.{o.ref.attr}"
    if o.arith and o.mul != 1:
        out = f"{params(o.mul)} * {out}"
    if o.arith and o.add != 0:
        out = f"{out} + {params(o.add)}"
    return out


def esper_statements(subs: list[tuple[int, Pattern]]) -> list[tuple[int, str, list[str]]]:
    """(sid, EPL, parameter fields) per subscription.  Followed-by without ``every`` on its right binds the first
    event passing b's filter (Cayuga's ;θ); the statement's ``where`` drops a match failing the post-selection, as
    Cayuga kills the instance.  ``timer:within`` is given ``within + 1`` ms: the guard ends its subexpression when
    the clock reaches start + interval, before the tick of that timestamp is sent, while Cayuga still binds an event
    at exactly start + within (timestamps are whole milliseconds)."""
    out = []
    for sid, p in subs:
        params = _Parameters()
        start, step = _shape(p)
        cond = " and ".join(f"{a} {_SQL_OP[op]} {params(v)}" for a, op, v in start)
        if step is None:
            out.append((sid, f"select id as a, -1L as b from Tick({cond})", params.fields))
            continue
        static, dyn, where = step
        corr = [f"{a} {_SQL_OP[op]} {params(v)}" for a, op, v in static] + ([f"{dyn} = a.{dyn}"] if dyn else [])
        within = params(p.within_ms + 1, "long")
        epl = (f"select a.id as a, b.id as b from pattern [every a=Tick({cond}) -> "
               f"(b=Tick({' and '.join(corr)}) where timer:within({within} msec))]")
        if where is not None:
            epl += f" where {_esper_side(where.left, params)} {_SQL_OP[where.op]} {_esper_side(where.right, params)}"
        out.append((sid, epl, params.fields))
    return out


def flink_queries(subs: list[tuple[int, Pattern]]) -> list[str]:
    out = []
    for sid, p in subs:
        start, step = _shape(p)
        cond = " AND ".join(f"{a} {_SQL_OP[op]} {_const(v)}" for a, op, v in start)
        if step is None:
            out.append(f"SELECT CAST({sid} AS BIGINT) AS sid, id AS a, CAST(-1 AS BIGINT) AS b FROM ticks WHERE {cond}")
            continue
        static, dyn, where = step
        a_def = " AND ".join(f"A.{a} {_SQL_OP[op]} {_const(v)}" for a, op, v in start)
        theta = " AND ".join(f"N.{a} {_SQL_OP[op]} {_const(v)}" for a, op, v in static)
        b_conds = [f"B.{a} {_SQL_OP[op]} {_const(v)}" for a, op, v in static]
        if where is not None:
            b_conds.append(f"{_side(where.left, 'A', 'B')} {_SQL_OP[where.op]} {_side(where.right, 'A', 'B')}")
        pattern = "(A N* B)" if static else "(A B)"
        defines = [f"A AS {a_def}"] + ([f"N AS NOT ({theta})"] if static else []) + \
                  [f"B AS {' AND '.join(b_conds) or 'TRUE'}"]
        ms = p.within_ms
        within = f"{ms // 86400000} {ms // 3600000 % 24:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"
        out.append(
            f"SELECT CAST({sid} AS BIGINT) AS sid, a, b FROM ticks MATCH_RECOGNIZE ("
            + (f"PARTITION BY {dyn} " if dyn else "")
            + f"ORDER BY rt MEASURES A.id AS a, B.id AS b ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            f"PATTERN {pattern} WITHIN INTERVAL '{within}' DAY TO SECOND(3) DEFINE {', '.join(defines)})")
    return out


# -- runners ----------------------------------------------------------------------------------------------
def run_engine(ticks: Ticks, subs: list[tuple[int, str]], warmup: int, batch: int) -> tuple[dict, set]:
    from fastpubsub.patterns.engine import Limits

    engine, build_s = build("dynamic", subs, Limits(10**9, 10**9))
    found: set = set()

    def feed(a: int, b: int) -> None:
        for i in range(a, b, batch):
            w = engine.process(*ticks.batch(i, min(b, i + batch)))
            found.update(zip(w.sid.tolist(), w.bound[:, 0].tolist(), w.bound[:, 1].tolist()))

    feed(0, warmup)
    before = len(found)
    t, cpu = time.perf_counter(), time.process_time()
    feed(warmup, len(ticks))
    dt, cpu = time.perf_counter() - t, time.process_time() - cpu
    n = len(ticks) - warmup
    return {"system": "fastpubsub", "build_s": round(build_s, 2), "events": n, "seconds": round(dt, 3),
            "events_per_s": round(n / dt), "events_per_cpu_s": round(n / cpu), "outputs": len(found) - before}, found


def _write_ticks(ticks: Ticks, path: Path) -> None:
    names = ticks.symbols[ticks.sym]
    with open(path, "w") as f:
        for i in range(len(ticks)):
            f.write(f"{int(ticks.ids[i])},{int(ticks.ts[i])},{names[i]},{float(ticks.price[i])!r},{float(ticks.volume[i])!r}\n")


def _peer_site(python: str, module: str) -> str:
    code = f"import {module}, os; print(os.path.dirname(os.path.dirname({module}.__file__)))"
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def _run_driver(system: str, cmd: list[str], matches: Path) -> tuple[dict, set]:
    """A Java driver's JSON line (build_s, events, seconds, cpu_s, outputs) as a result row, and its matches."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{system} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row.update(system=system, wall_s=round(time.perf_counter() - t, 1),
               events_per_s=round(row["events"] / max(row["seconds"], 1e-9)),
               events_per_cpu_s=round(row["events"] / max(row["cpu_s"], 1e-9)))
    return row, _read_matches(matches)


def run_siddhi(ticks_csv: Path, subs: list[tuple[int, Pattern]], warmup: int, work: Path, python: str,
               java_heap: str) -> tuple[dict, set]:
    site = Path(_peer_site(python, "PySiddhi"))
    target = site / "__PySiddhiProxy" / "target"
    cp = f"{target / 'lib'}/*:{target}/siddhi-python-api-proxy-5.1.0.jar"
    classes = work / "classes"
    classes.mkdir(exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(classes), str(HERE / "siddhi" / "SiddhiDriver.java")], check=True)
    app = work / "app.siddhi"
    app.write_text(siddhi_app(subs))
    matches = work / "siddhi_matches.csv"
    return _run_driver("siddhi", ["java", f"-Xmx{java_heap}", "-cp", f"{cp}:{classes}", "SiddhiDriver", str(app),
                                  str(ticks_csv), str(warmup), str(matches)], matches)


def run_esper(ticks_csv: Path, subs: list[tuple[int, Pattern]], warmup: int, work: Path, java_heap: str,
              mode: str = "contexts") -> tuple[dict, set]:
    """Esper from Maven Central, driven by ``benchmarks/peers/esper`` (built with Maven when missing or stale).

    ``mode``: "statements" deploys a statement per subscription; "contexts" one statement per template (an
    interval written in), a context partition per subscription; the same patterns either way."""
    jar = maven.build(ESPER, ESPER / "target" / "fastpubsub-esper-peer.jar", progress=lambda m: print(m, file=sys.stderr))
    statements = work / "esper_statements.tsv"
    statements.write_text("".join("\t".join([str(sid), epl, *fields]) + "\n" for sid, epl, fields in esper_statements(subs)))
    matches = work / "esper_matches.csv"
    return _run_driver("esper", ["java", f"-Xmx{java_heap}", "-jar", str(jar), str(statements), str(ticks_csv),
                                 str(warmup), str(matches), mode], matches)


_FLINK_SCRIPT = r'''
import json, sys, time
from pyflink.table import EnvironmentSettings, TableEnvironment
ticks, queries, out, n = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4])
config = json.loads(sys.argv[5])
t0 = time.perf_counter()
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
env.get_config().set("parallelism.default", "1")
for key, value in config:  # --flink-conf: e.g. network memory for many queries in one job
    env.get_config().set(key, value)
env.execute_sql(f"""CREATE TABLE ticks (id BIGINT, ts BIGINT, name STRING, price DOUBLE, volume DOUBLE,
    rt AS TO_TIMESTAMP_LTZ(ts, 3), WATERMARK FOR rt AS rt)
    WITH ('connector' = 'filesystem', 'path' = '{ticks}', 'format' = 'csv')""")
t1 = time.perf_counter()
def union(qs):  # a balanced tree: a chain of 1,000 UNION ALLs overflows the planner's stack
    if len(qs) == 1:
        return qs[0]
    h = len(qs) // 2
    return f"SELECT * FROM (({union(qs[:h])}) UNION ALL ({union(qs[h:])}))"
result = env.execute_sql(union(queries))
t2 = time.perf_counter()
rows = 0
with open(out, "w") as f:
    with result.collect() as it:
        for r in it:
            f.write(f"{r[0]},{r[1]},{r[2]}\n")
            rows += 1
t3 = time.perf_counter()
print(json.dumps({"setup_s": round(t1 - t0, 2), "submit_s": round(t2 - t1, 2), "seconds": round(t3 - t2, 3),
                  "events": n, "outputs": rows}))
'''


def run_flink(ticks_csv: Path, n: int, subs: list[tuple[int, Pattern]], work: Path, python: str,
              timeout: float, conf: list[tuple[str, str]] = ()) -> tuple[dict, set]:
    script = work / "flink_run.py"
    script.write_text(_FLINK_SCRIPT)
    queries = work / "flink_queries.json"
    queries.write_text(json.dumps(flink_queries(subs)))
    matches = work / "flink_matches.csv"
    t = time.perf_counter()
    try:
        proc = subprocess.run([python, str(script), str(ticks_csv), str(queries), str(matches), str(n), json.dumps(list(conf))],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Flink did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        causes = [ln for ln in proc.stderr.splitlines() if "Caused by" in ln or "Error" in ln]
        raise RuntimeError(f"Flink failed (exit {proc.returncode}): {' | '.join(causes[-3:])[:2000]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row.update(system="flink", wall_s=round(time.perf_counter() - t, 1), events_per_s=round(n / max(row["seconds"], 1e-9)))
    return row, _read_matches(matches)


def _read_matches(path: Path) -> set:
    out = set()
    for line in path.read_text().splitlines():
        sid, a, b = line.split(",")[:3]
        out.add((int(sid), int(a), int(b)))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subs", type=int, nargs="+", default=[1000])
    ap.add_argument("--peers", nargs="*", default=["siddhi", "esper", "flink"], choices=["siddhi", "esper", "flink"])
    ap.add_argument("--events", type=int, default=50_000, help="timed events (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--symbols", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step-sd", type=float, default=0.0005,
                    help="price random walk per tick (larger: more matches, a stronger agreement check)")
    ap.add_argument("--peer-python", default=sys.executable, help="a Python with apache-flink and pysiddhi")
    ap.add_argument("--java-heap", default="8g")
    ap.add_argument("--esper-mode", choices=["contexts", "statements"], default="contexts",
                    help="a context partition per subscription, or a statement per subscription")
    ap.add_argument("--flink-timeout", type=float, default=1800)
    ap.add_argument("--flink-conf", nargs="*", default=["taskmanager.memory.network.min=1gb",
                                                         "taskmanager.memory.network.max=1gb"],
                    help="key=value Flink settings (the default network memory holds 1,000 queries in one job)")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    n = args.warmup + args.events
    ticks = strict_ticks(n, args.symbols, args.seed, args.step_sd)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="pattern_peers_"))
    work.mkdir(parents=True, exist_ok=True)
    ticks_csv = work / "ticks.csv"
    _write_ticks(ticks, ticks_csv)
    for m in args.subs:
        texts = peer_subscriptions(m, ticks, args.seed + 1)
        subs = [(sid, parse(t)) for sid, t in texts]
        row, ours = run_engine(ticks, texts, args.warmup, args.batch)
        row["subscriptions"] = m
        print(json.dumps(row), flush=True)
        for peer in args.peers:
            try:
                if peer == "siddhi":
                    prow, theirs = run_siddhi(ticks_csv, subs, args.warmup, work, args.peer_python, args.java_heap)
                elif peer == "esper":
                    prow, theirs = run_esper(ticks_csv, subs, args.warmup, work, args.java_heap, args.esper_mode)
                    prow["mode"] = args.esper_mode
                else:  # Flink reads every event in one job: no warm-up split, the time includes all of them
                    prow, theirs = run_flink(ticks_csv, n, subs, work, args.peer_python, args.flink_timeout,
                                             [tuple(kv.split("=", 1)) for kv in args.flink_conf])
            except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
                print(json.dumps({"system": peer, "subscriptions": m, "error": str(e)}), flush=True)
                continue
            prow.update(subscriptions=m, same_matches=theirs == ours, only_here=len(ours - theirs),
                        only_there=len(theirs - ours), matches=len(theirs))
            print(json.dumps(prow), flush=True)


if __name__ == "__main__":
    main()
