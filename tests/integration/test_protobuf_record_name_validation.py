"""RecordNameStrategy validation of Protobuf records on one broker, seen from confluent-kafka's
ProtobufSerializer: a .proto file with several messages is registered under each message's full
name, and each record is checked against the message its message indexes name (not the file's
first message). Records whose indexes are malformed or name no message, or a message whose name is
not a subject, are refused per record; nothing of their batch is written. ``exercise_record_names``
is shared with the 3-broker test (tests/cluster/test_schema_validation_cluster.py)."""

from __future__ import annotations

import struct

from confluent_kafka import KafkaError
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from tests.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume
from tests.integration.test_schema_registry import registry_url
from tests.integration.test_schema_validation import codes, create_topic, produce, produce_raw

STRATEGY = "io.confluent.kafka.serializers.subject.RecordNameStrategy"


def shop_classes() -> dict[str, type]:
    """Message classes of one file shop.proto: Order (with nested Line), Refund, Audit."""
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    refund = file.message_type.add(name="Refund")
    refund.field.add(name="order", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    refund.field.add(name="cents", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    audit = file.message_type.add(name="Audit")
    audit.field.add(name="who", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    names = ("shop.Order", "shop.Order.Line", "shop.Refund", "shop.Audit")
    return {name: GetMessageClass(pool.FindMessageTypeByName(name)) for name in names}


def exercise_record_names(bootstrap: str, url: str, topic: str, leader_bootstrap: str) -> None:
    """Each subject is used at once after its registration: on a cluster, a topic leader whose view
    has not read it yet refuses retriably (NOT_ENOUGH_REPLICAS), and the producer retries."""
    client = SchemaRegistryClient({"url": url})
    context = SerializationContext(topic, MessageField.VALUE)
    classes = shop_classes()
    by_name = {"subject.name.strategy": record_subject_name_strategy}
    order = ProtobufSerializer(classes["shop.Order"], client, conf=by_name)(classes["shop.Order"](id="o-1"), context)
    refund_message = classes["shop.Refund"](order="o-1", cents=250)
    refund = ProtobufSerializer(classes["shop.Refund"], client, conf=by_name)(refund_message, context)
    schema_id = struct.unpack(">I", order[1:5])[0]
    assert struct.unpack(">I", refund[1:5])[0] == schema_id  # one file, one id, under two subjects
    assert (order[5:6], refund[5:7]) == (b"\x00", b"\x02\x02")  # message indexes [0] and [1]
    assert client.get_latest_version("shop.Refund").schema_id == schema_id

    # a nested message (confluent-kafka's Python serializer finds only top-level messages with
    # use.latest.version, so its bytes are written here as Java's serializer writes them)
    text = client.get_schema(schema_id).schema_str
    assert client.register_schema("shop.Order.Line", Schema(text, "PROTOBUF")) == schema_id
    prefix = b"\x00" + struct.pack(">I", schema_id)
    line = prefix + b"\x04\x00\x00" + classes["shop.Order.Line"](sku="x").SerializeToString()  # [0, 0]
    assert produce(bootstrap, topic, [(None, order), (None, refund), (None, line)]) == [None] * 3

    body = classes["shop.Audit"](who="me").SerializeToString()
    refused = [
        (None, refund),  # itself valid, refused with its batch
        (None, prefix + b"\x02\x04" + body),  # [2]: shop.Audit, not a subject
        (None, prefix + b"\x02\x0a" + body),  # [5]: no such message
        (None, prefix + b"\x04\x02"),  # a count of 2, one index: runs past the value
        (None, prefix),  # no indexes at all
    ]
    assert (
        codes(produce(bootstrap, topic, refused))
        == [KafkaError._INVALID_DIFFERENT_RECORD] + [KafkaError.INVALID_RECORD] * 4
    )
    partition = produce_raw(leader_bootstrap, topic, build_batch([NewRecord(v) for _, v in refused]))
    assert partition.error_code == ErrorCode.INVALID_RECORD
    why = f"the value with schema id {schema_id}: its Protobuf message indexes"
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, f"the value's schema id {schema_id} is not registered under subject 'shop.Audit'"),
        (2, f"{why} [5] name no message of schema id {schema_id}"),
        (3, f"{why} run past its end"),
        (4, f"{why} run past its end"),
    ]
    # once shop.Audit is a subject, a serializer using its latest version writes records that pass
    assert client.register_schema("shop.Audit", Schema(text, "PROTOBUF")) == schema_id
    latest = {**by_name, "auto.register.schemas": False, "use.latest.version": True}
    audited = ProtobufSerializer(classes["shop.Audit"], client, conf=latest)(classes["shop.Audit"](who="me"), context)
    assert audited == prefix + b"\x02\x04" + body
    assert produce(bootstrap, topic, [(None, audited)]) == [None]

    consumed = confluent_consume(bootstrap, topic, 4)
    assert [m.value for m in consumed] == [order, refund, line, audited]
    read_refund = ProtobufDeserializer(classes["shop.Refund"], {}, client)
    assert read_refund(consumed[1].value, context) == refund_message
    assert confluent_consume(bootstrap, topic, 1, offset=4, timeout=1.0) == []


def test_protobuf_record_names_on_one_broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        topic = create_topic(
            broker.bootstrap,
            {"confluent.value.schema.validation": "true", "confluent.value.subject.name.strategy": STRATEGY},
        )
        exercise_record_names(broker.bootstrap, registry_url(broker), topic, broker.bootstrap)
