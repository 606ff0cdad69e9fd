"""Typed records in Spark without jars: the strom source and sink with value.format=avro and json, against a
real broker serving its Schema Registry, with records written and read by confluent-kafka's own
Avro serializer and deserializer."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.spark.conftest import WAIT_S
from tests.spark.typed_support import TypedBroker, produce_raw

EVENT_V1 = {
    "type": "record",
    "name": "Event",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "price", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY", "RETURN"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {
            "name": "where",
            "type": {"type": "record", "name": "Where", "fields": [{"name": "shop", "type": "int"}]},
        },
    ],
}
# version 2: a field with a default (BACKWARD compatible), so v1 records read with v2 get it
EVENT_V2 = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "channel", "type": "string", "default": "web"}]}
UTC = dt.UTC


def event(i: int, version: int) -> dict:
    record = {
        "id": i,
        "user": f"user-{i % 7}-ü",
        "price": i * 1.25,
        "paid": i % 2 == 0,
        "kind": ["VIEW", "BUY", "RETURN"][i % 3],
        "coupon": None if i % 4 else f"C{i}",
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 30),
        "at": dt.datetime(2026, 3, 1, tzinfo=UTC) + dt.timedelta(milliseconds=1000 * i + 7),
        "amount": decimal.Decimal(i * 101 - 500) / 100,
        "where": {"shop": i % 5},
    }
    if version == 2:
        record["channel"] = "app" if i % 2 else "store"
    return record


def produce_avro(bootstrap: str, url: str, topic: str, schema: dict, records: list[dict], partition_of) -> list:
    """Records through confluent-kafka's AvroSerializer (auto-registering ``schema``); [(partition, offset)]."""
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    placed: list = [None] * len(records)

    def report(i):
        return lambda err, msg: placed.__setitem__(i, err if err else (msg.partition(), msg.offset()))

    for i, record in enumerate(records):
        producer.produce(
            topic,
            serializer(record, context),
            key=b"k%d" % record["id"],
            partition=partition_of(i),
            on_delivery=report(i),
        )
    assert producer.flush(WAIT_S) == 0
    assert all(isinstance(p, tuple) for p in placed), placed
    return placed


def as_spark(record: dict) -> dict:
    """What a Spark Row of the decoded value holds for ``record`` (timestamps compared as instants)."""
    return {**record, "at": record["at"].timestamp(), "where": dict(record["where"])}


def row_dict(row) -> dict:
    value = row.asDict(recursive=True)
    value["at"] = value["at"].replace(tzinfo=UTC).timestamp() if value["at"].tzinfo is None else value["at"]
    return value


