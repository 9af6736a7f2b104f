"""Tables as declared to the table service (``--table NAME:TOPIC:KEY[:ATTR=KIND,...]``), and as it announces them
on ``pubsub.table-schemas`` so that clients check subscriptions against them."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from fastpubsub.aggregates import TableSchema
from fastpubsub.kafka import ClientFactory, admin
from fastpubsub.kafka.readers import read_to_end
from fastpubsub.wire.topics import TABLE_SCHEMAS

KINDS = ("number", "string", "bool")
log = logging.getLogger("pubsub.tables")
_NAME = re.compile(r"^[A-Za-z_][\w]*$")


@dataclass(frozen=True)
class TableDeclaration:
    """A table as declared to the service: ``NAME:TOPIC:KEY[:ATTR=KIND,...]`` on the command line."""

    name: str
    topic: str
    key: str
    kinds: dict[str, str] | None = None  # None: attributes are not checked at subscription time

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"table name {self.name!r} must be a letter or _ followed by letters, digits or _")
        if not self.topic or not self.key:
            raise ValueError(f"table {self.name}: topic and key attribute must not be empty")
        if self.kinds is not None:
            bad = {a: k for a, k in self.kinds.items() if k not in KINDS}
            if bad:
                raise ValueError(f"table {self.name}: unknown attribute kind(s) {bad}; expected one of {', '.join(KINDS)}")

    @staticmethod
    def parse(text: str) -> "TableDeclaration":
        parts = text.split(":", 3)
        if len(parts) < 3:
            raise ValueError(f"a table is NAME:TOPIC:KEY[:ATTR=KIND,...], got {text!r}")
        kinds = None
        if len(parts) == 4:
            kinds = {}
            for item in parts[3].split(","):
                attr, sep, kind = item.partition("=")
                if not sep or not attr.strip():
                    raise ValueError(f"table {parts[0]}: attribute kinds are ATTR=KIND, got {item!r}")
                kinds[attr.strip()] = kind.strip()
            kinds.setdefault(parts[2], "string")  # the key attribute is declared even when its kind is not given
        return TableDeclaration(parts[0], parts[1], parts[2], kinds)

    def schema(self) -> TableSchema:
        return TableSchema(self.name, self.key, self.kinds)

    def to_json(self) -> bytes:
        return json.dumps({"name": self.name, "topic": self.topic, "key": self.key, "kinds": self.kinds}).encode()

    @staticmethod
    def from_json(value: bytes) -> "TableDeclaration":
        d = json.loads(value)
        return TableDeclaration(d["name"], d["topic"], d["key"], d.get("kinds"))


def declared_tables(clients: ClientFactory | str, timeout: float = 10.0,
                    topic: str = TABLE_SCHEMAS) -> dict[str, TableDeclaration] | None:
    """The tables the table service declared on ``topic`` (``pubsub.table-schemas`` under the deployment's prefix;
    None if the topic does not exist)."""
    clients = ClientFactory.of(clients)
    try:
        n = admin.partitions_of(clients, topic)
    except RuntimeError:
        return None
    out: dict[str, TableDeclaration] = {}
    for msg in read_to_end(clients, [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(n)], timeout):
        name = msg.key().decode()
        if msg.value():
            out[name] = TableDeclaration.from_json(msg.value())
        else:
            out.pop(name, None)
    return out


def create_table_topics(clients: ClientFactory, tables: list[TableDeclaration]) -> None:
    """A table topic that does not exist yet is created with one partition (a table's update order), compacted
    (the latest row per key is the table)."""
    client = clients.admin()
    existing = set(client.list_topics(timeout=10).topics)
    missing = [t.topic for t in tables if t.topic not in existing]
    if not missing:
        return
    futures = client.create_topics([NewTopic(t, 1, -1, config={"cleanup.policy": "compact"}) for t in missing],
                                   operation_timeout=30)
    for topic, future in futures.items():
        try:
            future.result(30)
            log.info("created the table topic %s (one partition, compacted)", topic)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def announce(clients: ClientFactory, tables: list[TableDeclaration], topic: str = TABLE_SCHEMAS) -> None:
    """The tables on ``topic`` (the table schemas), for clients that check subscriptions against them."""
    producer = clients.producer(**{"enable.idempotence": True})
    for t in tables:
        producer.produce(topic, t.to_json(), t.name)
    if producer.flush(30):
        raise RuntimeError(f"could not declare the tables on {topic}")
