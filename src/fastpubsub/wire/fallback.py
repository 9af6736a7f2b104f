"""The pairs of the records a batch decoder's kernel left to the per-record path, merged into its columns.

Both batch decoders (events, subscriptions) hand what their kernel cannot
prove well-formed to ``wire.codecs``; the (attribute, value) pairs that path
decodes join the kernel's columns here, so the result reads as if one
decoder had done it all: attribute ids shared with the kernel's names,
strings appended to its buffer, pairs in record order.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fastpubsub.engine import KIND_BOOL, KIND_NUMBER, KIND_STRING

from .avro_binary import Pairs


class FallbackPairs:
    """Pairs added one by one, to merge with the kernel's :class:`~.avro_binary.Pairs` (:meth:`merged`).

    ``names`` are the kernel's attribute names (their ids are kept);
    ``buffer_size`` is the size of the kernel's buffer, where the strings
    added here will follow; ``encoding_errors`` is how a string is encoded
    (``"surrogatepass"`` where the per-record path may give lone surrogates).
    """

    def __init__(self, names: Sequence[str], buffer_size: int, encoding_errors: str = "strict") -> None:
        self.index = {name: i for i, name in enumerate(names)}
        self.buffer_size = buffer_size
        self.encoding_errors = encoding_errors
        self.extra = bytearray()
        self.rec: list[int] = []
        self.attr: list[int] = []
        self.op: list[int] = []
        self.kind: list[int] = []
        self.number: list[float] = []
        self.start: list[int] = []
        self.length: list[int] = []

    @property
    def names(self) -> list[str]:
        """The kernel's names, then the new ones, by id."""
        return list(self.index)

    def add(self, record: int, attribute: str, value: Any, op: int = 0) -> None:
        """Pair (``attribute``, ``value``) of input ``record``; ``op`` is its operator code (subscriptions)."""
        self.rec.append(record)
        self.attr.append(self.index.setdefault(attribute, len(self.index)))
        self.op.append(op)
        if isinstance(value, str):
            b = value.encode("utf-8", self.encoding_errors)
            self.kind.append(KIND_STRING), self.number.append(np.nan)
            self.start.append(self.buffer_size + len(self.extra)), self.length.append(len(b))
            self.extra += b
        else:
            self.kind.append(KIND_BOOL if isinstance(value, bool) else KIND_NUMBER), self.number.append(float(value))
            self.start.append(0), self.length.append(-1)

    def merged(self, buf: np.ndarray, pairs: Pairs) -> tuple[np.ndarray, Pairs]:
        """The kernel's buffer and pairs with these merged in.

        The kernel's pairs and these never share a record, so a stable sort by
        record keeps each record's pairs in order.
        """
        if self.extra:
            buf = np.concatenate([buf, np.frombuffer(bytes(self.extra), np.uint8)])
        rec = np.concatenate([pairs.rec, np.array(self.rec, np.int32)])
        order = np.argsort(rec, kind="stable")
        added = (self.rec, self.attr, self.op, self.kind, self.number, self.start, self.length)
        return buf, Pairs(*(np.concatenate([kernel, np.array(more, kernel.dtype)])[order]
                            for kernel, more in zip(pairs, added)))
