"""value.format=protobuf in the strom source and sink, against a real broker serving its Schema
Registry, with records written and read by confluent-kafka's own ProtobufSerializer and
ProtobufDeserializer: two compatible schema versions read as one struct column, corrupt records
per mode, and the sink's derived schema registered and read back exactly once."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import frame, message_class
from strom.spark.protobuf_types import load
from tests.protobuf_support import AT, ORDER_V1, ORDER_V2, expected, order, order_class
from tests.spark.conftest import WAIT_S
from tests.spark.typed_support import TypedBroker, produce_raw

UTC = dt.UTC


def as_expected(row) -> dict:
    """A Row's value as ``expected`` gives it (Spark gives timestamps in the session's zone, without one)."""
    value = row.value.asDict(recursive=True)
    return {**value, "at": value["at"].replace(tzinfo=UTC)}


def test_protobuf_format_reads_two_versions_and_writes_what_the_deserializer_reads(spark, typed_broker):
    from pyspark.sql import functions as F

    typed, client = typed_broker, typed_broker.client
    typed.topics("orders-pb")
    context = SerializationContext("orders-pb", MessageField.VALUE)
    values = []
    for version, text, ids in ((1, ORDER_V1, range(0, 30)), (2, ORDER_V2, range(30, 60))):
        cls = order_class(text)
        serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        values += [serializer(order(cls, i), context) for i in ids]
    assert client.get_versions("orders-pb-value") == [1, 2]
    offsets = produce_raw(typed.bootstrap, "orders-pb", values, 0)
    latest = client.get_latest_version("orders-pb-value").schema_id
    corrupt = [b"not protobuf", frame(latest) + b"\xff\xff\xff", frame(latest, (1,)) + b"\x08\x01"]
    offsets += produce_raw(typed.bootstrap, "orders-pb", corrupt, 0)

    df = typed.read("protobuf", subscribe="orders-pb", mode="PERMISSIVE")
    assert dict(df.dtypes)["value"] == (
        "struct<id:bigint,item:string,price:double,kind:string,coupon:string,at:timestamp,"
        "ship:struct<city:string>,tags:array<string>,counts:map<string,int>,channel:string>"
    )
    rows = df.orderBy("offset").collect()
    assert [as_expected(r) for r in rows[:60]] == [expected(i, 1 if i < 30 else 2) for i in range(60)]
    assert [(r.value, r._corrupt_value) for r in rows[60:]] == [(None, raw) for raw in corrupt]
    with pytest.raises(Exception) as failed:
        typed.read("protobuf", subscribe="orders-pb").collect()
    message = str(failed.value)
    assert f"topic orders-pb partition 0 offset {offsets[60]}" in message, message
    assert "does not decode as PROTOBUF" in message and "no Confluent schema id prefix" in message
    # pinned to version 1: the channel field is not a column, version-2 records are still read
    pinned = typed.read("protobuf", subscribe="orders-pb", mode="PERMISSIVE", **{"value.schema.version": "1"})
    assert "channel" not in dict(pinned.dtypes)["value"]
    assert pinned.where("value IS NOT NULL").count() == 60

    # the sink: a projection, its schema derived from the struct and registered on the first write
    typed.topics("orders-pb-out")
    good = typed.read("protobuf", subscribe="orders-pb", mode="PERMISSIVE").where("value IS NOT NULL")
    out = good.select(F.struct("value.id", "value.item", "value.kind", "value.ship", "value.at").alias("value"))
    typed.write(out, "orders-pb-out", "protobuf")
    registered = client.get_latest_version("orders-pb-out-value")
    assert registered.schema.schema_type == "PROTOBUF"
    out_cls = message_class(load(registered.schema.schema_str).message())
    deserializer = ProtobufDeserializer(out_cls, {"use.deprecated.format": False})
    got = typed.read_back("orders-pb-out", 1, deserializer, frame(registered.schema_id)[:5])
    assert sorted((m.id, m.item, m.ship.city, m.at.seconds) for m in got) == [
        (i, f"item-{i}-ü", f"c{i % 4}", AT + i) for i in range(60)
    ]
    # kind was a string column: written as a proto3 string, not an enum, and nullable (optional)
    assert sorted(m.kind for m in got)[:1] == ["BUY"] and all(m.HasField("kind") for m in got)


KEY_SCHEMA = 'syntax = "proto3";\npackage shop;\nmessage OrderKey {\n  int64 id = 1;\n  string region = 2;\n}\n'


def test_protobuf_keys_and_values_over_sasl_ssl_with_registry_credentials(spark, tmp_path):
    """key.format and value.format protobuf through a SASL_SSL listener and a registry that asks
    for credentials: read as two struct columns, written back as both, read by ProtobufDeserializer."""
    from confluent_kafka import Producer
    from pyspark.sql import functions as F

    from tests.spark.secured_broker import ALICE, sasl_ssl_broker

    with sasl_ssl_broker(tmp_path) as (broker, kafka):
        typed = TypedBroker.secured(spark, broker, kafka, ALICE)
        typed.topics("secure-pb", "secure-pb-out")
        client = typed.client
        key_cls, value_cls = order_class(KEY_SCHEMA), order_class(ORDER_V1)
        key_ser = ProtobufSerializer(key_cls, client, {"use.deprecated.format": False})
        value_ser = ProtobufSerializer(value_cls, client, {"use.deprecated.format": False})
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(20):
            producer.produce(
                "secure-pb",
                value_ser(order(value_cls, i), SerializationContext("secure-pb", MessageField.VALUE)),
                key=key_ser(key_cls(id=i, region=f"r{i % 2}"), SerializationContext("secure-pb", MessageField.KEY)),
            )
        assert producer.flush(WAIT_S) == 0

        protobuf_keys = {"key.format": "protobuf"}
        df = typed.read("protobuf", subscribe="secure-pb", **protobuf_keys)
        assert dict(df.dtypes)["key"] == "struct<id:bigint,region:string>"
        rows = df.orderBy("offset").collect()
        assert [r.key.asDict() for r in rows] == [{"id": i, "region": f"r{i % 2}"} for i in range(20)]
        assert [{**as_expected(r), "channel": None} for r in rows] == [expected(i, 1) for i in range(20)]

        typed.write(
            df.select("key", F.struct("value.id", "value.item").alias("value")),
            "secure-pb-out",
            "protobuf",
            **protobuf_keys,
        )
        out_key = message_class(load(client.get_latest_version("secure-pb-out-key").schema.schema_str).message())
        out_value = message_class(load(client.get_latest_version("secure-pb-out-value").schema.schema_str).message())
        got = typed.read_back(
            "secure-pb-out",
            1,
            ProtobufDeserializer(out_value, {"use.deprecated.format": False}),
            keys=ProtobufDeserializer(out_key, {"use.deprecated.format": False}),
        )
        assert sorted((k.id, k.region, v.id, v.item) for k, v in got) == [
            (i, f"r{i % 2}", i, f"item-{i}-ü") for i in range(20)
        ]


def test_protobuf_streaming_exactly_once_on_three_brokers(spark, typed_cluster, tmp_path):
    """A 3-broker cluster, each broker serving the registry: Protobuf records of two versions
    serialized through broker 0's registry, read as typed columns through broker 1's, written by the
    exactly-once sink registering through broker 2's; ProtobufDeserializer reads every record once."""
    from confluent_kafka import Producer
    from pyspark.sql import functions as F

    typed, urls, client = typed_cluster, typed_cluster.urls, typed_cluster.client
    typed.topics("c-pb", "c-pb-out", partitions=3)
    producer = Producer({"bootstrap.servers": typed.bootstrap, "acks": "all"})
    versions = {}
    for version, text, ids in ((1, ORDER_V1, range(0, 60)), (2, ORDER_V2, range(60, 90))):
        cls = order_class(text)
        serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
        for i in ids:
            producer.produce(
                "c-pb", serializer(order(cls, i), SerializationContext("c-pb", MessageField.VALUE)), partition=i % 3
            )
            versions[i] = version
    assert producer.flush(60) == 0

    source = typed.read(
        "protobuf", streaming=True, url=urls[1], subscribe="c-pb", startingOffsets="earliest", maxOffsetsPerTrigger="40"
    )
    out = source.select(F.struct("value.id", "value.channel", "value.at").alias("value"))
    typed.write_stream(out, "c-pb-out", "protobuf", tmp_path / "ckpt", url=urls[2])
    registered = client.get_latest_version("c-pb-out-value")
    out_cls = message_class(load(registered.schema.schema_str).message())
    got = typed.read_back("c-pb-out", 3, ProtobufDeserializer(out_cls, {"use.deprecated.format": False}))
    assert sorted((m.id, m.channel if m.HasField("channel") else None, m.at.seconds) for m in got) == [
        (i, expected(i, versions[i])["channel"], AT + i) for i in range(90)
    ]


