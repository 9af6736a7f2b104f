"""Events shaped like Event Ruler's citylots2 lines, and its CL2Benchmark's rules restated, with every rule's match
count planted by construction.

The rules are those of ``Benchmarks.java`` (``src/test/software/amazon/event/ruler/``) in github.com/aws/event-ruler
at commit ``337e8d99026d3f6687f783535f157be8bf4ebbb7`` (21 Jul 2026): fourteen kinds of five rules, two
combinations, and their expected counts over the 213,068 lines of ``citylots2.json.gz``.  That file is not in the
repository's snapshot, so the events are ours: GeoJSON Features of about 900 bytes with the same properties
(``MAPBLKLOT``, ``BLKLOT``, ``BLOCK_NUM``, ``LOT_NUM``, ``FROM_ST``, ``TO_ST``, ``STREET``, ``ST_TYPE``,
``ODD_EVEN``) and a geometry whose ``coordinates`` is an array of ``{"x", "y", "z"}`` points and
``firstCoordinates`` its first point.  The rules are written here in our words, each of the same kind, field and
operands as theirs.  ``exists`` is a kind of ours (theirs has none).

How the counts are planted: each field the rules test is drawn from a few *components* (``FULTON``, "a
``MAPBLKLOT`` of the form ``143*``", "a polygon whose first point lies in band 2 with another in band 4", ...)
with a count each, the benchmark's 213,068-line count scaled to the number of events (at least 1), the last
component taking the rest.  Each rule declares the components it matches (or, for ``anything-but``, those it
does not), so its count is a sum known before any event exists; at 213,068 events the sums are the benchmark's
expected counts (tests/benchmarks/test_peer_event_ruler.py checks both, and checks the declarations against a naive
evaluation of every rule on the events).  The fields are independent, and no rule spans two of them except
through the geometry's own plan.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

#: The event-ruler commit whose benchmark is restated here.
EVENT_RULER_COMMIT = "337e8d99026d3f6687f783535f157be8bf4ebbb7"
#: Lines in their citylots2 file: the counts below are for this many events.
CITYLOTS2_LINES = 213_068

# the numeric operands of their NUMERIC and COMPLEX_ARRAYS rules
X_EXACT = -122.42916360922355
Y_EXACT = 37.729900216217324
X_SPLIT = -122.41600944012424  # x < it, x > it
X_LOW, X_HIGH = -122.46471267081272, -122.4063085128395  # the open range
#: x bands of a point, by the operands: 1 below X_LOW, 2 up to X_SPLIT, 3 up to X_HIGH, 4 above
BANDS = {1: (-122.5149, X_LOW), 2: (X_LOW, X_SPLIT), 3: (X_SPLIT, X_HIGH), 4: (X_HIGH, -122.3569)}
_MARGIN = 1e-5  # a drawn coordinate stays this far from every operand (whatever precision either side compares at)

# field -> [(component, count in 213,068 lines)]; the last component of each field takes what the others leave
STREET = [("ACADIA", 24), ("BLYTHDALE", 442), ("DRUMM", 13), ("DRAPER", 25), ("FULTON", 1910), ("FUNSTON", 477),
          ("RHODE ISLAND", 328), ("MASON", 2657), ("MASONIC", 293), ("JEFFERSON", 131), ("MOULTON", 22),
          ("WASHINGTON", 12724), ("LAKE", 871), ("KING", 1963), ("SANTIAGO", 682), ("BEACH", 211), ("HYDE", 1758),
          ("CHESTNUT", 825), ("other street", None)]
#: street names no rule matches: the "other street" component draws from them
OTHER_STREETS = ("MARKET", "VALENCIA", "CASTRO", "POLK", "PINE", "03RD", "24TH", "GEARY", "TARAVAL", "NORIEGA",
                 "OCEAN", "CLAY", "BUSH", "SUTTER", "POST", "EDDY", "TURK", "MCALLISTER", "HAIGHT", "PAGE",
                 "OAK", "FELL", "HAYES", "GROVE", "LINCOLN", "JUDAH", "KIRKHAM", "ORTEGA", "PACHECO", "QUINTARA")
ST_TYPE = [("ST", 116386), ("CT", 1774), ("STWY", 15), ("other type", None)]
OTHER_TYPES = ("AVE", "BLVD", "WAY", "DR", "PL", "LN", "TER", "HWY")
FROM_ST = [("441", 2453), ("44x", 1524), ("x41", 1560), ("other number", None)]
MAPBLKLOT = [("1430022", 1), ("143*", 489), ("2607117", 101), ("2*0*1*7", 612), ("2607218", 35), ("*218", 8),
             ("3745012", 655), ("3*5*2", 1885), ("VACSTWIL", 1), ("other lot", None)]
TO_ST = [("absent", 4261), ("present", None)]  # for the exists kind (ours)
# a geometry's plan: (polygon type, band of its first point, band of another point or None, what else it carries)
GEOMETRY_PLANS = {
    "first x exact": ("Polygon", 2, None, "x"), "another x exact": ("Polygon", 2, None, "x later"),
    "multi with y": ("MultiPolygon", 2, None, "y"), "multi": ("MultiPolygon", 1, None, ""),
    "4 then 2": ("Polygon", 4, 2, ""), "3 then 1": ("Polygon", 3, 1, ""), "1 then 3": ("Polygon", 1, 3, ""),
    "2 then 4": ("Polygon", 2, 4, ""), "1 then 2": ("Polygon", 1, 2, ""),
    "band 2": ("Polygon", 2, None, ""), "band 3": ("Polygon", 3, None, ""), "band 4": ("Polygon", 4, None, ""),
    "band 1": ("Polygon", 1, None, ""),
}
GEOMETRY = [("first x exact", 2), ("another x exact", 216), ("multi with y", 1), ("multi", 119), ("4 then 2", 200),
            ("3 then 1", 298), ("1 then 3", 100), ("2 then 4", 148), ("1 then 2", 132), ("band 2", 116686),
            ("band 3", 9702), ("band 4", 53920), ("band 1", None)]
FIELDS = {"STREET": STREET, "ST_TYPE": ST_TYPE, "FROM_ST": FROM_ST, "MAPBLKLOT": MAPBLKLOT, "TO_ST": TO_ST,
          "geometry": GEOMETRY}
_ALL_BANDS = {name for name, (_, first, _, _) in GEOMETRY_PLANS.items()}


def _plans(first: set[int] = frozenset(), other: set[int] = frozenset()) -> set[str]:
    """The geometry plans with a point in one of these bands (first point, or any point)."""
    return {name for name, (_, f, o, _) in GEOMETRY_PLANS.items() if f in first or f in other or o in other}


MULTI = {name for name, (kind, *_) in GEOMETRY_PLANS.items() if kind == "MultiPolygon"}


@dataclass(frozen=True)
class Rule:
    """One rule and what it matches: the components of ``field`` it matches (``negated``: all but these)."""

    pattern: dict
    field: str
    components: frozenset
    negated: bool = False

    def planted(self, counts: dict[str, dict[str, int]]) -> int:
        """Its match count on events of these component counts."""
        of = counts[self.field]
        hit = sum(of[c] for c in self.components)
        return sum(of.values()) - hit if self.negated else hit


def _p(field_: str, operand: Any, *components: str, negated: bool = False) -> Rule:
    return Rule({"properties": {field_: [operand]}}, field_, frozenset(components), negated)


def _lot(operand: Any, *components: str, negated: bool = False) -> Rule:
    return _p("MAPBLKLOT", operand, *components, negated=negated)


def _geo(pattern: dict, *components: str | set, negated: bool = False) -> Rule:
    names = set()
    for c in components:
        names |= c if isinstance(c, set) else {c}
    return Rule({"geometry": pattern}, "geometry", frozenset(names), negated)


def _street(operand: Any, *components: str, negated: bool = False) -> Rule:
    return _p("STREET", operand, *components, negated=negated)


_ON = ("FULTON", "FUNSTON", "MASON", "JEFFERSON", "MOULTON", "WASHINGTON")
_FIRST_BELOW, _FIRST_ABOVE = _plans(first={1, 2}), _plans(first={3, 4})
_FIRST_IN_RANGE = _plans(first={2, 3})

#: kind -> its five rules, in their order (their expected counts in the comments, for 213,068 lines)
KINDS: dict[str, list[Rule]] = {
    "exact": [_lot("1430022", "1430022"), _lot("2607117", "2607117"), _lot("2607218", "2607218"),  # 1 101 35
              _lot("3745012", "3745012"), _lot("VACSTWIL", "VACSTWIL")],  # 655 1
    "wildcard": [_lot({"wildcard": "143*"}, "1430022", "143*"),  # 490
                 _lot({"wildcard": "2*0*1*7"}, "2607117", "2*0*1*7"),  # 713
                 _lot({"wildcard": "*218"}, "2607218", "*218"),  # 43
                 _lot({"wildcard": "3*5*2"}, "3745012", "3*5*2"),  # 2540
                 _lot({"wildcard": "VA*IL"}, "VACSTWIL")],  # 1
    "prefix": [_street({"prefix": "AC"}, "ACADIA"), _street({"prefix": "BL"}, "BLYTHDALE"),  # 24 442
               _street({"prefix": "DR"}, "DRUMM", "DRAPER"), _street({"prefix": "FU"}, "FULTON", "FUNSTON"),  # 38 2387
               _street({"prefix": "RH"}, "RHODE ISLAND")],  # 328
    "prefix-ignore-case": [_street({"prefix": {"equals-ignore-case": "Ac"}}, "ACADIA"),
                           _street({"prefix": {"equals-ignore-case": "bL"}}, "BLYTHDALE"),
                           _street({"prefix": {"equals-ignore-case": "dR"}}, "DRUMM", "DRAPER"),
                           _street({"prefix": {"equals-ignore-case": "Fu"}}, "FULTON", "FUNSTON"),
                           _street({"prefix": {"equals-ignore-case": "rH"}}, "RHODE ISLAND")],
    "suffix": [_street({"suffix": "ON"}, *_ON), _street({"suffix": "KE"}, "LAKE"),  # 17921 871
               _street({"suffix": "MM"}, "DRUMM"), _street({"suffix": "ING"}, "KING"),  # 13 1963
               _street({"suffix": "GO"}, "SANTIAGO")],  # 682
    "suffix-ignore-case": [_street({"suffix": {"equals-ignore-case": "oN"}}, *_ON),
                           _street({"suffix": {"equals-ignore-case": "Ke"}}, "LAKE"),
                           _street({"suffix": {"equals-ignore-case": "mM"}}, "DRUMM"),
                           _street({"suffix": {"equals-ignore-case": "InG"}}, "KING"),
                           _street({"suffix": {"equals-ignore-case": "gO"}}, "SANTIAGO")],
    "equals-ignore-case": [_street({"equals-ignore-case": "jefferson"}, "JEFFERSON"),  # 131
                           _street({"equals-ignore-case": "bEaCh"}, "BEACH"),  # 211
                           _street({"equals-ignore-case": "HyDe"}, "HYDE"),  # 1758
                           _street({"equals-ignore-case": "CHESTNUT"}, "CHESTNUT"),  # 825
                           _p("ST_TYPE", {"equals-ignore-case": "st"}, "ST")],  # 116386
    "numeric": [_geo({"type": ["Polygon"], "firstCoordinates": {"x": [{"numeric": ["=", X_EXACT]}]}},
                     "first x exact"),  # 2
                _geo({"type": ["MultiPolygon"], "firstCoordinates": {"z": [{"numeric": ["=", 0]}]}}, MULTI),  # 120
                _geo({"firstCoordinates": {"x": [{"numeric": ["<", X_SPLIT]}]}}, _FIRST_BELOW),  # 148948
                _geo({"firstCoordinates": {"x": [{"numeric": [">", X_SPLIT]}]}}, _FIRST_ABOVE),  # 64120
                _geo({"firstCoordinates": {"x": [{"numeric": [">", X_LOW, "<", X_HIGH]}]}}, _FIRST_IN_RANGE)],  # 127053
    "anything-but": [_street({"anything-but": ["FULTON"]}, "FULTON", negated=True),  # 211158
                     _street({"anything-but": ["MASON"]}, "MASON", negated=True),  # 210411
                     _p("ST_TYPE", {"anything-but": ["ST"]}, "ST", negated=True),  # 96682
                     _geo({"type": [{"anything-but": ["Polygon"]}]}, MULTI),  # 120
                     _p("FROM_ST", {"anything-but": ["441"]}, "441", negated=True)],  # 210615
    "anything-but-ignore-case": [
        _street({"anything-but": {"equals-ignore-case": ["Fulton"]}}, "FULTON", negated=True),
        _street({"anything-but": {"equals-ignore-case": ["Mason"]}}, "MASON", negated=True),
        _p("ST_TYPE", {"anything-but": {"equals-ignore-case": ["st"]}}, "ST", negated=True),
        _geo({"type": [{"anything-but": {"equals-ignore-case": ["polygon"]}}]}, MULTI),
        _p("FROM_ST", {"anything-but": {"equals-ignore-case": ["441"]}}, "441", negated=True)],
    "anything-but-prefix": [
        _street({"anything-but": {"prefix": "FULTO"}}, "FULTON", negated=True),  # 211158
        _street({"anything-but": {"prefix": "MASO"}}, "MASON", "MASONIC", negated=True),  # 210118
        _p("ST_TYPE", {"anything-but": {"prefix": "S"}}, "ST", "STWY", negated=True),  # 96667
        _geo({"type": [{"anything-but": {"prefix": "Poly"}}]}, MULTI),  # 120
        _p("FROM_ST", {"anything-but": {"prefix": "44"}}, "441", "44x", negated=True)],  # 209091
    "anything-but-suffix": [
        _street({"anything-but": {"suffix": "ULTON"}}, "FULTON", "MOULTON", negated=True),  # 211136
        _street({"anything-but": {"suffix": "ASON"}}, "MASON", negated=True),  # 210411
        _p("ST_TYPE", {"anything-but": {"suffix": "T"}}, "ST", "CT", negated=True),  # 94908
        _geo({"type": [{"anything-but": {"suffix": "olygon"}}]}, _ALL_BANDS, negated=True),  # 0
        _p("FROM_ST", {"anything-but": {"suffix": "41"}}, "441", "x41", negated=True)],  # 209055
    "anything-but-wildcard": [
        _lot({"anything-but": {"wildcard": "143*"}}, "1430022", "143*", negated=True),  # 212578
        _lot({"anything-but": {"wildcard": "2*0*1*7"}}, "2607117", "2*0*1*7", negated=True),  # 212355
        _lot({"anything-but": {"wildcard": "*218"}}, "2607218", "*218", negated=True),  # 213025
        _lot({"anything-but": {"wildcard": "3*5*2"}}, "3745012", "3*5*2", negated=True),  # 210528
        _lot({"anything-but": {"wildcard": "VA*IL"}}, "VACSTWIL", negated=True)],  # 213067
    "arrays": [_geo({"type": ["Polygon"], "coordinates": {"x": [{"numeric": ["=", X_EXACT]}]}},
                    "first x exact", "another x exact"),  # 218
               _geo({"type": ["MultiPolygon"], "coordinates": {"y": [{"numeric": ["=", Y_EXACT]}]}},
                    "multi with y"),  # 1
               _geo({"coordinates": {"x": [{"numeric": ["<", X_SPLIT]}]}}, _plans(other={1, 2})),  # 149446
               _geo({"coordinates": {"x": [{"numeric": [">", X_SPLIT]}]}}, _plans(other={3, 4})),  # 64368
               _geo({"coordinates": {"x": [{"numeric": [">", X_LOW, "<", X_HIGH]}]}},
                    _plans(other={2, 3}))],  # 127485
    "exists": [_p("TO_ST", {"exists": True}, "present"), _p("TO_ST", {"exists": False}, "absent"),
               _geo({"firstCoordinates": {"z": [{"exists": True}]}}, _ALL_BANDS),
               Rule({"properties": {"ZIP": [{"exists": False}]}}, "TO_ST", frozenset(("present", "absent"))),
               Rule({"properties": {"ZIP": [{"exists": True}]}}, "TO_ST", frozenset())],
}
#: their expected counts over citylots2, per kind (``exists`` is ours: the counts of our plan at that size)
EXPECTED_CL2 = {
    "exact": [1, 101, 35, 655, 1], "wildcard": [490, 713, 43, 2540, 1], "prefix": [24, 442, 38, 2387, 328],
    "prefix-ignore-case": [24, 442, 38, 2387, 328], "suffix": [17921, 871, 13, 1963, 682],
    "suffix-ignore-case": [17921, 871, 13, 1963, 682], "equals-ignore-case": [131, 211, 1758, 825, 116386],
    "numeric": [2, 120, 148948, 64120, 127053], "anything-but": [211158, 210411, 96682, 120, 210615],
    "anything-but-ignore-case": [211158, 210411, 96682, 120, 210615],
    "anything-but-prefix": [211158, 210118, 96667, 120, 209091],
    "anything-but-suffix": [211136, 210411, 94908, 0, 209055],
    "anything-but-wildcard": [212578, 212355, 213025, 210528, 213067],
    "arrays": [218, 1, 149446, 64368, 127485],
}
# their two combinations: PARTIAL_COMBO without the arrays (slow in Event Ruler), COMBO with them
_PARTIAL = ("numeric", "exact", "prefix", "anything-but", "anything-but-ignore-case", "anything-but-prefix",
            "anything-but-suffix", "anything-but-wildcard")
COMBINATIONS = {"partial-combo": _PARTIAL, "combo": _PARTIAL + ("arrays",)}
ALL_KINDS = tuple(KINDS) + tuple(COMBINATIONS)


def kind_rules(kind: str) -> list[Rule]:
    """The rules of a kind or a combination, in order."""
    if kind in COMBINATIONS:
        return [r for k in COMBINATIONS[kind] for r in KINDS[k]]
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; the kinds: {', '.join(ALL_KINDS)}")
    return list(KINDS[kind])


def component_counts(events: int) -> dict[str, dict[str, int]]:
    """Each field's component counts at ``events`` events: the citylots2 counts scaled, at least 1, the rest last."""
    if events < 1000:
        raise ValueError("the planted counts need at least 1,000 events")
    out = {}
    for name, components in FIELDS.items():
        counts = {c: max(1, round(n * events / CITYLOTS2_LINES)) for c, n in components[:-1]}
        rest = events - sum(counts.values())
        if rest < 0:
            raise ValueError(f"{events} events cannot hold the components of {name}")
        counts[components[-1][0]] = rest
        out[name] = counts
    return out


