"""Topic names (``wire.topics.TopicNames``): today's names by default, each one replaceable, all under one prefix,
and the command line options that give them (unit lane: no broker)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from fastpubsub.cli import main
from fastpubsub.runtime import HostConfig
from fastpubsub.cli.common import topic_options
from fastpubsub.wire import topics
from fastpubsub.wire.topics import DEFAULT, TopicNames

PREFIX = st.from_regex(r"[a-z][a-z0-9._-]{0,20}", fullmatch=True)


def test_without_options_the_names_are_todays():
    t = TopicNames.build()
    assert t == DEFAULT
    assert (t.events, t.subscriptions, t.notifications, t.dead_letter, t.statistics) == (
        (topics.EVENTS,), topics.SUBSCRIPTIONS, topics.NOTIFICATIONS, topics.DEAD_LETTER, topics.STATISTICS)
    assert t.all == topics.ALL
    assert set(t.required) == set(topics.REQUIRED)
    assert t.event_subscription == [topics.EVENTS] and t.group("pubsub-processor") == "pubsub-processor"


@given(PREFIX)
def test_a_prefix_goes_before_every_name_fastpubsub_chooses_and_no_other(prefix):
    t = TopicNames.build(prefix, notifications="alerts")
    assert t.events == (prefix + topics.EVENTS,) and t.subscriptions == prefix + topics.SUBSCRIPTIONS
    assert t.dead_letter == prefix + topics.DEAD_LETTER and t.statistics == prefix + topics.STATISTICS
    assert t.notifications == "alerts"  # given: as it is
    assert (t.reformulated, t.table_schemas, t.pattern_changelog) == (
        prefix + topics.REFORMULATED, prefix + topics.TABLE_SCHEMAS, prefix + topics.PATTERN_CHANGELOG)
    assert t.changelog_topic("stock") == prefix + topics.changelog_topic("stock")
    assert t.group("pubsub-processor") == prefix + "pubsub-processor"
    assert not set(t.all) & set(topics.ALL)  # two deployments share nothing


@given(PREFIX, PREFIX)
def test_two_prefixes_name_disjoint_deployments(a, b):
    if a == b:
        return
    one, two = TopicNames.build(a), TopicNames.build(b)
    assert not set(one.all) & set(two.all)  # no default name is the end of another
    assert one.group("pubsub-processor") != two.group("pubsub-processor")


def test_events_from_topics_and_a_pattern():
    t = TopicNames.build(events=["orders", "clicks", "orders"], events_pattern="telemetry\\..*")
    assert t.events == ("orders", "clicks")  # once each, in order
    assert t.event_subscription == ["orders", "clicks", "^(telemetry\\..*)$"]
    assert t.is_event_topic("orders") and t.is_event_topic("telemetry.eu")
    assert not t.is_event_topic("xtelemetry.eu") and not t.is_event_topic("pubsub.events")
    assert t.events_label == "orders,clicks,^(telemetry\\..*)$"
    assert "telemetry.eu" not in t.required and "orders" in t.all  # a pattern's topics are the publishers'


def test_a_pattern_alone_reads_no_default_topic():
    t = TopicNames.build(events_pattern="^orders-.*")
    assert t.events == () and t.events_pattern == "orders-.*"  # a leading ^ is the user's habit, not part of it
    assert topics.EVENTS not in t.all and t.is_event_topic("orders-2026")


@pytest.mark.parametrize("kwargs, message", [
    ({"events": ["bad name"]}, "--events-topic: 'bad name' is not a Kafka topic name"),
    ({"prefix": "a/b"}, "--topic-prefix"),
    ({"notifications": "x" * 250}, "--notifications-topic"),
    ({"events_pattern": "orders("}, "is not a regular expression"),
    ({"events_pattern": "^"}, "an empty regular expression"),
    ({"events": ["t"], "notifications": "t"}, "topic t is both the events topic and the notifications topic"),
    ({"dead_letter": "pubsub.subscriptions"}, "both the subscriptions topic and the dead-letter topic"),
    ({"events_pattern": "pubsub\\..*"}, "matches pubsub.subscriptions"),
])
def test_bad_names_are_refused_with_the_option_to_fix(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("^", r"\^").replace("*", r"\*")
                       .replace(".", r"\.")):
        TopicNames.build(**kwargs)


def test_the_configuration_of_a_topic_follows_its_role():
    t = TopicNames.build("acme.", events=["orders"], statistics="stats")
    assert t.config_of("acme.pubsub.subscriptions") == {"cleanup.policy": "compact"}
    assert t.config_of("orders") == {"cleanup.policy": "delete"}
    assert t.config_of("acme.pubsub.dead-letter") == {"cleanup.policy": "compact"}
    assert t.config_of("acme.pubsub.changelog.tables.stock") == {"cleanup.policy": "compact"}
    assert t.fixed_partitions("stats", 4) == 1 and t.fixed_partitions("orders", 4) == 4


@given(PREFIX, st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), max_size=3, unique=True))
def test_the_options_of_a_deployment_give_it_back(prefix, events):
    t = TopicNames.build(prefix, events, "tele-.*" if len(events) % 2 else None)
    seen = {}

    @click.command()
    @topic_options
    def show(topics):
        seen["t"] = topics

    result = CliRunner().invoke(show, t.options())
    assert result.exit_code == 0, result.output
    assert seen["t"] == t and seen["t"].group("g") == t.group("g")


def test_environment_variables_name_the_topics():
    seen = {}

    @click.command()
    @topic_options
    def show(topics):
        seen["t"] = topics

    env = {"PUBSUB_TOPIC_PREFIX": "blue.", "PUBSUB_EVENTS_TOPIC": "orders clicks",
           "PUBSUB_NOTIFICATIONS_TOPIC": "alerts"}
    assert CliRunner().invoke(show, [], env=env).exit_code == 0
    t = seen["t"]
    assert t.events == ("orders", "clicks") and t.notifications == "alerts"
    assert t.subscriptions == "blue.pubsub.subscriptions"


@pytest.mark.parametrize("command", ["run", "patterns", "tables", "topics", "subscribe", "unsubscribe", "publish",
                                     "tail", "demo"])
def test_every_command_takes_the_topic_options(command):
    out = CliRunner().invoke(main, [command, "--help"]).output
    for option in ("--topic-prefix", "--events-topic", "--events-pattern", "--subscriptions-topic",
                   "--notifications-topic", "--dead-letter-topic", "--statistics-topic"):
        assert option in out, f"pubsub {command} lacks {option}"


def test_a_bad_name_on_the_command_line_is_a_usage_error():
    result = CliRunner().invoke(main, ["topics", "--events-topic", "no spaces"])
    assert result.exit_code == 2 and "not a Kafka topic name" in result.output


@pytest.mark.parametrize("args", [["--events-topic", "a", "--events-topic", "b"], ["--events-pattern", "a.*"]])
def test_publish_and_the_pattern_service_need_one_events_topic(args):
    result = CliRunner().invoke(main, ["publish", *args, "-b", "127.0.0.1:1", "{}"])
    assert result.exit_code == 2 and "publish writes to one topic" in result.output
    from fastpubsub.services.patterns.config import PatternServiceConfig

    with pytest.raises(ValueError, match="one events topic"):
        PatternServiceConfig(HostConfig("127.0.0.1:1", "g", topics=TopicNames.build(events=["a", "b"])))


def test_the_statistics_job_takes_the_prefix_and_the_events_topic():
    from fastpubsub.stats_job.statistics_job import build_parser

    args = build_parser().parse_args(["--topic-prefix", "blue.", "--events-topic", "orders"])
    t = TopicNames.build(args.topic_prefix, [args.topic], statistics=args.statistics_topic)
    assert t.events == ("orders",) and t.statistics == "blue.pubsub.statistics"
