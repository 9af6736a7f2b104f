"""Untrusted text (field names and values of records) reaches dead-letter reasons and log lines escaped: one line
each, nothing a terminal interprets."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import unicodedata

import pytest
from hypothesis import given, strategies as st
from tests.kafka.test_delivery import FakeProducer

from fastpubsub.kafka import clients
from fastpubsub.kafka.queues import QueueBounds
from fastpubsub.runtime.sink import Sink, SourceRecord
from fastpubsub.services.events.subscriptions import SubscriptionState
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import DecodeError
from fastpubsub.wire.printable import Formatter, printable

#: A field name that forges a log line and colours the reader's terminal.
FORGED = 'x\n2026-01-01 00:00:00,000 pubsub ERROR forged line\x1b[31m'


def shown_raw(c: str) -> bool:
    """A character a terminal or a log reader does not show as itself."""
    return unicodedata.category(c) in ("Cc", "Zl", "Zp") or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069


@given(st.text())
def test_printable_escapes_each_control_character_and_keeps_every_other_one(text):
    shown = printable(text)
    assert not any(shown_raw(c) for c in shown)
    assert shown == "".join(printable(c) for c in text)
    assert all(printable(c) == c for c in text if not shown_raw(c))
    assert all(printable(c).startswith("\\") and printable(c).isascii() for c in text if shown_raw(c))


def test_escapes_read_as_python_writes_them():
    assert printable("a\nb\rc\td\x1b[31m\x00\x7f\x85\u2028\u202e") == \
        "a\\nb\\rc\\td\\x1b[31m\\x00\\x7f\\x85\\u2028\\u202e"


class Capturing(FakeProducer):
    produced: list = []

    def produce(self, topic, value, key, on_delivery, **extra) -> None:
        Capturing.produced.append((topic, key, value))
        super().produce(topic, value, key, on_delivery)


@pytest.fixture
def producer(monkeypatch):
    monkeypatch.setattr(clients, "Producer", Capturing)
    Capturing.produced = []
    return Capturing


def test_a_field_name_with_a_newline_and_an_escape_is_escaped_in_the_dead_letter_and_its_log_line(producer):
    value = json.dumps({"subscriber": "s", "predicates": [], FORGED: 1}).encode()
    with pytest.raises(DecodeError) as refused:
        SubscriptionState().apply(b"1", value)
    assert FORGED in str(refused.value)  # the decoder quotes the field name as it was

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("fastpubsub.kafka.deadletter")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    try:
        deliver = Sink(clients.ClientFactory("127.0.0.1:1"), "at-least-once", "t", QueueBounds(), "json")
        deliver.reject(SourceRecord(topics.SUBSCRIPTIONS, 0, 7, b"1", value), str(refused.value))
    finally:
        logger.removeHandler(handler)
        logger.level = level

    [(topic, _, letter)] = producer.produced
    reason = codecs.decode_dead_letter(letter).reason
    assert topic == topics.DEAD_LETTER
    assert "\n" not in reason and "\x1b" not in reason
    assert "x\\n2026-01-01 00:00:00,000 pubsub ERROR forged line\\x1b[31m" in reason
    assert codecs.decode_dead_letter(letter).value == value  # the record itself is kept as it was
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("INFO dead letter ") and "\\n2026" in lines[0]
    assert "\x1b" not in out.getvalue()


def test_the_commands_log_one_line_per_record_and_indent_tracebacks():
    """What ``cli.common.setup_logging`` installs: a message is one escaped line; a traceback (whose last line
    quotes the exception) is escaped and indented, so none of its lines passes for a record."""
    script = f"""
import logging
from fastpubsub.cli.common import setup_logging
setup_logging("info")
log = logging.getLogger("pubsub")
log.warning("unknown field %s", {FORGED!r})
try:
    raise ValueError({FORGED!r})
except ValueError:
    log.exception("refused")
"""
    err = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stderr
    lines = err.splitlines()
    assert lines[0].endswith("pubsub WARNING unknown field x\\n2026-01-01 00:00:00,000 pubsub ERROR forged line"
                             "\\x1b[31m")
    assert lines[1].endswith("pubsub ERROR refused")
    assert all(line.startswith("    ") for line in lines[2:]) and len(lines) > 3
    assert lines[-2:] == ["    ValueError: x", "    2026-01-01 00:00:00,000 pubsub ERROR forged line\\x1b[31m"]
    assert "\x1b" not in err
