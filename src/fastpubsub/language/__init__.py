"""The subscription text language: what users type, parsed into the engine's predicates.

A package of its own, not a part of ``wire``: ``wire`` is what travels on the
topics (Avro/JSON records, fixed schema ids), while a subscription's text is
only a front end that ends as those records.  The language will grow (``IN``,
``BETWEEN``, ``OR``; sequence patterns ``seq a: ... next b: ...``; aggregates
``min(x) over table ...``), each with its own grammar and checks, so it gets
a package where those modules can live beside ``expression`` without crowding
the codecs.  It depends on the engine alone (``Predicate``, the validation of
``engine.semantics``), so ``wire`` and everything above may use it.
"""

from .expression import ExpressionError, format_predicates, parse

__all__ = ["ExpressionError", "format_predicates", "parse"]
