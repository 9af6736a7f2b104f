"""Pattern subscriptions (Cayuga, EDBT 2006): sequences, iterations and aggregates over a partition's events.

Kafka-free.  ``language`` compiles text and JSON; ``engine`` is the numba fast
path that uses the Fabret matcher (``fastpubsub.engine``) as its first stage,
tested against the reference interpreter of the algebra in
tests/support/oracles/patterns.py.  See docs/patterns.md.
"""

from .language import MAX_STEPS, Aggregate, Atom, Operand, Pattern, PatternError, Ref, Step, from_json, parse, to_json

__all__ = ["MAX_STEPS", "Aggregate", "Atom", "Operand", "Pattern", "PatternError", "Ref", "Step", "from_json", "parse",
           "to_json"]
