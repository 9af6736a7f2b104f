"""The Spark statistics job (issue 4): exact statistics, bad records, offset ranges, end to end.

One SparkSession (local[2]) for the module; Kafka tests use the session's
embedded broker (tests/conftest.py) with topics of their own.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.kafka_helpers import send
from tests.support.statistics_helpers import N_SUBSCRIPTIONS, events_without_a1, w0_subscriptions

from fastpubsub.engine.costmodel.statistics import EventStatistics
from fastpubsub.wire import codecs, topics
from fastpubsub.wire.codecs import decode_statistics, encode_event, encode_statistics
from fastpubsub.wire.event_decoder import decode_events
from fastpubsub.services.events.statistics_feed import hash_tables
from fastpubsub.kafka import ClientFactory
from fastpubsub.kafka.statistics_topic import latest_snapshot
from fastpubsub.stats_job import partial_counts as pc
from fastpubsub.stats_job.event_statistics import StatisticsOptions, compute_statistics, summarize
from fastpubsub.stats_job.kafka_source import OffsetRange, read_offset_range
from fastpubsub.stats_job.statistics_job import parse_duration, run_statistics_job
from fastpubsub.stats_job.window import WindowSpec, log_bounds, parse_offsets, parse_time

pytestmark = pytest.mark.timeout(300)


def known_events(n: int = 400, seed: int = 7) -> list[dict]:
    """Mixed types, missing attributes, NaN, unicode, a rare attribute below the support threshold."""
    rng = random.Random(seed)
    movies = ["groundhog day", "heat", "amélie", "up", "ran"]
    events = []
    for _ in range(n):
        e = {}
        if rng.random() < 0.9:
            e["price"] = rng.choice([1, 2, 2, 3, 5, 8, 8, 8, 2.5, 13.25]) if rng.random() > 0.02 else float("nan")
        if rng.random() < 0.8:
            e["movie"] = rng.choice(movies[: rng.randint(1, 5)])
        if rng.random() < 0.5:
            e["vip"] = rng.random() < 0.3
        if rng.random() < 0.6:
            e["mixed"] = rng.choice([1, 1.0, True, "1", "one", 2])
        for a in ("a", "b", "c"):
            if rng.random() < 0.7:
                e[a] = rng.randint(1, 4)
        if rng.random() < 0.004:
            e["rare"] = 1
        events.append(e)
    return events


def _kind(v) -> int:
    return 2 if isinstance(v, bool) else 1 if isinstance(v, str) else 0


def _key(kind: int, v):
    return {0: (0, float(v) if kind == 0 else None), 1: (1, v), 2: (2, bool(v))}[kind]


def reference_statistics(events: list[dict], opts: StatisticsOptions) -> EventStatistics:
    """The same statistics with pandas/numpy directly from the event dicts."""
    n = len(events)
    long = pd.DataFrame(
        [(i, a, _kind(v), (float(v) if _kind(v) != 1 else 0.0), (v if _kind(v) == 1 else "")) for i, e in enumerate(events) for a, v in e.items()],
        columns=["event", "attribute", "kind", "number", "string"],
    )
    long["nan"] = (long["kind"] == 0) & long["number"].isna()
    stats = EventStatistics(event_count=n, source="spark")
    from fastpubsub.engine.costmodel.statistics import AttributeStats

    for attr, g in long.groupby("attribute"):
        present = len(g)
        counts = g.groupby(["kind", "number", "string"], dropna=False).size().reset_index(name="count")
        distinct = len(counts)  # NaN values group together (dropna=False): one distinct value
        usable = counts[~((counts["kind"] == 0) & counts["number"].isna())]
        usable = usable.sort_values(["count", "kind", "number", "string"], ascending=[False, True, True, True]).head(opts.top_k)
        top = {_key(k, x if k != 1 else s): c / present for k, x, s, c in usable.itertuples(index=False)}
        nums = g[(g["kind"] == 0) & ~g["nan"]]["number"].sort_values().to_numpy()
        q = opts.quantiles
        quantiles = [float(nums[(j * (len(nums) - 1)) // (q - 1)]) for j in range(q)] if len(nums) else []
        kinds = g["kind"].value_counts()
        types = {["number", "string", "bool"][k]: c / present for k, c in kinds.items()}
        stats.attributes[attr] = AttributeStats(present / n, distinct, top, quantiles, types)
    schemas = [frozenset(e) for e in events]
    frequent = []
    for size in (2, 3):
        candidates = {frozenset(c) for s in schemas for c in combinations(sorted(s), size)}
        for c in candidates:
            support = sum(1 for s in schemas if c <= s)
            if support >= opts.min_support * n:
                frequent.append((tuple(sorted(c)), support))
    frequent.sort(key=lambda x: (-x[1], len(x[0]), x[0]))
    frequent = frequent[: opts.max_sets]
    stats.schemas = {frozenset(s): c / n for s, c in frequent}
    for attrs, _ in frequent[: opts.joint_sets]:
        combos: dict[tuple, int] = {}
        for e in events:
            if all(a in e for a in attrs) and not any(isinstance(e[a], float) and math.isnan(e[a]) for a in attrs):
                vs = tuple((_kind(e[a]), float(e[a]) if _kind(e[a]) != 1 else 0.0, e[a] if _kind(e[a]) == 1 else "") for a in attrs)
                combos[vs] = combos.get(vs, 0) + 1
        ranked = sorted(combos.items(), key=lambda kv: (-kv[1], kv[0]))[: opts.joint_top_k]
        stats.joint[attrs] = {tuple(_key(k, x if k != 1 else s) for k, x, s in vs): c / n for vs, c in ranked}
    return stats


def partials_of(spark, values: list[bytes], opts: StatisticsOptions, chunk: int = 64):
    """The first-pass DataFrame and the joint pass of ``values`` as the executors make them, without a broker.

    Batches of ``chunk`` values, so that Spark merges counts across batches as it does across splits.
    The joint pass records the sets it is asked for in ``joint.calls``.
    """
    chunks = [values[i:i + chunk] for i in range(0, len(values), chunk)]
    batches = []
    for i, part in enumerate(chunks):
        decoded = decode_events(part)
        batches += pc.record_counts(len(part), decoded.errors, np.arange(len(part)) + 1_000 + i * chunk)
        if len(decoded):
            schemas, counts = pc.schemas_of(decoded)
            batches += [pc.value_counts(decoded), pc.schema_counts(schemas, counts)]
            batches += pc.joint_counts(decoded, pc.local_joint_sets(schemas, counts, opts.min_support, opts.joint_sets))

    def frame(batches):
        return spark.createDataFrame(pa.Table.from_batches(batches, schema=pc._ARROW), schema=pc.SCHEMA)

    def joint(sets):
        joint.calls.append(sets)
        return frame([b for part in chunks for b in pc.joint_counts(decode_events(part), sets)])

    joint.calls = []
    return frame(batches), joint


def assert_same_statistics(got: EventStatistics, want: EventStatistics) -> None:
    assert got.event_count == want.event_count
    assert set(got.attributes) == set(want.attributes)
    for a, w in want.attributes.items():
        g = got.attributes[a]
        assert g.presence == pytest.approx(w.presence, abs=1e-12), a
        assert g.distinct == w.distinct, a
        assert g.top_values == pytest.approx(w.top_values, abs=1e-12), a
        assert list(g.top_values) == list(w.top_values), a  # the same ranking, ties included
        assert g.quantiles == w.quantiles, a
        assert g.value_types == pytest.approx(w.value_types, abs=1e-12), a
    assert got.schemas == pytest.approx(want.schemas, abs=1e-12)
    assert set(got.joint) == set(want.joint)
    for s, w in want.joint.items():
        assert list(got.joint[s]) == list(w), s
        assert got.joint[s] == pytest.approx(w, abs=1e-12), s


def test_statistics_equal_a_direct_pandas_computation(spark):
    events = known_events()
    values = [encode_event(e, "json" if i % 3 == 0 else "avro") for i, e in enumerate(events)]
    opts = StatisticsOptions(top_k=3, quantiles=5, min_support=0.05, joint_sets=4, joint_top_k=4)
    partials, joint = partials_of(spark, values, opts)
    summary = summarize(partials)
    assert (summary.records, summary.events, summary.bad) == (len(events), len(events), 0)
    assert (summary.first_timestamp_ms, summary.last_timestamp_ms) == (1_000, 1_000 + len(events) - 1)
    got = compute_statistics(partials, opts, summary, joint)
    want = reference_statistics(events, opts)
    assert "rare" in got.attributes and not any("rare" in s for s in got.schemas)  # below min support
    assert got.attributes["mixed"].value_types.keys() == {"number", "string", "bool"}
    assert_same_statistics(got, want)
    # and it survives the Avro record
    back = EventStatistics.from_record(decode_statistics(encode_statistics(got.to_record())))
    assert back.to_record() == got.to_record()


def test_bad_records_are_counted_and_skipped(spark):
    events = known_events(120, seed=11)
    bad = [b"garbage", b"{not json", b"", encode_event({"a": 1})[:-2], b'{"": 1}', b"\x00\x00\x00\x00\x01\x00"]
    values = [encode_event(e) for e in events]
    mixed = values[:50] + bad[:3] + values[50:] + bad[3:]
    opts = StatisticsOptions(top_k=5, quantiles=3, joint_sets=2)
    partials, joint = partials_of(spark, mixed, opts, chunk=50)
    summary = summarize(partials)
    assert (summary.records, summary.events, summary.bad) == (len(mixed), len(events), len(bad))
    assert summary.bad_reasons and len(summary.bad_reasons) == 5  # six different reasons: the top five
    assert {c for _, c in summary.bad_reasons} == {1}
    got = compute_statistics(partials, opts, summary, joint)
    assert got.bad_records == len(bad)
    assert_same_statistics(got, reference_statistics(events, opts))


def test_joint_values_in_one_pass_when_batches_agree_and_two_when_not(spark):
    rng = random.Random(3)
    agree = [{a: rng.randint(1, 3) for a in "abcde"} for _ in range(200)]
    opts = StatisticsOptions(top_k=3, quantiles=3, joint_sets=4, joint_top_k=5)
    partials, joint = partials_of(spark, [encode_event(e) for e in agree], opts, chunk=50)
    got = compute_statistics(partials, opts, summarize(partials), joint)
    assert joint.calls == []  # every batch guessed (a,b), (a,c), (a,d), (a,e)
    assert set(got.joint) == {("a", "b"), ("a", "c"), ("a", "d"), ("a", "e")}
    assert_same_statistics(got, reference_statistics(agree, opts))
    # the first batches see x with y only, the last ones x with z only: each guesses its own pair
    disagree = [{"x": i % 3, "y": i % 2} for i in range(100)] + [{"x": i % 3, "z": i % 4} for i in range(100)]
    opts = StatisticsOptions(top_k=3, quantiles=3, joint_sets=1, joint_top_k=5)
    partials, joint = partials_of(spark, [encode_event(e) for e in disagree], opts, chunk=50)
    got = compute_statistics(partials, opts, summarize(partials), joint)
    assert joint.calls == [[("x", "y")]]
    assert_same_statistics(got, reference_statistics(disagree, opts))


def test_groups_too_big_for_the_driver_are_derived_in_spark_with_the_same_result(spark, caplog):
    """At most ``driver_rows`` merged rows per attribute, schema table and joint set reach the driver;
    bigger groups (here: price, movie, mixed, the schemas, the joint pairs) take the Spark path."""
    events = known_events()
    opts = StatisticsOptions(top_k=3, quantiles=5, min_support=0.05, joint_sets=4, joint_top_k=4, driver_rows=4)
    partials, joint = partials_of(spark, [encode_event(e) for e in events], opts)
    with caplog.at_level("INFO", logger="fastpubsub.stats_job.event_statistics"):
        got = compute_statistics(partials, opts, summarize(partials), joint)
    assert_same_statistics(got, reference_statistics(events, opts))
    assert {a for a, st in got.attributes.items() if st.distinct > 4} == {"price", "movie", "mixed"}
    assert {a for a, st in got.attributes.items() if st.distinct <= 4} == {"vip", "a", "b", "c", "rare"}
    log = caplog.text
    assert "3 attribute(s) with more than 4 distinct values derived in Spark" in log
    assert "more than 4 distinct schemas: frequent sets in Spark" in log
    assert "joint set(s) with more than 4 value combinations ranked in Spark" in log
    with pytest.raises(ValueError, match="driver-rows"):
        StatisticsOptions(driver_rows=0)


# --- Kafka ---------------------------------------------------------------------------------


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"test-events-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for v in values:
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(topic, value=v, on_delivery=lambda err, msg: err and errors.append(err), **kwargs)
    producer.flush(30)
    assert not errors


def test_reader_stops_at_the_end_offset_also_on_transaction_markers(broker):
    """Offsets 3, 6, 9 hold transaction markers; every range ends exactly where asked."""
    bs = broker.bootstrap_servers
    topic = _topic(bs)
    producer = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    expected = {}  # offset -> value of every data record
    for batch, commit in ((["c0", "c1", "c2"], True), (["a0", "a1"], False), (["c3", "c4"], True)):
        producer.begin_transaction()
        for v in batch:
            producer.produce(topic, value=v.encode())
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    _produce(bs, topic, [b"p0"])
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "t", "enable.partition.eof": True})
    try:
        low, end = log_bounds(consumer, topic, 0)
    finally:
        consumer.close()
    config = ClientFactory(bs)
    every = [m for ms in read_offset_range(config, topic, OffsetRange(0, low, end)) for m in ms]
    expected = {m.offset(): m.value() for m in every}
    markers = sorted(set(range(low, end)) - set(expected))
    assert markers, "the broker wrote no transaction markers"
    assert end - 1 not in markers and end == max(expected) + 1
    for start in range(low, end + 1):
        for stop in range(start, end + 1):
            got = [(m.offset(), m.value()) for ms in read_offset_range(config, topic, OffsetRange(0, start, stop), batch_size=2, timeout=10) for m in ms]
            assert got == [(o, v) for o, v in sorted(expected.items()) if start <= o < stop], (start, stop, markers)


def test_log_bounds_see_every_record_of_the_last_batch(broker):
    bs = broker.bootstrap_servers
    topic = _topic(bs)
    _produce(bs, topic, [b"x"] * 7)  # one batch: the broker's ListOffsets says 1
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "t", "enable.partition.eof": True})
    try:
        assert log_bounds(consumer, topic, 0) == (0, 7)
    finally:
        consumer.close()


def test_job_end_to_end_through_the_broker(broker, spark, tmp_path):
    """Events in, snapshot on the statistics topic, decoded back; the next run starts where this one ended."""
    bs = broker.bootstrap_servers
    topic = _topic(bs, partitions=2)
    stats_topic = f"test-statistics-{uuid.uuid4().hex[:8]}"
    events = known_events(300, seed=5)
    bad = [b"garbage", b'{"": 1}']
    values = [encode_event(e, "json" if i % 4 == 0 else "avro") for i, e in enumerate(events)]
    _produce(bs, topic, values[:150] + bad[:1], partition=0)
    _produce(bs, topic, values[150:] + bad[1:], partition=1)
    opts = StatisticsOptions(top_k=4, quantiles=5, min_support=0.05, joint_sets=3, joint_top_k=3)
    out = tmp_path / "stats.json"

    first = run_statistics_job(bs, topic, options=opts, output=out, statistics_topic=stats_topic, spark=spark, split_size=40)
    assert first.records == len(values) + len(bad)
    snapshot = latest_snapshot(bs, topic, stats_topic)
    assert snapshot is not None and snapshot.source == "spark" and snapshot.bad_records == 2
    assert [(o.partition, o.start, o.end) for o in snapshot.window.offsets] == [(0, 0, 151), (1, 0, 151)]
    assert snapshot.window.first_timestamp_ms <= snapshot.window.last_timestamp_ms
    assert_same_statistics(snapshot, reference_statistics(events, opts))
    assert EventStatistics.from_record(json.loads(out.read_text())).to_record() == snapshot.to_record()

    # nothing new: nothing published
    assert run_statistics_job(bs, topic, options=opts, output=None, statistics_topic=stats_topic, spark=spark).statistics is None
    # new events: the next snapshot covers them only
    more = known_events(60, seed=6)
    _produce(bs, topic, [encode_event(e) for e in more], partition=1)
    third = run_statistics_job(bs, topic, options=opts, output=None, statistics_topic=stats_topic, spark=spark)
    latest = latest_snapshot(bs, topic, stats_topic)
    assert [(o.partition, o.start, o.end) for o in latest.window.offsets] == [(0, 151, 151), (1, 151, 211)]
    assert third.statistics.event_count == latest.event_count == 60
    assert_same_statistics(latest, reference_statistics(more, opts))
    # an explicit offset window
    window = WindowSpec("earliest", start_offsets={0: 100}, end_offsets={0: 120, 1: 0})
    part = run_statistics_job(bs, topic, window, opts, output=None, publish=False, spark=spark).statistics
    assert part.event_count == 20
    assert_same_statistics(part, reference_statistics(events[100:120], opts))


def test_registered_avro_events_are_counted_by_path(broker, schema_registry, spark):
    """`pubsub stats --schema-registry`: a producer's nested Avro records are decoded in the workers with the schema
    under their id and counted as their attributes by path, next to fastpubsub's own events."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from fastpubsub.kafka.schema_registry import RegistryConfig
    from fastpubsub.stats_job.statistics_job import main

    bs = broker.bootstrap_servers
    topic = _topic(bs)
    config = RegistryConfig(schema_registry.url)
    schema = {"type": "record", "name": "Visit", "namespace": "stats", "fields": [
        {"name": "page", "type": "string"},
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [{"name": "country", "type": "string"}]}}]}
    serialize = AvroSerializer(config.client(), json.dumps(schema), conf={"auto.register.schemas": True})
    context = SerializationContext(topic, MessageField.VALUE)
    _produce(bs, topic, [serialize({"page": f"p{i % 2}", "user": {"country": "FR" if i < 6 else "DE"}}, context)
                         for i in range(8)] + [encode_event({"page": "p0"}, "json")])
    stats = run_statistics_job(bs, topic, WindowSpec("earliest"), output=None, publish=False, spark=spark,
                               schema_registry=config).statistics
    assert stats.event_count == 9 and stats.bad_records == 0
    assert stats.attributes["user.country"].presence == pytest.approx(8 / 9)
    assert stats.attributes["user.country"].top_values[(1, "FR")] == pytest.approx(6 / 8)
    with pytest.raises(SystemExit):  # the command line names a bad registry setting
        main(["-b", bs, "--topic", topic, "-R", "timeout=1"])