def test_bad_protobuf_sink_options_are_refused_by_name():
    from pyspark.sql.types import DateType, LongType, StructField, StructType

    from strom.spark.options import StromOptionError
    from strom.spark.sink import _Producing

    sink = {
        "kafka.bootstrap.servers": "127.0.0.1:1",
        "schema.registry.url": "http://127.0.0.1:1",
        "topic": "t",
        "value.format": "protobuf",
    }
    longs = StructType([StructField("value", StructType([StructField("n", LongType())]))])
    with pytest.raises(StromOptionError, match=r"option 'value.schema' is not a Protobuf schema: Invalid schema"):
        _Producing({**sink, "value.schema": "message {"}, longs, False)
    with pytest.raises(StromOptionError, match=r"option 'value.protobuf.message' needs option 'value.format=protobuf'"):
        _Producing({**sink, "value.format": "avro", "value.protobuf.message": "X"}, longs, False)
    with pytest.raises(
        StromOptionError, match=r"column 'value': the schema has no message 'X' \(its top-level messages: R\)"
    ):
        _Producing(
            {**sink, "value.schema": 'syntax = "proto3"; message R { int64 n = 1; }', "value.protobuf.message": "X"},
            longs,
            False,
        )
    dates = StructType([StructField("value", StructType([StructField("day", DateType())]))])
    with pytest.raises(StromOptionError, match=r"column 'value': column 'day': Spark type date has no Protobuf type"):
        _Producing(sink, dates, False)

    from strom.spark.protobuf_types import imports
    from strom.spark.typed import TypedOptions

    key = "value.schema.references"
    for value, message in [
        ("[{", r"option 'value.schema.references' must be a JSON list of \{"),
        ('{"name": "a.proto"}', r"must be a JSON list of .* got"),
        ('[{"subject": "s"}]', r'\{"subject": "s"\} is not a reference'),
        ('[{"name": "a.proto", "version": 0}]', "is not a reference"),
        ('[{"name": "a.proto", "versoin": 1}]', "is not a reference"),
    ]:
        with pytest.raises(StromOptionError, match=message):
            TypedOptions.parse({**sink, key: value})
    with pytest.raises(
        StromOptionError,
        match=r"option 'value.schema.references' needs option 'value.format' \(avro, json or protobuf\)",
    ):
        TypedOptions.parse({**sink, "value.format": "binary", key: "[]"})
    assert TypedOptions.parse({**sink, "value.format": "avro", key: '[{"name": "geo.Address"}]'}).value.references == (
        ("geo.Address", "geo.Address", None),
    )
    parsed = TypedOptions.parse(
        {**sink, key: '[{"name": "a.proto"}, {"name": "b.proto", "subject": "b", "version": 2}]'}
    )
    assert parsed.value.references == (("a.proto", "a.proto", None), ("b.proto", "b", 2))
    assert TypedOptions.parse(sink).value.references is None  # the imports name them
    assert imports(INVOICE) == ["common.proto"]  # the well-known types need no reference
    assert imports("message {") == []


