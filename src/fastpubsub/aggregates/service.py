"""Tables, aggregate/join subscriptions and both delivery modes in one place (no Kafka).

``apply(table, key, row, update_id)`` runs the reformulators of the table's subscription groups
(one per table, function, attributes and row filter) and returns the S-CN records (the
reformulated messages, whatever the number of subscriptions) and, when ``notify`` is on, the S-UN
notifications (one per affected subscription).  A Kafka stage calls this per table record.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

import numpy as np

from fastpubsub.engine import Matcher

from ..state import StateChanges
from .changelog import live_rows, row_change
from .counting import CountReformulator
from .distinct import DistinctReformulator
from .join import JoinReformulator
from .reformulator import ExtremumReformulator
from .spec import AggregateSpec, JoinSpec
from .stateless import CountGroup, DistinctGroup, ExtremumGroup, net_changes
from .table import Row, Table, TableChange


#: Strings that JSON writes as they are (ids of topic:partition:offset form, plain keys): no escaping needed.
_PLAIN_ID = re.compile(r"[\w.:/-]*", re.ASCII)


@dataclass(frozen=True)
class TableSchema:
    """A declared table: name, key attribute and, optionally, the kind of each attribute."""

    name: str
    key: str
    kinds: dict[str, str] | None = None


def _plain(v: Any) -> Any:
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):  # no answer; JSON has neither
        return None
    if isinstance(v, (frozenset, set)):
        return sorted(v, key=repr)
    if isinstance(v, np.floating):
        return None if math.isinf(v) or math.isnan(v) else float(v)
    return v


@dataclass(frozen=True)
class Notification:
    """S-UN: one subscription's new answer, caused by one table update (or ``init``)."""

    notification_id: str
    subscription: Any
    value: Any
    update_id: str
    table: str | None = None
    key: Hashable | None = None
    added: Any = None
    removed: Any = None

    def to_bytes(self) -> bytes:
        v, key, table = self.value, self.key, self.table
        if (self.added is None and type(self.subscription) is int and (v is None or type(v) in (float, int))
                and type(key) is str and type(table) is str and _PLAIN_ID.fullmatch(self.notification_id)
                and _PLAIN_ID.fullmatch(self.update_id) and _PLAIN_ID.fullmatch(key) and _PLAIN_ID.fullmatch(table)):
            # the S-UN fan-out's common case, written directly (the same JSON as below)
            vs = "null" if v is None or v - v != 0 else repr(v)
            return (f'{{"notification_id":"{self.notification_id}","subscription":{self.subscription},"value":{vs},'
                    f'"update_id":"{self.update_id}","table":"{table}","key":"{key}"}}').encode()
        d = {"notification_id": self.notification_id, "subscription": self.subscription,
             "value": _plain(self.value), "update_id": self.update_id, "table": self.table, "key": self.key}
        if self.added is not None:
            d["added"], d["removed"] = _plain(self.added), _plain(self.removed)
        return json.dumps(d, separators=(",", ":"), default=str).encode()


def _wire(v: Any) -> Any:
    """JSON has no infinities: ±inf (open Mar ends, an empty answer) travel as {"inf": ±1}
    (not as strings, which a distinct value could be)."""
    if isinstance(v, float) and math.isinf(v):
        return {"inf": 1 if v > 0 else -1}
    return v


_GROUP_JSON: dict[str, str] = {}  # group name -> the start of its records' JSON (few groups, reused per record)


def _float_json(v: float) -> str:
    """A float as ``json.dumps`` of the payload writes it (``repr``), with NaN as null and ±inf as {"inf": ±1}."""
    if v != v:
        return "null"
    if v in (math.inf, -math.inf):
        return '{"inf":1}' if v > 0 else '{"inf":-1}'
    return repr(v)


def _unwire(v: Any) -> Any:
    return math.inf * v["inf"] if isinstance(v, dict) and "inf" in v else v


