"""Schema id validation on produce (confluent.value.schema.validation, issue 30), seen from real
clients: confluent-kafka's AvroSerializer producer is delivered; plain producers whose records lack
the prefix, name an unknown id or an id of another subject are refused per record with
INVALID_RECORD, nothing of their batch is readable, and a valid producer on the same topic carries
on. ``exercise_validation`` is shared with the 3-broker test (tests/cluster/test_schema_validation_cluster.py)."""

from __future__ import annotations

import datetime
import json
import struct

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient, confluent_consume, produce_with_reports, unique_topic
from tests.integration.test_schema_registry import USER_V1, registry_url

OTHER = {"type": "record", "name": "Other", "namespace": "example", "fields": [{"name": "x", "type": "long"}]}
UNKNOWN_ID = 987654


def create_topic(bootstrap: str, config: dict[str, str], replication: int = 1) -> str:
    topic = unique_topic("sv")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication, config=config)])[topic].result(WAIT_S)
    return topic


def described(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=WAIT_S).values()
    return {key: entry.value for key, entry in future.result(WAIT_S).items()}


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], **config) -> list:
    """Produce (key, value) pairs in one batch; each record's delivery error (None: delivered)."""
    # flush() sends at once; the linger keeps the records in one batch
    return produce_with_reports(bootstrap, topic, records, **{"linger.ms": 10_000, **config})


def codes(errors: list) -> list[int | None]:
    return [None if err is None else err.code() for err in errors]


