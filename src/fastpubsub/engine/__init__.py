"""The matching engine: subscriptions in, matching subscription ids out.

No Kafka, no Spark: the engine is a library.  What this module exports is its
public API; the processor, the statistics job and the CLI use nothing else.
"""

from .structures.sorted_runs import RUN_MIN
from .structures.byte_table import FNV_OFFSET, FNV_PRIME, file_texts, find_text, fnv1a, same_bytes
from .columnar import (
    EventBatch, SubscriptionBatch, batch_from_arrays, batch_to_arrays, concat_subscriptions, pack_strings, take_events,
    take_subscription_groups, take_subscriptions, unpack_strings,
)
from .frontend.encoding import N_KINDS
from .frontend.utf8 import Utf8Strings
from .frontend.lowering import parse_derived
from .validity.event_store import StoredMatches, ValidEventStore
from .algorithms.index import Index, IndexContext, register
from .matcher import ALGORITHMS, Matcher, Matches
from .memory_budget import InsufficientMemory
from .heap import PeriodicRelease, map_large_blocks
from .semantics import (
    ALL_OPERATORS, EXTENDED_OPERATORS, KIND_BOOL, KIND_NUMBER, KIND_STRING, KINDS, MAX_CONJUNCTIONS, MAX_LIST, OPERATORS,
    AllOf, AnyOf, Predicate, validate_event, validate_predicates, validate_subscription,
)
from .structure import StructureError
from .structure import dump as dump_index
from .structure import fingerprint as index_fingerprint
from .structure import holds_exactly as index_holds
from .structure import load as load_index
from .costmodel.statistics import MAX_PART_BYTES, AttributeStats, EventStatistics, PartitionOffsets, SnapshotParts, SourceWindow, split_record
from .validity.deadlines import DeadlineQueue

__all__ = [
    "map_large_blocks",
    "PeriodicRelease",
    "ALGORITHMS", "ALL_OPERATORS", "AllOf", "AnyOf", "EXTENDED_OPERATORS", "MAX_CONJUNCTIONS", "MAX_LIST",
    "take_subscription_groups", "validate_subscription", "AttributeStats", "DeadlineQueue", "EventBatch", "EventStatistics", "Index", "IndexContext", "InsufficientMemory", "KINDS",
    "KIND_BOOL", "KIND_NUMBER", "KIND_STRING", "Matcher", "Matches", "N_KINDS", "OPERATORS",
    "PartitionOffsets", "Predicate", "RUN_MIN", "SourceWindow", "StoredMatches", "SubscriptionBatch", "ValidEventStore",
    "batch_from_arrays", "batch_to_arrays", "concat_subscriptions", "pack_strings", "register", "StructureError",
    "dump_index", "index_fingerprint", "index_holds", "load_index", "take_events", "take_subscriptions",
    "unpack_strings", "validate_event", "validate_predicates", "MAX_PART_BYTES", "SnapshotParts", "split_record",
    "parse_derived", "Utf8Strings", "FNV_OFFSET", "FNV_PRIME", "file_texts", "find_text", "fnv1a", "same_bytes",
]
