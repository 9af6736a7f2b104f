"""The subscription text languages: what users type, before it becomes the engine's predicates or a spec.

A package of its own, not a part of ``wire``: ``wire`` is what travels on the
topics (Avro/JSON records, fixed schema ids), while a subscription's text is
only a front end that ends as those records.  ``lexer`` is the one lexer of
the three languages (plain, pattern and aggregate subscriptions), each a
``Dialect`` of it, so names, strings and numbers are spelled alike in all of
them; ``expression`` is the grammar of plain subscriptions (predicates over
every operator joined by ``and`` / ``or``).  The pattern and aggregate
grammars live with their engines (``patterns.language``, ``aggregates.text``),
which use the lexer.  It depends on the engine alone (``Predicate``, the
validation of ``engine.semantics``), so ``wire`` and everything above may use
it.
"""

from .expression import ExpressionError, format_predicates, parse

__all__ = ["ExpressionError", "format_predicates", "parse"]
