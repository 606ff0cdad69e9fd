"""``strom console-producer`` / ``console-consumer --value-format avro`` end to end, as Confluent's
kafka-avro-console-producer and -consumer: JSON lines in, Avro in Confluent's wire format on the
topic (read back by confluent-kafka's AvroDeserializer, and accepted by a topic that validates
schema ids), the same JSON lines out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume, unique_topic
from tests.integration.test_schema_registry import USER_V2, registry_url
from tests.integration.test_schema_validation import create_topic

LINES = [
    '{"name": "ada", "age": 36, "email": {"string": "ada@example.org"}}',
    '{"name": "alan", "age": 41, "email": null}',
]
RECORDS = [
    {"name": "ada", "age": 36, "email": "ada@example.org"},
    {"name": "alan", "age": 41, "email": None},
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("console-avro") / "broker"
    with BrokerProcess(data, {"schema.registry.listeners": "http://127.0.0.1:0"}) as process:
        yield process


def strom(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def produce(broker, topic: str, lines: list[str], *extra: str) -> subprocess.CompletedProcess:
    return strom(
        "console-producer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--property",
        f"schema.registry.url={registry_url(broker)}",
        *extra,
        input="".join(line + "\n" for line in lines),
    )


def consume(broker, topic: str, count: int, *extra: str) -> subprocess.CompletedProcess:
    return strom(
        "console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(count),
        "--timeout-ms",
        "15000",
        "--property",
        f"schema.registry.url={registry_url(broker)}",
        *extra,
    )


def test_json_in_avro_on_the_topic_json_out(broker):
    topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
    sent = produce(broker, topic, LINES, "--value-format", "avro", "--property", f"value.schema={json.dumps(USER_V2)}")
    assert sent.returncode == 0, sent.stderr

    client = SchemaRegistryClient({"url": registry_url(broker)})
    registered = client.get_latest_version(f"{topic}-value")
    assert json.loads(registered.schema.schema_str) == USER_V2
    messages = confluent_consume(broker.bootstrap, topic, 2)
    deserializer = AvroDeserializer(client)
    context = SerializationContext(topic, MessageField.VALUE)
    assert [deserializer(m.value, context) for m in messages] == RECORDS
    assert {m.value[1:5] for m in messages} == {registered.schema_id.to_bytes(4, "big")}

    # value.schema.id: an already registered schema, by its id
    again = produce(
        broker, topic, LINES[:1], "--value-format", "avro", "--property", f"value.schema.id={registered.schema_id}"
    )
    assert again.returncode == 0, again.stderr

    read = consume(broker, topic, 3, "--value-format", "avro", "--property", "print.offset=true")
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == [f"Offset:{i}\t{line}" for i, line in enumerate([*LINES, LINES[0]])]


def test_avro_keys_and_values(broker):
    topic = unique_topic("avro-kv")
    lines = [f'"user-{i}"\t{line}' for i, line in enumerate(LINES)]
    avro = ["--key-format", "avro", "--value-format", "avro", "--property", "parse.key=true"]
    schemas = ["--property", 'key.schema="string"', "--property", f"value.schema={json.dumps(USER_V2)}"]
    sent = produce(broker, topic, lines, *avro, *schemas)
    assert sent.returncode == 0, sent.stderr
    read = consume(broker, topic, 2, "--key-format", "avro", "--value-format", "avro", "--property", "print.key=true")
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == lines
    # without --key-format avro the key's bytes are Confluent's wire format, printed as they are
    raw = consume(broker, topic, 2, "--value-format", "avro", "--property", "print.key=true")
    assert raw.stdout.splitlines()[0].startswith("\x00")


def test_bad_input_and_undecodable_records_are_one_line_errors(broker):
    topic = unique_topic("avro-bad")
    schema = ["--value-format", "avro", "--property", f"value.schema={json.dumps(USER_V2)}"]
    sent = produce(broker, topic, [LINES[0], '{"name": "x"}', LINES[1]], *schema)
    assert sent.returncode == 1
    assert "line 2: the value is not a record of schema" in sent.stderr
    no_registry = strom(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--value-format", "avro"
    )
    assert no_registry.returncode == 1
    assert "needs --property schema.registry.url=URL" in no_registry.stderr
    unparsable = produce(broker, topic, LINES, "--value-format", "avro", "--property", "value.schema={not json")
    assert unparsable.returncode == 1 and "the schema does not parse" in unparsable.stderr

    plain = strom("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, input="plain text\n")
    assert plain.returncode == 0, plain.stderr
    read = consume(broker, topic, 5, "--value-format", "avro")
    assert read.returncode == 1
    assert "Unknown magic byte!" in read.stderr
