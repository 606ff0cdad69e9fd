"""Protobuf messages as Arrow columns (strom.iceberg.protobuf_columns): the type mapping, values
framed by hand and by confluent-kafka's own ProtobufSerializer against strom's Schema Registry,
the bad values each with its reason, and rows back to messages (the sink)."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg import protobuf_columns as pc
from strom.schemas.protobuf import parse
from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import registry_url

ORDER = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  int64 id = 1;
  string user = 2;
  double price = 3;
  bool paid = 4;
  Kind kind = 5;
  optional string coupon = 6;
  google.protobuf.Timestamp at = 7;
  Where where = 8;
  repeated string tags = 9;
  repeated Line lines = 10;
  map<string, int32> counts = 11;
  map<string, Line> by_sku = 12;
  oneof pay { string card = 13; int64 voucher = 14; }
  uint64 big = 15;
  google.protobuf.StringValue note = 16;
  sint32 delta = 17;
  float ratio = 18;
  bytes blob = 19;
  message Line { string sku = 1; uint32 qty = 2; }
}
message Where { int32 shop = 1; }
enum Kind { VIEW = 0; BUY = 1; RETURN = 2; }
"""
UTC = dt.UTC


def schema_of(text: str) -> pc.ProtobufSchema:
    parsed, _ = parse(text)
    return pc.ProtobufSchema([*parsed.dependencies.values(), parsed.file])


def order(cls, i: int):
    message = cls(
        id=i,
        user=f"user-{i}-ü",
        price=i * 1.25,
        paid=i % 2 == 0,
        kind=i % 3,
        where={"shop": i % 5},
        tags=[f"t{j}" for j in range(i % 3)],
        big=2**64 - 1 - i,
        delta=-i,
        ratio=0.5,
        blob=bytes([i % 256, 0]),
    )
    if i % 4 == 0:
        message.coupon = f"C{i}"
    message.at.seconds, message.at.nanos = 1_700_000_000 + i, 123_456_000
    message.lines.add(sku=f"s{i}", qty=i)
    message.counts["a"] = i
    message.by_sku["k"].qty = 7
    if i % 2:
        message.card = "visa"
    else:
        message.voucher = i
    if i % 3 == 0:
        message.note.value = "fragile"
    return message


def expected(i: int) -> dict:
    return {
        "id": i,
        "user": f"user-{i}-ü",
        "price": i * 1.25,
        "paid": i % 2 == 0,
        "kind": ["VIEW", "BUY", "RETURN"][i % 3],
        "coupon": f"C{i}" if i % 4 == 0 else None,
        "at": dt.datetime.fromtimestamp(1_700_000_000 + i, UTC).replace(microsecond=123_456),
        "where": {"shop": i % 5},
        "tags": [f"t{j}" for j in range(i % 3)],
        "lines": [{"sku": f"s{i}", "qty": i}],
        "counts": [("a", i)],
        "by_sku": [("k", {"sku": "", "qty": 7})],
        "card": "visa" if i % 2 else None,
        "voucher": None if i % 2 else i,
        "big": decimal.Decimal(2**64 - 1 - i),
        "note": "fragile" if i % 3 == 0 else None,
        "delta": -i,
        "ratio": 0.5,
        "blob": bytes([i % 256, 0]),
    }