@dataclass(frozen=True)
class ReformulatedRecord:
    """S-CN: one reformulated message of one subscription group (``pubsub.reformulated``).

    ``payload`` is ⟨NEW_MIN, INNER_L, INNER_R, OUTER_L, OUTER_R⟩ for min/max,
    ⟨x_old, y_old, x_new, y_new⟩ for count/sum/avg (NaN: absent), ⟨sign, y, x, L, R⟩ for
    distinct and ⟨sign, left key, right key⟩ for joins.
    """

    group: str
    update_id: str
    index: int
    payload: tuple

    def to_bytes(self) -> bytes:
        if all(type(v) is float for v in self.payload):  # the common case (min/max, count/sum/avg), written directly
            head = _GROUP_JSON.get(self.group)
            if head is None:
                head = _GROUP_JSON[self.group] = '{"group":' + json.dumps(self.group) + ',"id":'
            m = ",".join(repr(v) if v - v == 0 else _float_json(v) for v in self.payload)  # v - v: NaN for ±inf, NaN
            rid = f"{self.update_id}/{self.index}"
            return f'{head}{(chr(34) + rid + chr(34)) if _PLAIN_ID.fullmatch(rid) else json.dumps(rid)},"m":[{m}]}}'.encode()
        m = [None if isinstance(v, float) and math.isnan(v) else _wire(v) for v in self.payload]
        return json.dumps({"group": self.group, "id": f"{self.update_id}/{self.index}", "m": m},
                          separators=(",", ":"), default=str).encode()

    @staticmethod
    def from_bytes(b: bytes) -> "ReformulatedRecord":
        d = json.loads(b)
        update_id, _, index = d["id"].rpartition("/")
        payload = tuple(math.nan if v is None else _unwire(v) for v in d["m"])
        return ReformulatedRecord(d["group"], update_id, int(index), payload)


@dataclass
class Output:
    records: list[ReformulatedRecord] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)  # Corollary 1 class per extremum group touched
    rejected: list[str] = field(default_factory=list)  # reasons a row stays out of an aggregate
    change: tuple | None = None  # (table, key, row or None, source partition, source offset) of this update

    @property
    def state(self) -> StateChanges:
        """The changelog change of this update (built on demand: a Kafka stage may write the row directly)."""
        return StateChanges() if self.change is None else row_change(*self.change)


def group_name(g: tuple) -> str:
    return json.dumps(g, separators=(",", ":"), default=str)


class _Group:
    def __init__(self, key: tuple, reformulator: Any, stage: Any) -> None:
        self.key, self.name = key, group_name(key)
        self.reformulator, self.stage = reformulator, stage
        self.slot_sid: dict[int, Any] = {}
        self.filter: int | None = None
        self.seq = 0  # creation order: an update visits its groups in it


