"""The Schema Registry of one real broker, driven by confluent-kafka's SchemaRegistryClient and its
Avro serializers, and by raw HTTP for Confluent's error codes and bad input."""

from __future__ import annotations

import http.client
import json
import struct
import time
import uuid
from urllib.parse import urlsplit

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.broker_process import BrokerProcess

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
USER_BAD = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "level", "type": "int"}]}  # no default


def registry_url(broker: BrokerProcess) -> str:
    return (broker.data_dir / "strom.schema-registry").read_text().strip()


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as process:
        yield process


def resident_bytes(broker: BrokerProcess) -> int:
    with open(f"/proc/{broker.process.pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def call(url: str, method: str, path: str, body: bytes | dict | None = None, timeout_s: float = 10):
    """(status, content type, decoded JSON or text) of one request."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    try:
        payload = json.dumps(body).encode() if isinstance(body, dict) else body
        headers = {"Content-Type": CONTENT_TYPE} if payload is not None else {}
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = raw.decode()
        return response.status, response.getheader("Content-Type"), decoded
    finally:
        conn.close()


def test_confluent_client_registers_evolves_serializes_and_deletes(broker):
    url = registry_url(broker)
    client = SchemaRegistryClient({"url": url})
    topic = f"users-{uuid.uuid4().hex[:6]}"
    subject = f"{topic}-value"
    assert client.get_subjects() == []

    serializer = AvroSerializer(client, json.dumps(USER_V1))
    users = [{"name": f"user-{i}", "age": 20 + i} for i in range(5)]
    context = SerializationContext(topic, MessageField.VALUE)
    encoded = [serializer(user, context) for user in users]  # registers the schema on first use
    v1 = client.get_latest_version(subject)
    assert v1.version == 1
    assert encoded[0][:5] == b"\x00" + struct.pack(">I", v1.schema_id)
    assert json.loads(v1.schema.schema_str) == USER_V1

    # a compatible change (a field with a default) is the next version, under a new id
    v2_id = client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert v2_id != v1.schema_id
    assert client.get_versions(subject) == [1, 2]
    assert client.get_compatibility() == "BACKWARD"
    assert client.test_compatibility(subject, Schema(json.dumps(USER_BAD), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(USER_BAD), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert client.get_versions(subject) == [1, 2]
    # the same schema again is the same id and version, not a new one
    assert client.lookup_schema(subject, Schema(json.dumps(USER_V1), "AVRO")).version == 1

    v2_serializer = AvroSerializer(client, json.dumps(USER_V2), conf={"auto.register.schemas": False})
    encoded.append(v2_serializer({"name": "new", "age": 1, "email": "n@example.com"}, context))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in encoded:
        producer.produce(topic, value=value)
    assert producer.flush(15) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received = []
    deadline = time.monotonic() + 30
    while len(received) < len(encoded) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value())
    consumer.close()
    assert received == encoded  # byte-exact: prefix, schema id, Avro body

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))  # a fresh client: ids from the broker
    decoded = [deserializer(value, context) for value in received]
    assert decoded == [*users, {"name": "new", "age": 1, "email": "n@example.com"}]

    # soft delete of a version, then of the subject; then permanently
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.delete_subject(subject) == [1]
    assert client.get_subjects() == []
    status, _, body = call(url, "GET", "/subjects?deleted=true")
    assert (status, body) == (200, [subject])
    status, _, body = call(url, "GET", f"/schemas/ids/{v1.schema_id}")  # a soft-deleted id is still readable
    assert status == 200 and json.loads(body["schema"]) == USER_V1
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    status, _, body = call(url, "GET", "/subjects?deleted=true")
    assert (status, body) == (200, [])
    status, _, body = call(url, "GET", f"/schemas/ids/{v1.schema_id}")
    assert (status, body["error_code"]) == (404, 40403)

    # ids are never handed out again, even after a restart that replays the compacted topic
    broker.restart()
    url = registry_url(broker)
    again = SchemaRegistryClient({"url": url})
    new_id = again.register_schema(f"other-{topic}", Schema('"string"', "AVRO"))
    assert new_id > v2_id


def test_state_survives_a_restart_and_config_and_mode(broker):
    url = registry_url(broker)
    client = SchemaRegistryClient({"url": url})
    first = client.register_schema("a-value", Schema(json.dumps(USER_V1), "AVRO"))
    same = client.register_schema("b-value", Schema(json.dumps(USER_V1), "AVRO"))
    assert same == first  # one schema, one id, in every subject
    assert client.set_compatibility("a-value", "FULL") == {"compatibility": "FULL"}
    assert client.set_compatibility(level="NONE") == {"compatibility": "NONE"}
    status, _, body = call(url, "PUT", "/mode/b-value", {"mode": "READONLY"})
    assert (status, body) == (200, {"mode": "READONLY"})

    broker.restart()
    url = registry_url(broker)
    assert call(url, "GET", "/subjects")[2] == ["a-value", "b-value"]
    assert call(url, "GET", f"/schemas/ids/{first}/subjects")[2] == ["a-value", "b-value"]
    assert call(url, "GET", f"/schemas/ids/{first}/versions")[2] == [
        {"subject": "a-value", "version": 1},
        {"subject": "b-value", "version": 1},
    ]
    assert call(url, "GET", "/config/a-value")[2] == {"compatibilityLevel": "FULL"}
    assert call(url, "GET", "/config")[2] == {"compatibilityLevel": "NONE"}
    assert call(url, "GET", "/mode/b-value")[2] == {"mode": "READONLY"}
    assert call(url, "GET", "/mode")[2] == {"mode": "READWRITE"}
    status, _, body = call(url, "POST", "/subjects/b-value/versions", {"schema": '"string"'})
    assert (status, body["error_code"]) == (422, 42205)  # read-only subject
    # FULL refuses what NONE (global) would allow
    status, _, body = call(url, "POST", "/subjects/a-value/versions", {"schema": json.dumps(USER_BAD)})
    assert (status, body["error_code"]) == (409, 409)
    assert call(url, "DELETE", "/config/a-value")[2] == {"compatibilityLevel": "FULL"}
    status, _, body = call(url, "POST", "/subjects/a-value/versions", {"schema": json.dumps(USER_BAD)})
    assert status == 200 and body["version"] == 2
    assert call(url, "DELETE", "/mode/b-value")[2] == {"mode": "READONLY"}
    assert call(url, "POST", "/subjects/b-value/versions", {"schema": '"string"'})[0] == 200


def test_raw_http_error_codes_and_bad_input(broker):
    url = registry_url(broker)
    status, content_type, body = call(url, "POST", "/subjects/s/versions", {"schema": json.dumps(USER_V1)})
    assert (status, content_type) == (200, CONTENT_TYPE)
    schema_id = body["id"]
    cases = [
        ("GET", "/subjects/missing/versions", None, 404, 40401),
        ("GET", "/subjects/missing/versions/latest", None, 404, 40401),
        ("GET", "/subjects/s/versions/7", None, 404, 40402),
        ("GET", "/schemas/ids/9999", None, 404, 40403),
        ("POST", "/subjects/s", {"schema": '"string"'}, 404, 40403),
        ("POST", "/subjects/missing", {"schema": '"string"'}, 404, 40401),
        ("GET", "/subjects/s/versions/abc", None, 422, 42202),
        ("GET", "/subjects/s/versions/0", None, 422, 42202),
        ("POST", "/subjects/s/versions", {"schema": '{"type":"recrd"}'}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": "{not json"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"schema": '"string"', "schemaType": "XML"}, 422, 42201),
        ("POST", "/subjects/s/versions", {"nothing": 1}, 422, 42201),
        ("PUT", "/config", {"compatibility": "SOMETIMES"}, 422, 42203),
        ("PUT", "/mode", {"mode": "SOMETIMES"}, 422, 42204),
        ("GET", "/config/s", None, 404, 40408),
        ("DELETE", "/subjects/s?permanent=true", None, 404, 40405),
        ("DELETE", "/subjects/s/versions/1?permanent=true", None, 404, 40407),
        ("POST", "/subjects/s/versions", {"schema": json.dumps(USER_BAD)}, 409, 409),
        ("POST", "/subjects/s/versions", b"{malformed", 400, 400),
        ("PATCH", "/subjects", None, 405, 405),
        ("GET", "/no/such/route", None, 404, 404),
    ]
    for method, path, body, want_status, want_code in cases:
        status, content_type, answer = call(url, method, path, body)
        assert (status, answer["error_code"], content_type) == (want_status, want_code, CONTENT_TYPE), (
            method,
            path,
            answer,
        )
        assert answer["message"]
    status, _, answer = call(
        url, "POST", "/compatibility/subjects/s/versions/latest?verbose=true", {"schema": json.dumps(USER_BAD)}
    )
    assert status == 200 and answer["is_compatible"] is False and "age" not in answer["messages"][0]
    assert "level" in answer["messages"][0]
    assert call(url, "GET", "/schemas/types")[2] == ["AVRO", "JSON", "PROTOBUF"]
    assert call(url, "GET", "/subjects/s/versions/latest/schema")[2] == USER_V1
    assert call(url, "GET", f"/schemas/ids/{schema_id}/schema")[2] == USER_V1

    # a 10 MB body is refused unread (the broker does not grow by it), and nothing changed
    huge = json.dumps({"schema": json.dumps({**USER_V1, "doc": "x" * 10_000_000})}).encode()
    before = resident_bytes(broker)
    status, _, answer = call(url, "POST", "/subjects/huge/versions", huge)
    assert (status, answer["error_code"]) == (413, 413)
    assert resident_bytes(broker) - before < 5_000_000
    assert call(url, "GET", "/subjects")[2] == ["s"]
    assert call(url, "GET", "/subjects/s/versions")[2] == [1]


def test_a_schemas_topic_written_by_confluent_is_read_as_it_is(broker):
    """Records as a Confluent registry writes them (its field order, AVRO without schemaType, a
    DELETE_SUBJECT, a CONFIG) produced into _schemas by a client are the registry's state."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])
    created["_schemas"].result(15)
    string_schema = json.dumps('"string"')[1:-1]
    records = [
        (
            b'{"keytype":"SCHEMA","subject":"old-value","version":1,"magic":1}',
            b'{"subject":"old-value","version":1,"id":21,"schema":"' + string_schema.encode() + b'","deleted":false}',
        ),
        (
            b'{"keytype":"SCHEMA","subject":"gone-value","version":1,"magic":1}',
            b'{"subject":"gone-value","version":1,"id":40,"schema":"\\"long\\"","deleted":false}',
        ),
        (b'{"keytype":"DELETE_SUBJECT","subject":"gone-value","magic":0}', b'{"subject":"gone-value","version":1}'),
        (b'{"keytype":"CONFIG","subject":"old-value","magic":0}', b'{"compatibilityLevel":"NONE"}'),
        (b'{"keytype":"NOOP","magic":0}', None),
    ]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for key, value in records:
        producer.produce("_schemas", key=key, value=value)
    assert producer.flush(15) == 0

    url = registry_url(broker)
    deadline = time.monotonic() + 10
    while call(url, "GET", "/subjects")[2] != ["old-value"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert call(url, "GET", "/subjects")[2] == ["old-value"]
    assert call(url, "GET", "/subjects?deleted=true")[2] == ["gone-value", "old-value"]
    assert call(url, "GET", "/subjects/old-value/versions/1")[2] == {
        "subject": "old-value",
        "version": 1,
        "id": 21,
        "schema": '"string"',
    }
    assert call(url, "GET", "/config/old-value")[2] == {"compatibilityLevel": "NONE"}
    # the writer carries on above the highest id it read, and compatibility NONE lets int follow string
    status, _, body = call(url, "POST", "/subjects/old-value/versions", {"schema": '"int"'})
    assert (status, body) == (200, {"id": 41, "version": 2})


def test_avro_references_are_resolved_transitively_as_confluents_registry_does(broker):
    """A schema that references only geo.Address, whose own schema references geo.Country: the
    registry resolves Address's reference too (dependencies first) and takes it, as Confluent's
    does; AvroSerializer and AvroDeserializer (which resolve references the same way) round-trip
    a record, and a reference to a version that does not exist is 42201."""
    from confluent_kafka.schema_registry import SchemaReference

    url = registry_url(broker)
    client = SchemaRegistryClient({"url": url})
    country = {"type": "enum", "name": "Country", "namespace": "geo", "symbols": ["DE", "FR"]}
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "geo",
        "fields": [{"name": "city", "type": "string"}, {"name": "country", "type": "Country"}],
    }
    user = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "home", "type": "geo.Address"}]}
    client.register_schema("geo.Country", Schema(json.dumps(country), "AVRO"))
    client.register_schema(
        "geo.Address", Schema(json.dumps(address), "AVRO", [SchemaReference("geo.Country", "geo.Country", 1)])
    )
    schema = Schema(json.dumps(user), "AVRO", [SchemaReference("geo.Address", "geo.Address", 1)])
    schema_id = client.register_schema("users-geo-value", schema)
    record = {"name": "ann", "age": 41, "home": {"city": "Lyon", "country": "FR"}}
    context = SerializationContext("users-geo", MessageField.VALUE)
    encoded = AvroSerializer(client, schema)(record, context)
    assert encoded[:5] == b"\x00" + struct.pack(">I", schema_id)
    assert AvroDeserializer(SchemaRegistryClient({"url": url}))(encoded, context) == record

    missing = {
        "schema": json.dumps(user),
        "references": [{"name": "geo.Address", "subject": "geo.Address", "version": 2}],
    }
    status, _, body = call(url, "POST", "/subjects/users-geo-value/versions", missing)
    assert (status, body["error_code"]) == (422, 42201) and "geo.Address" in body["message"]
