"""Protobuf records of any message of their schema in the Iceberg schema modes, on a real broker
serving the Schema Registry, fed by confluent-kafka's ProtobufSerializer with a schema of several
messages: each record's message indexes pick the message whose fields are its columns (as
Redpanda resolves a record's type), the table holds the union of the messages' columns, and a
message whose columns clash with the table's, or indexes naming no message, end in ``~dlq``."""

from __future__ import annotations

import functools

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import frame, message_class
from strom.spark.protobuf_types import load
from tests.iceberg.avro_support import registry_url
from tests.iceberg.test_schema_modes import ICEBERG, column_types, create_topic
from tests.iceberg.test_schema_modes_json_protobuf import settled

SHOP = """
syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string item = 2;
  double price = 3;
  message Line { string sku = 1; int32 count = 2; }
}
message Refund { int64 id = 1; double amount = 2; string reason = 3; }
message Clash { string id = 1; }
"""
# version 2: Refund gains a field (BACKWARD compatible)
SHOP_V2 = SHOP.replace("string reason = 3; }", "string reason = 3; optional string note = 4; }")
ORDER, LINE, REFUND, CLASH = (0,), (0, 0), (1,), (2,)


@functools.cache
def classes(text: str) -> dict[tuple[int, ...], type]:
    """The message classes of a schema text, made once (a serializer takes only its own class's messages)."""
    schema = load(text)
    return {path: message_class(schema.message(path)) for path in (ORDER, LINE, REFUND, CLASH)}


def message(cls: type, path: tuple[int, ...], i: int):
    """Record ``i`` of the message at ``path``."""
    if path == ORDER:
        return cls(id=i, item=f"item-{i}", price=i * 0.25)
    if path == LINE:
        return cls(sku=f"sku-{i}", count=i)
    if path == REFUND:
        found = cls(id=i, amount=i * 1.5, reason=f"r{i}")
        if "note" in cls.DESCRIPTOR.fields_by_name and i % 2:
            found.note = f"n{i}"
        return found
    return cls(id=f"clash-{i}")


def expected(path: tuple[int, ...], i: int, version: int = 1) -> dict:
    """The value columns record ``i`` of ``path`` fills (the others are null in its row)."""
    if path == ORDER:
        return {"id": i, "item": f"item-{i}", "price": i * 0.25}
    if path == LINE:
        return {"sku": f"sku-{i}", "count": i}
    found: dict = {"id": i, "amount": i * 1.5, "reason": f"r{i}"}
    if version == 2:
        found["note"] = f"n{i}" if i % 2 else None
    return found


class Feed:
    """Records of the schema's messages to a topic through ProtobufSerializer, kept by (partition,
    offset): the good ones with what their row holds, the bad ones with a piece of their reason."""

    def __init__(self, bootstrap: str, client: SchemaRegistryClient, topic: str, **producer):
        self.topic, self.client = topic, client
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **producer})
        self.context = SerializationContext(topic, MessageField.VALUE)
        self.good: dict[tuple[int, int], dict] = {}
        self.bad: dict[tuple[int, int], str] = {}
        self._serializers: dict[tuple[str, tuple[int, ...]], ProtobufSerializer] = {}

    def serializer(self, text: str, path: tuple[int, ...]) -> ProtobufSerializer:
        key = (text, path)
        if key not in self._serializers:
            cls = classes(text)[path]
            self._serializers[key] = ProtobufSerializer(cls, self.client, {"use.deprecated.format": False})
        return self._serializers[key]

    def _send(self, value: bytes, partition: int, good: dict | None, reason: str = "") -> None:
        def placed(err, msg):
            assert err is None, err
            if good is None:
                self.bad[(msg.partition(), msg.offset())] = reason
            else:
                self.good[(msg.partition(), msg.offset())] = good

        self.producer.produce(self.topic, value, partition=partition, on_delivery=placed)

    def send(self, path: tuple[int, ...], i: int, partition: int = 0, text: str = SHOP, **how) -> None:
        """Record ``i`` of ``path``; ``want``: its row's values (default ``expected``), ``bad``: a
        piece of the reason it is a dead letter."""
        cls = classes(text)[path]
        value = self.serializer(text, path)(message(cls, path, i), self.context)
        if "bad" in how:
            self._send(value, partition, None, how["bad"])
        else:
            self._send(value, partition, how.get("want", expected(path, i)))

    def send_bad(self, value: bytes, reason: str, partition: int = 0) -> None:
        self._send(value, partition, None, reason)

    def flush(self) -> None:
        assert self.producer.flush(60) == 0


