"""JSON Schema and Protobuf in the Schema Registry (issue 30), seen from confluent-kafka's own
JSONSerializer/JSONDeserializer and ProtobufSerializer/ProtobufDeserializer producing through a
broker that validates schema ids on produce, and from raw HTTP. ``exercise_json`` and
``exercise_protobuf`` are shared with the 3-broker test (tests/cluster/test_schema_types_cluster.py).

The Protobuf messages are classes made at run time from descriptors built here by hand (the
serializer sends their descriptor, base64, as a real generated class would) and protoc-generated
classes that googleapis-common-protos ships (google.rpc.Status imports google/protobuf/any.proto:
a well-known type, and with skip.known.types=false a schema reference)."""

from __future__ import annotations

import base64
import json
import struct

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass
from google.rpc import status_pb2

from tests.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume
from tests.integration.test_schema_registry import call, registry_url
from tests.integration.test_schema_registry_tls import tls_overrides
from tests.integration.test_schema_validation import codes, create_topic, produce
from tests.tls_certs import make_certificates

ORDER_V1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"],
    "additionalProperties": False,
}
# a property added to a closed content model: BACKWARD compatible (no old document has it)
ORDER_V2 = {**ORDER_V1, "properties": {**ORDER_V1["properties"], "note": {"type": "string"}}}
# a required property added: old documents lack it
ORDER_REQUIRED = {**ORDER_V2, "required": ["id", "item", "note"]}
# id narrowed from integer to string: TYPE_CHANGED
ORDER_RETYPED = {**ORDER_V2, "properties": {**ORDER_V2["properties"], "id": {"type": "string"}}}
OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}
OPEN_ADDED = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}

READING_V1 = 'syntax = "proto3";\npackage example;\n\nmessage Reading {\n  string sensor = 1;\n  double value = 2;\n}\n'


def reading_class(extra_field: tuple[str, int, int] | None = None, file_name: str = "reading.proto"):
    """A message class for example.Reading, built from a hand-made descriptor: sensor = 1 (string),
    value = 2 (double), and optionally one more (name, number, type)."""
    file = descriptor_pb2.FileDescriptorProto(name=file_name, package="example", syntax="proto3")
    message = file.message_type.add(name="Reading")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="sensor", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(name="value", number=2, type=field.TYPE_DOUBLE, label=field.LABEL_OPTIONAL)
    if extra_field is not None:
        name, number, kind = extra_field
        message.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("example.Reading"))


def exercise_json(bootstrap: str, url: str, topic: str) -> None:
    client = SchemaRegistryClient({"url": url})
    subject = f"{topic}-value"
    context = SerializationContext(topic, MessageField.VALUE)
    serializer = JSONSerializer(json.dumps(ORDER_V1), client)
    orders = [{"id": i, "item": f"item-{i}"} for i in range(3)]
    encoded = [serializer(order, context) for order in orders]  # registers ORDER_V1 under <topic>-value
    v1 = client.get_latest_version(subject)
    assert (v1.version, v1.schema.schema_type) == (1, "JSON")
    assert encoded[0][:5] == b"\x00" + struct.pack(">I", v1.schema_id)
    assert json.loads(v1.schema.schema_str) == ORDER_V1
    # the same schema spelt with other whitespace is the same schema: same id, no new version
    spaced = Schema(json.dumps(ORDER_V1, indent=4), "JSON")
    assert client.register_schema(subject, spaced) == v1.schema_id
    assert client.lookup_schema(subject, spaced).version == 1
    with pytest.raises(SerializationError):
        serializer({"id": "not an int", "item": "x"}, context)  # the client validates against the schema

    # evolution under BACKWARD (the default): a property added to a closed model passes; a
    # required property, a changed type are refused with 409
    assert client.test_compatibility(subject, Schema(json.dumps(ORDER_V2), "JSON")) is True
    v2_id = client.register_schema(subject, Schema(json.dumps(ORDER_V2), "JSON"))
    assert v2_id != v1.schema_id and client.get_versions(subject) == [1, 2]
    for bad in (ORDER_REQUIRED, ORDER_RETYPED):
        assert client.test_compatibility(subject, Schema(json.dumps(bad), "JSON")) is False
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(subject, Schema(json.dumps(bad), "JSON"))
        assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    status, _, verbose = call(
        url,
        "POST",
        f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
        {"schema": json.dumps(ORDER_REQUIRED), "schemaType": "JSON"},
    )
    assert status == 200 and verbose["is_compatible"] is False
    assert any("REQUIRED_ATTRIBUTE_ADDED" in message for message in verbose["messages"]), verbose

    # produced through the broker, validated there; plain JSON without the prefix is refused
    assert produce(bootstrap, topic, [(None, e) for e in encoded]) == [None] * 3
    errors = produce(bootstrap, topic, [(None, json.dumps(orders[0]).encode())])
    assert codes(errors) == [KafkaError.INVALID_RECORD]
    consumed = confluent_consume(bootstrap, topic, 3)
    assert [m.value for m in consumed] == encoded  # byte-exact
    deserializer = JSONDeserializer(json.dumps(ORDER_V1), schema_registry_client=client)
    assert [deserializer(m.value, context) for m in consumed] == orders
    by_id = JSONDeserializer(None, schema_registry_client=client)  # the writer's schema, fetched by id
    assert [by_id(m.value, context) for m in consumed] == orders
    assert confluent_consume(bootstrap, topic, 1, offset=3, timeout=1.0) == []