def planted_counts(kind: str, events: int) -> list[int]:
    """Each rule's match count on :func:`generate`'s events, known from the plan alone."""
    counts = component_counts(events)
    return [r.planted(counts) for r in kind_rules(kind)]


@dataclass
class Workload:
    """The events (JSON lines, no newline) and the plan they were drawn from."""

    lines: list[bytes]
    counts: dict[str, dict[str, int]]
    lots: list[str] = field(default_factory=list)  # each event's MAPBLKLOT
    streets: list[str] = field(default_factory=list)


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _lot_value(component: str, rng: random.Random) -> str:
    """A MAPBLKLOT of the component: an exact value as is, a pattern's value drawn so that it meets no other rule."""
    while True:
        if component == "143*":
            v = "143" + _digits(rng, 4)
        elif component == "2*0*1*7":
            v = "2" + _digits(rng, 1) + "0" + _digits(rng, 1) + "1" + _digits(rng, 1) + "7"
        elif component == "*218":
            v = rng.choice("56789") + _digits(rng, 3) + "218"
        elif component == "3*5*2":
            v = "3" + _digits(rng, 1) + "5" + _digits(rng, 3) + "2"
        elif component == "other lot":
            v = rng.choice("456789") + _digits(rng, 6)
        else:
            return component
        exact = {c for c, _ in MAPBLKLOT if c.isalnum()}
        if v not in exact and (component == "*218" or not v.endswith("218")):
            return v


