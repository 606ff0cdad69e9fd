"""``strom console-producer`` / ``console-consumer --value-format json|protobuf`` end to end, as
Confluent's kafka-json-schema- and kafka-protobuf-console-producer and -consumer: JSON lines in,
Confluent's wire format on a topic that validates schema ids (read back by confluent-kafka's own
deserializers), JSON lines out."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.broker_process import BrokerProcess
from tests.cli.test_console_avro import consume, produce
from tests.integration.clients import confluent_consume, unique_topic
from tests.integration.test_schema_registry import registry_url
from tests.integration.test_schema_types import ORDER_V1, reading_class
from tests.integration.test_schema_validation import create_topic

ORDERS = ['{"id": 1, "item": "book"}', '{"id": 2, "item": "pen"}']
READING_PROTO = (
    'syntax = "proto3";\npackage example;\n\nmessage Reading {\n  string sensor = 1;\n  double value = 2;\n'
    "  Unit unit = 3;\n\n  message Unit {\n    string name = 1;\n  }\n}\n"
)
READINGS = ['{"sensor": "s-1", "value": 1.5, "unit": {"name": "C"}}', '{"sensor": "s-2", "value": 2.25}']


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("console-typed") / "broker"
    with BrokerProcess(data, {"schema.registry.listeners": "http://127.0.0.1:0"}) as process:
        yield process


def test_json_schema_lines_in_and_out(broker):
    topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
    schema = ["--value-format", "json", "--property", f"value.schema={json.dumps(ORDER_V1)}"]
    sent = produce(broker, topic, ORDERS, *schema)
    assert sent.returncode == 0, sent.stderr
    client = SchemaRegistryClient({"url": registry_url(broker)})
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    context = SerializationContext(topic, MessageField.VALUE)
    deserializer = JSONDeserializer(json.dumps(ORDER_V1), schema_registry_client=client)
    assert [deserializer(m.value, context) for m in confluent_consume(broker.bootstrap, topic, 2)] == [
        json.loads(line) for line in ORDERS
    ]
    read = consume(broker, topic, 2, "--value-format", "json")
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == ORDERS

    # a line the schema refuses stops the producer with the line and why; by id works too
    bad = produce(
        broker,
        topic,
        ['{"id": "x", "item": "y"}'],
        "--value-format",
        "json",
        "--property",
        f"value.schema.id={registered.schema_id}",
    )
    assert bad.returncode == 1 and "line 1" in bad.stderr and "at id" in bad.stderr, bad.stderr
    wrong_type = produce(
        broker, topic, ORDERS, "--value-format", "protobuf", "--property", f"value.schema.id={registered.schema_id}"
    )
    assert wrong_type.returncode == 1 and "is JSON, not PROTOBUF" in wrong_type.stderr


def test_protobuf_lines_in_and_out(broker):
    topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
    sent = produce(broker, topic, READINGS, "--value-format", "protobuf", "--property", f"value.schema={READING_PROTO}")
    assert sent.returncode == 0, sent.stderr
    client = SchemaRegistryClient({"url": registry_url(broker)})
    registered = client.get_latest_version(f"{topic}-value")
    assert (registered.schema.schema_type, registered.schema.schema_str) == ("PROTOBUF", READING_PROTO)  # as written
    messages = confluent_consume(broker.bootstrap, topic, 2)
    assert messages[0].value[:6] == b"\x00" + registered.schema_id.to_bytes(4, "big") + b"\x00"
    read = consume(broker, topic, 2, "--value-format", "protobuf")
    assert read.returncode == 0, read.stderr
    assert [json.loads(line) for line in read.stdout.splitlines()] == [json.loads(line) for line in READINGS]

    # the records are what confluent-kafka's ProtobufDeserializer reads, into a class of its own
    context = SerializationContext(topic, MessageField.VALUE)
    reading = reading_class()
    first = ProtobufDeserializer(reading, {}, client)(messages[0].value, context)
    assert (first.sensor, first.value) == ("s-1", 1.5)
    # and a record that confluent-kafka's ProtobufSerializer wrote, the console consumer prints
    other = unique_topic("proto-from-client")
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from tests.integration.test_schema_validation import produce as produce_records

    data = ProtobufSerializer(reading, client)(
        reading(sensor="c", value=3.0), SerializationContext(other, MessageField.VALUE)
    )
    assert produce_records(broker.bootstrap, other, [(None, data)]) == [None]
    printed = consume(broker, other, 1, "--value-format", "protobuf")
    assert json.loads(printed.stdout) == {"sensor": "c", "value": 3.0}, printed.stderr

    bad = produce(
        broker,
        topic,
        ['{"sensor": 5, "nope": 1}'],
        "--value-format",
        "protobuf",
        "--property",
        f"value.schema.id={registered.schema_id}",
    )
    assert bad.returncode == 1 and "line 1" in bad.stderr, bad.stderr