PEOPLE = """
syntax = "proto3";
package people;
message Address { string city = 1; }
message Person {
  string name = 1;
  Address home = 2;
}
"""


def test_protobuf_message_option_reads_and_writes_a_message_other_than_the_first(spark, typed_broker):
    """A schema whose record is its second message: confluent-kafka's serializer frames it with
    message indexes [1]; read with value.protobuf.message, and written back so its deserializer reads it."""

    typed, client = typed_broker, typed_broker.client
    typed.topics("people")
    schema = load(PEOPLE)
    person = message_class(schema.named("Person"))
    serializer = ProtobufSerializer(person, client, {"use.deprecated.format": False})
    context = SerializationContext("people", MessageField.VALUE)
    values = [serializer(person(name=f"p{i}", home={"city": f"c{i % 3}"}), context) for i in range(12)]
    assert values[0][5:7] == b"\x02\x02"  # one index, 1 (zig-zag varints)
    produce_raw(typed.bootstrap, "people", values, 0)

    with pytest.raises(Exception, match=r"message indexes \[1\] name another message than the reader's \[0\]"):
        typed.read("protobuf", subscribe="people").collect()
    df = typed.read("protobuf", subscribe="people", **{"value.protobuf.message": "Person"})
    assert dict(df.dtypes)["value"] == "struct<name:string,home:struct<city:string>>"
    assert [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()] == [
        {"name": f"p{i}", "home": {"city": f"c{i % 3}"}} for i in range(12)
    ]

    typed.topics("people-out")
    typed.write(
        df.select("value"),
        "people-out",
        "protobuf",
        **{"value.schema": PEOPLE, "value.protobuf.message": "people.Person"},
    )
    got = typed.read_back("people-out", 1, ProtobufDeserializer(person, {"use.deprecated.format": False}))
    assert sorted((p.name, p.home.city) for p in got) == sorted((f"p{i}", f"c{i % 3}") for i in range(12))
    with pytest.raises(Exception, match="the schema has no message 'Robot'"):
        typed.read("protobuf", subscribe="people", **{"value.protobuf.message": "Robot"}).schema