def exercise_protobuf(bootstrap: str, url: str, topic: str) -> None:
    client = SchemaRegistryClient({"url": url})
    subject = f"{topic}-value"
    context = SerializationContext(topic, MessageField.VALUE)
    reading = reading_class()
    serializer = ProtobufSerializer(reading, client)
    readings = [reading(sensor=f"s-{i}", value=i / 4) for i in range(3)]
    encoded = [serializer(r, context) for r in readings]  # registers the descriptor (base64)
    v1 = client.get_latest_version(subject)
    assert (v1.version, v1.schema.schema_type) == (1, "PROTOBUF")
    assert encoded[0][:6] == b"\x00" + struct.pack(">I", v1.schema_id) + b"\x00"  # message index [0]
    assert v1.schema.schema_str == READING_V1  # stored and answered as .proto text
    # the same schema as .proto text (and as another file's descriptor) is the same schema
    assert client.register_schema(subject, Schema(READING_V1, "PROTOBUF")) == v1.schema_id
    elsewhere = reading_class(file_name="elsewhere.proto")
    assert ProtobufSerializer(elsewhere, client)(elsewhere(sensor="s-0", value=0.0), context) == encoded[0]
    serialized = client.get_schema(v1.schema_id, fmt="serialized").schema_str
    described = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [f.name for f in described.message_type[0].field] == ["sensor", "value"]

    # evolution: a field added is compatible; a field number reused with another type is not
    added = reading_class(("unit", 3, descriptor_pb2.FieldDescriptorProto.TYPE_STRING))
    v2_bytes = ProtobufSerializer(added, client)(added(sensor="s-9", value=9.5, unit="C"), context)
    assert client.get_versions(subject) == [1, 2]
    retyped_text = READING_V1.replace("double value = 2;", "string value = 2;")
    assert client.test_compatibility(subject, Schema(retyped_text, "PROTOBUF")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(retyped_text, "PROTOBUF"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    removed = 'syntax = "proto3";\npackage example;\nmessage Other {\n  string x = 1;\n}\n'
    assert client.test_compatibility(subject, Schema(removed, "PROTOBUF")) is False  # MESSAGE_REMOVED

    # produced through the broker with validation on; read back byte-exact and decoded
    assert produce(bootstrap, topic, [(None, e) for e in [*encoded, v2_bytes]]) == [None] * 4
    consumed = confluent_consume(bootstrap, topic, 4)
    assert [m.value for m in consumed] == [*encoded, v2_bytes]
    deserializer = ProtobufDeserializer(reading, {}, client)
    assert [deserializer(m.value, context) for m in consumed[:3]] == readings
    newer = ProtobufDeserializer(added, {}, client)
    assert newer(consumed[3].value, context) == added(sensor="s-9", value=9.5, unit="C")
    # soft delete of version 2, then permanent: version 1 and its id stay readable
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.delete_version(subject, 2, permanent=True) == 2
    assert client.get_schema(v1.schema_id, fmt="serialized").schema_type == "PROTOBUF"
    # a record naming the id of another subject's schema is refused
    status_id = client.register_schema("status-value", Schema(READING_V1.replace("Reading", "Status2"), "PROTOBUF"))
    stray = b"\x00" + struct.pack(">I", status_id) + b"\x00" + readings[0].SerializeToString()
    assert codes(produce(bootstrap, topic, [(None, stray)])) == [KafkaError.INVALID_RECORD]


def exercise_generated_protobuf(url: str, topic: str) -> None:
    """A protoc-generated class importing a well-known type: without a reference (the default,
    skip.known.types) and with one (its import registered as a subject of its own)."""
    client = SchemaRegistryClient({"url": url})
    context = SerializationContext(topic, MessageField.VALUE)
    detail = any_pb2.Any(type_url="type.example/x", value=b"\x01\x02")
    status = status_pb2.Status(code=5, message="not found", details=[detail])
    for skip in (True, False):
        serializer = ProtobufSerializer(status_pb2.Status, client, conf={"skip.known.types": skip})
        data = serializer(status, context)
        assert ProtobufDeserializer(status_pb2.Status, {}, client)(data, context) == status
    registered = client.get_latest_version(f"{topic}-value")
    assert 'import "google/protobuf/any.proto";' in registered.schema.schema_str
    assert [r.name for r in registered.schema.references] == ["google/protobuf/any.proto"]
    assert client.get_subjects().count("google/protobuf/any.proto") == 1


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as process:
        yield process


def test_json_schema_on_one_broker(broker):
    topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
    exercise_json(broker.bootstrap, registry_url(broker), topic)


def test_protobuf_on_one_broker(broker):
    topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
    url = registry_url(broker)
    exercise_protobuf(broker.bootstrap, url, topic)
    exercise_generated_protobuf(url, "statuses")


def test_bad_json_and_protobuf_schemas_get_42201_and_change_nothing(broker):
    url = registry_url(broker)
    cases = [
        ({"schema": '{"type": 5}', "schemaType": "JSON"}, "type"),
        ({"schema": "[1, 2]", "schemaType": "JSON"}, "object or a boolean"),
        ({"schema": "{not json", "schemaType": "JSON"}, "not JSON"),
        ({"schema": "message { nope", "schemaType": "PROTOBUF"}, "line 1"),
        ({"schema": 'syntax = "proto3"; message A { Nope x = 1; }', "schemaType": "PROTOBUF"}, "Nope"),
        ({"schema": 'syntax = "proto3"; message A { int32 x = 1; string y = 1; }', "schemaType": "PROTOBUF"}, "1"),
        ({"schema": 'import "missing.proto"; message A {}', "schemaType": "PROTOBUF"}, "missing.proto"),
        ({"schema": "", "schemaType": "PROTOBUF"}, "no message"),
    ]
    for body, fragment in cases:
        status, _, answer = call(url, "POST", "/subjects/bad-value/versions", body)
        assert (status, answer["error_code"]) == (422, 42201), (body, answer)
        assert answer["message"].startswith("Invalid schema") and fragment in answer["message"], answer
    assert call(url, "GET", "/subjects")[2] == []
    # a subject keeps one type: a JSON schema after a Protobuf one is refused under BACKWARD
    client = SchemaRegistryClient({"url": url})
    client.register_schema("mixed-value", Schema(READING_V1, "PROTOBUF"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("mixed-value", Schema(json.dumps(OPEN), "JSON"))
    assert refused.value.http_status_code == 409 and "schema type" in str(refused.value)


def test_open_content_model_rules(broker):
    """Confluent's JSON rules for an open content model: adding a property is not BACKWARD
    compatible (old documents may hold it with any value); removing one is."""
    client = SchemaRegistryClient({"url": registry_url(broker)})
    client.register_schema("open-value", Schema(json.dumps(OPEN), "JSON"))
    assert client.test_compatibility("open-value", Schema(json.dumps(OPEN_ADDED), "JSON")) is False
    client.set_compatibility("open-value", "FORWARD")
    assert client.test_compatibility("open-value", Schema(json.dumps(OPEN_ADDED), "JSON")) is True
    client.register_schema("open-value", Schema(json.dumps(OPEN_ADDED), "JSON"))
    # normalize=true: key order does not make another schema
    reordered = json.dumps({"properties": OPEN_ADDED["properties"], "type": "object"})
    first = client.register_schema("norm-value", Schema(json.dumps(OPEN_ADDED), "JSON"), normalize_schemas=True)
    assert client.register_schema("norm-value", Schema(reordered, "JSON"), normalize_schemas=True) == first


def exercise_combined(url: str) -> None:
    """Confluent's diff-combined-schema-examples through confluent-kafka's client: oneOf read as
    anyOf with a branch more is BACKWARD compatible (#11, COMBINED_TYPE_EXTENDED), so is allOf
    read as oneOf with fewer branches (#19); anyOf read as a oneOf that lost a branch is not (#17,
    COMBINED_TYPE_CHANGED): 409 on register, the difference named by the verbose check. And
    draft 2020-12's unevaluatedProperties is a content model (diff-schema-examples-2020-12 #33);
    a required name beside a 2020-12 $ref is refused, a tuple an allOf branch evaluates is read.
    Shared with the 3-broker test (tests/cluster/test_schema_types_cluster.py)."""
    client = SchemaRegistryClient({"url": url})

    def prop1(schema: dict) -> Schema:
        return Schema(json.dumps({"type": "object", "properties": {"prop1": schema}}), "JSON")

    string, number = {"type": "string"}, {"type": "number"}
    # (a title on version 1, so that the refused schema below is not one the subject holds)
    client.register_schema("combined-value", prop1({"oneOf": [{"title": "text", **string}]}))
    assert client.test_compatibility("combined-value", prop1({"anyOf": [number, string]})) is True
    any_of = client.register_schema("combined-value", prop1({"anyOf": [number, string]}))
    assert client.test_compatibility("combined-value", prop1({"oneOf": [string]})) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("combined-value", prop1({"oneOf": [string]}))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    body = {"schema": prop1({"oneOf": [string]}).schema_str, "schemaType": "JSON"}
    status, _, verbose = call(url, "POST", "/compatibility/subjects/combined-value/versions/latest?verbose=true", body)
    assert status == 200 and verbose["is_compatible"] is False
    assert any("COMBINED_TYPE_CHANGED" in message for message in verbose["messages"]), verbose
    assert client.get_latest_version("combined-value").schema_id == any_of

    client.register_schema("product-value", prop1({"allOf": [number, string]}))
    assert client.test_compatibility("product-value", prop1({"oneOf": [string]})) is True

    draft_2020 = "https://json-schema.org/draft/2020-12/schema"
    closed = {"$schema": draft_2020, "properties": {"foo": string}, "unevaluatedProperties": False}
    client.register_schema("unevaluated-value", Schema(json.dumps(closed), "JSON"))
    added = {**closed, "properties": {"foo": string, "bar": number}}
    assert client.test_compatibility("unevaluated-value", Schema(json.dumps(added), "JSON")) is True
    opened = {"$schema": draft_2020, "properties": {"foo": string}}
    client.register_schema("unevaluated-value", Schema(json.dumps(opened), "JSON"))
    assert client.test_compatibility("unevaluated-value", Schema(json.dumps(closed), "JSON")) is False

    # 2020-12: a keyword beside a $ref applies with it; items an allOf branch evaluates are its own
    defs = {"a": {"type": "object", "properties": {"x": string}}}
    referring = {"$schema": draft_2020, "$defs": defs, "$ref": "#/$defs/a"}
    client.register_schema("beside-ref-value", Schema(json.dumps(referring), "JSON"))
    required = Schema(json.dumps({**referring, "required": ["x"]}), "JSON")
    assert client.test_compatibility("beside-ref-value", required) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("beside-ref-value", required)
    assert refused.value.http_status_code == 409
    pair = {"$schema": draft_2020, "type": "array", "prefixItems": [string, number], "items": False}
    client.register_schema("tuple-value", Schema(json.dumps(pair), "JSON"))
    composed = {"$schema": draft_2020, "type": "array", "allOf": [{"prefixItems": [string, number]}]}
    assert client.test_compatibility("tuple-value", Schema(json.dumps({**composed, "unevaluatedItems": False}), "JSON"))


def test_switches_between_one_of_any_of_and_all_of_get_confluents_answers(broker):
    exercise_combined(registry_url(broker))


def test_json_and_protobuf_over_https(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    with BrokerProcess(tmp_path / "broker", tls_overrides(certs)) as broker:
        url = registry_url(broker)
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca)})
        context = SerializationContext("tls-typed", MessageField.VALUE)
        json_bytes = JSONSerializer(json.dumps(ORDER_V1), client)({"id": 1, "item": "x"}, context)
        assert JSONDeserializer(json.dumps(ORDER_V1), schema_registry_client=client)(json_bytes, context) == {
            "id": 1,
            "item": "x",
        }
        context = SerializationContext("tls-proto", MessageField.VALUE)
        reading = reading_class()
        proto_bytes = ProtobufSerializer(reading, client)(reading(sensor="t", value=1.5), context)
        assert ProtobufDeserializer(reading, {}, client)(proto_bytes, context) == reading(sensor="t", value=1.5)


def test_record_name_strategy_names_a_json_title_and_a_protobuf_message(broker):
    """RecordNameStrategy on produce: a JSON schema's subject is its title, a Protobuf schema's its
    message's full name, as confluent-kafka's serializers name them."""
    client = SchemaRegistryClient({"url": registry_url(broker)})
    topic = create_topic(
        broker.bootstrap,
        {
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        },
    )
    context = SerializationContext(topic, MessageField.VALUE)
    by_record = {"subject.name.strategy": record_subject_name_strategy}
    order = JSONSerializer(json.dumps(ORDER_V1), client, conf=by_record)({"id": 1, "item": "x"}, context)
    reading = reading_class()
    proto = ProtobufSerializer(reading, client, conf=by_record)(reading(sensor="r", value=2.0), context)
    assert sorted(client.get_subjects()) == ["Order", "example.Reading"]
    assert produce(broker.bootstrap, topic, [(None, order), (None, proto)]) == [None, None]
    # under TopicNameStrategy the same ids are not registered under <topic>-value
    by_topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
    assert codes(produce(broker.bootstrap, by_topic, [(None, order)])) == [KafkaError.INVALID_RECORD]
    assert [m.value for m in confluent_consume(broker.bootstrap, topic, 2)] == [order, proto]


def test_a_large_schema_is_parsed_off_the_brokers_loop(broker):
    """A .proto of 470 KB takes seconds to parse in pure Python: while it is parsed, the broker goes on
    answering (the registry's other requests and the Kafka listener), and then registers it (its
    canonical text still fits a record of _schemas)."""
    import threading
    import time

    url = registry_url(broker)
    messages = "".join(f"message M{i} {{ string a = 1; int64 b = 2; double c = 3; }}\n" for i in range(8000))
    big = 'syntax = "proto3";\npackage big;\n' + messages
    assert 400_000 < len(json.dumps({"schema": big, "schemaType": "PROTOBUF"})) < 1024 * 1024
    answer: list = []
    posting = threading.Thread(
        target=lambda: answer.append(
            call(url, "POST", "/subjects/big-value/versions", {"schema": big, "schemaType": "PROTOBUF"}, timeout_s=120)
        )
    )
    posting.start()
    time.sleep(0.5)  # let the registration reach the parser (if it were on the loop, it would stall)
    answered_during = 0
    while posting.is_alive() and answered_during < 2:
        assert call(url, "GET", "/schemas/types")[0] == 200
        assert produce(broker.bootstrap, "during-parse", [(None, b"x")]) == [None]
        answered_during += 1
    posting.join(120)
    assert answered_during == 2, "the registration ended before the broker answered twice"
    status, _, body = answer[0]
    assert status == 200 and body["id"] >= 1, body


def test_a_protobuf_schema_copied_from_confluents_registry_keeps_its_id(tmp_path):
    """A _schemas topic copied from Confluent's registry holds Protobuf text as Confluent renders it
    (type names as written, blank lines): the same schema registered again is found, not given a
    new id, and confluent-kafka's deserializer reads records written with it (?format=serialized)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.integration.clients import WAIT_S, wait_until

    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(
            WAIT_S
        )
        confluent_text = (
            'syntax = "proto3";\npackage example;\n\nmessage Reading {\n  string sensor = 1;\n  double value = 2;\n}\n'
        )
        key = '{"keytype":"SCHEMA","subject":"copied-value","version":1,"magic":1}'
        value = json.dumps(
            {"subject": "copied-value", "version": 1, "id": 41, "schemaType": "PROTOBUF", "schema": confluent_text}
        )
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        producer.produce("_schemas", key=key.encode(), value=value.encode())
        assert producer.flush(WAIT_S) == 0

        client = SchemaRegistryClient({"url": registry_url(broker)})
        context = SerializationContext("copied", MessageField.VALUE)
        reading = reading_class()
        wait_until(lambda: client.get_subjects() == ["copied-value"], what="the registry's view reads the record")
        data = ProtobufSerializer(reading, client)(reading(sensor="c", value=1.0), context)
        assert data[1:5] == struct.pack(">I", 41)
        assert client.get_versions("copied-value") == [1]
        assert client.get_schema(41).schema_str == confluent_text  # answered as it is stored
        assert ProtobufDeserializer(reading, {}, client)(data, context) == reading(sensor="c", value=1.0)


def test_json_schema_references(broker):
    exercise_json_references(registry_url(broker))


def exercise_json_references(url: str) -> None:
    """A JSON schema referencing another subject's schema ($ref by the reference's name): the
    check follows it (a referenced version whose property changed type is refused), and
    confluent-kafka's JSONSerializer and JSONDeserializer resolve it through the registry."""
    from confluent_kafka.schema_registry import SchemaReference

    client = SchemaRegistryClient({"url": url})
    address = {"type": "object", "properties": {"zip": {"type": "integer"}}, "required": ["zip"]}
    retyped = {**address, "properties": {"zip": {"type": "string"}}}
    client.register_schema("address", Schema(json.dumps(address), "JSON"))
    client.set_compatibility("address", "NONE")
    client.register_schema("address", Schema(json.dumps(retyped), "JSON"))
    order = {"type": "object", "properties": {"ship_to": {"$ref": "address.json"}}, "required": ["ship_to"]}
    first = Schema(json.dumps(order), "JSON", [SchemaReference("address.json", "address", 1)])
    schema_id = client.register_schema("ref-orders-value", first)
    assert client.get_schema(schema_id).references[0].name == "address.json"
    second = Schema(json.dumps(order), "JSON", [SchemaReference("address.json", "address", 2)])
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("ref-orders-value", second)
    assert refused.value.http_status_code == 409 and "ship_to" in str(refused.value)

    context = SerializationContext("ref-orders", MessageField.VALUE)
    serializer = JSONSerializer(first, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    data = serializer({"ship_to": {"zip": 12345}}, context)
    assert data[1:5] == struct.pack(">I", schema_id)
    with pytest.raises(SerializationError):
        serializer({"ship_to": {"zip": "not a number"}}, context)  # validated through the reference
    assert JSONDeserializer(None, schema_registry_client=client)(data, context) == {"ship_to": {"zip": 12345}}

    # a referenced version is not deleted while a schema names it, soft-deleted referrers included (42206)
    for delete in (lambda: client.delete_version("address", 1), lambda: client.delete_subject("address")):
        with pytest.raises(SchemaRegistryError) as referenced:
            delete()
        assert (referenced.value.http_status_code, referenced.value.error_code) == (422, 42206), referenced.value
    client.delete_version("address", 2)  # named by nothing: deleted as before
    client.delete_subject("ref-orders-value")
    with pytest.raises(SchemaRegistryError) as still:
        client.delete_version("address", 1)
    assert still.value.error_code == 42206 and "subject=address,version=1" in still.value.error_message
    client.delete_subject("ref-orders-value", permanent=True)
    assert client.delete_subject("address") == [1]
    assert not {"address", "ref-orders-value"} & set(client.get_subjects())
