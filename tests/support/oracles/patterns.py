"""The reference interpreter of pattern subscriptions: the algebra, event by event, in plain Python.

This is the specification every fast path is tested against (docs/patterns.md
section 1.5).  It follows Cayuga's automaton (EDBT 2006, section 2.3): an
instance waits at a node; an event failing the node's correlation takes the
filter edge (no change); otherwise the forward edge (``next``) or the rebind
edge (``fold``) is taken if the post-selection holds, and the instance dies if
it does not.  No indexes, no batching: clarity over speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from fastpubsub.engine import OPERATORS
from fastpubsub.patterns import Atom, Operand, Pattern
from fastpubsub.patterns.engine import Event, Limits
from fastpubsub.patterns.witnesses import Witness

MISSING = object()


@dataclass
class Counters:
    started: int = 0
    completed: int = 0
    killed: int = 0
    expired: int = 0
    refused: int = 0
    dropped: int = 0  # by replacing or deleting a subscription

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Instance:
    sid: int
    node: int  # the step it waits at (1..n)
    start_ts: int
    last_ts: int
    events: list  # per binding: the attributes of the bound event (a fold: its latest iteration, or its entry event)
    bound: list  # per binding: (event id, iterations)
    aggs: dict = field(default_factory=dict)  # (step, name) -> [acc, n]

    def copy(self) -> "_Instance":
        return _Instance(self.sid, self.node, self.start_ts, self.last_ts, list(self.events), list(self.bound),
                         {k: list(v) for k, v in self.aggs.items()})


def _kind(v: Any) -> str:
    return "bool" if isinstance(v, bool) else ("number" if isinstance(v, (int, float)) else "string")


def compare(op: str, x: Any, c: Any) -> bool:
    """``x op c`` as the engine's predicate semantics say (docs/guide/concepts.md, "What a predicate means"): values of
    different kinds never compare, numbers as IEEE doubles, NaN with nothing, strings by code point,
    ``False < True``.  tests/patterns/test_pattern_oracle.py checks it against the engine's reference."""
    kind = _kind(x)
    if kind != _kind(c):
        return False
    if kind == "number":
        x, c = float(x), float(c)
        if math.isnan(x) or math.isnan(c):
            return False
    return {"=": x == c, "!=": x != c, "<": x < c, "<=": x <= c, ">": x > c, ">=": x >= c}[op]


def _number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))


def aggregate_value(fn: str, acc: float, n: int) -> float | None:
    """The finaliser g3 (EDBT section 2.2): ``avg`` divides, the others read the accumulator (written apart from
    the engine's, in :mod:`fastpubsub.patterns.witnesses`, so that the two do not share a bug)."""
    if fn == "count":
        return acc
    if n == 0:
        return None
    return acc / n if fn == "avg" else acc


