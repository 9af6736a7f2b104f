"""The subscription text language: what users type, parsed into the engine's predicates.

A package of its own, not a part of ``wire``: ``wire`` is what travels on the
topics (Avro/JSON records, fixed schema ids), while a subscription's text is
only a front end that ends as those records.  ``expression`` parses
predicates over every operator joined by ``and`` / ``or``; other languages
(sequence patterns, aggregates) have their own grammars and checks, so they
get a package where those modules live without crowding the codecs.  It depends on the engine alone (``Predicate``, the validation of
``engine.semantics``), so ``wire`` and everything above may use it.
"""

from .expression import ExpressionError, format_predicates, parse

__all__ = ["ExpressionError", "format_predicates", "parse"]