def produce_raw(bootstrap: str, topic: str, batch: bytes):
    with RawClient(bootstrap) as client:
        response = client.request(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": datetime.timedelta(milliseconds=5000),
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
    [topic_response] = response.responses
    [partition] = topic_response.partition_responses
    return partition


def exercise_validation(bootstrap: str, url: str, topic: str, leader_bootstrap: str) -> None:
    client = SchemaRegistryClient({"url": url})
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    context = SerializationContext(topic, MessageField.VALUE)
    users = [{"name": f"user-{i}", "age": 20 + i} for i in range(3)]
    valid = [serializer(user, context) for user in users]  # registers USER_V1 under <topic>-value
    assert produce(bootstrap, topic, [(None, v) for v in valid]) == [None] * 3

    topic_id = struct.unpack(">I", valid[0][1:5])[0]
    other_id = client.register_schema("other-subject", Schema(json.dumps(OTHER), "AVRO"))
    assert other_id != topic_id
    body = valid[0][5:]
    refused_batch = [
        (None, valid[1]),  # itself valid, refused with its batch
        (None, b'{"name": "plain", "age": 1}'),  # no prefix
        (None, b"\x00" + struct.pack(">I", UNKNOWN_ID) + body),  # an id the registry does not know
        (None, b"\x00" + struct.pack(">I", other_id) + body),  # an id of another subject
        (None, b"\x00\x00"),  # too short for a prefix
    ]
    for codec in ("none", "lz4"):  # a compressed batch is decompressed to be checked
        errors = produce(bootstrap, topic, refused_batch, **{"compression.type": codec})
        assert codes(errors) == [KafkaError._INVALID_DIFFERENT_RECORD] + [KafkaError.INVALID_RECORD] * 4

    # KIP-467: the Produce response names each record and why
    batch = build_batch([NewRecord(value) for _, value in refused_batch], compression=1)
    partition = produce_raw(leader_bootstrap, topic, batch)
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
        (2, f"the value's schema id {UNKNOWN_ID} is not known to the Schema Registry"),
        (3, f"the value's schema id {other_id} is not registered under subject '{topic}-value'"),
        (4, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
    ]
    assert partition.error_message.startswith("One or more records have been rejected due to 4 record errors")

    # a valid producer on the same topic is unaffected, and nothing of the refused batches was written
    assert produce(bootstrap, topic, [(None, serializer({"name": "after", "age": 9}, context))]) == [None]
    consumed = confluent_consume(bootstrap, topic, 4)
    assert [m.offset for m in consumed] == [0, 1, 2, 3]
    deserializer = AvroDeserializer(client)
    assert [deserializer(m.value, context) for m in consumed] == [*users, {"name": "after", "age": 9}]
    assert confluent_consume(bootstrap, topic, 1, offset=4, timeout=1.0) == []

    # valid compressed batches: decompressed once for the check, the log's own checks reuse it
    compressed = [serializer({"name": f"z-{i}", "age": i}, context) for i in range(200)]
    for codec in ("lz4", "zstd"):
        assert produce(bootstrap, topic, [(None, v) for v in compressed], **{"compression.type": codec}) == [None] * 200
    consumed = confluent_consume(bootstrap, topic, 400, offset=4)
    assert [m.offset for m in consumed] == list(range(4, 404))
    assert [m.value for m in consumed] == compressed * 2


def test_validation_on_one_broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
        shown = described(broker.bootstrap, topic)
        assert shown["confluent.value.schema.validation"] == "true"
        assert shown["redpanda.value.schema.id.validation"] == "true"  # Redpanda's name for it
        assert shown["confluent.key.schema.validation"] == "false"
        assert shown["confluent.value.subject.name.strategy"].endswith("TopicNameStrategy")
        exercise_validation(broker.bootstrap, registry_url(broker), topic, broker.bootstrap)

        # without validation a topic takes anything, as before; turned on later, it refuses at once
        plain = create_topic(broker.bootstrap, {})
        assert produce(broker.bootstrap, plain, [(None, b"no prefix")]) == [None]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        entry = ConfigEntry("confluent.value.schema.validation", "true", incremental_operation=AlterConfigOpType.SET)
        [future] = admin.incremental_alter_configs(
            [ConfigResource("topic", plain, incremental_configs=[entry])]
        ).values()
        future.result(WAIT_S)
        assert described(broker.bootstrap, plain)["redpanda.value.schema.id.validation"] == "true"
        assert codes(produce(broker.bootstrap, plain, [(None, b"a"), (None, b"b")])) == [KafkaError.INVALID_RECORD] * 2
        # Redpanda's name of the same setting replaces it: the last one set wins
        entry = ConfigEntry("redpanda.value.schema.id.validation", "false", incremental_operation=AlterConfigOpType.SET)
        [future] = admin.incremental_alter_configs(
            [ConfigResource("topic", plain, incremental_configs=[entry])]
        ).values()
        future.result(WAIT_S)
        assert described(broker.bootstrap, plain)["confluent.value.schema.validation"] == "false"
        assert produce(broker.bootstrap, plain, [(None, b"c")]) == [None]


def test_key_validation_and_record_name_strategy(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as registry:
        url = registry_url(registry)
        client = SchemaRegistryClient({"url": url})
        topic = create_topic(
            registry.bootstrap,
            {
                "redpanda.key.schema.id.validation": "true",
                "confluent.value.schema.validation": "true",
                "confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            },
        )
        value_serializer = AvroSerializer(
            client, json.dumps(USER_V1), conf={"subject.name.strategy": record_subject_name_strategy}
        )
        key_serializer = AvroSerializer(client, json.dumps({"type": "string"}))
        value = value_serializer({"name": "a", "age": 1}, SerializationContext(topic, MessageField.VALUE))
        key = key_serializer("k", SerializationContext(topic, MessageField.KEY))
        assert client.get_latest_version("example.User").schema_id == struct.unpack(">I", value[1:5])[0]
        assert produce(registry.bootstrap, topic, [(key, value)]) == [None]

        # the keys lack their prefix (librdkafka names the others _INVALID_DIFFERENT_RECORD when two
        # or more records are named; with one, it fails the whole batch with the one error)
        errors = produce(registry.bootstrap, topic, [(b"plain", value), (key, value), (b"plain2", value)])
        assert codes(errors) == [
            KafkaError.INVALID_RECORD,
            KafkaError._INVALID_DIFFERENT_RECORD,
            KafkaError.INVALID_RECORD,
        ]
        batch = build_batch([NewRecord(value, key=b"plain"), NewRecord(value, key=key)])
        partition = produce_raw(registry.bootstrap, topic, batch)
        assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
            (0, "the key has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)")
        ]
        # TopicNameStrategy would want <topic>-value, where this id is not registered
        topic_named = create_topic(registry.bootstrap, {"confluent.value.schema.validation": "true"})
        partition = produce_raw(registry.bootstrap, topic_named, build_batch([NewRecord(value)]))
        assert partition.record_errors[0].batch_index_error_message == (
            f"the value's schema id {struct.unpack('>I', value[1:5])[0]} is not registered under subject "
            f"'{topic_named}-value'"
        )
        assert [m.offset for m in confluent_consume(registry.bootstrap, topic, 1)] == [0]


def test_a_broker_that_does_not_serve_the_registry_validates_from_a_copied_schemas_topic(tmp_path):
    """No schema.registry.listeners: the broker still builds its view of _schemas (here records as
    Confluent's registry writes them, produced by a client, as a copied topic would hold them); an
    id whose only version is soft-deleted is not accepted."""
    with BrokerProcess(tmp_path / "broker") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(
            WAIT_S
        )
        topic = create_topic(broker.bootstrap, {"confluent.value.schema.validation": "true"})
        records = [
            (
                f'{{"keytype":"SCHEMA","subject":"{topic}-value","version":1,"magic":1}}',
                f'{{"subject":"{topic}-value","version":1,"id":21,"schema":"\\"string\\"","deleted":false}}',
            ),
            (
                f'{{"keytype":"SCHEMA","subject":"{topic}-value","version":2,"magic":1}}',
                f'{{"subject":"{topic}-value","version":2,"id":22,"schema":"\\"long\\"","deleted":true}}',
            ),
        ]
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for key, value in records:
            producer.produce("_schemas", key=key.encode(), value=value.encode())
        assert producer.flush(WAIT_S) == 0

        framed = [b"\x00" + struct.pack(">I", schema_id) + b"\x02a" for schema_id in (21, 22, 23)]
        assert produce(broker.bootstrap, topic, [(None, framed[0])]) == [None]
        partition = produce_raw(broker.bootstrap, topic, build_batch([NewRecord(v) for v in framed]))
        assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
            (1, "the value's schema id 22 is not known to the Schema Registry"),  # its only version is deleted
            (2, "the value's schema id 23 is not known to the Schema Registry"),
        ]
        assert [m.value for m in confluent_consume(broker.bootstrap, topic, 1)] == [framed[0]]
