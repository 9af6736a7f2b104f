"""Select-join (§4): an update δR of one table becomes one message per joined pair in {δR} ⋈ S,
removals for the pairs of the old row and additions for those of the new one.  The subscription
σ_p(σ_pR R ⋈ σ_pS S) becomes the stateless predicate p ∧ pR ∧ pS over the joined tuple, whose
attributes are named ``<table>.<attribute>``.
"""

from __future__ import annotations

import math
from typing import Any, Hashable

from .table import Row, TableChange


def key_kind(v: Any) -> str | None:
    """The kind of a join key value (number, string, bool), or None if it cannot join: keys of different kinds
    never join, as values of different kinds never compare (docs/guide/concepts.md)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return None if isinstance(v, float) and math.isnan(v) else "number"
    return "string" if isinstance(v, str) else None


def joined(left_table: str, lrow: Row, right_table: str, rrow: Row) -> dict[str, Any]:
    return {f"{left_table}.{k}": v for k, v in lrow.items()} | {f"{right_table}.{k}": v for k, v in rrow.items()}


class JoinReformulator:
    """Both tables indexed by their join key: (kind, value) -> {row key: row}."""

    def __init__(self, left: tuple[str, str], right: tuple[str, str]) -> None:
        (self.lt, self.la), (self.rt, self.ra) = left, right
        self._by_key: dict[str, dict[tuple, dict[Hashable, Row]]] = {self.lt: {}, self.rt: {}}

    def _jk(self, table: str, row: Row | None) -> tuple | None:
        if row is None:
            return None
        v = row.get(self.la if table == self.lt else self.ra)
        k = key_kind(v)
        return None if k is None else (k, v)

    def apply(self, change: TableChange) -> list[tuple[int, Hashable, Hashable, dict[str, Any]]]:
        """Messages (sign, left key, right key, joined tuple) for a change of either table."""
        t = change.table
        if t not in self._by_key:
            return []
        other = self.rt if t == self.lt else self.lt
        out = []
        for sign, row in ((-1, change.old), (1, change.new)):
            jk = self._jk(t, row)
            if jk is None:
                continue
            if sign < 0:
                bucket = self._by_key[t][jk]
                del bucket[change.key]
                if not bucket:
                    del self._by_key[t][jk]
            for okey, orow in self._by_key[other].get(jk, {}).items():
                if t == self.lt:
                    out.append((sign, change.key, okey, joined(self.lt, row, self.rt, orow)))
                else:
                    out.append((sign, okey, change.key, joined(self.lt, orow, self.rt, row)))
            if sign > 0:
                self._by_key[t].setdefault(jk, {})[change.key] = row
        return out

    def pairs(self) -> list[tuple[Hashable, Hashable, dict[str, Any]]]:
        """Every joined pair now (the answer owed at subscription time)."""
        out = []
        for jk, lrows in self._by_key[self.lt].items():
            for rk, rr in self._by_key[self.rt].get(jk, {}).items():
                for lk, lr in lrows.items():
                    out.append((lk, rk, joined(self.lt, lr, self.rt, rr)))
        return out