def test_streaming_read_of_two_schema_versions_as_typed_columns(spark, typed_broker, tmp_path):
    """v1 and v2 records, written by AvroSerializer, come out as columns of the latest (v2) schema,
    row by row as produced; v1 records get the new field's default."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    typed = typed_broker
    typed.topics("events", partitions=2)
    v1 = [event(i, 1) for i in range(150)]
    v2 = [event(i, 2) for i in range(150, 300)]
    placed = produce_avro(typed.bootstrap, typed.url, "events", EVENT_V1, v1, lambda i: i % 2)
    placed += produce_avro(typed.bootstrap, typed.url, "events", EVENT_V2, v2, lambda i: i % 2)
    assert typed.client.get_versions("events-value") == [1, 2]

    source = typed.read(
        "avro",
        streaming=True,
        subscribe="events",
        startingOffsets="earliest",
        maxOffsetsPerTrigger="120",  # several micro-batches
    )
    value_type = dict(source.dtypes)["value"]
    assert value_type.startswith("struct<id:bigint,user:string,price:double,paid:boolean,kind:string,")
    assert value_type.endswith("amount:decimal(12,2),where:struct<shop:int>,channel:string>")
    assert dict(source.dtypes)["key"] == "binary"  # key.format defaults to binary
    query = (
        source.selectExpr("partition", "offset", "key", "value")
        .writeStream.format("memory")
        .queryName("avro_events")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180) and query.exception() is None
    rows = spark.sql("SELECT * FROM avro_events").collect()
    expected = {pl: {**r, "channel": r.get("channel", "web")} for pl, r in zip(placed, v1 + v2)}
    assert len(rows) == 300
    for row in rows:
        want = expected[(row.partition, row.offset)]
        assert row.key == b"k%d" % want["id"]
        assert row_dict(row.value) == as_spark(want), (row.partition, row.offset)


def test_batch_read_pins_a_version_and_reads_keys(spark, typed_broker):
    """value.schema.version=1 reads v2 records with v1 (the new field dropped); Avro keys decode too,
    and arrays, maps and a union of several types come out in Spark's shapes."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    typed, client = typed_broker, typed_broker.client
    typed.topics("pinned")
    produce_avro(typed.bootstrap, typed.url, "pinned", EVENT_V1, [event(0, 1)], lambda i: 0)
    produce_avro(typed.bootstrap, typed.url, "pinned", EVENT_V2, [event(1, 2)], lambda i: 0)
    rows = typed.read("avro", subscribe="pinned", **{"value.schema.version": "1"}).collect()
    assert [row_dict(r.value) for r in rows] == [as_spark(event(0, 1)), as_spark(event(1, 1))]
    v2_id = client.get_version("pinned-value", 2).schema_id
    by_id = typed.read("avro", subscribe="pinned", **{"value.schema.id": str(v2_id)})
    assert [row_dict(r.value) for r in by_id.collect()] == [
        as_spark({**event(0, 2), "channel": "web"}),
        as_spark(event(1, 2)),
    ]
    with pytest.raises(Exception, match="Schema Registry: the value schema"):
        typed.read("avro", subscribe="pinned", **{"value.schema.version": "9"})

    nested = {
        "type": "record",
        "name": "Basket",
        "fields": [
            {"name": "items", "type": {"type": "array", "items": "string"}},
            {"name": "counts", "type": {"type": "map", "values": "long"}},
            {"name": "either", "type": ["null", "int", "string"]},
        ],
    }
    key_schema = {"type": "string"}
    typed.topics("baskets")
    value_ser = AvroSerializer(client, json.dumps(nested))
    key_ser = AvroSerializer(client, json.dumps(key_schema))
    baskets = [
        {"items": ["a", "b"], "counts": {"a": 1}, "either": 3},
        {"items": [], "counts": {}, "either": "x"},
        {"items": ["c"], "counts": {"c": 2, "d": 3}, "either": None},
    ]
    producer = Producer({"bootstrap.servers": typed.bootstrap})
    for i, basket in enumerate(baskets):
        producer.produce(
            "baskets",
            value_ser(basket, SerializationContext("baskets", MessageField.VALUE)),
            key=key_ser(f"basket-{i}", SerializationContext("baskets", MessageField.KEY)),
        )
    assert producer.flush(WAIT_S) == 0
    df = typed.read("avro", subscribe="baskets", **{"key.format": "avro"})
    assert dict(df.dtypes)["key"] == "string"
    assert dict(df.dtypes)["value"] == (
        "struct<items:array<string>,counts:map<string,bigint>,either:struct<member0:int,member1:string>>"
    )
    got = [(r.key, r.value.asDict(recursive=True)) for r in df.orderBy("offset").collect()]
    assert got == [
        ("basket-0", {"items": ["a", "b"], "counts": {"a": 1}, "either": {"member0": 3, "member1": None}}),
        ("basket-1", {"items": [], "counts": {}, "either": {"member0": None, "member1": "x"}}),
        ("basket-2", {"items": ["c"], "counts": {"c": 2, "d": 3}, "either": None}),
    ]