def test_the_snapshot_reaches_a_running_processor_and_the_clustering_reacts(bootstrap, start_processor, spark, tmp_path):
    """W0 subscriptions build an (a0, a1) table; the job's snapshot of events without a1 makes the processor drop it."""
    w0_subscriptions(bootstrap)
    p = start_processor()
    matcher = p.state.matcher
    assert len(matcher) == N_SUBSCRIPTIONS
    assert "a0,a1" in hash_tables(p.state.matcher), "uniform statistics: W0's two fixed equalities call for an (a0, a1) table"
    assert p.processor.task.statistics_feed.adopted == 0 and matcher.statistics.source != "spark"

    events = events_without_a1(1500)  # under 2000: too few for the online statistics to take over (engine.matcher)
    bad = [b"garbage", b'{"": 1}']
    send(bootstrap, topics.EVENTS, [(f"e{i}", codecs.encode_event(e)) for i, e in enumerate(events)]
         + [(None, b) for b in bad])
    p.wait_for(lambda: p.processor.events == len(events), timeout=60, what="the events matched")

    job = run_statistics_job(bootstrap, output=tmp_path / "statistics.json", spark=spark)
    assert job.records == len(events) + len(bad) and job.statistics.bad_records == len(bad)
    assert job.published is not None

    feed = p.processor.task.statistics_feed
    p.wait_for(lambda: feed.adopted == 1, what="the snapshot adopted by the running processor")
    assert matcher.statistics.source == "spark" and matcher.statistics.event_count == len(events)
    assert matcher.statistics.presence("a1") == 0.0 and matcher.statistics.presence("a0") == 1.0
    last = feed.last
    assert last["event_count"] == len(events) and last["at"] == f"{topics.STATISTICS}[0]@{job.published[1]}"
    assert "a0,a1" in last["tables_before"] and "a0,a1" not in last["tables_after"]
    assert last["tables_dropped"] >= 1 and "a0,a1" not in hash_tables(p.state.matcher)
    stats = p.stop()
    assert stats["task"]["statistics"]["snapshots_adopted"] == 1 and stats["task"]["statistics"]["bad_snapshots"] == 0
    assert stats["dead_letters"] == {topics.EVENTS: len(bad)}  # the processor's own verdict on the bad events


