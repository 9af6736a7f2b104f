"""The pattern language: text and JSON forms, compiled to one checked :class:`Pattern`.

A pattern is a left-deep Cayuga expression (EDBT 2006, section 2.2): a start
selection, then ``next`` (sequence ``;θ`` with a post-selection) and ``fold``
(iteration ``μ`` with aggregation ``α``) steps, and a mandatory ``within``.
See docs/patterns.md for the semantics and the grammar.

Both forms go through :func:`_resolve`, which turns names into references
(:class:`Ref`) and applies the compile-time checks, so the text and the JSON
cannot accept different things.  Operands are linear, ``mul * ref + add``, so
that static and dynamic parts split mechanically (section 3.1).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from fastpubsub.engine import OPERATORS

MAX_STEPS = 8  # steps after the start
MAX_AGGREGATES = 8  # per fold
AGGREGATE_FUNCTIONS = ("count", "sum", "min", "max", "avg")
UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
KEYWORDS = {"seq", "next", "fold", "where", "while", "agg", "until", "within", "and", "dur"}


class PatternError(ValueError):
    """A pattern that does not compile; the message names the column (text) or JSON path."""


# -- the compiled form ---------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A value an operand reads.

    ``kind``: "event" (attribute ``attr`` of the candidate event), "bound"
    (attribute ``attr`` as bound at step ``step``; for a fold, its latest
    iteration), "agg" (aggregate ``attr`` of fold ``step``), "dur".
    """

    kind: str
    step: int = -1
    attr: str = ""


@dataclass(frozen=True)
class Operand:
    """``mul * ref + add`` (``arith``), the bare ``ref``, or a constant when ``ref`` is None."""

    ref: Ref | None
    const: Any = None
    mul: float = 1.0
    add: float = 0.0
    arith: bool = False


@dataclass(frozen=True)
class Atom:
    left: Operand
    op: str
    right: Operand

    @property
    def static_triple(self) -> tuple[str, str, Any] | None:
        """``(attr, op, constant)`` if this atom compares a candidate attribute with a constant."""
        lhs, rhs = self.left, self.right
        if lhs.ref is not None and lhs.ref.kind == "event" and not lhs.arith and rhs.ref is None:
            return (lhs.ref.attr, self.op, rhs.const)
        return None


@dataclass(frozen=True)
class Aggregate:
    name: str
    fn: str
    attr: str = ""  # empty for count()


@dataclass(frozen=True)
class Step:
    op: str  # "next" or "fold"
    bind: str
    correlate: tuple[Atom, ...]
    where: tuple[Atom, ...] = ()  # next: post-selection; fold: the while (rebind) selection
    aggregates: tuple[Aggregate, ...] = ()
    until: tuple[Atom, ...] = ()


@dataclass(frozen=True)
class Pattern:
    bind: str
    start: tuple[tuple[str, str, Any], ...]
    steps: tuple[Step, ...]
    within_ms: int

    def binding(self, name: str) -> int:
        return ([self.bind] + [s.bind for s in self.steps]).index(name)


# -- text -> raw syntax tree ---------------------------------------------------
# Raw operands: ("const", value, col) | ("name", [parts], col) | ("dur", None, col)
#               | ("bin", op, left, right, col) | ("neg", x, col)

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<dur>\d+(?:ms|s|m|h|d|w)(?![A-Za-z0-9_]))
  | (?P<op>!=|<=|>=|==|=|<|>)
  | (?P<punct>[:,()*/+\-.])
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PatternError(f"column {pos + 1}: unexpected character {text[pos]!r}")
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group(), pos + 1))
        pos = m.end()
    out.append(("end", "", len(text) + 1))
    return out