def test_the_arrow_type_of_a_message():
    schema = schema_of(ORDER)
    line = pa.struct([("sku", pa.string()), ("qty", pa.int64())])
    assert pc.arrow_type(schema.message()) == pa.struct(
        [
            ("id", pa.int64()),
            ("user", pa.string()),
            ("price", pa.float64()),
            ("paid", pa.bool_()),
            ("kind", pa.string()),
            ("coupon", pa.string()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("where", pa.struct([("shop", pa.int32())])),
            ("tags", pa.list_(pa.string())),
            ("lines", pa.list_(line)),
            ("counts", pa.map_(pa.string(), pa.int32())),
            ("by_sku", pa.map_(pa.string(), line)),
            ("card", pa.string()),
            ("voucher", pa.int64()),
            ("big", pa.decimal128(20, 0)),
            ("note", pa.string()),
            ("delta", pa.int32()),
            ("ratio", pa.float32()),
            ("blob", pa.binary()),
        ]
    )
    assert schema.message((1,)).full_name == "shop.Where"
    # nested types are counted as the descriptor holds them, map entries included (as Confluent's serializer counts)
    assert [schema.message((0, i)).full_name for i in range(3)] == [
        "shop.Order.CountsEntry",
        "shop.Order.BySkuEntry",
        "shop.Order.Line",
    ]
    assert schema.path_of(schema.message().nested_types_by_name["Line"]) == (0, 2)
    recursive = schema_of('syntax = "proto3";\nmessage Node { string name = 1; repeated Node children = 2; }\n')
    with pytest.raises(pc.UnsupportedMessage, match="Node.children: the message Node contains itself"):
        pc.arrow_type(recursive.message())


def test_values_framed_by_hand_decode_to_columns_and_bad_ones_are_marked():
    schema = schema_of(ORDER)
    descriptor = schema.message()
    cls = pc.message_class(descriptor)
    good = [pc.frame(7) + order(cls, i).SerializeToString() for i in range(50)]
    values = pa.array(
        [
            *good,
            None,  # a tombstone: null, not bad
            b"plain bytes",
            pc.frame(8) + order(cls, 1).SerializeToString(),  # an id the registry does not know
            pc.frame(7, (1,)) + b"\x08\x01",  # a Where, not an Order
            pc.frame(7) + b"\xff\xff\xff",
            pc.frame(7) + cls().SerializeToString(),  # every field unset
        ],
        pa.binary(),
    )
    column, bad, reasons = pc.decode(values, descriptor, (0,), lambda schema_id: schema_id == 7)
    rows = column.to_pylist()
    assert rows[:50] == [expected(i) for i in range(50)]
    assert rows[50:55] == [None] * 5
    assert list(bad) == [False] * 51 + [True] * 4 + [False]
    assert reasons[51].startswith("no Confluent schema id prefix")
    assert reasons[52] == "schema id 8 is not a registered PROTOBUF schema"
    assert reasons[53] == "message indexes [1] name another message than the reader's [0]"
    assert reasons[54].startswith("not a shop.Order:")
    assert rows[55] == {
        **{name: None for name in ("coupon", "at", "where", "card", "voucher", "note")},
        **{"id": 0, "user": "", "price": 0.0, "paid": False, "kind": "VIEW", "tags": [], "lines": []},
        **{"counts": [], "by_sku": [], "big": decimal.Decimal(0), "delta": 0, "ratio": 0.0, "blob": b""},
    }
    # and back: a decoded row is the message it came from (the sink's way)
    assert [pc.to_message(row, cls) for row in rows[:50]] == [order(cls, i) for i in range(50)]
    assert pc.to_message({"price": decimal.Decimal("2.5"), "big": decimal.Decimal(7)}, cls) == cls(price=2.5, big=7)
    with pytest.raises(ValueError, match=r"shop.Order.kind: 'LOST' is not a value of enum shop.Kind"):
        pc.to_message({"kind": "LOST"}, cls)


def test_confluent_serializer_values_decode_and_decoded_rows_encode_back(tmp_path):
    """confluent-kafka's ProtobufSerializer registers the schema with strom's registry and frames
    the values (message indexes included); they decode to columns, and rows encoded back with
    ``frame`` + ``to_message`` are read by its ProtobufDeserializer."""
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        client = SchemaRegistryClient({"url": registry_url(broker)})
        schema = schema_of(ORDER)
        context = SerializationContext("orders", MessageField.VALUE)
        for path in ((0,), (0, 2), (1,)):
            descriptor = schema.message(path)
            cls = pc.message_class(descriptor)
            serializer = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
            if path == (0,):
                messages = [order(cls, i) for i in range(20)]
            elif path == (0, 2):
                messages = [cls(sku=f"s{i}", qty=i) for i in range(20)]
            else:
                messages = [cls(shop=i) for i in range(20)]
            framed = [serializer(m, context) for m in messages]
            schema_id = client.get_latest_version("orders-value").schema_id
            assert framed[0].startswith(pc.frame(schema_id, path))
            column, bad, _ = pc.decode(pa.array(framed), descriptor, path, lambda i: i == schema_id)
            assert not bad.any()
            if path == (0,):
                assert column.to_pylist() == [expected(i) for i in range(20)]
            back = [
                pc.frame(schema_id, path) + pc.to_message(row, cls).SerializeToString() for row in column.to_pylist()
            ]
            assert back == framed
            deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
            assert [deserializer(value, context) for value in back] == messages


def test_as_dict_is_what_the_columns_hold():
    schema = schema_of(ORDER)
    cls = pc.message_class(schema.message())
    messages = [order(cls, i) for i in range(12)] + [cls()]
    assert [pc.as_dict(m) for m in messages] == pc.columns(messages, schema.message()).to_pylist()


def test_messages_are_found_by_name():
    schema = schema_of(ORDER)
    assert schema.named(None).full_name == "shop.Order"
    assert schema.named("Where").full_name == schema.named("shop.Where").full_name == "shop.Where"
    assert schema.path_of(schema.named("Order.Line")) == (0, 2)
    with pytest.raises(KeyError, match=r"no message 'Nope' \(its top-level messages: shop.Order, shop.Where\)"):
        schema.named("Nope")
    with pytest.raises(KeyError, match="no message 'google.protobuf.Timestamp'"):
        schema.named("google.protobuf.Timestamp")  # in the pool, but not the schema's own
