"""Iceberg topics in the schema modes on a real broker serving the Schema Registry, fed by
confluent-kafka's AvroSerializer: typed columns from the schemas, the table evolving with a new
schema version, and the records that cannot be translated in ``<topic>~dlq`` with their reasons,
each record in one of the two tables once (kill -9 included)."""

from __future__ import annotations

import json
import random
import struct
import time

from confluent_kafka.admin import AdminClient, NewTopic

from strom.iceberg.table import CatalogSettings, identifier, open_catalog
from tests.iceberg.avro_support import AvroProducer, assert_exactly_once, registry_url, wait_for_tables

ICEBERG = {
    "iceberg.enabled": "true",
    "iceberg.target.lag.ms": "500",
    "schema.registry.listeners": "http://127.0.0.1:0",
}


def catalog_of(data_dir) -> CatalogSettings:
    return CatalogSettings.for_broker((str(data_dir),), None, None, 1)


def create_topic(bootstrap: str, topic: str, mode: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config={"iceberg.mode": mode})], request_timeout=30)
    futures[topic].result(timeout=30)


def column_types(catalog: CatalogSettings, topic: str) -> dict[str, str]:
    schema = open_catalog(catalog).load_table(identifier(topic)).schema()
    return {field.name: str(field.field_type) for field in schema.fields}


def test_id_prefix_mode_types_evolves_and_sends_bad_records_to_the_dead_letter_table(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "orders", "value_schema_id_prefix")
    producer = AvroProducer(broker.bootstrap, registry_url(broker.data_dir), "orders")
    producer.orders(120, version=1)
    producer.flush()
    v1 = producer.client.get_latest_version("orders-value").schema_id
    producer.bad_records(v1)
    producer.flush()
    wait_for_tables(catalog, "orders", len(producer.good), len(producer.bad))
    types = column_types(catalog, "orders")
    assert (types["quantity"], types["price"]) == ("int", "float") and "coupon" not in types
    assert (types["day"], types["placed"], types["amount"], types["ref"]) == (
        "date",
        "timestamptz",
        "decimal(10, 2)",
        "string",  # not Iceberg's uuid: Spark's Parquet reader refuses it
    )
    assert types["tags"].startswith("list<") and types["attributes"].startswith("map<")
    # the second version: the table gains its column and widens two, old rows keep theirs
    producer.orders(80, version=2, start=120)
    producer.orders(20, version=1, start=200)  # an old writer still producing
    producer.flush()
    rows, dead = wait_for_tables(catalog, "orders", len(producer.good), len(producer.bad))
    time.sleep(1.5)  # more rounds: nothing more may arrive
    rows, dead = wait_for_tables(catalog, "orders", 0, 0)
    assert_exactly_once(rows, dead, producer)
    types = column_types(catalog, "orders")
    assert (types["quantity"], types["price"], types["coupon"]) == ("long", "double", "string")
    assert (types["kafka"].startswith("struct<"), types["key"]) == (True, "binary")
    assert "translating orders failed" not in broker.read_log()


def test_latest_mode_reads_every_record_as_the_latest_version(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "latest", "value_schema_latest")
    producer = AvroProducer(broker.bootstrap, registry_url(broker.data_dir), "latest")
    producer.orders(50, version=1)
    producer.flush()
    wait_for_tables(catalog, "latest", len(producer.good), 0)
    assert "coupon" not in column_types(catalog, "latest")
    producer.orders(50, version=2, start=50)
    producer.orders(10, version=1, start=100)  # read as the latest: coupon is its default, null
    producer.bad_records(producer.client.get_latest_version("latest-value").schema_id)
    producer.flush()
    rows, dead = wait_for_tables(catalog, "latest", len(producer.good), len(producer.bad))
    time.sleep(1.5)
    rows, dead = wait_for_tables(catalog, "latest", 0, 0)
    assert_exactly_once(rows, dead, producer)
    assert column_types(catalog, "latest")["quantity"] == "long"


def test_kill_9_neither_loses_nor_duplicates_rows_or_dead_letters(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "crashy", "value_schema_id_prefix", partitions=2)
    rng = random.Random(31)
    schema_id = None
    producers = []
    for round_ in range(3):
        producer = AvroProducer(broker.bootstrap, registry_url(broker.data_dir), "crashy")
        producer.orders(150, version=1 + round_ % 2, start=round_ * 1000)
        producer.flush()
        schema_id = schema_id or producer.client.get_latest_version("crashy-value").schema_id
        producer.bad_records(schema_id)
        producer.flush()
        producers.append(producer)
        time.sleep(rng.uniform(0.3, 1.2))  # a kill at a moment no one chose
        broker.kill()
        broker.start()
    every = producers[0]
    for other in producers[1:]:
        every.good |= other.good
        every.bad |= other.bad
    wait_for_tables(catalog, "crashy", len(every.good), len(every.bad), timeout_s=90)
    time.sleep(1.5)
    rows, dead = wait_for_tables(catalog, "crashy", 0, 0)
    assert_exactly_once(rows, dead, every)