def at(row: dict) -> tuple[int, int]:
    return (row["kafka"]["partition"], row["kafka"]["offset"])


VALUE_COLUMNS = ("id", "item", "price", "sku", "count", "amount", "reason")


def check(rows: list[dict], dead: list[dict], feed: Feed, columns=VALUE_COLUMNS) -> None:
    """Each good record once with its message's columns (the other messages' null), each bad one
    once in ``~dlq`` with its reason."""
    assert sorted(at(r) for r in rows) == sorted(feed.good), "each good record once"
    for row in rows:
        want = feed.good[at(row)]
        assert {k: row[k] for k in columns} == {k: want.get(k) for k in columns}, row
    reasons = {at(r): r["reason"] for r in dead}
    assert sorted(reasons) == sorted(feed.bad) and len(dead) == len(feed.bad)
    for where, reason in feed.bad.items():
        assert reason in reasons[where], (reasons[where], reason)


def test_each_record_fills_the_columns_of_the_message_its_indexes_name(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "shop", "value_schema_id_prefix", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    feed = Feed(broker.bootstrap, client, "shop")
    for i in range(20):
        feed.send(ORDER, i)
    feed.flush()
    settled(broker.data_dir, "shop", 20, 0)  # the table's columns are Order's first
    for i in range(20, 50):
        feed.send((ORDER, LINE, REFUND)[i % 3], i)
    feed.flush()
    schema_id = client.get_latest_version("shop-value").schema_id
    assert client.get_versions("shop-value") == [1], "one schema, every message under it"
    feed.send(CLASH, 50, bad=f"schema id {schema_id} message shop.Clash does not fit the table's columns")
    feed.send_bad(frame(schema_id, (3,)) + b"\x08\x01", "message indexes [3] name no message of the schema")
    feed.send_bad(frame(schema_id, REFUND) + b"\xff\xff", "not a shop.Refund")
    feed.send_bad(frame(schema_id)[:5] + b"\x81", "message indexes do not decode")
    feed.flush()
    rows, dead = settled(broker.data_dir, "shop", len(feed.good), len(feed.bad))
    check(rows, dead, feed)
    types = column_types(catalog, "shop")
    assert {k: types[k] for k in VALUE_COLUMNS} == {
        "id": "long",
        "item": "string",
        "price": "double",
        "sku": "string",
        "count": "int",
        "amount": "double",
        "reason": "string",
    }
    assert "translating shop failed" not in broker.read_log()


def test_latest_mode_reads_each_message_as_the_latest_versions_message_of_its_name(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "shop-latest", "value_schema_latest", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    client.register_schema("shop-latest-value", Schema(SHOP, "PROTOBUF"))
    latest = client.register_schema("shop-latest-value", Schema(SHOP_V2, "PROTOBUF"))
    feed = Feed(broker.bootstrap, client, "shop-latest")
    for i in range(30):  # version-1 records: read as version 2's messages (Refund's note unset)
        path = (ORDER, LINE, REFUND)[i % 3]
        want = {**expected(path, i), "note": None} if path == REFUND else expected(path, i)
        feed.send(path, i, want=want)
    for i in range(30, 45):
        feed.send(REFUND, i, text=SHOP_V2, want=expected(REFUND, i, 2))
    feed.send_bad(frame(latest, (7,)) + b"", "message indexes [7] name no message of the schema")
    feed.flush()
    rows, dead = settled(broker.data_dir, "shop-latest", len(feed.good), len(feed.bad))
    check(rows, dead, feed, (*VALUE_COLUMNS, "note"))
    assert "note" in column_types(catalog, "shop-latest")