def test_failfast_names_the_record_and_permissive_keeps_its_bytes(spark, typed_broker):
    typed, url = typed_broker, typed_broker.url
    typed.topics("dirty")
    produce_avro(typed.bootstrap, url, "dirty", EVENT_V1, [event(i, 1) for i in range(40)], lambda i: 0)
    corrupt = [
        b"not avro at all",
        b"\x00\x00\x00\x27\x0fpadding",
        b"\x00\x00\x00\x01\x02",
    ]  # no prefix, id 39, cut short
    offsets = produce_raw(typed.bootstrap, "dirty", corrupt, 0)
    produce_avro(typed.bootstrap, url, "dirty", EVENT_V1, [event(i, 1) for i in range(40, 50)], lambda i: 0)

    with pytest.raises(Exception) as failed:
        typed.read("avro", subscribe="dirty").collect()
    message = str(failed.value)
    assert f"topic dirty partition 0 offset {offsets[0]}" in message, message
    assert "no Confluent schema id prefix" in message and "mode=PERMISSIVE" in message

    df = typed.read("avro", subscribe="dirty", mode="PERMISSIVE")
    assert df.columns[-1] == "_corrupt_value"
    rows = {r.offset: r for r in df.collect()}
    assert len(rows) == 53
    for offset, raw in zip(offsets, corrupt):
        assert rows[offset].value is None and rows[offset]._corrupt_value == raw
    good = [r for o, r in sorted(rows.items()) if o not in offsets]
    assert [r.value.id for r in good] == list(range(50)) and all(r._corrupt_value is None for r in good)


def test_exactly_once_sink_writes_avro_that_confluent_deserializer_reads_once(spark, typed_broker, tmp_path):
    """A streaming query reads typed events and writes a typed projection, exactly once; the schema
    is derived from the struct and registered on the first write; AvroDeserializer reads it back."""
    from pyspark.sql import functions as F

    typed, url, client = typed_broker, typed_broker.url, typed_broker.client
    typed.topics("orders", "receipts", partitions=2)
    produce_avro(typed.bootstrap, url, "orders", EVENT_V1, [event(i, 1) for i in range(200)], lambda i: i % 2)
    source = typed.read(
        "avro", streaming=True, subscribe="orders", startingOffsets="earliest", maxOffsetsPerTrigger="70"
    )
    receipts = source.select(
        F.col("partition"),
        F.struct(
            F.col("value.id").alias("order"),
            F.col("value.user").alias("user"),
            F.col("value.amount").alias("amount"),
            F.col("value.coupon").alias("coupon"),
            F.col("value.at").alias("at"),
        ).alias("value"),
    )
    typed.write_stream(receipts, "receipts", "avro", tmp_path / "ckpt")

    registered = client.get_latest_version("receipts-value")
    schema = json.loads(registered.schema.schema_str)
    assert [f["name"] for f in schema["fields"]] == ["order", "user", "amount", "coupon", "at"]
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))
    prefix = b"\x00" + registered.schema_id.to_bytes(4, "big")
    got = typed.read_back("receipts", 2, deserializer, prefix)
    want = {}
    for i in range(200):
        e = event(i, 1)
        want[i] = {"order": i, "user": e["user"], "amount": e["amount"], "coupon": e["coupon"], "at": e["at"]}
    assert sorted(g["order"] for g in got) == list(range(200))  # each exactly once
    for g in got:
        assert g == want[g["order"]]

    # auto.register.schemas=false with a schema that is not registered: refused when the write starts
    df = spark.createDataFrame([(1,)], "n int").select(F.struct("n").alias("value"))
    unregistered = json.dumps({"type": "record", "name": "N", "fields": [{"name": "n", "type": "int"}]})
    with pytest.raises(Exception, match="receipts-value|40403|not found"):
        typed.write(df, "receipts", "avro", **{"auto.register.schemas": "false", "value.schema": unregistered})
    assert client.get_versions("receipts-value") == [registered.version]