def _number(component: str, rng: random.Random) -> str:
    while True:
        if component == "44x":
            v = rng.choice(("44", "440", "442", "4400", "4471"))
        elif component == "x41":
            v = rng.choice(("41", "141", "241", "1041", "2941"))
        elif component == "other number":
            v = str(rng.randrange(0, 10000))
        else:
            return component
        if component != "other number" or not (v.startswith("44") or v.endswith("41")):
            return v


def _coordinate(rng: random.Random, band: int) -> float:
    lo, hi = BANDS[band]
    while True:
        x = rng.uniform(lo + _MARGIN, hi - _MARGIN)
        if abs(x - X_EXACT) > _MARGIN:
            return x


def _y(rng: random.Random) -> float:
    while True:
        y = rng.uniform(37.7081, 37.8324)
        if abs(y - Y_EXACT) > _MARGIN:
            return y


def _geometry(plan: str, rng: random.Random) -> dict:
    kind, first, other, extra = GEOMETRY_PLANS[plan]
    n = rng.randint(8, 12)
    xs = [_coordinate(rng, first) for _ in range(n)]
    if extra == "x":
        xs[0] = X_EXACT
    elif extra == "x later":
        xs[rng.randrange(1, n)] = X_EXACT
    if other is not None:
        xs[rng.randrange(1, n)] = _coordinate(rng, other)
    ys = [_y(rng) for _ in range(n)]
    if extra == "y":
        ys[rng.randrange(n)] = Y_EXACT
    points = [{"x": x, "y": y, "z": 0} for x, y in zip(xs, ys)]
    return {"type": kind, "coordinates": points, "firstCoordinates": dict(points[0])}