class AggregateService:
    """Declared tables + subscriptions; S-UN notifications and S-CN records per table update."""

    def __init__(self, tables: list[TableSchema], notify: bool = True) -> None:
        self.schemas = {t.name: t for t in tables}
        self.tables = {t.name: Table(t.name, t.key) for t in tables}
        self.notify = notify
        self._groups: dict[tuple, _Group] = {}
        self._subs: dict[Any, tuple[tuple, int, AggregateSpec | JoinSpec]] = {}
        self._filters: dict[str, tuple[Matcher, dict[tuple, int]]] = {}
        self._filter_uses: dict[tuple[str, int], int] = {}  # (table, filter id) -> groups filtering by it
        self._next_filter = 0  # filter ids are never reused (the matcher recycles its own room)
        self._join_matchers: dict[tuple, tuple[Matcher, set[int]]] = {}
        # An update visits only the groups it can change: those of its table without a row filter or with a filter
        # that the old or the new row passes (a group holds exactly the rows passing its filter), and the joins of
        # its table.  Which filters a row passes is kept per row key, so the old row is not matched again; that
        # cache is dropped whenever a filter is added (ids are never reused, so a removed one only goes stale).
        self._by_filter: dict[str, dict[int | None, dict[tuple, _Group]]] = {}
        self._joins_of: dict[str, dict[tuple, _Group]] = {}
        self._passing: dict[str, dict[Hashable, frozenset[int]]] = {}
        self._seq = 0

    # -- subscriptions --------------------------------------------------------------------------
    def _check_table(self, name: str) -> TableSchema:
        if name not in self.schemas:
            raise ValueError(f"unknown table {name!r}; declared: {', '.join(sorted(self.schemas)) or 'none'}")
        return self.schemas[name]

    def _check_attr(self, schema: TableSchema, attr: str | None, numeric: bool) -> None:
        if attr is None or schema.kinds is None:
            return
        if attr not in schema.kinds:
            raise ValueError(f"unknown attribute {attr!r} of table {schema.name!r}")
        if numeric and schema.kinds[attr] != "number":
            raise ValueError(f"attribute {schema.name}.{attr} is a {schema.kinds[attr]}, not a number")

    def _row_filter(self, table: str, where: tuple) -> int | None:
        if not where:
            return None
        m, ids = self._filters.setdefault(table, (Matcher(), {}))
        key = tuple(sorted(where, key=repr))
        if key not in ids:
            ids[key] = self._next_filter
            self._next_filter += 1
            m.add(ids[key], list(key))
            self._passing.pop(table, None)
        self._filter_uses[table, ids[key]] = self._filter_uses.get((table, ids[key]), 0) + 1
        return ids[key]

    def _drop_group(self, g: _Group, table: str | None) -> None:
        """Forget a group its last subscription left, and its row filter if no other group uses it: under churn
        (subscriptions created and deleted with ever new ranges of attributes, values, filters) the groups, each
        with its reformulator's copy of the rows it aggregates, would otherwise grow with every group ever seen
        and every table update would visit them all."""
        del self._groups[g.key]
        self._unindex(g)
        fid = g.filter
        if fid is None or table is None:
            return
        uses = self._filter_uses.pop((table, fid)) - 1
        if uses:
            self._filter_uses[table, fid] = uses
            return
        m, ids = self._filters[table]
        m.remove(fid)
        del ids[next(k for k, v in ids.items() if v == fid)]
        if not ids:
            del self._filters[table]

    def stats(self) -> dict[str, Any]:
        """Sizes of what the subscriptions hold (groups, row filters and their matchers' bytes, join matchers) and
        the tables' rows: read by ``/metrics`` (``pubsub_engine_*``), so that growth under churn shows early."""
        filters = [m for m, _ in self._filters.values()]
        joins = [m for m, _ in self._join_matchers.values()]
        memory = {"row_filters": sum(m.memory_bytes() for m in filters),
                  "join_matchers": sum(m.memory_bytes() for m in joins)}
        return {"subscriptions": len(self._subs), "groups": len(self._groups),
                "row_filters": sum(len(ids) for _, ids in self._filters.values()),
                "join_groups": len(self._join_matchers), "rows": sum(len(t) for t in self.tables.values()),
                "memory": memory, "memory_bytes": sum(memory.values())}

    def check(self, spec: AggregateSpec | JoinSpec) -> None:
        """Refuse (``ValueError``) a subscription over an undeclared table or attribute, or a join on attributes of
        different kinds, without registering anything: what ``subscribe`` checks first."""
        if isinstance(spec, JoinSpec):
            (lt, la), (rt, ra) = spec.left, spec.right
            ls, rs = self._check_table(lt), self._check_table(rt)
            self._check_attr(ls, spec.on[0], False)
            self._check_attr(rs, spec.on[1], False)
            if ls.kinds is not None and rs.kinds is not None and ls.kinds[spec.on[0]] != rs.kinds[spec.on[1]]:
                raise ValueError(f"join on attributes of different kinds: {lt}.{spec.on[0]} is a "
                                 f"{ls.kinds[spec.on[0]]}, {rt}.{spec.on[1]} is a {rs.kinds[spec.on[1]]}")
            alias = {la: ls, ra: rs}
            for attr, _, _ in spec.where:
                a, _, name = attr.partition(".")
                self._check_attr(alias[a], name, False)
            return
        schema = self._check_table(spec.table)
        self._check_attr(schema, spec.range_attr, True)
        self._check_attr(schema, spec.value, spec.fn in ("min", "max", "sum", "avg"))
        for attr, _, _ in spec.where:
            self._check_attr(schema, attr, False)

    def subscribe(self, sid: Any, spec: AggregateSpec | JoinSpec, update_id: str = "0") -> Notification:
        """Register a subscription and return its current answer (id ``<sid>/init/<update_id>``)."""
        if sid in self._subs:
            raise ValueError(f"subscription {sid!r} already exists")
        if isinstance(spec, JoinSpec):
            return self._subscribe_join(sid, spec, update_id)
        self.check(spec)
        g = self._groups.get(spec.group)
        if g is None:
            g = self._new_group(spec)
        r, st = g.reformulator, g.stage
        if spec.fn in ("min", "max"):
            value = r.answer(spec.low, spec.high)
            slot = st.add(spec.low, spec.high, value)
        elif spec.fn == "distinct":
            value = r.answer(spec.low, spec.high)
            slot = st.add(spec.low, spec.high, value)
        else:
            c, t = r.answer(spec.low, spec.high)
            slot = st.add(spec.low, spec.high, c, t)
            value = st.value(slot)
        g.slot_sid[slot] = sid
        self._subs[sid] = (spec.group, slot, spec)
        return Notification(f"{sid}/init/{update_id}", sid, value, update_id)

    def subscribe_many(self, items: list[tuple[Any, AggregateSpec]], update_id: str = "0") -> list[Notification]:
        """Register many aggregate subscriptions at once: min/max ones of one group are indexed in
        bulk (one 2-D index build instead of one insert each)."""
        out: list[Notification | None] = [None] * len(items)
        bulk: dict[tuple, list[int]] = {}
        seen: set = set()
        for sid, _ in items:
            if sid in self._subs or sid in seen:
                raise ValueError(f"subscription {sid!r} already exists")
            seen.add(sid)
        for i, (sid, spec) in enumerate(items):
            if isinstance(spec, AggregateSpec) and spec.fn in ("min", "max"):
                bulk.setdefault(spec.group, []).append(i)
            else:
                out[i] = self.subscribe(sid, spec, update_id)
        for gkey, idx in bulk.items():
            first = items[idx[0]][1]
            schema = self._check_table(first.table)
            self._check_attr(schema, first.range_attr, True)
            self._check_attr(schema, first.value, True)
            for attr, _, _ in first.where:
                self._check_attr(schema, attr, False)
            g = self._groups.get(gkey) or self._new_group(first)
            lows = np.array([items[i][1].low for i in idx])
            highs = np.array([items[i][1].high for i in idx])
            initial = g.reformulator.answers(lows, highs)
            slots = g.stage.add_bulk(lows, highs, initial)
            for i, slot, v in zip(idx, slots.tolist(), initial.tolist()):
                sid, spec = items[i]
                g.slot_sid[slot] = sid
                self._subs[sid] = (gkey, slot, spec)
                out[i] = Notification(f"{sid}/init/{update_id}", sid, None if math.isinf(v) else v, update_id)
        return out

    def _new_group(self, spec: AggregateSpec) -> _Group:
        if spec.fn in ("min", "max"):
            r, st = ExtremumReformulator(spec.range_attr, spec.value, spec.fn), ExtremumGroup(spec.fn)
        elif spec.fn == "distinct":
            r, st = DistinctReformulator(spec.range_attr, spec.value), DistinctGroup()
        else:
            r, st = CountReformulator(spec.range_attr, spec.value), CountGroup(spec.fn)
        g = _Group(spec.group, r, st)
        g.filter = self._row_filter(spec.table, spec.where)
        rows = [(k, row) for k, row in self.tables[spec.table].items() if self._passes(spec.table, g.filter, row)]
        if isinstance(r, ExtremumReformulator):
            r.load(rows)
        else:
            for k, row in rows:
                r.apply(TableChange(spec.table, k, None, row))
        self._groups[spec.group] = g
        self._index(g)
        return g

    def _index(self, g: _Group) -> None:
        g.seq, self._seq = self._seq, self._seq + 1
        if g.key[0] == "join":
            for t in {g.key[1], g.key[3]}:
                self._joins_of.setdefault(t, {})[g.key] = g
        else:
            self._by_filter.setdefault(g.key[0], {}).setdefault(g.filter, {})[g.key] = g

    def _unindex(self, g: _Group) -> None:
        if g.key[0] == "join":
            for t in {g.key[1], g.key[3]}:
                del self._joins_of[t][g.key]
            return
        buckets = self._by_filter[g.key[0]]
        del buckets[g.filter][g.key]
        if not buckets[g.filter]:
            del buckets[g.filter]

    def _row_passes(self, table: str, key: Hashable, row: Row | None, cached: bool) -> frozenset[int]:
        """The row filters of ``table`` that ``row`` passes (``cached``: the row is the one held under ``key``)."""
        if row is None or table not in self._filters:
            return frozenset()
        known = self._passing.setdefault(table, {})
        if cached and key in known:
            return known[key]
        return frozenset(self._filters[table][0].match(row).tolist())

    def _groups_changed_by(self, table: str, key: Hashable, old: Row | None, new: Row | None,
                           passing: frozenset[int] | None) -> tuple[list[_Group], frozenset[int]]:
        """The groups an update of ``key`` from ``old`` to ``new`` can change, in creation order, and the filters
        ``new`` passes (``passing`` where the caller matched it already)."""
        if passing is None:
            passing = self._row_passes(table, key, new, False)
        was = self._row_passes(table, key, old, True)
        known = self._passing.setdefault(table, {})
        if new is None:
            known.pop(key, None)
        elif table in self._filters:
            known[key] = passing
        buckets = self._by_filter.get(table, {})
        hit = [g for fid in (None, *(passing | was)) for g in buckets.get(fid, {}).values()]
        hit.extend(self._joins_of.get(table, {}).values())
        hit.sort(key=lambda g: g.seq)
        return hit, passing

    def _passes(self, table: str, fid: int | None, row: Row | None) -> bool:
        if row is None:
            return False
        if fid is None:
            return True
        return fid in self._filters[table][0].match(row)

    def _subscribe_join(self, sid: Any, spec: JoinSpec, update_id: str) -> Notification:
        self.check(spec)  # tables, join attributes and their kinds, the where attributes
        (lt, la), (rt, ra) = spec.left, spec.right
        alias = {la: lt, ra: rt}
        where = []
        for attr, op, v in spec.where:
            a, _, name = attr.partition(".")
            where.append((f"{alias[a]}.{name}", op, v))
        key = ("join", lt, spec.on[0], rt, spec.on[1])
        g = self._groups.get(key)
        if g is None:
            r = JoinReformulator((lt, spec.on[0]), (rt, spec.on[1]))
            for t in (lt, rt):
                for k, row in self.tables[t].items():
                    r.apply(TableChange(t, k, None, row))
            g = self._groups[key] = _Group(key, r, None)
            self._index(g)
            g.matcher, g.match_all, g.pairs, g.next_slot = Matcher(), set(), {}, 0
        slot = g.next_slot
        g.next_slot += 1
        if where:
            g.matcher.add(slot, where)
        else:
            g.match_all.add(slot)
        pairs = [(lk, rk) for lk, rk, tup in g.reformulator.pairs() if not where or slot in g.matcher.match(tup)]
        g.pairs[slot] = set(pairs)
        g.slot_sid[slot] = sid
        self._subs[sid] = (key, slot, spec)
        return Notification(f"{sid}/init/{update_id}", sid, frozenset(pairs), update_id)

    def unsubscribe(self, sid: Any) -> None:
        key, slot, spec = self._subs.pop(sid)
        g = self._groups[key]
        del g.slot_sid[slot]
        if isinstance(spec, JoinSpec):
            if slot in g.match_all:
                g.match_all.discard(slot)
            else:
                g.matcher.remove(slot)
            del g.pairs[slot]
        else:
            g.stage.remove(slot)
        if not g.slot_sid:
            self._drop_group(g, None if isinstance(spec, JoinSpec) else spec.table)

    def client_state(self, sid: Any) -> dict[str, Any]:
        """What an S-CN client needs beyond the answer to follow it: count and sum for count/sum/avg."""
        key, slot, spec = self._subs[sid]
        st = self._groups[key].stage
        if isinstance(st, CountGroup):
            return {"count": int(st.count[slot]), "sum": float(st.total[slot])}
        return {}

    def answer(self, sid: Any) -> Any:
        """The answer the S-UN stage holds for a subscription now."""
        key, slot, spec = self._subs[sid]
        g = self._groups[key]
        return frozenset(g.pairs[slot]) if isinstance(spec, JoinSpec) else g.stage.value(slot)

    # -- updates --------------------------------------------------------------------------------
    def restore(self, changes: StateChanges, committed: dict[int, int] | None = None) -> int:
        """Load the tables from changelog changes (before any subscription); returns the row count."""
        if self._subs:
            raise ValueError("restore the tables before registering subscriptions")
        n = 0
        for name, rows in live_rows(changes, committed).items():
            self._check_table(name)
            for key, row in rows.items():
                self.tables[name].apply(key, row)
                n += 1
        return n

    def check_row(self, table: str, key: Hashable, row: Row | None) -> None:
        """Refuse (``ValueError``) an update ``apply`` would refuse, before any state changes: an undeclared table,
        a row that is not an attribute map, NaN in an attribute."""
        self._check_table(table)
        if row is not None:
            if not isinstance(row, dict):
                raise ValueError(f"table {table}: row for key {key!r} is not an attribute map: {row!r}")
            for attr, v in row.items():
                if isinstance(v, float) and math.isnan(v):
                    raise ValueError(f"table {table}: row {key!r} has NaN in attribute {attr!r}")

    def filters_passed(self, table: str, rows: list[Row | None]) -> list[frozenset[int]]:
        """The row filters each of ``rows`` passes, matched as one batch (``apply(..., passing=)``): a run of
        updates pays the matcher's per-call cost once instead of once per row.  Rows must pass ``check_row``."""
        if table not in self._filters:
            return [frozenset()] * len(rows)
        present = [r for r in rows if r is not None]
        found = iter(self._filters[table][0].match_batch(present) if present else [])
        return [frozenset() if r is None else frozenset(next(found).tolist()) for r in rows]

    def apply(self, table: str, key: Hashable, row: Row | None, update_id: str,
              source: tuple[int, int] = (0, -1), passing: frozenset[int] | None = None) -> Output:
        """One table update: S-CN records always, S-UN notifications if ``notify``, and the
        changelog record of the row (``source`` = input partition and offset of the update; ``passing``: the
        row filters ``row`` passes, from ``filters_passed``, under the filters registered now)."""
        self.check_row(table, key, row)  # before any state changes, so that a bad row leaves no trace
        change = self.tables[table].apply(key, row)
        out = Output(change=(table, key, row, *source))
        groups, passing = self._groups_changed_by(table, key, change.old, row, passing)
        for g in groups:
            gkey = g.key
            if gkey[0] == "join":
                self._apply_join(g, change, update_id, out)
                continue
            new = row if g.filter is None or g.filter in passing else None
            ch = TableChange(table, key, change.old, new)
            if isinstance(g.stage, ExtremumGroup):
                self._apply_extremum(g, ch, update_id, out)
            elif isinstance(g.stage, DistinctGroup):
                msgs, rejected = g.reformulator.apply(ch)
                if rejected:
                    out.rejected.append(f"{g.name}: row {key!r} lacks a numeric {gkey[3]!r} or {gkey[2]!r}")
                out.records.extend(ReformulatedRecord(g.name, update_id, i, m) for i, m in enumerate(msgs))
                if self.notify:
                    for slot, added, removed, i in g.stage.apply(msgs):
                        sid = g.slot_sid[slot]
                        out.notifications.append(Notification(f"{sid}/{update_id}/{i}", sid, g.stage.value(slot),
                                                              update_id, table, key, added, removed))
            else:
                msgs, rejected = g.reformulator.apply(ch)
                if rejected:
                    out.rejected.append(f"{g.name}: row {key!r} lacks a numeric {gkey[3]!r} or {gkey[2]!r}")
                for m in msgs:
                    out.records.append(ReformulatedRecord(g.name, update_id, 0, tuple(float(v) for v in m)))
                    if self.notify:
                        slots, values = g.stage.apply(m)
                        for slot, v in zip(slots.tolist(), values.tolist()):
                            sid = g.slot_sid[slot]
                            out.notifications.append(Notification(f"{sid}/{update_id}/0", sid, g.stage.value(slot),
                                                                  update_id, table, key))
        return out

    def _apply_extremum(self, g: _Group, ch: TableChange, update_id: str, out: Output) -> None:
        res = g.reformulator.apply(ch)
        out.kinds.append(res.kind)
        if res.rejected:
            out.rejected.append(f"{g.name}: row {ch.key!r} lacks a numeric {g.key[3]!r} or {g.key[2]!r}")
        out.records.extend(ReformulatedRecord(g.name, update_id, i, tuple(float(v) for v in m))
                           for i, m in enumerate(res.messages))
        if self.notify and len(res.messages):
            slots, values, idx = g.stage.apply(res.messages)
            for slot, v, i in zip(slots.tolist(), values.tolist(), idx.tolist()):
                sid = g.slot_sid[slot]
                out.notifications.append(Notification(f"{sid}/{update_id}/{i}", sid, None if math.isinf(v) else v,
                                                      update_id, ch.table, ch.key))

    def _apply_join(self, g: _Group, change: TableChange, update_id: str, out: Output) -> None:
        msgs = g.reformulator.apply(change)
        out.records.extend(ReformulatedRecord(g.name, update_id, i, (s, lk, rk)) for i, (s, lk, rk, _) in
                           enumerate(msgs))
        if not self.notify or not msgs:
            return
        matched = g.matcher.match_batch([tup for *_, tup in msgs]) if len(g.matcher) else [np.empty(0, np.int64)] * len(msgs)
        every = np.fromiter(g.match_all, np.int64, len(g.match_all))
        per_msg = [np.concatenate([np.asarray(m, np.int64), every]) for m in matched]
        ids = np.concatenate(per_msg)
        offsets = np.concatenate([[0], np.cumsum([len(m) for m in per_msg])])
        changes = net_changes(ids, offsets, [m[0] for m in msgs], [(m[1], m[2]) for m in msgs], g.pairs)
        delta = {s: (a, r) for s, a, r, _ in changes}
        last = {s: i for s, _, _, i in changes}
        for s, (a, r) in delta.items():
            sid = g.slot_sid[s]
            out.notifications.append(Notification(f"{sid}/{update_id}/{last[s]}", sid, frozenset(g.pairs[s]),
                                                  update_id, change.table, change.key, frozenset(a), frozenset(r)))
