"""The three subscription parsers as they were before they shared ``fastpubsub.language.lexer``: an oracle only.

tests/language/test_language_corpus.py checks that the parsers of today accept what
these accepted, with the same result, and refuse what these refused.  Nothing
in ``src`` imports them.
"""
