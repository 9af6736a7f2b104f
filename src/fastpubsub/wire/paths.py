"""Attribute paths: a nested event (records, maps, arrays) as the flat attribute pairs the engine matches.

The rule (docs/guide/formats.md, "Nested events and paths"):

* a field of a record, or a key of a map, is named by its path from the top,
  its segments joined by ``.``: ``customer.address.country``;
* an array yields one pair per element, all under the array's own path, so
  an event may carry one attribute several times; a predicate on it holds
  when any of the values satisfies it (AWS Event Ruler's rule);
* an array of records flattens each element's fields under ``path.field``,
  *each field independently*: ``items.sku = "A" and items.qty > 5`` holds
  when some item has sku ``A`` and some item (the same or another) has a
  quantity above 5.  This is Event Ruler's rule without its array-consistency
  check; it keeps a predicate a test of one attribute, which is what every
  index of the engine files subscriptions by, so it costs nothing extra and
  is exact.  Arrays nested in arrays are flattened the same way;
* ``null``, an empty array and an empty record yield nothing (the attribute
  is absent: every predicate on it fails, ``exists`` included).

Names are escaped so that a path always splits back into the segments it was
made of: a backslash before ``.``, before ``\\`` and before a leading
:data:`SIGIL` (names starting with it are kept for metadata such as the
event's topic, so that they cannot clash with payload fields).  The key
``a.b`` of a map is the attribute ``a\\.b``; in subscription text it is
written as a bare name too (``tags.a\\.b = 1``) or quoted with JSON's
escapes (``"tags.a\\\\.b" = 1``).
"""

from __future__ import annotations

from typing import Any, Mapping

#: Names starting with this character are metadata, not payload fields: a payload key starting with it is escaped.
SIGIL = "$"
#: Most nesting levels a value may have (deeper ones are refused: bad input, not a reason to overflow the stack).
MAX_DEPTH = 64

Scalar = bool | int | float | str


def escape(segment: str) -> str:
    """``segment`` as one path segment: ``\\`` and ``.`` (and a leading :data:`SIGIL`) backslash-escaped."""
    if "\\" in segment or "." in segment:
        segment = segment.replace("\\", "\\\\").replace(".", "\\.")
    if segment[:1] == SIGIL:
        segment = "\\" + segment
    return segment


def join(*segments: str) -> str:
    """The path of ``segments`` (each escaped): ``join("a.b", "c") == "a\\\\.b.c"``."""
    return ".".join(map(escape, segments))


def split(path: str) -> list[str]:
    """The segments of ``path``, unescaped (the inverse of :func:`join`); ``ValueError`` for a dangling ``\\``."""
    if "\\" not in path:
        return path.split(".")
    out: list[str] = []
    current: list[str] = []
    chars = iter(path)
    for c in chars:
        if c == "\\":
            nxt = next(chars, None)
            if nxt is None:
                raise ValueError(f"path {path!r} ends with a backslash (escape it as \\\\)")
            current.append(nxt)
        elif c == ".":
            out.append("".join(current))
            current = []
        else:
            current.append(c)
    out.append("".join(current))
    return out


def flatten(value: Mapping[str, Any]) -> list[tuple[str, Scalar]]:
    """The attribute pairs of a nested event, in document order (module docstring for the rule).

    Values are ``bool``, ``int``, ``float`` or ``str``; anything else (bytes,
    a non-string map key, ...) is a ``ValueError`` naming its path, as is
    nesting deeper than :data:`MAX_DEPTH`.
    """
    return flatten_counting(value)[0]


def flatten_counting(value: Mapping[str, Any]) -> tuple[list[tuple[str, Scalar]], int]:
    """:func:`flatten`, and how many fields (keys) the records and maps held: the JSON decoder compares it with the
    text's (``wire/codecs.py``, duplicate keys)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"an event must be a record or map of fields, got {type(value).__name__}")
    out: list[tuple[str, Scalar]] = []
    return out, _record(value, "", out, 0)


def _record(value: Mapping[str, Any], prefix: str, out: list, depth: int) -> int:
    if depth >= MAX_DEPTH:
        raise ValueError(f"{prefix or 'the event'}: nested more than {MAX_DEPTH} levels deep")
    keys = len(value)
    for key, v in value.items():
        if type(key) is not str and not isinstance(key, str):
            raise ValueError(f"{prefix or 'the event'}: a field name must be a string, got {key!r}"[:300])
        if not key:
            raise ValueError(f"{prefix or 'the event'}: field names must be non-empty strings")
        path = prefix + "." + escape(key) if prefix else escape(key)
        t = type(v)
        if t is str or t is int or t is float or t is bool:  # (the common case, inline)
            out.append((path, v))
        else:
            keys += _value(v, path, out, depth + 1)
    return keys


def _value(v: Any, path: str, out: list, depth: int) -> int:
    t = type(v)
    if t is str or t is int or t is float or t is bool:
        out.append((path, v))
    elif v is None:
        pass
    elif isinstance(v, Mapping):
        return _record(v, path, out, depth)
    elif isinstance(v, (list, tuple)):
        if depth >= MAX_DEPTH:
            raise ValueError(f"{path}: nested more than {MAX_DEPTH} levels deep")
        keys = 0
        for x in v:
            keys += _value(x, path, out, depth + 1)
        return keys
    elif isinstance(v, bool):  # subclasses of the scalar types (an IntEnum, a str subclass), as their base type
        out.append((path, bool(v)))
    elif isinstance(v, int):
        out.append((path, int(v)))
    elif isinstance(v, float):
        out.append((path, float(v)))
    elif isinstance(v, str):
        out.append((path, str(v)))
    else:
        raise ValueError(f"{path}: a {type(v).__name__} value cannot be compared (use a number, string or boolean)")
    return 0
