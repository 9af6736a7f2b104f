"""A producer's registered Avro schema compiled into arrays, and one numba kernel that decodes a batch with them.

Reading a registered record with fastavro builds a dict per record and a Python object per field, then the dict is
made comparable and flattened to dotted paths (``wire.registered``): some 50 Python objects for a record of 36
leaves, several times the cost of fastpubsub's own Avro map.  Here the schema (references resolved) becomes a
tree of nodes in flat arrays (an opcode, the static path id of a leaf, children), and :func:`decode_registered`
walks every record of a batch with an explicit stack, writing (path id, scalar) pairs straight into the columns
fastpubsub's own event kernel fills (``avro_binary.Pairs``).

Only what a subscription references is decoded: ``wanted`` marks the nodes on some referenced path; any other leaf
is skipped by its length, not decoded or checked.  With every node wanted the pairs are, by construction, those of
``wire.registered`` (a property test checks it): whatever the kernel cannot prove to read the same way (a
decimal, a uuid in another form than Python's, a map of records, a boolean byte other than 0 or 1, a timestamp
out of ``datetime``'s range, bad UTF-8, a duplicate map key...) sends the record to that per-record path instead.
Logical types become the comparable scalars of ``wire.registered`` in the kernel, but dates, which become text
after it (:func:`dates_as_text`, vectorised).  Map entries are named at
run time (``path.key``), interned per batch by their map and key bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from fastpubsub.engine import FNV_OFFSET, fnv1a, same_bytes

from .avro_binary import INEXACT_PAIR, INTEGRAL_PAIR, block_count, empty_pairs, first_pairs, utf8_ok, varint

# opcodes
NULL, BOOLEAN, LONG, FLOAT, DOUBLE, STRING, BYTES, FIXED, ENUM, RECORD, ARRAY, MAP, UNION = range(13)
TS_MILLIS, TS_MICROS, TIME_MILLIS, TIME_MICROS, DATE, UUID = range(13, 19)
#: ``Pairs.op`` of a date pair, whose number is its day since the epoch until :func:`dates_as_text` makes it text
DATE_PAIR = 1
_PRIMITIVES = {"null": NULL, "boolean": BOOLEAN, "int": LONG, "long": LONG, "float": FLOAT, "double": DOUBLE,
               "string": STRING, "bytes": BYTES}
_LOGICAL = {("long", "timestamp-millis"): TS_MILLIS, ("long", "timestamp-micros"): TS_MICROS,
            ("long", "local-timestamp-millis"): TS_MILLIS, ("long", "local-timestamp-micros"): TS_MICROS,
            ("int", "time-millis"): TIME_MILLIS, ("long", "time-micros"): TIME_MICROS, ("int", "date"): DATE,
            ("string", "uuid"): UUID}
_LEAVES = {NULL, BOOLEAN, LONG, FLOAT, DOUBLE, STRING, BYTES, FIXED, ENUM, TS_MILLIS, TS_MICROS, TIME_MILLIS,
           TIME_MICROS, DATE, UUID}
# datetime's range (years 1 to 9999), a day inside it on each side for time zones: beyond, fastavro decides
_MIN_MS, _MAX_MS = -62135596800000 + 86_400_000, 253402300799999 - 86_400_000
_MIN_DAY, _MAX_DAY = -719162, 2932896  # 0001-01-01 and 9999-12-31
_FAST, _SLOW = 0, 1


class NotCompiled(Exception):
    """The schema has a shape the kernel does not walk (a recursive record, a root that is not a record)."""


@dataclass(frozen=True)
class AvroProgram:
    """A compiled schema.  Node 0 is the root record.

    ``arg``: a record's or union's first child in ``kids``, an enum's first symbol, an array's or map's item node,
    a fixed's size; ``count``: fields, branches or symbols.  ``path``: a leaf's static path id (a map's: the id of
    its prefix), -1 under a map.  ``slow``: reading this node needs the per-record path.  ``paths[i]`` names path id
    ``i``; ``node_path[n]`` is the dotted path of node ``n`` (its prefix for a map), None under a map.
    """

    op: np.ndarray  # int8 [nodes]
    arg: np.ndarray  # int64 [nodes]
    count: np.ndarray  # int64 [nodes]
    path: np.ndarray  # int32 [nodes]
    slow: np.ndarray  # bool [nodes]
    kids: np.ndarray  # int32
    symbol_start: np.ndarray  # int64: into ``pool``
    symbol_length: np.ndarray  # int32
    pool: bytes  # enum symbols, UTF-8
    paths: tuple[str, ...]
    node_path: tuple[str | None, ...]
    depth: int

    def wanted(self, names: frozenset[str] | None) -> np.ndarray:
        """Per node, whether some name in ``names`` is its path or lies under it (None: every node)."""
        if names is None:
            return np.ones(len(self.op), bool)
        prefixes = set(names)
        for name in names:
            i = name.find(".")
            while i >= 0:
                prefixes.add(name[:i])
                i = name.find(".", i + 1)
        out = np.zeros(len(self.op), bool)
        for n, p in enumerate(self.node_path):
            if p is not None:
                out[n] = p in prefixes
        out[0] = True
        # under a map, a node is as wanted as its map: fill top-down
        for n in range(len(self.op)):
            if self.op[n] == MAP and out[n] and self.node_path[n] is not None:
                names_prefix = self.node_path[n] + "."
                out[n] = any(x.startswith(names_prefix) for x in names)
                if out[n]:
                    _mark(self, int(self.arg[n]), out)
        return out


def _mark(prog: AvroProgram, n: int, out: np.ndarray) -> None:
    out[n] = True
    op = prog.op[n]
    if op in (RECORD, UNION):
        for k in prog.kids[prog.arg[n]:prog.arg[n] + prog.count[n]]:
            _mark(prog, int(k), out)
    elif op in (ARRAY, MAP):
        _mark(prog, int(prog.arg[n]), out)


def compile_schema(parsed: Any, named: dict[str, Any], max_name_bytes: int) -> AvroProgram:
    """The program of a schema parsed by fastavro (``named``: its named types, references included)."""
    if not (isinstance(parsed, dict) and parsed.get("type") == "record"):
        raise NotCompiled("the root is not a record")
    op: list[int] = []
    arg: list[int] = []
    count: list[int] = []
    path: list[int] = []
    slow: list[bool] = []
    node_path: list[str | None] = []
    kids: list[int] = []
    sym_start: list[int] = []
    sym_len: list[int] = []
    pool = bytearray()
    paths: dict[str, int] = {}
    depth = [1]

    def node(code: int, p: str | None, is_slow: bool = False) -> int:
        op.append(code), arg.append(0), count.append(0), slow.append(is_slow), node_path.append(p)
        pid = -1
        if p is not None and (code in _LEAVES or code == MAP):
            pid = paths.setdefault(p, len(paths))
        path.append(pid)
        if p is not None and len(p.encode("utf-8")) > max_name_bytes:
            slow[-1] = True
        return len(op) - 1

    def walk(t: Any, p: str | None, open_records: tuple[str, ...], level: int) -> int:
        depth[0] = max(depth[0], level)
        if isinstance(t, str):
            if t in _PRIMITIVES:
                return node(_PRIMITIVES[t], p)
            if t not in named:
                raise NotCompiled(f"unknown type {t!r}")
            t = named[t]
        if isinstance(t, list):
            n = node(UNION, p)
            branches = [walk(b, p, open_records, level) for b in t]
            arg[n], count[n] = len(kids), len(branches)
            kids.extend(branches)
            return n
        kind = t["type"]
        if isinstance(kind, (dict, list)):
            return walk(kind, p, open_records, level)
        logical = t.get("logicalType")
        if kind in _PRIMITIVES:
            if logical is None:
                return node(_PRIMITIVES[kind], p)
            if (kind, logical) in _LOGICAL:
                return node(_LOGICAL[(kind, logical)], p)
            return node(_PRIMITIVES[kind], p, is_slow=True)  # decimal...: the per-record path converts
        if kind == "fixed":
            n = node(FIXED, p, is_slow=logical is not None)
            arg[n] = int(t["size"])
            return n
        if kind == "enum":
            n = node(ENUM, p)
            arg[n], count[n] = len(sym_start), len(t["symbols"])
            for s in t["symbols"]:
                b = s.encode("utf-8")
                sym_start.append(len(pool)), sym_len.append(len(b))
                pool.extend(b)
            return n
        if kind == "record":
            name = t["name"]
            if name in open_records:
                raise NotCompiled(f"record {name} contains itself")
            n = node(RECORD, p)
            fields = [walk(f["type"], None if p is None else (f"{p}.{f['name']}" if p else f["name"]),
                           open_records + (name,), level + 1) for f in t["fields"]]
            arg[n], count[n] = len(kids), len(fields)
            kids.extend(fields)
            return n
        if kind == "array":
            n = node(ARRAY, p)
            arg[n] = walk(t["items"], p, open_records, level + 1)
            return n
        if kind == "map":
            n = node(MAP, p)
            item = walk(t["values"], None, open_records, level + 1)
            arg[n] = item
            if not _leaf_like(item, op, kids, arg, count):
                slow[n] = True  # a map of records, arrays or maps: named per entry at any depth, left to Python
            return n
        raise NotCompiled(f"unknown type {kind!r}")

    walk(parsed, "", (), 1)
    return AvroProgram(np.array(op, np.int8), np.array(arg, np.int64), np.array(count, np.int64),
                       np.array(path, np.int32), np.array(slow, bool), np.array(kids, np.int32),
                       np.array(sym_start, np.int64), np.array(sym_len, np.int32), bytes(pool),
                       tuple(paths), tuple(node_path), depth[0] + 1)


def _leaf_like(n: int, op: list[int], kids: list[int], arg: list[int], count: list[int]) -> bool:
    if op[n] == UNION:
        return all(op[k] in _LEAVES for k in kids[arg[n]:arg[n] + count[n]])
    return op[n] in _LEAVES


@numba.njit(cache=True, inline="always")
def _plain_segment(buf, pos, n):
    """Whether a map key is a path segment as it is: not empty (wire.paths refuses it), no ``.`` or ``\\``, no
    leading ``$`` (wire.paths escapes those); such a record takes the Python path, which says so."""
    if n == 0 or buf[pos] == 36:
        return False
    for j in range(pos, pos + n):
        if buf[j] == 46 or buf[j] == 92:
            return False
    return True


@numba.njit(cache=True, inline="always")
def _canonical_uuid(buf, pos, n):
    """Whether ``buf[pos:pos+n]`` is a UUID as ``str(uuid.UUID(...))`` writes it (lowercase, hyphens at 8-4-4-4-12)."""
    if n != 36:
        return False
    for i in range(36):
        c = buf[pos + i]
        if i == 8 or i == 13 or i == 18 or i == 23:
            if c != 45:
                return False
        elif not (48 <= c <= 57 or 97 <= c <= 102):
            return False
    return True


def dates_as_text(buf: np.ndarray, pairs: Any) -> tuple[np.ndarray, Any]:
    """The kernel's date pairs (days) as the text ``YYYY-MM-DD`` (``wire.registered``'s rule), appended to ``buf``."""
    at = np.flatnonzero(pairs.op == DATE_PAIR)
    if not len(at):
        return buf, pairs
    text = "".join(np.datetime_as_string(pairs.number[at].astype(np.int64).astype("datetime64[D]")).tolist())
    start = len(buf)
    buf = np.concatenate([buf, np.frombuffer(text.encode("ascii"), np.uint8)])
    pairs.kind[at], pairs.number[at], pairs.op[at] = 1, np.nan, 0
    pairs.start[at] = start + 10 * np.arange(len(at))
    pairs.length[at] = 10
    return buf, pairs


# --- the kernel ---------------------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def decode_registered(buf, starts, ends, schema_id, op, arg, count, path, slow, wanted, kids, symbol_start,
                      symbol_length, pool_base, n_paths, depth, max_names, max_name_bytes, path_bytes, cap):
    """Decode every record framed with ``schema_id`` that the program reads as ``wire.registered`` would.

    Returns per record a status (others than ``schema_id``'s stay slow), the pairs (attribute ids: ``path`` ids,
    then ``n_paths + i`` for map entry ``i``; ``op``: ``DATE_PAIR`` or a number's form, ``avro_binary.INTEGRAL_PAIR``), each map entry's (prefix path id, key start, key length), and
    whether more than ``max_names`` map entries were met (the caller retries with more room).  ``cap``: the bytes
    of the records framed with ``schema_id``, room enough since every pair reads at least one byte of its record.
    """
    n = len(starts)
    status = np.full(n, _SLOW, np.int8)
    pairs = empty_pairs(cap)
    rec, attr, pop, kind, number, sstart, slen = pairs
    pop[:] = 0
    size = 1
    while size < 2 * max_names:
        size *= 2
    slots = np.full(size, -1, np.int32)
    dprefix = np.empty(max_names, np.int32)
    dstart = np.empty(max_names, np.int64)
    dlen = np.empty(max_names, np.int32)
    dhash = np.empty(max_names, np.uint64)
    seen = np.full(max_names, -1, np.int64)  # the map instance that last had each entry (duplicate keys)
    n_dyn = 0
    instance = 0
    st_node = np.empty(depth, np.int64)
    st_left = np.empty(depth, np.int64)
    st_emit = np.empty(depth, np.bool_)
    st_inst = np.empty(depth, np.int64)
    m = 0
    full = False
    for r in range(n):
        s, e = starts[r], ends[r]
        if e - s < 5 or buf[s] != 0:
            continue
        sid = (np.int64(buf[s + 1]) << 24) | (np.int64(buf[s + 2]) << 16) | (np.int64(buf[s + 3]) << 8) \
            | np.int64(buf[s + 4])
        if sid != schema_id:
            continue
        pos = s + 5
        m0 = m
        ok = True
        sp = 0
        st_node[0] = 0
        st_left[0] = 0
        st_emit[0] = wanted[0]
        while sp >= 0:
            nd = st_node[sp]
            o = op[nd]
            emit = st_emit[sp]
            pid = np.int64(-1)
            if o == RECORD:
                i = st_left[sp]
                if i == count[nd]:
                    sp -= 1
                    continue
                st_left[sp] = i + 1
                child = np.int64(kids[arg[nd] + i])
            else:  # an array or map: items in blocks
                if st_left[sp] == 0:
                    c, pos, ok = block_count(buf, pos, e)
                    if not ok:
                        break
                    if c == 0:
                        sp -= 1
                        continue
                    if c > e - pos + 4096:  # items of no bytes (nulls, empty records) by the billion: Python's
                        ok = False
                        break
                    if o == MAP:
                        if emit and slow[nd]:
                            ok = False
                            break
                        instance += 1
                        st_inst[sp] = instance
                    st_left[sp] = c
                st_left[sp] -= 1
                child = arg[nd]
                if o == MAP:
                    klen, pos, ok = varint(buf, pos, e)
                    ok = ok and 0 <= klen and pos + klen <= e
                    if not ok:
                        break
                    if emit:
                        ok = (path_bytes[path[nd]] + 1 + klen <= max_name_bytes and utf8_ok(buf, pos, klen)
                              and _plain_segment(buf, pos, klen))
                        if not ok:
                            break
                        h = fnv1a(FNV_OFFSET ^ np.uint64(path[nd]), buf, pos, pos + klen)
                        mask = size - 1
                        slot = np.int64(h & np.uint64(mask))
                        found = -1
                        while slots[slot] >= 0:
                            cand = slots[slot]
                            if (dhash[cand] == h and dlen[cand] == klen and dprefix[cand] == path[nd]
                                    and same_bytes(buf, dstart[cand], buf, pos, klen)):
                                found = cand
                                break
                            slot = (slot + 1) & mask
                        if found < 0:
                            if n_dyn == max_names:
                                full = True
                                ok = False
                                break
                            found = n_dyn
                            dprefix[found] = path[nd]
                            dstart[found] = pos
                            dlen[found] = klen
                            dhash[found] = h
                            slots[slot] = found
                            n_dyn += 1
                        if seen[found] == st_inst[sp]:  # a duplicate key: fastavro keeps the last value
                            ok = False
                            break
                        seen[found] = st_inst[sp]
                        pid = n_paths + found
                    pos += klen
            # the child: resolve a union, then descend into a container or read a leaf
            co = op[child]
            if co == UNION:
                br, pos, ok = varint(buf, pos, e)
                ok = ok and 0 <= br < count[child]
                if not ok:
                    break
                child = np.int64(kids[arg[child] + br])
                co = op[child]
            if o != MAP:
                pid = path[child]
            cemit = emit and wanted[child]
            if cemit and slow[child]:
                ok = False
                break
            if co == RECORD or co == ARRAY or co == MAP:
                sp += 1
                st_node[sp] = child
                st_left[sp] = 0
                st_emit[sp] = cemit
                continue
            if co == NULL:
                continue
            if co == BOOLEAN:
                ok = pos < e and (not cemit or buf[pos] <= 1)
                if not ok:
                    break
                if cemit:
                    rec[m], attr[m], kind[m], number[m], sstart[m], slen[m] = r, pid, 2, buf[pos], 0, -1
                    m += 1
                pos += 1
            elif co == FLOAT or co == DOUBLE:
                w = 4 if co == FLOAT else 8
                ok = pos + w <= e
                if not ok:
                    break
                if cemit:
                    if co == FLOAT:
                        v = np.float64(buf[pos:pos + 4].view(np.float32)[0])
                    else:
                        v = buf[pos:pos + 8].view(np.float64)[0]
                    rec[m], attr[m], kind[m], number[m], sstart[m], slen[m] = r, pid, 0, v, 0, -1
                    m += 1
                pos += w
            elif co == STRING or co == BYTES or co == FIXED or co == UUID:
                if co == FIXED:
                    ln = arg[child]
                else:
                    ln, pos, ok = varint(buf, pos, e)
                ok = ok and ln >= 0 and pos + ln <= e
                if not ok:
                    break
                if cemit and (co == STRING or co == UUID):
                    ok = _canonical_uuid(buf, pos, ln) if co == UUID else utf8_ok(buf, pos, ln)
                    if not ok:  # a uuid in another form: Python's uuid module makes it canonical
                        break
                    rec[m], attr[m], kind[m], number[m], sstart[m], slen[m] = r, pid, 1, np.nan, pos, ln
                    m += 1
                pos += ln
            elif co == ENUM:
                v, pos, ok = varint(buf, pos, e)
                if not ok:
                    break
                if cemit:
                    ok = 0 <= v < count[child]
                    if not ok:
                        break
                    k = arg[child] + v
                    rec[m], attr[m], kind[m], number[m] = r, pid, 1, np.nan
                    sstart[m], slen[m] = pool_base + symbol_start[k], symbol_length[k]
                    m += 1
            else:  # a long, int or a time
                v, pos, ok = varint(buf, pos, e)
                if not ok:
                    break
                if cemit:
                    x = np.float64(v)
                    if co == TS_MILLIS:
                        ok = _MIN_MS <= v <= _MAX_MS
                    elif co == TS_MICROS:
                        ok = _MIN_MS * 1000 <= v <= _MAX_MS * 1000 and -(2 ** 53) < v < 2 ** 53
                        x = x / 1000.0
                    elif co == TIME_MILLIS:
                        ok = 0 <= v < 86_400_000
                    elif co == TIME_MICROS:
                        ok = 0 <= v < 86_400_000_000
                        x = x / 1000.0
                    elif co == DATE:
                        ok = _MIN_DAY <= v <= _MAX_DAY
                    if not ok:
                        break
                    rec[m], attr[m], kind[m], number[m], sstart[m], slen[m] = r, pid, 0, x, 0, -1
                    if co == DATE:
                        pop[m] = DATE_PAIR
                    elif co == TS_MICROS or co == TIME_MICROS:  # whole milliseconds are an int in Python
                        if x == np.floor(x):
                            pop[m] = INTEGRAL_PAIR
                    elif -(2 ** 53) <= v <= 2 ** 53:
                        pop[m] = INTEGRAL_PAIR
                    else:
                        pop[m] = INEXACT_PAIR
                    m += 1
        if full:
            break
        if ok and sp < 0 and pos == e:
            status[r] = _FAST
        else:
            pop[m0:m] = 0  # a record rolled back leaves no date mark under the pairs written over it
            m = m0
    return status, first_pairs(pairs, m), dprefix[:n_dyn], dstart[:n_dyn], dlen[:n_dyn], full
