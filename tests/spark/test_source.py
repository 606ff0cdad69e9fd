"""The strom source in Spark (local[2]) against a real broker process."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from tests.spark.conftest import create_topic, produce, strom_reader, wait_for

KAFKA_COLUMNS = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
]


def test_batch_read_returns_exactly_the_produced_records(spark, broker):
    create_topic(broker.bootstrap, "orders", 3)
    records = [
        (
            f"value-{i}".encode(),
            f"key-{i}".encode() if i % 5 else None,
            i % 3,
            [("source", b"test"), ("n", str(i).encode())] if i % 2 else None,
        )
        for i in range(300)
    ]
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    placed = produce(broker.bootstrap, "orders", records)
    after = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)

    df = strom_reader(spark, broker.bootstrap, subscribe="orders", includeHeaders="true")
    assert df.dtypes == KAFKA_COLUMNS + [("headers", "array<struct<key:string,value:binary>>")]
    rows = df.collect()
    expected = {
        (p, o): (v, k, [tuple(h) for h in hs] if hs else None) for (v, k, _, hs), (p, o) in zip(records, placed)
    }
    got = {
        (r.partition, r.offset): (r.value, r.key, [(h.key, h.value) for h in r.headers] if r.headers else None)
        for r in rows
    }
    assert len(rows) == 300 and got == expected
    assert {r.topic for r in rows} == {"orders"} and {r.timestampType for r in rows} == {0}
    stamps = [r.timestamp.timestamp() for r in rows]  # naive local datetimes: compare as epoch seconds
    assert before.timestamp() <= min(stamps) and max(stamps) <= after.timestamp()

    # without includeHeaders: exactly Spark's Kafka columns
    assert strom_reader(spark, broker.bootstrap, subscribe="orders").dtypes == KAFKA_COLUMNS

    # offset bounds (an unnamed partition ends at latest), minPartitions splitting, subscribePattern
    ranged = strom_reader(
        spark,
        broker.bootstrap,
        subscribePattern="ord.*",
        startingOffsets=json.dumps({"orders": {"0": 10}}),
        endingOffsets=json.dumps({"orders": {"0": 60, "2": 5}}),
        minPartitions="8",
    )
    assert ranged.rdd.getNumPartitions() >= 8
    offsets = sorted((r.partition, r.offset) for r in ranged.select("partition", "offset").collect())
    assert offsets == ([(0, o) for o in range(10, 60)] + [(1, o) for o in range(100)] + [(2, o) for o in range(5)])


def test_fetch_reads_and_client_library_reads_agree(spark, broker):
    """Big compressed batches go through the bulk decoder; read_committed takes confluent-kafka."""
    create_topic(broker.bootstrap, "bulk", 2)
    records = [
        (
            None if i % 97 == 0 else bytes([65 + i % 26]) * (i % 300),
            None if i % 7 == 0 else b"key-%d" % i,
            i % 2,
            [("n", str(i).encode()), ("empty", None)] if i % 3 == 0 else None,
        )
        for i in range(3000)
    ]
    placed = produce(
        broker.bootstrap, "bulk", records, **{"linger.ms": 200, "batch.size": 1_000_000, "compression.type": "lz4"}
    )
    expected = {
        (p, o): (v, k, [tuple(h) for h in hs] if hs else None) for (v, k, _, hs), (p, o) in zip(records, placed)
    }

    def read(**extra):
        df = strom_reader(spark, broker.bootstrap, subscribe="bulk", includeHeaders="true", **extra)
        return {
            (r.partition, r.offset): (r.value, r.key, [(h.key, h.value) for h in r.headers] if r.headers else None)
            for r in df.collect()
        }

    assert read() == expected
    assert read(**{"kafka.isolation.level": "read_committed"}) == expected
    # a range that starts and ends inside batches is cut to the offsets asked for
    ranged = strom_reader(
        spark,
        broker.bootstrap,
        subscribe="bulk",
        startingOffsets=json.dumps({"bulk": {"0": 333, "1": 0}}),
        endingOffsets=json.dumps({"bulk": {"0": 1234, "1": 1}}),
    )
    assert sorted((r.partition, r.offset) for r in ranged.select("partition", "offset").collect()) == (
        [(0, o) for o in range(333, 1234)] + [(1, 0)]
    )


def test_fail_on_data_loss(spark, broker):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "retained", 1)
    produce(broker.bootstrap, "retained", [(b"v%d" % i, None, 0, None) for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([TopicPartition("retained", 0, 40)], request_timeout=30).values():
        future.result()
    start = json.dumps({"retained": {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        strom_reader(spark, broker.bootstrap, subscribe="retained", startingOffsets=start).count()
    rows = (
        strom_reader(spark, broker.bootstrap, subscribe="retained", startingOffsets=start, failOnDataLoss="false")
        .select("offset")
        .collect()
    )
    assert sorted(r.offset for r in rows) == list(range(40, 100))


def _stream_to_parquet(spark, bootstrap, checkpoint, out, trigger, **options):
    df = strom_reader(spark, bootstrap, streaming=True, **options)
    writer = (
        df.select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )
    return writer.trigger(**trigger).start()


def test_restart_from_checkpoint_neither_skips_nor_repeats(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "clicks", 2)
    produce(broker.bootstrap, "clicks", [(b"a%d" % i, None, i % 2, None) for i in range(400)])
    options = dict(subscribe="clicks", startingOffsets="earliest", maxOffsetsPerTrigger="50")
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    # first run: continuous micro-batches, stopped after a few of them
    query = _stream_to_parquet(spark, broker.bootstrap, checkpoint, out, {"processingTime": "0 seconds"}, **options)
    try:
        wait_for(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 150, what="three batches")
    finally:
        query.stop()
    first = [p["numInputRows"] for p in query.recentProgress]
    assert all(n <= 50 for n in first), first

    # more records arrive while the query is down, then it resumes from its checkpoint to the end
    produce(broker.bootstrap, "clicks", [(b"b%d" % i, None, i % 2, None) for i in range(200)])
    query = _stream_to_parquet(spark, broker.bootstrap, checkpoint, out, {"availableNow": True}, **options)
    assert query.awaitTermination(120), "availableNow query did not finish"
    assert query.exception() is None
    second = [p["numInputRows"] for p in query.recentProgress]
    assert second and all(n <= 50 for n in second), second  # maxOffsetsPerTrigger bounds each batch
    assert sum(first) + sum(second) == 600

    rows = spark.read.parquet(str(out)).collect()
    keys = sorted((r.partition, r.offset) for r in rows)
    assert keys == sorted([(0, o) for o in range(300)] + [(1, o) for o in range(300)])  # no gap, no repeat
    assert sorted(r.value for r in rows) == sorted([b"a%d" % i for i in range(400)] + [b"b%d" % i for i in range(200)])


def test_max_offsets_per_trigger_and_new_partitions(spark, broker):
    create_topic(broker.bootstrap, "logs-a", 3)
    produce(broker.bootstrap, "logs-a", [(b"x%d" % i, None, i % 3, None) for i in range(1000)])
    df = strom_reader(
        spark,
        broker.bootstrap,
        streaming=True,
        subscribePattern="logs-.*",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="300",
    )
    query = df.writeStream.format("memory").queryName("bounded").trigger(processingTime="0 seconds").start()
    try:
        wait_for(lambda: spark.sql("select count(*) c from bounded").first().c == 1000, what="1000 rows")
        # a topic created later that matches the pattern is picked up from its earliest offset
        create_topic(broker.bootstrap, "logs-b", 2)
        produce(broker.bootstrap, "logs-b", [(b"y%d" % i, None, i % 2, None) for i in range(100)])
        wait_for(lambda: spark.sql("select count(*) c from bounded").first().c == 1100, what="1100 rows")
        time.sleep(1)
        sizes = [p["numInputRows"] for p in query.recentProgress]
    finally:
        query.stop()
    assert max(sizes) <= 300 and sum(sizes) == 1100, sizes
    assert sum(1 for n in sizes if n == 300) >= 3
    got = spark.sql("select topic, count(*) c from bounded group by topic order by topic").collect()
    assert [(r.topic, r.c) for r in got] == [("logs-a", 1000), ("logs-b", 100)]


def test_a_batch_read_of_nothing_subscribed_is_empty(spark, broker):
    """A pattern that matches no topic plans no partition; Spark then reads one stand-in partition
    of its own (an InputPartition of None), which yields no row instead of failing the task."""
    df = strom_reader(spark, broker.bootstrap, subscribePattern="no-such-topic-.*")
    assert df.count() == 0
    assert df.collect() == []


def test_a_batch_dataframe_keeps_the_offsets_of_its_first_action(spark, broker):
    """Spark's Python Data Source API plans a batch DataFrame's partitions once and keeps them
    (PythonDataSourceV2 caches its read info), so every action on it reads the same offset ranges;
    records produced later appear in a DataFrame made by a new ``load()``. Spark's Kafka source
    instead asks for the latest offsets again on each action: the README says so."""
    create_topic(broker.bootstrap, "growing", 2)
    produce(broker.bootstrap, "growing", [(f"a{i}".encode(), None, i % 2, None) for i in range(10)])
    df = strom_reader(spark, broker.bootstrap, subscribe="growing")
    first = sorted((r.partition, r.offset, r.value) for r in df.collect())
    assert len(first) == 10

    produce(broker.bootstrap, "growing", [(f"b{i}".encode(), None, i % 2, None) for i in range(6)])
    assert df.count() == 10
    assert sorted((r.partition, r.offset, r.value) for r in df.collect()) == first

    again = strom_reader(spark, broker.bootstrap, subscribe="growing")
    values = sorted(r.value for r in again.collect())
    assert values == sorted([f"a{i}".encode() for i in range(10)] + [f"b{i}".encode() for i in range(6)])