def test_sasl_ssl_broker_and_a_registry_that_asks_for_credentials(spark, tmp_path):
    """Kafka options of SASL_SSL reach the readers and the producer, schema.registry.basic.auth.user.info
    reaches the registry clients on the driver and the executors; a wrong password is refused by name."""
    from pyspark.sql import functions as F

    from tests.spark.secured_broker import ALICE, sasl_ssl_broker

    with sasl_ssl_broker(tmp_path) as (broker, kafka):
        typed = TypedBroker.secured(spark, broker, kafka, ALICE)
        typed.topics("secure-events", "secure-out")
        client = typed.client
        serializer = AvroSerializer(client, json.dumps(EVENT_V1))
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(20):
            producer.produce(
                "secure-events", serializer(event(i, 1), SerializationContext("secure-events", MessageField.VALUE))
            )
        assert producer.flush(WAIT_S) == 0

        df = typed.read("avro", subscribe="secure-events")
        assert [r.value.id for r in df.orderBy("offset").collect()] == list(range(20))

        out = df.select(F.struct(F.col("value.id").alias("id"), F.col("value.user").alias("user")).alias("value"))
        typed.write(out, "secure-out", "avro")
        got = typed.read_back("secure-out", 1, AvroDeserializer(client))
        assert sorted(g["id"] for g in got) == list(range(20))
        assert got[0]["user"] == event(got[0]["id"], 1)["user"]

        with pytest.raises(Exception, match="Schema Registry.*(401|Unauthorized|40101)"):
            typed.read("avro", subscribe="secure-events", **{"schema.registry.basic.auth.user.info": "alice:wrong"})


