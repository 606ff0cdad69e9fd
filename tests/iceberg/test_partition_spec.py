"""iceberg.partition.spec on a real broker: a new table gets the topic's spec, its data files hold
the partition values pyiceberg's planning shows (and every row of a file has them), altering the
spec evolves the table (files written before keep theirs), and a bad spec is refused by name."""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import BinaryType

from strom.iceberg.table import identifier, open_catalog
from tests.iceberg.support import assert_exactly, create_topic, table_rows, wait_for_rows
from tests.iceberg.test_translator import ICEBERG

DAY_MS = 24 * 3600 * 1000
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def produce_at(bootstrap: str, topic: str, count: int, prefix: str, days: int) -> dict[tuple[int, int], dict]:
    """``count`` records with 12 keys, their timestamps spread over ``days`` days from BASE_MS."""
    acked: dict[tuple[int, int], dict] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})

    def report(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = {
                "key": msg.key(),
                "value": msg.value(),
                "timestamp": msg.timestamp()[1],
                "headers": [],
            }

    for i in range(count):
        at = BASE_MS + (i % days) * DAY_MS + i * 1000
        producer.produce(
            topic, key=f"k{i % 12}".encode(), value=f"{prefix}{i}".encode(), timestamp=at, on_delivery=report
        )
    assert producer.flush(30) == 0
    return acked


def file_partitions(table) -> list[tuple[int, dict, list[dict]]]:
    """(spec id, partition values by field name, the file's rows) of each data file pyiceberg plans."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
    found = []
    for task in table.scan().plan_files():
        spec = table.specs()[task.file.spec_id]
        values = {field.name: task.file.partition[i] for i, field in enumerate(spec.fields)}
        found.append((task.file.spec_id, values, scan.to_table([task]).to_pylist()))
    return found


def test_day_and_bucket_spec_partitions_the_files_and_an_alter_evolves_it(iceberg_broker):
    bucket = BucketTransform(4).transform(BinaryType())
    broker, catalog = iceberg_broker(ICEBERG)
    spec = "(day(redpanda.timestamp), bucket(4, key))"
    create_topic(broker.bootstrap, "dated", 2, **{"redpanda.iceberg.partition.spec": spec})
    committed = produce_at(broker.bootstrap, "dated", 240, "a", days=3)
    wait_for_rows(catalog, "dated", len(committed))
    table = open_catalog(catalog).load_table(identifier("dated"))
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("kafka_day", "day"),
        ("key_bucket_4", "bucket[4]"),
    ]
    files = file_partitions(table)
    seen = set()
    for _spec_id, values, rows in files:
        assert rows, "an empty data file"
        for row in rows:  # every row of a file is in the file's partition
            day = (row["kafka"]["timestamp"].date() - datetime.date(1970, 1, 1)).days
            assert (values["kafka_day"], values["key_bucket_4"]) == (day, bucket(row["key"]))
        seen.add((values["kafka_day"], values["key_bucket_4"]))
    days = {(BASE_MS // DAY_MS) + d for d in range(3)}
    assert {d for d, _ in seen} == days
    assert len({b for _, b in seen}) > 1

    # altered to unpartitioned: the table's spec evolves, the new files have none, the old keep theirs
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(
        "topic",
        "dated",
        incremental_configs=[ConfigEntry("iceberg.partition.spec", "()", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    committed |= produce_at(broker.bootstrap, "dated", 60, "b", days=1)
    wait_for_rows(catalog, "dated", len(committed))
    time.sleep(1.5)  # more rounds: nothing more may arrive
    assert_exactly(table_rows(catalog, "dated"), committed, {})
    table = open_catalog(catalog).load_table(identifier("dated"))
    assert table.spec().fields == ()
    by_spec: dict[int, int] = {}
    for spec_id, values, rows in file_partitions(table):
        by_spec[spec_id] = by_spec.get(spec_id, 0) + len(rows)
        if spec_id == table.spec().spec_id:
            assert values == {}
    assert by_spec == {0: 240, table.spec().spec_id: 60}
    assert "partition.spec field" not in broker.read_log()


def test_a_bad_spec_is_refused_by_name_at_create_and_alter(iceberg_broker):
    broker = iceberg_broker(ICEBERG).broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bad = {"iceberg.mode": "key_value", "iceberg.partition.spec": "(minute(kafka.timestamp))"}
    refused = admin.create_topics([NewTopic("bad", 1, 1, config=bad)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG") as refusal:
        refused["bad"].result(30)
    assert "iceberg.partition.spec: '(minute(kafka.timestamp))': unknown transform 'minute'" in str(refusal.value)

    create_topic(broker.bootstrap, "good", 1)
    for key, value, why in [
        ("redpanda.iceberg.partition.spec", "(hour(key))", "key cannot be partitioned by hour"),
        ("iceberg.partition.spec", "(bucket(key))", "bucket takes a width first"),
        ("iceberg.partition.spec", "(kafka.nope)", "no column 'kafka.nope'"),
    ]:
        entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("topic", "good", incremental_configs=[entry])
        with pytest.raises(KafkaException, match="INVALID_CONFIG") as refusal:
            admin.incremental_alter_configs([resource])[resource].result(30)
        assert f"{key}: '{value}': {why}" in str(refusal.value)
    shown = admin.describe_configs([ConfigResource("topic", "good")])
    configs = {k: e.value for k, e in next(iter(shown.values())).result(30).items()}
    assert configs["iceberg.partition.spec"] == configs["redpanda.iceberg.partition.spec"] == "(hour(kafka.timestamp))"


def test_a_spec_naming_a_column_the_table_lacks_is_reported_and_left_out(iceberg_broker):
    """A name the topic config cannot check (a value column, in key_value mode absent) does not stop
    translation: the table is partitioned by the rest, and the broker says which field it left out."""
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "loose", 1, **{"iceberg.partition.spec": "(kafka.partition, truncate(4, name))"})
    committed = produce_at(broker.bootstrap, "loose", 30, "a", days=1)
    wait_for_rows(catalog, "loose", len(committed))
    assert_exactly(table_rows(catalog, "loose"), committed, {})
    table = open_catalog(catalog).load_table(identifier("loose"))
    assert [f.name for f in table.spec().fields] == ["kafka_partition"]
    deadline = time.monotonic() + 10
    while "truncate(4, name): the table has no column name" not in broker.read_log():
        assert time.monotonic() < deadline, "the left-out field was not reported"
        time.sleep(0.2)
