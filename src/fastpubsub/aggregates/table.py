"""A table: the latest row per key, so that an update carrying only the new row yields the old one.

The paper treats updates Δ(t: x, y_o → y_n) whose ``y_o`` the server knows (§2); publishers send
only the new row, so the table state supplies the old one.  A tombstone (``None``) deletes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterator

Row = dict[str, Any]


@dataclass(frozen=True)
class TableChange:
    """One update of one row: ``old`` is None for an insert, ``new`` is None for a delete."""

    table: str
    key: Hashable
    old: Row | None
    new: Row | None


class Table:
    """Latest row per key of one declared table."""

    def __init__(self, name: str, key: str) -> None:
        if not name or not key:
            raise ValueError(f"a table needs a name and a key attribute (got name={name!r}, key={key!r})")
        self.name = name
        self.key = key
        self._rows: dict[Hashable, Row] = {}

    def apply(self, key: Hashable, row: Row | None) -> TableChange:
        """Upsert ``row`` under ``key`` (delete if None); return the change with the old row."""
        if row is not None:
            if not isinstance(row, dict):
                raise ValueError(f"table {self.name}: row for key {key!r} is not an attribute map: {row!r}")
            row = dict(row)
            old = self._rows.get(key)
            self._rows[key] = row
        else:
            old = self._rows.pop(key, None)
        return TableChange(self.name, key, old, row)

    def get(self, key: Hashable) -> Row | None:
        return self._rows.get(key)

    def items(self) -> Iterator[tuple[Hashable, Row]]:
        return iter(self._rows.items())

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows
