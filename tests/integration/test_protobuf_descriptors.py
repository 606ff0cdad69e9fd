"""A Protobuf schema sent as a descriptor (what confluent-kafka's ProtobufSerializer registers)
is stored as Confluent's registry stores it, and ``normalize=true`` does what Confluent's does:
the same .proto registered as text to one subject and auto-registered by the serializer as its
descriptor to another gets one id when both are normalized; lookups by either form find it; two
layouts of one schema normalize to one id. Without normalizing, Confluent's texts of the two
differ (type names as written against fully qualified ones, protoc's json_name on every field),
and so do their ids, in strom as in Confluent."""

from __future__ import annotations

import base64
import struct

from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass

from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import call, registry_url
from tests.schemas.test_protobuf_printer import DESCRIPTOR_PRINTED, ORDER, ORDER_NORMALIZED, RELAID, protoc_like


def order_class(json_names: bool):
    """shop.Order as a class generated from ORDER would be (protoc puts json_name on every field;
    without them, it is the descriptor strom's registry itself serves for the text)."""
    file = protoc_like()
    if not json_names:
        for message in [file.message_type[0], *file.message_type[0].nested_type]:
            for member in message.field:
                member.ClearField("json_name")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def serialize(url: str, order, topic: str, normalize: bool) -> bytes:
    client = SchemaRegistryClient({"url": url})
    serializer = ProtobufSerializer(order, client, conf={"auto.register.schemas": True, "normalize.schemas": normalize})
    message = order(id="o-1", lines=[order.Line(sku="s")], counts={"a": 2}, status=order.Status.PAID, card="c")
    data = serializer(message, SerializationContext(topic, MessageField.VALUE))
    decoded = ProtobufDeserializer(order, {}, client)(data, SerializationContext(topic, MessageField.VALUE))
    assert decoded == message
    return data


def schema_id(data: bytes) -> int:
    assert data[0] == 0
    return int(struct.unpack(">I", data[1:5])[0])


def exercise_descriptors(url: str, other_url: str) -> None:
    """Register through ``url``; read and look up through ``other_url`` too (the 3-broker test in
    tests/cluster/test_schema_types_cluster.py passes another broker's)."""
    client = SchemaRegistryClient({"url": url})

    # the text, normalized, to subject A: Confluent's normalized text is stored
    text_id = client.register_schema("orders-a-value", Schema(ORDER, "PROTOBUF"), normalize_schemas=True)
    for where in (url, other_url):
        assert call(where, "GET", f"/schemas/ids/{text_id}")[2] == {
            "schemaType": "PROTOBUF",
            "schema": ORDER_NORMALIZED,
        }

    # the serializer auto-registers the descriptor of the same .proto, normalized, to subject B
    data = serialize(url, order_class(json_names=False), "orders-b", normalize=True)
    assert schema_id(data) == text_id
    assert call(other_url, "GET", "/subjects/orders-b-value/versions/1")[2]["id"] == text_id

    # lookups by either form, in either subject, find it
    described = base64.standard_b64encode(order_class(json_names=False).DESCRIPTOR.file.serialized_pb).decode()
    for subject in ("orders-a-value", "orders-b-value"):
        for form in (ORDER, described):
            found = SchemaRegistryClient({"url": other_url}).lookup_schema(
                subject, Schema(form, "PROTOBUF"), normalize_schemas=True
            )
            assert (found.schema_id, found.version) == (text_id, 1), (subject, form[:20])

    # two layouts of one schema, normalized: one id, one version
    assert client.register_schema("orders-c-value", Schema(RELAID, "PROTOBUF"), normalize_schemas=True) == text_id
    assert client.register_schema("orders-a-value", Schema(RELAID, "PROTOBUF"), normalize_schemas=True) == text_id
    assert call(other_url, "GET", "/subjects/orders-a-value/versions")[2] == [1]

    # not normalized: the text as Confluent prints it, and protoc's descriptor as Confluent renders
    # it (fully qualified names, the map's entry message, json_name on every field, options kept):
    # two texts, so two more ids
    plain_id = client.register_schema("orders-p-value", Schema(ORDER, "PROTOBUF"))
    assert plain_id != text_id
    data = serialize(url, order_class(json_names=True), "orders-d", normalize=False)
    descriptor_id = schema_id(data)
    assert descriptor_id not in (text_id, plain_id)
    assert call(other_url, "GET", f"/schemas/ids/{descriptor_id}")[2]["schema"] == DESCRIPTOR_PRINTED
    assert call(other_url, "GET", "/subjects/orders-d-value/versions/1/schema")[2] == DESCRIPTOR_PRINTED

    # normalized, protoc's json_name still tells them apart (Confluent keeps json_name)
    normalized = schema_id(serialize(url, order_class(json_names=True), "orders-e", normalize=True))
    assert normalized not in (text_id, plain_id, descriptor_id)
    assert 'string id = 1 [json_name = "id"];' in call(other_url, "GET", f"/schemas/ids/{normalized}")[2]["schema"]

    # strom still finds the text's version in its own subject by the descriptor (Confluent
    # compares texts; strom also compares the schemas they spell)
    described = base64.standard_b64encode(order_class(json_names=True).DESCRIPTOR.file.serialized_pb).decode()
    found = SchemaRegistryClient({"url": other_url}).lookup_schema("orders-p-value", Schema(described, "PROTOBUF"))
    assert (found.schema_id, found.version) == (plain_id, 1)

    # Confluent's own meta options: imported without a reference (the serializer skips
    # confluent/*.proto), kept from the descriptor as Confluent keeps them
    customer = customer_class()
    data = ProtobufSerializer(customer, client, conf={"auto.register.schemas": True})(
        customer(email="a@example.com"), SerializationContext("customers", MessageField.VALUE)
    )
    assert call(other_url, "GET", f"/schemas/ids/{schema_id(data)}")[2]["schema"] == CUSTOMER_PRINTED
    assert client.register_schema("customers-text-value", Schema(CUSTOMER_PRINTED, "PROTOBUF")) == schema_id(data)