COMMON = 'syntax = "proto3";\npackage common;\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n'
INVOICE = """
syntax = "proto3";
package billing;
import "common.proto";
import "google/protobuf/timestamp.proto";
message Invoice {
  int64 id = 1;
  common.Money total = 2;
  google.protobuf.Timestamp at = 3;
}
"""


def test_protobuf_sink_registers_a_schema_that_imports_another_with_its_references(spark, typed_broker):
    """A value.schema importing common.proto: the sink registers it with a reference to the subject
    common.proto (as confluent-kafka's ProtobufSerializer names it), or to the subject option
    value.schema.references names; confluent-kafka's ProtobufDeserializer, fetching the writer
    schema and its reference from the registry, reads back exactly the messages it was given."""
    typed, client = typed_broker, typed_broker.client
    typed.topics("invoices", "invoices-out", "invoices-shared")
    invoice = message_class(load(INVOICE, [("common.proto", COMMON)]).message())
    serializer = ProtobufSerializer(invoice, client, {"use.deprecated.format": False})
    context = SerializationContext("invoices", MessageField.VALUE)
    sent = []
    for i in range(15):
        message = invoice(id=i, total={"currency": ["EUR", "USD"][i % 2], "units": 100 * i + 1})
        message.at.seconds = AT + i
        sent.append(message)
    produce_raw(typed.bootstrap, "invoices", [serializer(m, context) for m in sent], 0)
    references = client.get_latest_version("invoices-value").schema.references
    assert [(r.name, r.subject, r.version) for r in references] == [("common.proto", "common.proto", 1)]
    df = typed.read("protobuf", subscribe="invoices")
    assert dict(df.dtypes)["value"] == "struct<id:bigint,total:struct<currency:string,units:bigint>,at:timestamp>"

    def read_back(topic: str) -> list:
        deserializer = ProtobufDeserializer(invoice, {"use.deprecated.format": False}, client)
        return sorted(typed.read_back(topic, 1, deserializer), key=lambda m: m.id)

    # the import resolved as the serializer does: the subject named by the import, its latest version
    typed.write(df.select("value"), "invoices-out", "protobuf", **{"value.schema": INVOICE})
    registered = client.get_latest_version("invoices-out-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references] == [
        ("common.proto", "common.proto", 1)
    ]
    assert read_back("invoices-out") == sent

    # named by value.schema.references: another subject holding the same file
    client.register_schema("shared-money", Schema(COMMON, "PROTOBUF"))
    shared = json.dumps([{"name": "common.proto", "subject": "shared-money", "version": 1}])
    typed.write(
        df.select("value"),
        "invoices-shared",
        "protobuf",
        **{"value.schema": INVOICE, "value.schema.references": shared},
    )
    registered = client.get_latest_version("invoices-shared-value")
    assert [(r.name, r.subject, r.version) for r in registered.schema.references] == [
        ("common.proto", "shared-money", 1)
    ]
    assert read_back("invoices-shared") == sent

    # an import the registry does not have is refused when the write starts, naming it
    elsewhere = INVOICE.replace('"common.proto"', '"money/v2.proto"')
    with pytest.raises(Exception, match=r"reference 'money/v2.proto' is imported as subject money/v2.proto"):
        typed.write(df.select("value"), "invoices-out", "protobuf", **{"value.schema": elsewhere})
    assert client.get_versions("invoices-out-value") == [1]


