"""Events with a validity, and new subscriptions evaluated against them (Fabret et al., section 1).

An event may carry ``valid_until`` (ms since the epoch, event time, exclusive)
in a Kafka record header of that name, as a decimal string — a header, so that
the event's value (which notifications re-use byte for byte) stays as it is.
The processor keeps such events in an ``engine.validity.event_store.ValidEventStore``
while ``event time < valid_until`` and matches every batch of new (or replaced)
subscriptions against them at once.  A stored event ``e`` is notified to a new
subscription ``s`` iff ``s`` matches it, ``s``'s record time is before
``e.valid_until`` (the event was still valid when ``s`` came in), and ``e``'s
time lies in ``s``'s validity interval (as for a live match).  Times are record
timestamps, so the decision is the same on every replay.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fastpubsub.engine import StoredMatches

from fastpubsub.wire.codecs import DecodeError

HEADER = "valid_until"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def valid_until_of(headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The ``valid_until`` header of a record (None if absent); ``DecodeError`` if malformed."""
    found = [v for k, v in headers or () if k == HEADER]
    if not found:
        return None
    if len(found) > 1:
        raise DecodeError(f"{len(found)} {HEADER} headers; at most one is allowed")
    raw = found[0]
    try:
        text = (raw or b"").decode("ascii")
        value = int(text)
    except (UnicodeDecodeError, ValueError):
        raise DecodeError(f"{HEADER} header {(raw or b'')[:40]!r} is not a decimal integer (ms since the epoch)") from None
    if text.strip() != text or not _INT64_MIN <= value <= _INT64_MAX:
        raise DecodeError(f"{HEADER} header {raw[:40]!r} is not a decimal signed 64-bit integer")
    return value


def due(found: StoredMatches, subscription_times: dict[int, int], valid_mask) -> np.ndarray:
    """Indexes of ``found`` to notify: the event was valid at the subscription's time, and in its interval."""
    if not len(found.subscription_ids):
        return np.zeros(0, dtype=np.int64)
    sub_time = np.fromiter((subscription_times[s] for s in found.subscription_ids.tolist()), dtype=np.int64,
                           count=len(found.subscription_ids))
    ok = (sub_time < found.valid_until) & valid_mask(found.subscription_ids, found.times)
    return np.flatnonzero(ok)