def test_command_line_values():
    assert parse_duration("10m") == 600 and parse_duration("90s") == 90 and parse_duration("2h") == 7200
    assert parse_offsets("0:10, 3:7") == {0: 10, 3: 7}
    assert parse_time("1970-01-01T00:00:01Z") == 1000 and parse_time("2500") == 2500
    for bad in ("x", "0", "10 minutes"):
        with pytest.raises(Exception):
            parse_duration(bad)
    with pytest.raises(ValueError, match="PARTITION:OFFSET"):
        parse_offsets("0-10")
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_time("yesterday")
    with pytest.raises(ValueError, match="--from"):
        WindowSpec("latest")


def test_the_compose_service_runs_a_valid_job_command():
    from pathlib import Path

    import yaml

    from fastpubsub.stats_job.statistics_job import build_parser

    compose = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())
    command = compose["services"]["statistics"]["command"]
    assert command[:3] == ["python", "-m", "fastpubsub.stats_job"]
    args = build_parser().parse_args(command[3:])
    assert args.every == 600 and args.bootstrap_servers == "kafka:9092"


def test_no_topic_is_created_by_looking_for_it(broker, spark):
    """Looking for a missing topic by name must not create it (on a broker with auto.create.topics.enable)."""
    bs = broker.bootstrap_servers
    missing = f"test-missing-{uuid.uuid4().hex[:8]}"
    assert latest_snapshot(bs, "pubsub.events", topic=missing) is None
    with pytest.raises(RuntimeError, match="does not exist"):
        run_statistics_job(bs, missing, output=None, publish=False, spark=spark)
    assert missing not in AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics


def test_pubsub_stats_is_the_job_command_line():
    from click.testing import CliRunner

    from fastpubsub.cli import main

    out = CliRunner().invoke(main, ["stats", "--help"])
    assert out.exit_code == 0 and out.output.startswith("usage: pubsub stats")
    for option in ("--bootstrap-servers", "PUBSUB_BOOTSTRAP_SERVERS", "default 127.0.0.1:9092", "--every", "--master",
                   "spark://HOST:PORT",
                   "--no-publish", "--output", "-X KEY=VALUE", "--client-config FILE"):
        assert option in out.output, option
    bad = CliRunner().invoke(main, ["stats", "--every", "10m", "--from", "earliest"])
    assert bad.exit_code == 2 and "--every reads what is new since the last run" in bad.output
    bad = CliRunner().invoke(main, ["stats", "--client-config", "/nonexistent/client.properties"])
    assert bad.exit_code == 2 and "/nonexistent/client.properties" in bad.output