CUSTOMER_PRINTED = """syntax = "proto3";
package shop;

import "confluent/meta.proto";

message Customer {
  string email = 1 [(confluent.field_meta) = {
    tags: [
      "PII"
    ]
  }];
}
"""


def customer_class():
    """shop.Customer, whose email carries Confluent's field meta (tags: PII)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/customer.proto", package="shop", syntax="proto3", dependency=["confluent/meta.proto"]
    )
    email = file.message_type.add(name="Customer").field.add(
        name="email", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    )
    email.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    email.options.Extensions[meta_pb2.field_meta].tags.append("PII")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(meta_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Customer"))


def test_protobuf_descriptors_on_one_broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        url = registry_url(broker)
        exercise_descriptors(url, url)


def test_normalize_sorts_references(tmp_path):
    """Confluent's normalize sorts a Protobuf schema's references (by subject, then version): the
    same imports listed in another order are one schema, normalized."""
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        url = registry_url(broker)
        client = SchemaRegistryClient({"url": url})
        for name in ("alpha", "beta"):
            text = f'syntax = "proto3";\npackage {name};\nmessage Id {{ string value = 1; }}\n'
            client.register_schema(f"{name}-value", Schema(text, "PROTOBUF"))
        text = (
            'syntax = "proto3";\nimport "alpha.proto";\nimport "beta.proto";\n'
            "message Pair { alpha.Id a = 1; beta.Id b = 2; }\n"
        )
        alpha, beta = SchemaReference("alpha.proto", "alpha-value", 1), SchemaReference("beta.proto", "beta-value", 1)
        first = client.register_schema("pairs-value", Schema(text, "PROTOBUF", [beta, alpha]), normalize_schemas=True)
        again = client.register_schema("pairs-value", Schema(text, "PROTOBUF", [alpha, beta]), normalize_schemas=True)
        assert first == again
        answer = call(url, "GET", f"/schemas/ids/{first}")[2]
        assert [r["subject"] for r in answer["references"]] == ["alpha-value", "beta-value"]
        assert answer["schema"].startswith('syntax = "proto3";\n\nimport "alpha.proto";\nimport "beta.proto";\n')