def _unquote(token: str, column: int) -> str:
    body = token[1:-1]
    if token[0] == "'":
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads(f'"{body}"')
    except json.JSONDecodeError as exc:
        raise PatternError(f"column {column}: bad escape in string {token}: {exc.msg}") from None


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self) -> tuple[str, str, int]:
        t = self.peek()
        self.i += 1
        return t

    def is_kw(self, word: str) -> bool:
        kind, tok, _ = self.peek()
        return kind == "name" and tok.lower() == word

    def expect_kw(self, word: str) -> int:
        kind, tok, col = self.take()
        if kind != "name" or tok.lower() != word:
            raise PatternError(f"column {col}: expected {word!r}, got {tok or 'end of text'!r}")
        return col

    def expect_punct(self, p: str) -> int:
        kind, tok, col = self.take()
        if tok != p or kind != "punct":
            raise PatternError(f"column {col}: expected {p!r}, got {tok or 'end of text'!r}")
        return col

    def ident(self, what: str) -> tuple[str, int]:
        kind, tok, col = self.take()
        if kind != "name" or tok.lower() in KEYWORDS:
            raise PatternError(f"column {col}: expected {what}, got {tok or 'end of text'!r}")
        return tok, col

    # expressions
    def expr(self):
        left = self.term()
        while self.peek()[1] in ("+", "-") and self.peek()[0] == "punct":
            _, op, col = self.take()
            left = ("bin", op, left, self.term(), col)
        return left

    def term(self):
        left = self.factor()
        while self.peek()[1] in ("*", "/") and self.peek()[0] == "punct":
            _, op, col = self.take()
            left = ("bin", op, left, self.factor(), col)
        return left

    def factor(self):
        kind, tok, col = self.take()
        if kind == "punct" and tok == "-":
            return ("neg", self.factor(), col)
        if kind == "punct" and tok == "(":
            inner = self.expr()
            self.expect_punct(")")
            return inner
        if kind == "string":
            return ("const", _unquote(tok, col), col)
        if kind == "number":
            return ("const", float(tok) if any(c in tok for c in ".eE") else int(tok), col)
        if kind == "dur":
            n = re.match(r"\d+", tok).group()
            return ("const", int(n) * UNITS_MS[tok[len(n):]], col)
        if kind == "name":
            low = tok.lower()
            if low in ("true", "false"):
                return ("const", low == "true", col)
            if low == "dur":
                return ("dur", None, col)
            if low in KEYWORDS:
                raise PatternError(f"column {col}: expected a value, got keyword {tok!r}")
            parts = [tok]
            while self.peek()[1] == "." and self.peek()[0] == "punct":
                self.take()
                parts.append(self.ident("an attribute name after '.'")[0])
            return ("name", parts, col)
        raise PatternError(f"column {col}: expected a value, got {tok or 'end of text'!r}")

    def atom(self):
        col = self.peek()[2]
        left = self.expr()
        kind, op, opcol = self.take()
        if kind != "op":
            raise PatternError(f"column {opcol}: expected an operator ({' '.join(OPERATORS)}), got {op or 'end of text'!r}")
        return (left, "=" if op == "==" else op, self.expr(), col)

    def conj(self):
        atoms = [self.atom()]
        while self.is_kw("and"):
            self.take()
            atoms.append(self.atom())
        return atoms

    def pattern(self) -> dict:
        self.expect_kw("seq")
        bind, _ = self.ident("a binding name")
        self.expect_punct(":")
        raw: dict = {"bind": bind, "start": self.conj(), "steps": [], "within": None}
        while True:
            if self.is_kw("next") or self.is_kw("fold"):
                _, op, col = self.take()
                op = op.lower()
                name, _ = self.ident("a binding name")
                self.expect_punct(":")
                step = {"op": op, "bind": name, "col": col, "correlate": self.conj(), "where": [], "aggregates": [],
                        "until": []}
                if op == "next" and self.is_kw("where"):
                    self.take()
                    step["where"] = self.conj()
                if op == "fold":
                    if self.is_kw("while"):
                        self.take()
                        step["where"] = self.conj()
                    if self.is_kw("agg"):
                        self.take()
                        step["aggregates"].append(self.aggregate())
                        while self.peek()[1] == "," and self.peek()[0] == "punct":
                            self.take()
                            step["aggregates"].append(self.aggregate())
                    if self.is_kw("until"):
                        self.take()
                        step["until"] = self.conj()
                raw["steps"].append(step)
            elif self.is_kw("within"):
                col = self.take()[2]
                kind, tok, dcol = self.take()
                if kind == "dur":
                    n = re.match(r"\d+", tok).group()
                    raw["within"] = (int(n) * UNITS_MS[tok[len(n):]], dcol)
                elif kind == "number" and tok.isdigit():
                    raw["within"] = (int(tok), dcol)
                else:
                    raise PatternError(f"column {dcol}: expected a duration after 'within' (e.g. 30m, 1h), got {tok!r}")
                kind, tok, ecol = self.take()
                if kind != "end":
                    raise PatternError(f"column {ecol}: unexpected {tok!r} after the within clause")
                return raw
            else:
                kind, tok, col = self.peek()
                if kind == "end":
                    raise PatternError(f"column {col}: a pattern needs 'within <duration>' (e.g. within 1h)")
                raise PatternError(f"column {col}: expected 'next', 'fold' or 'within', got {tok!r}")

    def aggregate(self):
        name, col = self.ident("an aggregate name")
        kind, tok, c = self.take()
        if tok != "=":
            raise PatternError(f"column {c}: expected '=' after aggregate name {name!r}")
        fn, fcol = self.ident("an aggregate function")
        if fn.lower() not in AGGREGATE_FUNCTIONS:
            raise PatternError(f"column {fcol}: unknown aggregate function {fn!r}; expected one of {', '.join(AGGREGATE_FUNCTIONS)}")
        self.expect_punct("(")
        attr = ""
        if not (self.peek()[1] == ")" and self.peek()[0] == "punct"):
            attr, _ = self.ident("an attribute name")
        self.expect_punct(")")
        return (name, fn.lower(), attr, col)


