"""Nested values as attributes: each leaf is an attribute named by its dotted path.

A record's (or map's) fields join their parent's name with a dot (``customer.address.country``); an array gives one
pair per element under the same path, so a predicate on it holds when any element satisfies it; a null is no
attribute at all.
"""

from __future__ import annotations

from typing import Any, Mapping

Scalar = "bool | int | float | str"


def flatten(value: Mapping) -> list[tuple[str, Any]]:
    """The (dotted path, scalar) pairs of a nested value, in field order; arrays as repeated pairs."""
    out: list[tuple[str, Any]] = []
    _walk(value, "", out)
    return out


def _walk(value: Any, path: str, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, path, out)
    elif value is not None:
        out.append((path, value))