def test_schemas_with_no_iceberg_columns_send_their_records_to_the_dead_letter_table(iceberg_broker):
    """A union of two non-null types, a field named like strom's own column, a type the table's
    column cannot widen to (registered under other subjects, so no compatibility check stops them):
    their records are dead letters with the reason, and the good records around them still land."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema

    from tests.iceberg.avro_support import ORDER_V1, order

    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "odd", "value_schema_id_prefix", partitions=1)
    producer = AvroProducer(broker.bootstrap, registry_url(broker.data_dir), "odd")
    producer.orders(10, version=1)
    producer.flush()
    wait_for_tables(catalog, "odd", 10, 0)
    client = producer.client
    union = {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]}
    named = {"type": "record", "name": "N", "fields": [{"name": "kafka", "type": "string"}]}
    narrowed = {**ORDER_V1, "fields": [{"name": "quantity", "type": "string"}]}  # int column, string value
    cases = []
    for subject, schema, body, reason in (
        ("u-value", union, b"\x00\x02", "a union of several non-null types has no Iceberg type"),
        ("n-value", named, b"\x02a", "the field kafka has the name of a column strom writes itself"),
        ("q-value", narrowed, b"\x02a", "does not fit the table's columns"),
    ):
        schema_id = client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
        cases.append((b"\x00" + struct.pack(">I", schema_id) + body, reason))
    raw = Producer({"bootstrap.servers": broker.bootstrap})
    acked = {}
    for value, reason in cases:
        raw.produce("odd", value=value, on_delivery=lambda e, m, r=reason: acked.__setitem__(m.offset(), r))
    assert raw.flush(30) == 0
    producer.orders(5, version=1, start=10)
    producer.flush()
    rows, dead = wait_for_tables(catalog, "odd", 15, 3)
    assert sorted(r["id"] for r in rows) == sorted(order(i, 1)["id"] for i in range(15))
    reasons = {row["kafka"]["offset"]: row["reason"] for row in dead}
    assert set(reasons) == set(acked)
    for offset, reason in acked.items():
        assert reason in reasons[offset], (reasons[offset], reason)
    assert column_types(catalog, "odd")["quantity"] == "int"


def test_switching_modes_keeps_one_table_going(iceberg_broker):
    """value_schema_id_prefix -> key_value -> value_schema_id_prefix on a live topic: each mode's
    records land in the one table (the other mode's columns null; key_value's binary value column is
    added to the typed table), and no round gets stuck on the columns it finds."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    from strom.iceberg.table import table_mode

    def switch(mode: str) -> None:
        resource = ConfigResource(
            "topic",
            "switched",
            incremental_configs=[ConfigEntry("iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET)],
        )
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until the answer came
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    def plain(count: int, prefix: str) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(count):
            producer.produce("switched", value=f"{prefix}{i}".encode(), key=b"p")
        assert producer.flush(30) == 0

    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "switched", "value_schema_id_prefix", partitions=1)
    producer = AvroProducer(broker.bootstrap, registry_url(broker.data_dir), "switched")
    producer.orders(5, version=1)
    producer.flush()
    wait_for_tables(catalog, "switched", 5, 0)
    assert "value" not in column_types(catalog, "switched")
    switch("key_value")
    plain(5, "b")
    wait_for_tables(catalog, "switched", 10, 0)
    switch("value_schema_id_prefix")
    producer.orders(5, version=1, start=5)
    producer.flush()
    rows, dead = wait_for_tables(catalog, "switched", 15, 0)
    table = open_catalog(catalog).load_table(identifier("switched"))
    assert table_mode(table) == "value_schema_id_prefix" and dead == []
    assert column_types(catalog, "switched")["value"] == "binary"
    by_offset = {r["kafka"]["offset"]: r for r in rows}
    assert sorted(by_offset) == list(range(15))
    typed = [(by_offset[o]["id"], by_offset[o]["value"]) for o in (*range(5), *range(10, 15))]
    assert typed == [(f"o-1-{i}", None) for i in range(10)]  # typed rows: no raw value
    assert [(by_offset[o]["value"], by_offset[o]["id"]) for o in range(5, 10)] == [(b"b%d" % i, None) for i in range(5)]
    assert "translating switched failed" not in broker.read_log()