def parse(text: str) -> Pattern:
    """Compile the text form (docs/patterns.md section 2.1); :class:`PatternError` names the column."""
    if not isinstance(text, str):
        raise PatternError("a pattern text must be a string")
    return _resolve(_Parser(text).pattern(), lambda col: f"column {col}")


# -- JSON <-> raw syntax tree --------------------------------------------------


def _raw_from_json_operand(x: Any, where: str, left: bool):
    if isinstance(x, dict):
        unknown = set(x) - {"ref", "mul", "add"}
        if unknown or "ref" not in x or not isinstance(x["ref"], str):
            raise PatternError(f"{where}: an operand object is {{'ref': str, 'mul': number, 'add': number}}")
        parts = x["ref"].split(".")
        base = ("dur", None, where) if x["ref"] == "dur" else ("name", parts, where)
        mul, add = x.get("mul", 1), x.get("add", 0)
        for v in (mul, add):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise PatternError(f"{where}: mul and add must be numbers")
        if "mul" in x or "add" in x:
            return ("bin", "+", ("bin", "*", ("const", mul, where), base, where), ("const", add, where), where)
        return base
    if left and isinstance(x, str):
        return ("name", [x], where)
    if isinstance(x, (bool, int, float, str)):
        return ("const", x, where)
    raise PatternError(f"{where}: expected a constant or an operand object, got {x!r}")


def _raw_atoms(items: Any, where: str):
    if not isinstance(items, list):
        raise PatternError(f"{where}: expected a list of [left, op, right] atoms")
    out = []
    for k, item in enumerate(items):
        w = f"{where}[{k}]"
        if not isinstance(item, list) or len(item) != 3:
            raise PatternError(f"{w}: expected [left, op, right]")
        op = "=" if item[1] == "==" else item[1]
        if op not in OPERATORS:
            raise PatternError(f"{w}: unknown operator {item[1]!r}")
        out.append((_raw_from_json_operand(item[0], w, True), op, _raw_from_json_operand(item[2], w, False), w))
    return out