class OraclePatterns:
    """Pattern subscriptions over one partition's events (the reference)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.subscriptions: dict[int, tuple[Pattern, int]] = {}
        self.instances: list[_Instance] = []
        self.event_time: int | None = None
        self.counters = Counters()

    # -- subscriptions -------------------------------------------------------
    def subscribe(self, sid: int, pattern: Pattern, since_ms: int = 0) -> None:
        """Add or replace a subscription; a replaced one loses its instances."""
        self.unsubscribe(sid, missing_ok=True)
        self.subscriptions[sid] = (pattern, since_ms)

    def unsubscribe(self, sid: int, missing_ok: bool = False) -> None:
        if sid not in self.subscriptions:
            if missing_ok:
                return
            raise KeyError(sid)
        del self.subscriptions[sid]
        before = len(self.instances)
        self.instances = [i for i in self.instances if i.sid != sid]
        self.counters.dropped += before - len(self.instances)

    def live(self) -> int:
        return len(self.instances)

    # -- evaluation ----------------------------------------------------------
    def _value(self, o: Operand, e: Event, inst: _Instance | None) -> Any:
        if o.ref is None:
            return o.const
        r = o.ref
        if r.kind == "event":
            v = e.attributes.get(r.attr, MISSING)
        elif r.kind == "dur":
            v = e.ts - inst.start_ts
        elif r.kind == "bound":
            v = inst.events[r.step].get(r.attr, MISSING)
        else:  # agg
            pattern = self.subscriptions[inst.sid][0]
            fn = next(a.fn for a in pattern.steps[r.step - 1].aggregates if a.name == r.attr)
            acc, n = inst.aggs[(r.step, r.attr)]
            v = aggregate_value(fn, acc, n)
            v = MISSING if v is None else v
        if v is MISSING or not o.arith:
            return v
        if not _number(v):
            return MISSING
        return o.mul * float(v) + o.add

    def _holds(self, atom: Atom, e: Event, inst: _Instance | None) -> bool:
        lv, rv = self._value(atom.left, e, inst), self._value(atom.right, e, inst)
        if lv is MISSING or rv is MISSING:
            return False
        if (atom.static_triple is None and isinstance(lv, str) and isinstance(rv, str)
                and OPERATORS.index(atom.op) >= 2):
            return False  # ordering of strings only in static atoms (docs/patterns.md 1.2)
        return compare(atom.op, lv, rv)

    def _all(self, atoms, e, inst) -> bool:
        return all(self._holds(a, e, inst) for a in atoms)

    def _enter(self, inst: _Instance, node: int, e: Event, pattern: Pattern) -> None:
        """Place ``inst`` at ``node`` after binding ``e``; a fold initialises ``.last`` and its aggregates from ``e``."""
        inst.node = node
        inst.last_ts = e.ts
        if node <= len(pattern.steps) and pattern.steps[node - 1].op == "fold":
            inst.events[node] = e.attributes
            inst.bound[node] = (None, 0)
            for a in pattern.steps[node - 1].aggregates:
                inst.aggs[(node, a.name)] = self._init(a, e)

    @staticmethod
    def _init(a, e: Event) -> list:
        if a.fn == "count":
            return [1.0, 1]
        v = e.attributes.get(a.attr, MISSING)
        return [float(v), 1] if _number(v) else [0.0, 0]

    @staticmethod
    def _accumulate(a, state: list, e: Event) -> None:
        if a.fn == "count":
            state[0] += 1.0
            state[1] += 1
            return
        v = e.attributes.get(a.attr, MISSING)
        if not _number(v):
            return
        x = float(v)
        if state[1] == 0:
            state[0] = x
        elif a.fn in ("sum", "avg"):
            state[0] += x
        elif a.fn == "min":
            state[0] = min(state[0], x)
        else:
            state[0] = max(state[0], x)
        state[1] += 1

    def _witness(self, inst: _Instance, pattern: Pattern, e: Event) -> Witness:
        aggs = []
        for k, s in enumerate(pattern.steps, start=1):
            for a in s.aggregates:
                acc, n = inst.aggs[(k, a.name)]
                aggs.append((f"{s.bind}.{a.name}", aggregate_value(a.fn, acc, n)))
        return Witness(inst.sid, tuple(inst.bound), tuple(aggs), inst.start_ts, e.ts)

    def process(self, events: Iterable[Event | tuple]) -> list[Witness]:
        """Process events in offset order; the witnesses they complete, in order."""
        out: list[Witness] = []
        for ev in events:
            out.extend(self._one(Event(*ev)))
        return out

    def _one(self, e: Event) -> list[Witness]:
        self.event_time = e.ts if self.event_time is None else max(self.event_time, e.ts)
        kept = []
        for inst in self.instances:
            if inst.start_ts + self.subscriptions[inst.sid][0].within_ms < self.event_time:
                self.counters.expired += 1
            else:
                kept.append(inst)
        self.instances = kept
        out: list[Witness] = []
        created: dict[int, list[tuple[_Instance, bool]]] = {}
        survivors = []
        for inst in self.instances:
            pattern = self.subscriptions[inst.sid][0]
            step = pattern.steps[inst.node - 1]
            if e.ts <= inst.last_ts or not self._all(step.correlate, e, inst):
                survivors.append(inst)  # invisible, or the filter edge
                continue
            if step.op == "next":
                if not self._all(step.where, e, inst):
                    self.counters.killed += 1
                    continue
                inst.events[inst.node] = e.attributes
                inst.bound[inst.node] = (e.id, 0)
                if inst.node == len(pattern.steps):
                    out.append(self._witness(inst, pattern, e))
                    self.counters.completed += 1
                    continue
                self._enter(inst, inst.node + 1, e, pattern)
                survivors.append(inst)
                continue
            # fold: the rebind edge, or death
            if not self._all(step.where, e, inst):
                self.counters.killed += 1
                continue
            k = inst.node
            for a in step.aggregates:
                self._accumulate(a, inst.aggs[(k, a.name)], e)
            inst.events[k] = e.attributes
            inst.bound[k] = (e.id, inst.bound[k][1] + 1)
            inst.last_ts = e.ts
            survivors.append(inst)
            if self._all(step.until, e, inst):  # an output of μ
                if k == len(pattern.steps):
                    out.append(self._witness(inst, pattern, e))
                    self.counters.completed += 1
                else:
                    copy = inst.copy()
                    self._enter(copy, k + 1, e, pattern)
                    created.setdefault(inst.sid, []).append((copy, False))
        self.instances = survivors
        for sid, (pattern, since) in self.subscriptions.items():
            if e.ts < since or not all(compare(op, e.attributes[a], c) if a in e.attributes else False
                                       for a, op, c in pattern.start):
                continue
            inst = _Instance(sid, 0, e.ts, e.ts, [None] * (len(pattern.steps) + 1), [(None, 0)] * (len(pattern.steps) + 1))
            inst.events[0] = e.attributes
            inst.bound[0] = (e.id, 0)
            if not pattern.steps:
                out.append(self._witness(inst, pattern, e))
                self.counters.started += 1
                self.counters.completed += 1
                continue
            self._enter(inst, 1, e, pattern)
            created.setdefault(sid, []).append((inst, True))
        per_sid: dict[int, int] = {}
        for inst in self.instances:
            per_sid[inst.sid] = per_sid.get(inst.sid, 0) + 1
        for sid in sorted(created):
            new = created[sid]
            if (per_sid.get(sid, 0) + len(new) > self.limits.max_per_subscription
                    or len(self.instances) + len(new) > self.limits.max_instances):
                self.counters.refused += len(new)
                continue
            self.counters.started += sum(1 for _, is_start in new if is_start)
            self.instances.extend(i for i, _ in new)
        return out
