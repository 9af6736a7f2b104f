"""Untrusted text made safe to show: the one place control characters are escaped.

Field names and values of records reach dead-letter reasons and log lines.
Written raw, a newline in a field name forges a whole log line, and an ANSI
escape sequence reaches the reader's terminal.  :func:`printable` escapes
every control character (C0, DEL, C1), the Unicode line and paragraph
separators and the bidirectional overrides as ``\\n``, ``\\x1b``,
``\\u2028``...; the dead-letter path applies it to every reason
(``kafka.deadletter``), and :class:`Formatter` to every log record of the
commands (:func:`log_to_stderr`).
"""

from __future__ import annotations

import logging
import sys

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPED = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_TABLE = {c: _NAMED.get(chr(c)) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _ESCAPED}


def printable(text: str) -> str:
    """``text`` with its control characters escaped: one line, nothing a terminal interprets."""
    return text.translate(_TABLE)


class Formatter(logging.Formatter):
    """A log formatter whose records are one line each: the message is :func:`printable`, and the lines of a
    traceback (whose last line quotes the exception's message) are escaped and indented, so that no line of a
    record can pass for the start of another."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        message = record.message
        record.message = printable(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei) -> str:  # noqa: N802, ANN001 - logging's name and signature
        return "\n".join("    " + printable(line) for line in super().formatException(ei).split("\n"))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return "\n".join("    " + printable(line) for line in stack_info.split("\n"))


def log_to_stderr(level: int | str, fmt: str) -> None:
    """The root logger writes to stderr through :class:`Formatter` (the commands' logging setup)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Formatter(fmt))
    logging.basicConfig(level=level, handlers=[handler])
