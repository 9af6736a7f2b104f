"""A completed pattern as a notification record: deterministic ids, the bound events, the aggregates (JSON).

The id names every bound event by its events partition and offset, so a replay (or another instance after a
rebalance) writes the same id for the same completion, and consumers can de-duplicate on it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastpubsub.patterns import Pattern
from fastpubsub.patterns.contents import BoundContents
from fastpubsub.patterns.witnesses import Witness, notification_id
from fastpubsub.patterns.reorder import event_name
from fastpubsub.wire import codecs
from fastpubsub.wire.registered import RegisteredDecoders


def _event(value: bytes, registered: RegisteredDecoders | None) -> Any:
    if registered is not None and registered.handles(value):
        return registered.decode(value)
    return codecs.decode_event(value)


def pattern_notification_id(sid: int, partition: int, bound: tuple[tuple[int, int], ...]) -> str:
    """``<sid>/<p>:<a's offset>|<p>:<r's offset>#<iterations>|...``: deterministic, unique over partitions."""
    return notification_id(sid, [(f"{partition}:{i}", n) for i, n in bound])


def repartitioned_notification_id(sid: int, bound: tuple[tuple[int, int], ...]) -> str:
    """``<sid>/<events partition>:<offset>|...`` of events that came through the repartition topic: each named by
    its source position, so the id does not depend on where or when the re-keying put it."""
    return notification_id(sid, [("%d:%d" % event_name(i), n) for i, n in bound])



def notification(w: Witness, subscriber: str, pattern: Pattern, p: int, contents: BoundContents,
                 repartitioned: bool, registered: RegisteredDecoders | None = None) -> bytes:
    """The JSON notification of witness ``w`` completed in events (or repartition) partition ``p``; an event in a
    producer's registered schema (``registered``) is carried as decoded, with its nesting."""
    names = [pattern.bind] + [s.bind for s in pattern.steps]
    bound: list[dict[str, Any]] = []
    for name, (eid, iterations) in zip(names, w.bound):
        item = contents.get(eid)
        src_p, offset = event_name(eid) if repartitioned else (p, eid)  # the events partition and offset
        bound.append({"bind": name, "event_id": f"{src_p}:{offset}", "offset": offset, "iterations": iterations,
                      "ts": None if item is None else item[0],
                      "event": None if item is None else _event(item[1], registered)})
        if repartitioned:
            bound[-1]["partition"] = src_p
    nid = repartitioned_notification_id(w.sid, w.bound) if repartitioned else pattern_notification_id(w.sid, p, w.bound)
    body = {"notification_id": nid, "subscription_id": w.sid, "subscriber": subscriber, "kind": "pattern",
            "partition": p, "start_ts": w.start_ts, "end_ts": w.end_ts, "events": bound,
            "aggregates": {k: (None if v is None or (isinstance(v, float) and math.isnan(v)) else v)
                           for k, v in w.aggregates}}
    return json.dumps(body, separators=(",", ":")).encode()
