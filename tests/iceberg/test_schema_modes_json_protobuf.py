"""Iceberg topics in the schema modes with JSON Schema and Protobuf values, on a real broker serving
the Schema Registry, fed by confluent-kafka's own JSONSerializer and ProtobufSerializer: typed
columns from the schemas, the table gaining a column when a compatible version adds a field, and
the records that cannot be translated in ``<topic>~dlq`` with their reasons, each record in one
of the two tables once."""

from __future__ import annotations

import datetime as dt
import json
import struct
import time

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import frame
from tests.iceberg.avro_support import registry_url, wait_for_tables
from tests.iceberg.test_schema_modes import ICEBERG, catalog_of, column_types, create_topic
from tests.protobuf_support import ORDER_V1, ORDER_V2, expected, order, order_class

UTC = dt.UTC
ORDER_JSON_V1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ship": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    "required": ["id", "item"],
    "additionalProperties": False,
}
# a property added to a closed content model: BACKWARD compatible
ORDER_JSON_V2 = {**ORDER_JSON_V1, "properties": {**ORDER_JSON_V1["properties"], "note": {"type": ["string", "null"]}}}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """The values to partition 0, in order; their offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    offsets: list[int] = [-1] * len(values)
    for i, value in enumerate(values):
        producer.produce(
            topic, value, partition=0, on_delivery=lambda e, m, i=i: offsets.__setitem__(i, m.offset() if not e else -1)
        )
    assert producer.flush(30) == 0 and -1 not in offsets
    return offsets


def json_order(i: int, version: int) -> dict:
    order = {
        "id": i,
        "item": f"item-{i}-ü",
        "price": i * 0.5,
        "at": f"2026-03-01T00:00:{i % 60:02d}Z",
        "tags": ["t"] * (i % 3),
        "ship": {"city": f"c{i % 4}"},
    }
    if version == 2 and i % 2:
        order["note"] = f"n{i}"
    return order


def settled(data, topic: str, rows: int, dead: int) -> tuple[list, list]:
    wait_for_tables(catalog_of(data), topic, rows, dead)
    time.sleep(1.5)  # more rounds: nothing more may arrive
    return wait_for_tables(catalog_of(data), topic, 0, 0)


def test_json_schema_values_as_columns_with_evolution_and_dead_letters(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "orders-json", "value_schema_id_prefix", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    context = SerializationContext("orders-json", MessageField.VALUE)
    v1 = JSONSerializer(json.dumps(ORDER_JSON_V1), client)
    good = {
        o: (i, 1)
        for i, o in zip(
            range(40), produce(broker.bootstrap, "orders-json", [v1(json_order(i, 1), context) for i in range(40)])
        )
    }
    v1_id = client.get_latest_version("orders-json-value").schema_id
    prefix = b"\x00" + struct.pack(">I", v1_id)
    bad_values = [
        (b'{"id": 1, "item": "no prefix"}', "no schema id prefix"),
        (prefix + b"{not json", "not JSON"),
        (prefix + b"[1, 2]", "not a JSON object but list"),
        (prefix + b'{"id": "seven", "item": "x"}', "does not fit the table's columns"),
        (b"\x00" + struct.pack(">I", 424242) + b"{}", "unknown schema id 424242"),
    ]
    bad = dict(zip(produce(broker.bootstrap, "orders-json", [v for v, _ in bad_values]), [r for _, r in bad_values]))
    rows, dead = settled(broker.data_dir, "orders-json", 40, len(bad))
    types = column_types(catalog, "orders-json")
    assert {k: types[k] for k in ("id", "item", "price", "at")} == {
        "id": "long",
        "item": "string",
        "price": "double",
        "at": "timestamptz",
    }
    assert types["tags"].startswith("list<") and types["ship"].startswith("struct<") and "note" not in types

    # version 2 adds a property: the table gains a nullable column; version-1 rows keep null there
    v2 = JSONSerializer(json.dumps(ORDER_JSON_V2), client)
    offsets = produce(broker.bootstrap, "orders-json", [v2(json_order(i, 2), context) for i in range(40, 70)])
    good.update({o: (i, 2) for i, o in zip(range(40, 70), offsets)})
    rows, dead = settled(broker.data_dir, "orders-json", 70, len(bad))
    assert column_types(catalog, "orders-json")["note"] == "string"
    at = sorted(r["kafka"]["offset"] for r in rows)
    assert at == sorted(good), "each good record once"
    for row in rows:
        i, version = good[row["kafka"]["offset"]]
        want = json_order(i, version)
        assert {k: row[k] for k in ("id", "item", "price", "tags", "ship")} == {
            k: want[k] for k in ("id", "item", "price", "tags", "ship")
        }
        assert row["at"] == dt.datetime.fromisoformat(want["at"])
        assert row["note"] == want.get("note")
    reasons = {r["kafka"]["offset"]: r["reason"] for r in dead}
    assert sorted(reasons) == sorted(bad) and len(dead) == len(bad)
    for offset, reason in bad.items():
        assert reason in reasons[offset], (reasons[offset], reason)
    assert "translating orders-json failed" not in broker.read_log()


def produce_protobuf(bootstrap: str, client, topic: str, text: str, ids: range) -> dict[int, tuple[int, int]]:
    cls = order_class(text)
    serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    version = 2 if text == ORDER_V2 else 1
    offsets = produce(bootstrap, topic, [serializer(order(cls, i), context) for i in ids])
    return {o: (i, version) for i, o in zip(ids, offsets)}


def offset_of(row: dict) -> int:
    return row["kafka"]["offset"]


def check_proto_rows(rows: list[dict], good: dict, where=offset_of) -> None:
    """Each good record (``good`` keyed by ``where(row)``) once, with its values; version-1 records
    have a null channel (read as version 2 or not)."""
    assert sorted(where(r) for r in rows) == sorted(good), "each good record once"
    for row in rows:
        i, version = good[where(row)]
        got = {k: row[k] for k in expected(i, version)}
        assert {**got, "counts": dict(got["counts"])} == expected(i, version), row


def test_protobuf_values_as_columns_with_evolution_and_dead_letters(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "orders-pb", "value_schema_id_prefix", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    good = produce_protobuf(broker.bootstrap, client, "orders-pb", ORDER_V1, range(40))
    v1_id = client.get_latest_version("orders-pb-value").schema_id
    bad_values = [
        (b"not protobuf", "no schema id prefix"),
        (frame(v1_id) + b"\xff\xff\xff", "not a shop.Order"),
        (frame(v1_id, (1,)) + b"\x08\x01", "message indexes [1] name no message of the schema"),
    ]
    bad = dict(zip(produce(broker.bootstrap, "orders-pb", [v for v, _ in bad_values]), [r for _, r in bad_values]))
    rows, dead = settled(broker.data_dir, "orders-pb", 40, len(bad))
    types = column_types(catalog, "orders-pb")
    assert {k: types[k] for k in ("id", "item", "price", "kind", "coupon", "at")} == {
        "id": "long",
        "item": "string",
        "price": "double",
        "kind": "string",
        "coupon": "string",
        "at": "timestamptz",
    }
    assert types["counts"].startswith("map<") and types["ship"].startswith("struct<") and "channel" not in types

    good.update(produce_protobuf(broker.bootstrap, client, "orders-pb", ORDER_V2, range(40, 70)))
    assert client.get_versions("orders-pb-value") == [1, 2]
    rows, dead = settled(broker.data_dir, "orders-pb", 70, len(bad))
    assert column_types(catalog, "orders-pb")["channel"] == "string"
    check_proto_rows(rows, good)
    reasons = {r["kafka"]["offset"]: r["reason"] for r in dead}
    assert sorted(reasons) == sorted(bad) and len(dead) == len(bad)
    for offset, reason in bad.items():
        assert reason in reasons[offset], (reasons[offset], reason)
    assert "translating orders-pb failed" not in broker.read_log()


def test_protobuf_latest_mode_reads_every_record_as_the_latest_version(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "latest-pb", "value_schema_latest", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    # both versions registered before translation sees a record: every row has version 2's columns
    subject = "latest-pb-value"
    from confluent_kafka.schema_registry import Schema

    client.register_schema(subject, Schema(ORDER_V1, "PROTOBUF"))
    client.register_schema(subject, Schema(ORDER_V2, "PROTOBUF"))
    good = produce_protobuf(broker.bootstrap, client, "latest-pb", ORDER_V1, range(20))
    good.update(produce_protobuf(broker.bootstrap, client, "latest-pb", ORDER_V2, range(20, 40)))
    rows, dead = settled(broker.data_dir, "latest-pb", 40, 0)
    assert dead == [] and "channel" in column_types(catalog, "latest-pb")
    check_proto_rows(rows, good)


def test_json_latest_mode_reads_every_document_with_the_latest_columns(iceberg_broker):
    from confluent_kafka.schema_registry import Schema

    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "latest-js", "value_schema_latest", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    client.register_schema("latest-js-value", Schema(json.dumps(ORDER_JSON_V1), "JSON"))
    client.register_schema("latest-js-value", Schema(json.dumps(ORDER_JSON_V2), "JSON"))
    context = SerializationContext("latest-js", MessageField.VALUE)
    good = {}
    for version, schema, ids in ((1, ORDER_JSON_V1, range(20)), (2, ORDER_JSON_V2, range(20, 40))):
        serializer = JSONSerializer(json.dumps(schema), client, conf={"auto.register.schemas": False})
        offsets = produce(broker.bootstrap, "latest-js", [serializer(json_order(i, version), context) for i in ids])
        good.update({o: (i, version) for i, o in zip(ids, offsets)})
    rows, dead = settled(broker.data_dir, "latest-js", 40, 0)
    assert dead == [] and column_types(catalog, "latest-js")["note"] == "string"
    assert sorted(offset_of(r) for r in rows) == sorted(good)
    for row in rows:
        i, version = good[offset_of(row)]
        want = json_order(i, version)
        assert (row["id"], row["item"], row["ship"], row["note"]) == (
            i,
            want["item"],
            want["ship"],
            want.get("note"),
        )
