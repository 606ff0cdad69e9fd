"""kafka-python against a real strom broker: produce, consume with manual assignment, admin."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():  # kafka-python loads its schemas with importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from tests.integration.clients import (
    CODECS,
    WAIT_S,
    Msg,
    assert_same,
    kafka_python_consume,
    kafka_python_produce,
    module_broker,  # noqa: F401 - fixture
    sample_messages,
    unique_topic,
    wait_until,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # and again when it loads more of them


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(module_broker, codec, idempotent):
    topic = unique_topic(f"kp-{codec}")
    sent = sample_messages()
    offsets = kafka_python_produce(
        module_broker.bootstrap,
        topic,
        sent,
        acks="all",
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotent,
    )
    assert offsets == list(range(len(sent)))
    assert_same(kafka_python_consume(module_broker.bootstrap, topic, len(sent)), sent)


def test_batched_and_seek(module_broker):
    topic = unique_topic("kp-batch")
    sent = [
        Msg(None, f"m{i}".encode() * (i % 9), (("n", str(i).encode()),), 1_650_000_000_000 + i) for i in range(1000)
    ]
    offsets = kafka_python_produce(
        module_broker.bootstrap, topic, sent, linger_ms=50, batch_size=64 * 1024, compression_type="gzip"
    )
    assert offsets == list(range(1000))
    assert_same(kafka_python_consume(module_broker.bootstrap, topic, 1000), sent)
    assert_same(kafka_python_consume(module_broker.bootstrap, topic, 10, offset=990), sent[990:], first_offset=990)


def test_end_offsets_and_offsets_for_times(module_broker):
    topic = unique_topic("kp-offsets")
    sent = sample_messages(10, binary=False)
    kafka_python_produce(module_broker.bootstrap, topic, sent, linger_ms=50)
    consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp], timeout_ms=WAIT_S * 1000) == {tp: 0}
        assert consumer.end_offsets([tp], timeout_ms=WAIT_S * 1000) == {tp: 10}
        found = consumer.offsets_for_times({tp: sent[3].timestamp}, timeout_ms=WAIT_S * 1000)[tp]
        assert (found.offset, found.timestamp) == (3, sent[3].timestamp)
    finally:
        consumer.close()


def test_admin_create_list_delete(module_broker):
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        names = [unique_topic("kp-admin"), unique_topic("kp-admin")]
        admin.create_topics([NewTopic(n, num_partitions=3, replication_factor=1) for n in names])
        listed = admin.list_topics()
        assert set(names) <= set(listed)
        described = {t["name"]: t for t in admin.describe_topics(names)}
        for name in names:
            assert described[name]["error_code"] == 0
            assert sorted(p["partition_index"] for p in described[name]["partitions"]) == [0, 1, 2]

        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(names[0], num_partitions=1, replication_factor=1)])

        admin.delete_topics(names)
        wait_until(lambda: not set(names) & set(admin.list_topics()), what="topics deleted")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([names[0]])
    finally:
        admin.close()
