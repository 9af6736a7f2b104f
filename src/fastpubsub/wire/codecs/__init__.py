"""Record values on the wire: Avro (Confluent wire format) and JSON, one module per kind of record.

``framing`` holds what every kind shares: the schemas and their fixed ids, the
Confluent header, the strict JSON reader and :class:`DecodeError` (its message
is the reason written to the dead-letter topic).  The kinds: ``subscriptions``,
``aggregate_subscriptions``, ``pattern_subscriptions`` (``any_subscription``
tells the three apart), ``events``, ``notifications``, ``dead_letters`` and
``statistics``.  Their public names are importable from here.
"""

from .framing import (FORMATS, MAGIC, MAX_ATTRIBUTE_BYTES, MAX_JSON_DEPTH, MAX_SUBSCRIBER_BYTES, SCHEMA_DIR, SCHEMA_IDS,
                      SCHEMAS, DecodeError, reframed)
from .subscriptions import Subscription, decode_subscription, encode_subscription
from .aggregate_subscriptions import AggregateDecodeError, AggregateSubscription, encode_aggregate_subscription
from .pattern_subscriptions import PatternDecodeError, PatternSubscription, encode_pattern_subscription
from .any_subscription import decode_any_subscription, is_aggregate_subscription, is_pattern_subscription
from .events import (decode_event, decode_event_pairs, decode_json_event, encode_attributes, encode_event,
                     native_attributes)
from .notifications import (decode_notification, encode_notification, encode_notification_reference,
                            notification_encoder, notification_id, original_event)
from .dead_letters import (MAX_REASON_CHARS, TRUNCATED_KEY_BYTES, DeadLetter, dead_letter, decode_dead_letter,
                           encode_dead_letter, fit_dead_letter)
from .statistics import decode_statistics, encode_statistics

__all__ = ["FORMATS", "MAGIC", "MAX_ATTRIBUTE_BYTES", "MAX_JSON_DEPTH", "MAX_REASON_CHARS", "MAX_SUBSCRIBER_BYTES",
           "SCHEMA_DIR", "SCHEMA_IDS", "SCHEMAS", "TRUNCATED_KEY_BYTES", "AggregateDecodeError",
           "AggregateSubscription", "DeadLetter", "DecodeError", "PatternDecodeError", "PatternSubscription",
           "Subscription", "dead_letter", "decode_any_subscription", "decode_dead_letter", "decode_event",
           "decode_event_pairs", "decode_json_event", "decode_notification", "decode_statistics", "decode_subscription",
           "encode_aggregate_subscription", "encode_attributes", "encode_dead_letter", "encode_event",
           "encode_notification", "encode_notification_reference", "encode_pattern_subscription", "encode_statistics",
           "encode_subscription", "fit_dead_letter", "is_aggregate_subscription", "is_pattern_subscription",
           "native_attributes", "notification_encoder", "notification_id", "original_event", "reframed"]