def from_json(doc: Any) -> Pattern:
    """Compile the JSON form (docs/patterns.md section 2.2); errors name the JSON path."""
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise PatternError(f"pattern JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise PatternError("pattern JSON must be an object")
    unknown = set(doc) - {"start", "steps", "within_ms"}
    if unknown:
        raise PatternError(f"pattern JSON: unknown field(s) {', '.join(sorted(unknown))}")
    start = doc.get("start")
    if not isinstance(start, dict) or not isinstance(start.get("bind"), str):
        raise PatternError("start: expected {'bind': name, 'predicates': [...]}")
    raw: dict = {"bind": start["bind"], "start": _raw_atoms(start.get("predicates"), "start.predicates"), "steps": []}
    steps = doc.get("steps", [])
    if not isinstance(steps, list):
        raise PatternError("steps: expected a list")
    for k, s in enumerate(steps):
        w = f"steps[{k}]"
        if not isinstance(s, dict) or s.get("op") not in ("next", "fold") or not isinstance(s.get("bind"), str):
            raise PatternError(f"{w}: expected {{'op': 'next'|'fold', 'bind': name, ...}}")
        allowed = {"op", "bind", "correlate"} | ({"where"} if s["op"] == "next" else {"while", "aggregates", "until"})
        if set(s) - allowed:
            raise PatternError(f"{w}: unknown field(s) {', '.join(sorted(set(s) - allowed))}")
        aggs = []
        for j, a in enumerate(s.get("aggregates", [])):
            if not isinstance(a, list) or len(a) not in (2, 3) or not all(isinstance(x, str) for x in a):
                raise PatternError(f"{w}.aggregates[{j}]: expected [name, function] or [name, function, attribute]")
            if a[1] not in AGGREGATE_FUNCTIONS:
                raise PatternError(f"{w}.aggregates[{j}]: unknown aggregate function {a[1]!r}")
            aggs.append((a[0], a[1], a[2] if len(a) == 3 else "", f"{w}.aggregates[{j}]"))
        raw["steps"].append({
            "op": s["op"], "bind": s["bind"], "col": w,
            "correlate": _raw_atoms(s.get("correlate", []), f"{w}.correlate"),
            "where": _raw_atoms(s.get("where", s.get("while", [])), f"{w}.{'where' if s['op'] == 'next' else 'while'}"),
            "aggregates": aggs, "until": _raw_atoms(s.get("until", []), f"{w}.until"),
        })
    within = doc.get("within_ms")
    if within is None:
        raw["within"] = None
    elif isinstance(within, bool) or not isinstance(within, int):
        raise PatternError("within_ms: expected an integer number of milliseconds")
    else:
        raw["within"] = (within, "within_ms")
    return _resolve(raw, lambda where: str(where))


def _operand_json(o: Operand, names: list[str], step: int, left: bool) -> Any:
    if o.ref is None:
        return o.const
    r = o.ref
    if r.kind == "event" and left and not o.arith:
        return r.attr
    if r.kind == "event":
        ref = r.attr
    elif r.kind == "dur":
        ref = "dur"
    elif r.kind == "bound" and r.step == step:  # a fold reading its own previous iteration
        ref = f"{names[r.step]}.last.{r.attr}"
    else:
        ref = f"{names[r.step]}.{r.attr}"
    out: dict[str, Any] = {"ref": ref}
    if o.arith or o.mul != 1 or o.add != 0:
        out["mul"] = o.mul
        out["add"] = o.add
    return out


def to_json(pattern: Pattern) -> dict:
    """The canonical JSON form; ``from_json(to_json(p)) == p``."""
    names = [pattern.bind] + [s.bind for s in pattern.steps]

    def atoms(xs, k):
        return [[_operand_json(a.left, names, k, True), a.op, _operand_json(a.right, names, k, False)] for a in xs]
    steps = []
    for k, s in enumerate(pattern.steps, start=1):
        d: dict[str, Any] = {"op": s.op, "bind": s.bind, "correlate": atoms(s.correlate, k)}
        if s.op == "next":
            if s.where:
                d["where"] = atoms(s.where, k)
        else:
            if s.where:
                d["while"] = atoms(s.where, k)
            if s.aggregates:
                d["aggregates"] = [[a.name, a.fn] + ([a.attr] if a.attr else []) for a in s.aggregates]
            if s.until:
                d["until"] = atoms(s.until, k)
        steps.append(d)
    return {"start": {"bind": pattern.bind, "predicates": [list(p) for p in pattern.start]}, "steps": steps,
            "within_ms": pattern.within_ms}


# -- resolution and checks -----------------------------------------------------

_NUMERIC = "number"


def _resolve(raw: dict, at) -> Pattern:
    names = [raw["bind"]]
    for s in raw["steps"]:
        if s["bind"] in names:
            raise PatternError(f"{at(s['col'])}: binding {s['bind']!r} is already used")
        names.append(s["bind"])
    if raw.get("within") is None:
        raise PatternError("a pattern needs 'within <duration>' (within_ms): instances must not live forever")
    within, wcol = raw["within"]
    if within <= 0:
        raise PatternError(f"{at(wcol)}: within must be positive")
    if len(raw["steps"]) > MAX_STEPS:
        raise PatternError(f"{at(raw['steps'][MAX_STEPS]['col'])}: too many steps ({len(raw['steps'])}; at most {MAX_STEPS})")

    start = []
    for left, op, right, col in raw["start"]:
        atom = _atom(left, op, right, col, at, ctx=_Ctx(names, 0, "start", {}))
        trip = atom.static_triple
        if trip is None:
            flipped = Atom(atom.right, _FLIP[op], atom.left)
            trip = flipped.static_triple
        if trip is None or isinstance(trip[2], float) and math.isnan(trip[2]):
            raise PatternError(f"{at(col)}: a start predicate compares an attribute with a constant")
        start.append(trip)
    if not start:
        raise PatternError("the start needs at least one predicate")

    aggs_by_step: dict[int, dict[str, Aggregate]] = {}
    steps = []
    for k, s in enumerate(raw["steps"], start=1):
        if s["op"] == "next" and (s["aggregates"] or s["until"]):
            raise PatternError(f"{at(s['col'])}: agg and until belong to a fold")
        corr = tuple(_atom(*a, at, ctx=_Ctx(names, k, "correlate", aggs_by_step)) for a in s["correlate"])
        if not corr:
            raise PatternError(f"{at(s['col'])}: step {s['bind']!r} needs a correlation predicate")
        where = tuple(_atom(*a, at, ctx=_Ctx(names, k, "while" if s["op"] == "fold" else "where", aggs_by_step))
                      for a in s["where"])
        aggs = []
        if len(s["aggregates"]) > MAX_AGGREGATES:
            raise PatternError(f"{at(s['aggregates'][MAX_AGGREGATES][3])}: too many aggregates (at most {MAX_AGGREGATES})")
        seen = set()
        for name, fn, attr, col in s["aggregates"]:
            if name in seen or name.lower() in KEYWORDS:
                raise PatternError(f"{at(col)}: aggregate name {name!r} repeated or reserved")
            if (fn == "count") != (attr == ""):
                raise PatternError(f"{at(col)}: count() takes no attribute; {fn}() needs one")
            seen.add(name)
            aggs.append(Aggregate(name, fn, attr))
        if aggs:
            aggs_by_step[k] = {a.name: a for a in aggs}
        until = tuple(_atom(*a, at, ctx=_Ctx(names, k, "until", aggs_by_step)) for a in s["until"])
        steps.append(Step(s["op"], s["bind"], corr, where, tuple(aggs), until))
    return Pattern(raw["bind"], tuple(start), tuple(steps), int(within))


_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass
class _Ctx:
    names: list[str]
    step: int  # index of the step being compiled (0 = start)
    clause: str  # start, correlate, where, while, until
    aggs: dict[int, dict[str, Aggregate]]


def _ref(parts: list[str], col, at, ctx: _Ctx) -> Ref:
    here = ctx.names[ctx.step]
    if len(parts) == 1:
        name = parts[0]
        if ctx.clause == "until" and name in ctx.aggs.get(ctx.step, {}):
            return Ref("agg", ctx.step, name)
        return Ref("event", -1, name)
    b = parts[0]
    if b not in ctx.names[: ctx.step + 1]:
        known = ", ".join(ctx.names[: ctx.step + 1])
        raise PatternError(f"{at(col)}: unknown binding {b!r} in {'.'.join(parts)} (bound here: {known})")
        # a binding used before it is bound is unknown at this point
    k = ctx.names.index(b)
    if len(parts) == 3 and parts[1] == "last":
        if not (k == ctx.step and ctx.clause == "while"):
            raise PatternError(f"{at(col)}: {'.'.join(parts)}: .last is read in {b}'s own while clause only")
        return Ref("bound", k, parts[2])
    if len(parts) != 2:
        raise PatternError(f"{at(col)}: {'.'.join(parts)}: expected binding.attribute or binding.last.attribute")
    attr = parts[1]
    if k == ctx.step:
        if ctx.clause == "until" and attr in ctx.aggs.get(k, {}):
            return Ref("agg", k, attr)
        if ctx.clause == "start":
            return Ref("event", -1, attr)
        return Ref("event", -1, attr)
    if attr in ctx.aggs.get(k, {}):
        return Ref("agg", k, attr)
    return Ref("bound", k, attr)


def _operand(node, at, ctx: _Ctx) -> tuple[Operand, str | None]:
    """Fold a raw expression into ``mul * ref + add``; returns (operand, value type or None if unknown)."""
    kind = node[0]
    if kind == "const":
        v = node[1]
        if isinstance(v, float) and math.isnan(v):
            raise PatternError(f"{at(node[2])}: NaN is not a valid constant")
        t = "bool" if isinstance(v, bool) else ("string" if isinstance(v, str) else _NUMERIC)
        return Operand(None, v), t
    if kind == "dur":
        if ctx.clause in ("start", "correlate"):
            raise PatternError(f"{at(node[2])}: dur is read in where, while and until clauses only")
        return Operand(Ref("dur")), _NUMERIC
    if kind == "name":
        r = _ref(node[1], node[2], at, ctx)
        return Operand(r), (_NUMERIC if r.kind in ("agg", "dur") else None)
    if kind == "neg":
        o, t = _operand(node[1], at, ctx)
        _numeric(o, t, node[2], at)
        if o.ref is None:
            return Operand(None, -o.const), _NUMERIC
        return Operand(o.ref, None, -o.mul, -o.add, True), _NUMERIC
    _, op, l_node, r_node, col = node
    lo, lt = _operand(l_node, at, ctx)
    ro, rt = _operand(r_node, at, ctx)
    _numeric(lo, lt, col, at)
    _numeric(ro, rt, col, at)
    if lo.ref is not None and ro.ref is not None:
        raise PatternError(f"{at(col)}: only linear forms c * ref + d are supported (one reference per side)")
    if op in ("+", "-"):
        sign = 1 if op == "+" else -1
        if lo.ref is None and ro.ref is None:
            return Operand(None, lo.const + sign * ro.const), _NUMERIC
        if lo.ref is not None:
            return Operand(lo.ref, None, lo.mul, lo.add + sign * ro.const, True), _NUMERIC
        return Operand(ro.ref, None, sign * ro.mul, lo.const + sign * ro.add, True), _NUMERIC
    if op == "*":
        if lo.ref is None and ro.ref is None:
            return Operand(None, lo.const * ro.const), _NUMERIC
        c, o = (lo.const, ro) if lo.ref is None else (ro.const, lo)
        return Operand(o.ref, None, o.mul * c, o.add * c, True), _NUMERIC
    # division: only by a constant
    if ro.ref is not None:
        raise PatternError(f"{at(col)}: division by a reference is not linear; divide by a constant")
    if ro.const == 0:
        raise PatternError(f"{at(col)}: division by zero")
    if lo.ref is None:
        return Operand(None, lo.const / ro.const), _NUMERIC
    return Operand(lo.ref, None, lo.mul / ro.const, lo.add / ro.const, True), _NUMERIC


def _numeric(o: Operand, t: str | None, col, at) -> None:
    if t in ("string", "bool"):
        what = repr(o.const)
        raise PatternError(f"{at(col)}: type error: arithmetic on the {t} {what}")


def _atom(left, op, right, col, at, ctx: _Ctx) -> Atom:
    lo, lt = _operand(left, at, ctx)
    ro, rt = _operand(right, at, ctx)
    for a, ta, b, tb in ((lo, lt, ro, rt), (ro, rt, lo, lt)):
        if ta in ("string", "bool") and (tb == _NUMERIC and (b.ref is not None or b.arith)):
            raise PatternError(f"{at(col)}: type error: {a.const!r} compared with a number")
        if ta in ("string", "bool") and tb is not None and tb != ta and b.ref is None:
            raise PatternError(f"{at(col)}: type error: {a.const!r} compared with {b.const!r}")
    if lo.ref is None and ro.ref is None:
        raise PatternError(f"{at(col)}: a comparison needs at least one attribute or reference")
    plain_event = lambda o: o.ref is not None and o.ref.kind == "event" and not o.arith  # noqa: E731
    if lo.ref is None or (plain_event(ro) and not plain_event(lo)):  # candidate attribute on the left
        lo, op, ro = ro, _FLIP[op], lo
    return Atom(lo, op, ro)
