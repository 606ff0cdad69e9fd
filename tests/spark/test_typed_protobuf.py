"""value.format=protobuf in the strom source and sink, against a real broker serving its Schema
Registry, with records written and read by confluent-kafka's own ProtobufSerializer and
ProtobufDeserializer: two compatible schema versions read as one struct column, corrupt records
per mode, and the sink's derived schema registered and read back exactly once."""

from __future__ import annotations

import datetime as dt

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import frame, message_class
from strom.spark.protobuf_types import load
from tests.integration.test_schema_registry import registry_url
from tests.protobuf_support import AT, ORDER_V1, ORDER_V2, expected, order, order_class
from tests.spark.conftest import create_topic, strom_reader
from tests.spark.test_typed import broker, produce_raw, read_back  # noqa: F401 - broker is a fixture

UTC = dt.UTC


def as_expected(row) -> dict:
    """A Row's value as ``expected`` gives it (Spark gives timestamps in the session's zone, without one)."""
    value = row.value.asDict(recursive=True)
    return {**value, "at": value["at"].replace(tzinfo=UTC)}


def test_protobuf_format_reads_two_versions_and_writes_what_the_deserializer_reads(spark, broker):  # noqa: F811
    from pyspark.sql import functions as F

    url = registry_url(broker)
    client = SchemaRegistryClient({"url": url})
    create_topic(broker.bootstrap, "orders-pb", 1)
    context = SerializationContext("orders-pb", MessageField.VALUE)
    values = []
    for version, text, ids in ((1, ORDER_V1, range(0, 30)), (2, ORDER_V2, range(30, 60))):
        cls = order_class(text)
        serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        values += [serializer(order(cls, i), context) for i in ids]
    assert client.get_versions("orders-pb-value") == [1, 2]
    offsets = produce_raw(broker.bootstrap, "orders-pb", values, 0)
    latest = client.get_latest_version("orders-pb-value").schema_id
    corrupt = [b"not protobuf", frame(latest) + b"\xff\xff\xff", frame(latest, (1,)) + b"\x08\x01"]
    offsets += produce_raw(broker.bootstrap, "orders-pb", corrupt, 0)
    options = {"subscribe": "orders-pb", "value.format": "protobuf", "schema.registry.url": url}

    df = strom_reader(spark, broker.bootstrap, mode="PERMISSIVE", **options)
    assert dict(df.dtypes)["value"] == (
        "struct<id:bigint,item:string,price:double,kind:string,coupon:string,at:timestamp,"
        "ship:struct<city:string>,tags:array<string>,counts:map<string,int>,channel:string>"
    )
    rows = df.orderBy("offset").collect()
    assert [as_expected(r) for r in rows[:60]] == [expected(i, 1 if i < 30 else 2) for i in range(60)]
    assert [(r.value, r._corrupt_value) for r in rows[60:]] == [(None, raw) for raw in corrupt]
    with pytest.raises(Exception) as failed:
        strom_reader(spark, broker.bootstrap, **options).collect()
    message = str(failed.value)
    assert f"topic orders-pb partition 0 offset {offsets[60]}" in message, message
    assert "does not decode as PROTOBUF" in message and "no Confluent schema id prefix" in message
    # pinned to version 1: the channel field is not a column, version-2 records are still read
    pinned = strom_reader(spark, broker.bootstrap, mode="PERMISSIVE", **options, **{"value.schema.version": "1"})
    assert "channel" not in dict(pinned.dtypes)["value"]
    assert pinned.where("value IS NOT NULL").count() == 60

    # the sink: a projection, its schema derived from the struct and registered on the first write
    create_topic(broker.bootstrap, "orders-pb-out", 1)
    good = strom_reader(spark, broker.bootstrap, mode="PERMISSIVE", **options).where("value IS NOT NULL")
    (
        good.select(F.struct("value.id", "value.item", "value.kind", "value.ship", "value.at").alias("value"))
        .write.format("strom")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "orders-pb-out")
        .option("value.format", "protobuf")
        .option("schema.registry.url", url)
        .save()
    )
    registered = client.get_latest_version("orders-pb-out-value")
    assert registered.schema.schema_type == "PROTOBUF"
    out_cls = message_class(load(registered.schema.schema_str).message())
    deserializer = ProtobufDeserializer(out_cls, {"use.deprecated.format": False})
    got = read_back(broker.bootstrap, "orders-pb-out", 1, deserializer, frame(registered.schema_id)[:5])
    assert sorted((m.id, m.item, m.ship.city, m.at.seconds) for m in got) == [
        (i, f"item-{i}-ü", f"c{i % 4}", AT + i) for i in range(60)
    ]
    # kind was a string column: written as a proto3 string, not an enum, and nullable (optional)
    assert sorted(m.kind for m in got)[:1] == ["BUY"] and all(m.HasField("kind") for m in got)
