"""One lexer for the three subscription languages: plain, pattern and aggregate subscriptions.

Each language is a :class:`Dialect` of it (its operators, punctuation, the
extra characters its names may hold, signed numbers, duration suffixes), as a
SQL tokenizer serves its dialects: so a name, a string and a number are
spelled the same way in every language (docs/guide/subscriptions.md, "Names,
strings and numbers").

* a **name** starts with a letter or ``_`` and goes on with letters, digits
  and ``_`` (Unicode letters and digits count), plus the dialect's extra
  characters (``.`` and ``-`` in plain subscriptions, ``.`` in aggregate
  ones); a backslash takes the character after it into the name, escape
  included (``tags.app\\.kubernetes\\.io``: the attribute path escape of
  wire/paths.py);
* a **string** is double- or single-quoted, with JSON's backslash escapes;
  ``\\'`` is a quote inside a single-quoted string;
* a **number** is an integer or a decimal with an optional exponent, signed
  where the dialect says so; it may not run straight into a name (``12abc``)
  unless the dialect allows it.

Keywords are names: each grammar reads them where it expects them, case
insensitively (plain and aggregate subscriptions by their place alone, a
pattern also reserves its own).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

#: The one rule for names: a letter or ``_``, then letters, digits and ``_``; a dialect may allow more after the first.
NAME_START = r"[^\W\d]"
NAME = NAME_START + r"\w*"
#: A backslash and the character after it, inside a name: the escape of attribute paths (wire/paths.py).
ESCAPE = r"\\[^\s]"
#: The one rule for string literals (and quoted attribute names): double or single quotes, backslash escapes.
STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\''
_DIGITS = r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_PLAIN = re.compile(r"[^\\\x00-\x1f]*").fullmatch

NAME_KIND, STRING_KIND, NUMBER_KIND, DURATION_KIND, OP_KIND, PUNCT_KIND, END_KIND = (
    "name", "string", "number", "duration", "op", "punct", "end")


class Token(NamedTuple):
    """A token: its kind, its text as written, its value and the column (from 1) where it starts.

    The value of a string is its unquoted text, of a number an ``int`` or a
    ``float``, of a duration its milliseconds; of anything else its text.
    """

    kind: str
    text: str
    value: Any
    column: int

    def is_word(self, *words: str) -> bool:
        """Whether this is a name spelled like one of ``words`` (lower case), in any case."""
        return self.kind == NAME_KIND and self.text.lower() in words


@dataclass(frozen=True)
class Dialect:
    """What sets one language's tokens apart from another's."""

    operators: tuple[str, ...] = ("!=", "<=", ">=", "==", "=", "<", ">")
    punctuation: str = "(),"
    #: Characters a name may hold after its first, besides letters, digits and ``_``.
    name_chars: str = ""
    #: Characters that may sign a number literal (a language with arithmetic has a minus operator instead).
    signs: str = ""
    #: Suffixes that make an integer a duration, with their length in milliseconds.
    durations: tuple[tuple[str, int], ...] = ()
    #: Whether a number may run straight into a name (``2and``: the number 2, then ``and``).
    glued_numbers: bool = False
    #: Words with a meaning in the grammar: a name spelled like one is quoted when the text is written out.
    keywords: frozenset[str] = frozenset()
    #: A character that may open a name, once (``$topic``; a payload field ``$price`` is ``\\$price``: plain subscriptions'
    #: record metadata, ``wire.metadata``).
    sigil: str = ""

    @cached_property
    def name_pattern(self) -> re.Pattern[str]:
        # a backslash takes the next character into the name as it is (wire/paths.py: ``a\\.b`` is the key "a.b");
        # the sigil may open a name once (``$topic``: record metadata, wire.metadata)
        base = f"(?:{NAME_START}|{ESCAPE})(?:[\\w{re.escape(self.name_chars)}]|{ESCAPE})*"
        return re.compile(f"{re.escape(self.sigil)}?{base}" if self.sigil else base)

    @cached_property
    def _scanner(self) -> re.Pattern[str]:
        number = f"[{re.escape(self.signs)}]?{_DIGITS}" if self.signs else _DIGITS
        if not self.glued_numbers:  # as an atomic group: a number that runs into a name is not cut short to fit
            number = rf"(?=(?P<digits>{number}))(?P=digits)(?!{NAME_START})"
        units = "|".join(re.escape(u) for u, _ in sorted(self.durations, key=lambda d: -len(d[0])))
        operators = "|".join(re.escape(o) for o in sorted(self.operators, key=len, reverse=True))
        # tried in this order: a duration before a number; punctuation before a number too, so that where ``.``
        # is punctuation (a pattern's) ``.5`` is no number
        parts = [*([rf"(?P<{DURATION_KIND}>\d+(?:{units})(?!\w))"] if units else []),
                 f"(?P<{OP_KIND}>{operators})",
                 f"(?P<{PUNCT_KIND}>[{re.escape(self.punctuation)}])",
                 f"(?P<{STRING_KIND}>{STRING})",
                 f"(?P<{NUMBER_KIND}>{number})",
                 f"(?P<{NAME_KIND}>{self.name_pattern.pattern})"]
        return re.compile("|".join(parts))

    def is_name(self, text: str) -> bool:
        """Whether ``text`` can be written as a bare name (not a keyword) rather than quoted."""
        return self.name_pattern.fullmatch(text) is not None and text.lower() not in self.keywords

    @cached_property
    def _units(self) -> dict[str, int]:
        return dict(self.durations)

    def tokenize(self, text: str, error: type[ValueError] = ValueError) -> list[Token]:
        """The tokens of ``text``, then an ``end`` token; ``error`` (with the column) if a character fits no token."""
        out: list[Token] = []
        append, new = out.append, tuple.__new__
        pos = 0
        for m in self._scanner.finditer(text):  # tokens; what lies between them must be white space
            start, end = m.span()
            if start != pos and not text[pos:start].isspace():
                break
            pos = end
            kind, word = m.lastgroup, m.group()
            if kind == STRING_KIND:
                value: Any = unquote(word, start + 1, error)
            elif kind == NUMBER_KIND:
                value = float(word) if "." in word or "e" in word or "E" in word else int(word)
            elif kind == DURATION_KIND:
                digits = re.match(r"\d+", word).group()  # type: ignore[union-attr]
                value = int(digits) * self._units[word[len(digits):]]
            else:
                value = word
            append(new(Token, (kind, word, value, start + 1)))
        if pos != len(text) and not text[pos:].isspace():
            pos += len(text[pos:]) - len(text[pos:].lstrip())
            raise error(self._unexpected(text, pos))
        append(new(Token, (END_KIND, "", None, len(text) + 1)))
        return out

    def _unexpected(self, text: str, pos: int) -> str:
        c = text[pos]
        if c in "\"'":
            return f"column {pos + 1}: unexpected character {c!r} (a string that does not end)"
        sign = f"[{re.escape(self.signs)}]?" if self.signs else ""
        glued = re.match(rf"{sign}\.?\d[\w.]*", text[pos:])
        if glued:
            hint = (f" (a duration is an integer and one of {', '.join(u for u, _ in self.durations)})"
                    if self.durations else "")
            return f"column {pos + 1}: a number runs into a name: {glued.group()!r}{hint}"
        return f"column {pos + 1}: unexpected character {c!r}"


def unquote(literal: str, column: int, error: type[ValueError] = ValueError) -> str:
    """The text of a string literal: JSON's escapes, and ``\\'`` for a quote in a single-quoted one."""
    body = literal[1:-1]
    if _PLAIN(body):  # no escape and no control character: the text as written
        return body
    if literal[0] == "'":
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads(f'"{body}"')
    except json.JSONDecodeError as exc:
        raise error(f"column {column}: bad escape in string {literal}: {exc.msg}") from None