def test_typed_pipeline_on_three_brokers(spark, typed_cluster, tmp_path):
    """A 3-broker cluster, each broker serving the registry: records serialized through broker 0's
    registry are read as typed columns through broker 1's, and the exactly-once sink registers its
    schema through broker 2's (a non-writer forwards it); AvroDeserializer reads every record once."""
    from pyspark.sql import functions as F

    typed, urls = typed_cluster, typed_cluster.urls
    typed.topics("c-events", "c-out", partitions=3)
    records = [event(i, 1) for i in range(90)] + [event(i, 2) for i in range(90, 120)]
    produce_avro(typed.bootstrap, urls[0], "c-events", EVENT_V1, records[:90], lambda i: i % 3)
    produce_avro(typed.bootstrap, urls[0], "c-events", EVENT_V2, records[90:], lambda i: i % 3)

    source = typed.read(
        "avro", streaming=True, url=urls[1], subscribe="c-events", startingOffsets="earliest", maxOffsetsPerTrigger="50"
    )
    out = source.select(F.struct(F.col("value.id").alias("id"), F.col("value.channel").alias("channel")).alias("value"))
    typed.write_stream(out, "c-out", "avro", tmp_path / "ckpt", url=urls[2])
    got = typed.read_back("c-out", 3, AvroDeserializer(SchemaRegistryClient({"url": urls[0]})))
    assert sorted((g["id"], g["channel"]) for g in got) == [(r["id"], r.get("channel", "web")) for r in records]


ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "paid": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "at": {"type": "string", "format": "date-time"},
        "note": {"type": ["string", "null"]},
        "ship": {"$ref": "#/definitions/Ship"},
    },
    "required": ["id", "item"],
    "definitions": {"Ship": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def test_json_format_reads_and_writes_typed_columns(spark, typed_broker):
    """value.format=json: documents written by confluent-kafka's JSONSerializer as typed columns,
    corrupt ones per mode; the sink derives and registers a JSON schema and JSONDeserializer reads
    what it wrote."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from pyspark.sql import functions as F

    typed, client = typed_broker, typed_broker.client
    typed.topics("orders-json")
    serializer = JSONSerializer(json.dumps(ORDER_JSON), client)
    context = SerializationContext("orders-json", MessageField.VALUE)
    orders = [
        {
            "id": i,
            "item": f"item-{i}",
            "price": i * 0.5,
            "paid": i % 2 == 0,
            "tags": [f"t{i}"] * (i % 3),
            "at": f"2026-03-01T00:00:{i % 60:02d}Z",
            "note": None if i % 2 else f"n{i}",
            "ship": {"city": f"c{i % 4}"},
            "extra": "ignored",
        }
        for i in range(30)
    ]
    offsets = produce_raw(typed.bootstrap, "orders-json", [serializer(o, context) for o in orders], 0)
    schema_id = client.get_latest_version("orders-json-value").schema_id
    corrupt = [b"\x00" + schema_id.to_bytes(4, "big") + b"{not json", b'{"id": 1}']
    offsets += produce_raw(typed.bootstrap, "orders-json", corrupt, 0)

    df = typed.read("json", subscribe="orders-json", mode="PERMISSIVE")
    assert dict(df.dtypes)["value"] == (
        "struct<id:bigint,item:string,price:double,paid:boolean,tags:array<string>,at:timestamp,"
        "note:string,ship:struct<city:string>>"
    )
    rows = df.orderBy("offset").collect()
    for row, order in zip(rows[:30], orders):
        value = row.value.asDict(recursive=True)
        assert value["at"].replace(tzinfo=UTC).timestamp() == dt.datetime.fromisoformat(order["at"]).timestamp()
        assert {k: v for k, v in value.items() if k != "at"} == {
            k: v for k, v in order.items() if k not in ("at", "extra")
        }
    assert [(r.value, r._corrupt_value) for r in rows[30:]] == [(None, raw) for raw in corrupt]
    with pytest.raises(Exception, match=f"topic orders-json partition 0 offset {offsets[30]}"):
        typed.read("json", subscribe="orders-json").collect()

    typed.topics("orders-json-out")
    good = typed.read("json", subscribe="orders-json", mode="PERMISSIVE").where("value IS NOT NULL")
    out = good.select(F.struct("value.id", "value.item", "value.tags", "value.at").alias("value"))
    typed.write(out, "orders-json-out", "json")
    registered = client.get_latest_version("orders-json-out-value")
    assert registered.schema.schema_type == "JSON"
    deserializer = JSONDeserializer(registered.schema.schema_str, schema_registry_client=client)
    got = typed.read_back("orders-json-out", 1, deserializer)
    assert sorted((g["id"], g["item"], tuple(g["tags"])) for g in got) == [
        (o["id"], o["item"], tuple(o["tags"])) for o in orders
    ]
    assert all(dt.datetime.fromisoformat(g["at"]).tzinfo is not None for g in got)


def test_bad_typed_options_are_refused_by_name():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from strom.spark.options import StromOptionError
    from strom.spark.sink import _Producing
    from strom.spark.typed import SideFormat, TypedOptions, subject_of

    registry = {"schema.registry.url": "http://127.0.0.1:1"}
    for options, message in [
        ({"value.format": "xml"}, "'value.format' must be one of binary, avro, json, protobuf"),
        ({"value.format": "avro"}, "'value.format=avro' needs option 'schema.registry.url'"),
        ({"key.format": "json"}, "'key.format=json' needs option 'schema.registry.url'"),
        ({**registry, "value.format": "avro", "value.schema.id": "3", "value.schema.version": "1"}, "exclude"),
        ({**registry, "value.format": "avro", "value.schema.id": "x"}, "'value.schema.id' must be a positive integer"),
        ({**registry, "value.format": "avro", "value.schema.version": "0"}, "must be a positive integer"),
        ({**registry, "value.format": "avro", "mode": "DROPMALFORMED"}, "FAILFAST or PERMISSIVE"),
        ({**registry, "value.format": "avro", "auto.register.schemas": "yes"}, "true or false"),
        ({**registry, "value.format": "avro", "value.schema": "{nope"}, "'value.schema' is not JSON"),
    ]:
        with pytest.raises(StromOptionError, match=re.escape(message)):
            TypedOptions.parse(options)
    parsed = TypedOptions.parse({**registry, "Value.Format": "AVRO", "schema.registry.basic.auth.user.info": "a:b"})
    assert parsed.value.format == "avro" and parsed.registry == {
        "url": "http://127.0.0.1:1",
        "basic.auth.user.info": "a:b",
    }
    with pytest.raises(StromOptionError, match="2 topics: name the schema's subject with option 'value.subject'"):
        subject_of(SideFormat("value", "avro"), ["a", "b"])
    assert subject_of(SideFormat("value", "avro", subject="s"), ["a", "b"]) == "s"

    sink = {"kafka.bootstrap.servers": "127.0.0.1:1", **registry, "value.format": "avro"}
    with pytest.raises(StromOptionError, match="needs the 'topic' option or option 'value.subject'"):
        routed = [StructField("value", StructType([StructField("n", LongType())])), StructField("topic", StringType())]
        _Producing(sink, StructType(routed), False)  # a topic per row, so no subject to derive
    with pytest.raises(StromOptionError, match="column 'value' must be a struct"):
        _Producing({**sink, "topic": "t"}, StructType([StructField("value", LongType())]), False)