def test_protobuf_sink_resolves_an_import_through_another_brokers_registry(spark, typed_cluster):
    """On 3 brokers: common.proto registered through broker 0's registry, the importing schema
    resolved and registered by the sink through broker 2's, and ProtobufDeserializer fetching both
    through broker 1's reads back each row written."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from tests.spark.conftest import wait_for

    typed, urls = typed_cluster, typed_cluster.urls
    typed.topics("c-invoices", partitions=3)
    SchemaRegistryClient({"url": urls[0]}).register_schema("common.proto", Schema(COMMON, "PROTOBUF"))
    through_2 = SchemaRegistryClient({"url": urls[2]})

    def seen_through_2() -> bool:
        try:
            return through_2.get_versions("common.proto") == [1]
        except SchemaRegistryError:  # 40401 until broker 2 has read the registration
            return False

    wait_for(seen_through_2, what="common.proto through broker 2")
    at = dt.datetime.fromtimestamp(AT, UTC)
    rows = [((i, (["EUR", "USD"][i % 2], 100 * i + 1), at + dt.timedelta(seconds=i)),) for i in range(30)]
    df = spark.createDataFrame(rows, "value struct<id:bigint,total:struct<currency:string,units:bigint>,at:timestamp>")
    typed.write(df, "c-invoices", "protobuf", url=urls[2], **{"value.schema": INVOICE})

    through_1 = SchemaRegistryClient({"url": urls[1]})
    references = through_1.get_latest_version("c-invoices-value").schema.references
    assert [(r.name, r.subject, r.version) for r in references] == [("common.proto", "common.proto", 1)]
    invoice = message_class(load(INVOICE, [("common.proto", COMMON)]).message())
    deserializer = ProtobufDeserializer(invoice, {"use.deprecated.format": False}, through_1)
    got = sorted(typed.read_back("c-invoices", 3, deserializer), key=lambda m: m.id)
    assert [(m.id, m.total.currency, m.total.units, m.at.seconds) for m in got] == [
        (i, ["EUR", "USD"][i % 2], 100 * i + 1, AT + i) for i in range(30)
    ]


def test_protobuf_sink_references_over_sasl_ssl_with_registry_credentials(spark, tmp_path):
    """The sink resolves an import through a registry that asks for credentials and writes through
    a SASL_SSL listener; ProtobufDeserializer, with the same credentials, reads back each row."""
    from tests.spark.secured_broker import ALICE, sasl_ssl_broker

    with sasl_ssl_broker(tmp_path) as (broker, kafka):
        typed = TypedBroker.secured(spark, broker, kafka, ALICE)
        typed.topics("secure-invoices")
        typed.client.register_schema("common.proto", Schema(COMMON, "PROTOBUF"))
        at = dt.datetime.fromtimestamp(AT, UTC)
        rows = [((i, ("EUR", i), at + dt.timedelta(seconds=i)),) for i in range(10)]
        df = spark.createDataFrame(
            rows, "value struct<id:bigint,total:struct<currency:string,units:bigint>,at:timestamp>"
        )
        typed.write(df, "secure-invoices", "protobuf", **{"value.schema": INVOICE})
        references = typed.client.get_latest_version("secure-invoices-value").schema.references
        assert [(r.name, r.subject, r.version) for r in references] == [("common.proto", "common.proto", 1)]
        invoice = message_class(load(INVOICE, [("common.proto", COMMON)]).message())
        deserializer = ProtobufDeserializer(invoice, {"use.deprecated.format": False}, typed.client)
        got = sorted(typed.read_back("secure-invoices", 1, deserializer), key=lambda m: m.id)
        assert [(m.id, m.total.currency, m.total.units, m.at.seconds) for m in got] == [
            (i, "EUR", i, AT + i) for i in range(10)
        ]