def _shuffled(counts: dict[str, int], rng: random.Random) -> list[str]:
    labels = [c for c, n in counts.items() for _ in range(n)]
    rng.shuffle(labels)
    return labels


def generate(events: int, seed: int = 0) -> Workload:
    """``events`` citylots2-like lines with the planted counts of :func:`component_counts` (``seed``: the draw)."""
    rng = random.Random(seed)
    counts = component_counts(events)
    drawn = {name: _shuffled(c, rng) for name, c in counts.items()}
    lines, lots, streets = [], [], []
    for i in range(events):
        lot = _lot_value(drawn["MAPBLKLOT"][i], rng)
        street = drawn["STREET"][i]
        street = rng.choice(OTHER_STREETS) if street == "other street" else street
        st_type = drawn["ST_TYPE"][i]
        st_type = rng.choice(OTHER_TYPES) if st_type == "other type" else st_type
        from_st = _number(drawn["FROM_ST"][i], rng)
        props = {"MAPBLKLOT": lot, "BLKLOT": lot, "BLOCK_NUM": lot[:4], "LOT_NUM": lot[4:], "FROM_ST": from_st}
        if drawn["TO_ST"][i] == "present":
            props["TO_ST"] = str(int(from_st) + rng.choice((0, 2, 8, 40)))
        props.update({"STREET": street, "ST_TYPE": st_type, "ODD_EVEN": rng.choice("EO")})
        event = {"type": "Feature", "properties": props, "geometry": _geometry(drawn["geometry"][i], rng)}
        lines.append(json.dumps(event, separators=(", ", ": ")).encode())
        lots.append(lot)
        streets.append(street)
    return Workload(lines, counts, lots, streets)


def size_rules(workload: Workload, n: int, seed: int = 0) -> tuple[list[dict], list[int]]:
    """``n`` exact rules drawn from the events' own values, with their match counts: three in four on one event's
    ``MAPBLKLOT``, one in four on its ``MAPBLKLOT`` and ``STREET`` together (counted from the values drawn)."""
    rng = random.Random(seed)
    lots = Counter(workload.lots)
    pairs = Counter(zip(workload.lots, workload.streets))
    rules, counts = [], []
    for _ in range(n):
        e = rng.randrange(len(workload.lots))
        lot, street = workload.lots[e], workload.streets[e]
        if rng.random() < 0.75:
            rules.append({"properties": {"MAPBLKLOT": [lot]}})
            counts.append(lots[lot])
        else:
            rules.append({"properties": {"MAPBLKLOT": [lot], "STREET": [street]}})
            counts.append(pairs[lot, street])
    return rules, counts


def rule_lines(patterns: list[dict]) -> Iterator[str]:
    """The rules as Event Ruler reads them, one JSON pattern a line."""
    for p in patterns:
        yield json.dumps(p)
