"""The users' topics through Apache Kafka: deployments under two prefixes on one cluster, events from several topics
and from a pattern that picks up a topic created later, subscriptions on a record's topic, key and headers."""

from __future__ import annotations

import json

from tests.support.kafka_helpers import RunningProcessor, producer, read_all, send, service_config

from fastpubsub.kafka import admin
from fastpubsub.services.events.processor import ProcessorConfig
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import Subscription
from fastpubsub.wire.topics import TopicNames


def processor(bootstrap: str, names: TopicNames, **settings) -> RunningProcessor:
    return RunningProcessor(service_config(ProcessorConfig, bootstrap, group_id=names.group("pubsub-processor"),
                                           topics=names, progress_interval=60, output_format="json", **settings))


def notes_of(bootstrap: str, topic: str) -> list[dict]:
    return [codecs.decode_notification(m.value()) for m in read_all(bootstrap, topic, quiet=0.2)]


def test_two_prefixes_share_a_cluster_without_touching_each_other(bootstrap):
    blue, green = TopicNames.build("blue."), TopicNames.build("green.")
    for names in (blue, green):
        admin.create_topics(bootstrap, partitions=2, topics=names)
        send(bootstrap, names.subscriptions, [("1", codecs.encode_subscription(
            Subscription(f"{names.prefix}owner", [("price", "<", 10)])))])
    running = [processor(bootstrap, blue), processor(bootstrap, green)]
    try:
        send(bootstrap, blue.events[0], [("b1", codecs.encode_event({"price": 5}))])
        send(bootstrap, green.events[0], [("g1", codecs.encode_event({"price": 6})),
                                          ("g2", codecs.encode_event({"price": 7}))])
        for p, n in zip(running, (1, 2)):
            p.wait_for(lambda: p.processor.events >= n, what="the events processed")
    finally:
        stats = [p.stop() for p in running]
    assert [(n["subscriber"], n["event_id"]) for n in notes_of(bootstrap, blue.notifications)] == [
        ("blue.owner", "b1")]
    assert sorted((n["subscriber"], n["event_id"]) for n in notes_of(bootstrap, green.notifications)) == [
        ("green.owner", "g1"), ("green.owner", "g2")]
    assert read_all(bootstrap, topics.NOTIFICATIONS, quiet=0.1) == []  # today's topics untouched
    assert [s["task"]["group"] for s in stats] == ["blue.pubsub-processor", "green.pubsub-processor"]


def test_events_from_topics_and_a_pattern_with_a_topic_created_later(bootstrap):
    names = TopicNames.build(events=["orders", "clicks"], events_pattern="tele-.*")
    admin.create_topics(bootstrap, partitions=2, names=("orders", "clicks", "tele-1"), topics=names)
    send(bootstrap, names.subscriptions, [
        ("1", codecs.encode_subscription(Subscription("all", [("n", ">=", 0)]))),
        ("2", codecs.encode_subscription(Subscription("tele", [("$topic", "prefix", "tele-"), ("n", ">=", 0)]))),
        ("3", codecs.encode_subscription(Subscription("keyed", [("$key", "=", "vip")]))),
        ("4", codecs.encode_subscription(Subscription("traced", [("$header.source", "=", "mobile"),
                                                                 (r"\$n", "exists", None)]))),
    ])
    p = processor(bootstrap, names, client_config={"topic.metadata.refresh.interval.ms": 500},
                  notification_event_format="original")
    try:
        out = producer(bootstrap)
        out.produce("orders", codecs.encode_event({"n": 1}), "vip")
        out.produce("clicks", json.dumps({"n": 2, "$n": 0}).encode(), "c2", headers=[("source", b"mobile")])
        out.produce("tele-1", codecs.encode_event({"n": 3}), "t3")
        assert out.flush(30) == 0
        p.wait_for(lambda: p.processor.events >= 3, what="the events of the three topics")
        admin.create_topics(bootstrap, partitions=1, names=("tele-2",), topics=names)  # after the start
        send(bootstrap, "tele-2", [("t4", codecs.encode_event({"n": 4}))])
        p.wait_for(lambda: p.processor.events >= 4, timeout=30, what="the event of the topic created later")
    finally:
        p.stop()
    notes = notes_of(bootstrap, names.notifications)
    got = sorted((n["event_id"], n["subscriber"]) for n in notes)
    assert got == [("c2", "all"), ("c2", "traced"), ("t3", "all"), ("t3", "tele"), ("t4", "all"), ("t4", "tele"),
                   ("vip", "all"), ("vip", "keyed")]
    # each notification names its record and carries the value as the producer wrote it
    sent = {(m.topic(), m.partition(), m.offset()): m.value()
            for t in ("orders", "clicks", "tele-1", "tele-2") for m in read_all(bootstrap, t, quiet=0.1)}
    topic_of = {"vip": "orders", "c2": "clicks", "t3": "tele-1", "t4": "tele-2"}
    for n in notes:
        where = n["source"]
        assert where["topic"] == topic_of[n["event_id"]] and n["event"] == {}
        value = sent[where["topic"], where["partition"], where["offset"]]
        assert n["original"] == {"schema_id": 2 if value[0] == 0 else None, "value": value}
