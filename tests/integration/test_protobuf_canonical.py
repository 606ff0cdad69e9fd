"""A Protobuf schema registered as .proto text comes back as Confluent's registry prints it
(options of every kind, type names as written; comments dropped, laid out by its printer); the
same schema laid out otherwise gets the same id and version; confluent-kafka's
ProtobufSerializer, which sends a descriptor, finds it by lookup; an option changed is another
schema. ``exercise_canonical`` is shared with the 3-broker test
(tests/cluster/test_schema_types_cluster.py)."""

from __future__ import annotations

import base64
import struct

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from strom.schemas.protobuf import WELL_KNOWN
from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import call, registry_url

WRITTEN = """// orders, as the team writes them
syntax = "proto3";
package shop;

import "google/protobuf/descriptor.proto";
option java_package = "com.example.shop";   // the Java client's package
option go_package = "example.com/shop;shop";

extend google.protobuf.FieldOptions {
  string sensitive = 50001;
}

/* an order and its lines */
message Order {
  string id = 1 [json_name = "orderId"];
  string email = 2 [(sensitive) = "pii", deprecated = true];
  repeated Line lines = 3;
  message Line {
    string sku = 1;
  }
}
"""

PRINTED = """syntax = "proto3";
package shop;

import "google/protobuf/descriptor.proto";

option java_package = "com.example.shop";
option go_package = "example.com/shop;shop";

message Order {
  string id = 1 [json_name = "orderId"];
  string email = 2 [
    (sensitive) = "pii",
    deprecated = true
  ];
  repeated Line lines = 3;

  message Line {
    string sku = 1;
  }
}

extend google.protobuf.FieldOptions {
  string sensitive = 50001;
}
"""


def order_class(url: str, schema_id: int):
    """The message class of shop.Order built from the registry's descriptor of the id (as a class
    protoc generated from the same file would be)."""
    _, _, answer = call(url, "GET", f"/schemas/ids/{schema_id}?format=serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"]))
    file.name = "shop.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(WELL_KNOWN["google/protobuf/descriptor.proto"].serialized_pb)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def exercise_canonical(url: str, other_url: str) -> None:
    """Register through ``url``, read and look up through ``other_url`` too."""
    subject = "shop-orders-value"
    body = {"schemaType": "PROTOBUF", "schema": WRITTEN}
    status, _, registered = call(url, "POST", f"/subjects/{subject}/versions", body, timeout_s=30)
    assert (status, registered["version"]) == (200, 1), registered
    schema_id = registered["id"]
    for where in (url, other_url):
        assert call(where, "GET", f"/schemas/ids/{schema_id}")[2] == {"schemaType": "PROTOBUF", "schema": PRINTED}
        assert call(where, "GET", f"/subjects/{subject}/versions/1/schema")[2] == PRINTED
    # Confluent's format=ignore_extensions: no custom options, no extend blocks
    without = call(other_url, "GET", f"/schemas/ids/{schema_id}?format=ignore_extensions")[2]["schema"]
    assert without == PRINTED.replace(
        '[\n    (sensitive) = "pii",\n    deprecated = true\n  ]', "[deprecated = true]"
    ).replace("\nextend google.protobuf.FieldOptions {\n  string sensitive = 50001;\n}\n", "")
    assert "sensitive" not in without and "deprecated = true" in without

    # the same schema laid out otherwise, without its comments: the same id and version
    relaid = "\n".join(line.split("//")[0].rstrip() for line in WRITTEN.splitlines())
    relaid = relaid.replace("/* an order and its lines */", "").replace("\n\n", "\n").replace(" = ", "=")
    again = call(other_url, "POST", f"/subjects/{subject}/versions", {**body, "schema": relaid}, timeout_s=30)[2]
    assert again == {"id": schema_id, "version": 1}
    assert call(other_url, "POST", f"/subjects/{subject}", {**body, "schema": relaid})[2]["id"] == schema_id

    # confluent-kafka's serializer sends the descriptor; its lookup finds the text registered
    client = SchemaRegistryClient({"url": other_url})
    order = order_class(other_url, schema_id)
    context = SerializationContext("shop-orders", MessageField.VALUE)
    serializer = ProtobufSerializer(order, client, conf={"auto.register.schemas": False})
    data = serializer(order(id="o-1", email="a@example.com"), context)
    assert data[:6] == b"\x00" + struct.pack(">I", schema_id) + b"\x00"
    assert ProtobufDeserializer(order, {}, client)(data, context) == order(id="o-1", email="a@example.com")
    assert client.get_schema(schema_id).schema_str == PRINTED

    # another option value is another schema: a new version with a new id, each text as written
    moved = WRITTEN.replace("example.com/shop;shop", "example.com/v2/shop;shop")
    status, _, second = call(url, "POST", f"/subjects/{subject}/versions", {**body, "schema": moved}, timeout_s=30)
    assert status == 200 and second["version"] == 2 and second["id"] != schema_id
    assert (
        'option go_package = "example.com/v2/shop;shop";'
        in call(other_url, "GET", f"/schemas/ids/{second['id']}")[2]["schema"]
    )


def test_protobuf_text_is_kept_as_written_on_one_broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        url = registry_url(broker)
        exercise_canonical(url, url)
