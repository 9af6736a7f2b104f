"""The matching engine: subscriptions in, matching subscription ids out.

No Kafka, no Spark: the engine is a library; I/O lives in ``processor/`` and
``fastpubsub/stats_job/``.
"""

from .matcher import ALGORITHMS, Matcher, Matches
from .oracle import OracleMatcher
from .semantics import OPERATORS

__all__ = ["ALGORITHMS", "Matcher", "Matches", "OracleMatcher", "OPERATORS"]
