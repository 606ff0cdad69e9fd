"""confluent-kafka (librdkafka) against a real strom broker: produce, consume with manual assignment, admin."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import (
    CODECS,
    WAIT_S,
    Msg,
    assert_same,
    confluent_consume,
    confluent_produce,
    module_broker,  # noqa: F401 - fixture
    sample_messages,
    unique_topic,
    wait_until,
)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(module_broker, codec, idempotent):
    topic = unique_topic(f"ck-{codec}")
    sent = sample_messages()
    offsets = confluent_produce(
        module_broker.bootstrap,
        topic,
        sent,
        **{"compression.type": codec, "enable.idempotence": idempotent, "acks": "all"},
    )
    assert offsets == list(range(len(sent)))
    assert_same(confluent_consume(module_broker.bootstrap, topic, len(sent)), sent)


def test_many_small_messages_batched(module_broker):
    """Thousands of records in multi-record batches: none lost, none duplicated, offsets dense."""
    topic = unique_topic("ck-many")
    sent = [Msg(str(i).encode(), b"v" * (i % 50), (), 1_600_000_000_000 + i) for i in range(5000)]
    offsets = confluent_produce(
        module_broker.bootstrap,
        topic,
        sent,
        **{"linger.ms": 20, "batch.num.messages": 1000, "compression.type": "lz4", "enable.idempotence": True},
    )
    assert sorted(offsets) == list(range(len(sent)))
    assert_same(confluent_consume(module_broker.bootstrap, topic, len(sent)), sent)


def test_consume_from_middle_offset(module_broker):
    topic = unique_topic("ck-seek")
    sent = sample_messages(10, binary=False)
    confluent_produce(module_broker.bootstrap, topic, sent, **{"linger.ms": 50})  # one batch of 10
    assert_same(confluent_consume(module_broker.bootstrap, topic, 4, offset=6), sent[6:], first_offset=6)


def test_watermarks_and_offsets_for_times(module_broker):
    from confluent_kafka import Consumer

    topic = unique_topic("ck-wm")
    sent = sample_messages(10, binary=False)
    confluent_produce(module_broker.bootstrap, topic, sent, **{"linger.ms": 50})
    consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S) == (0, 10)
        # The earliest offset whose timestamp is >= the target, even inside a batch.
        [found] = consumer.offsets_for_times([TopicPartition(topic, 0, sent[4].timestamp - 1)], timeout=WAIT_S)
        assert found.error is None and found.offset == 4
        [past_end] = consumer.offsets_for_times([TopicPartition(topic, 0, sent[-1].timestamp + 1)], timeout=WAIT_S)
        assert past_end.offset == -1  # no such record: Kafka answers offset -1
    finally:
        consumer.close()


def test_multiple_partitions_and_log_append_time(module_broker):
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    topic = unique_topic("ck-lat")
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1, config={"message.timestamp.type": "LogAppendTime"})]
    )
    futures[topic].result(WAIT_S)
    sent = sample_messages(6, binary=False)
    before = int(time.time() * 1000)
    for partition in range(3):
        offsets = confluent_produce(module_broker.bootstrap, topic, sent, partition=partition)
        assert offsets == list(range(6))
    after = int(time.time() * 1000)
    for partition in range(3):
        got = confluent_consume(module_broker.bootstrap, topic, 6, partition=partition)
        assert_same(got, sent, check_timestamps=False)
        for msg in got:  # LogAppendTime: the broker's clock replaces the producer's timestamp
            assert before - 1000 <= msg.timestamp <= after + 1000, (msg.timestamp, before, after)


def test_admin_create_list_delete(module_broker):
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    names = [unique_topic("ck-admin"), unique_topic("ck-admin")]
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=2, replication_factor=1) for n in names], operation_timeout=10
    )
    for name in names:
        assert futures[name].result(WAIT_S) is None
    metadata = admin.list_topics(timeout=WAIT_S)
    for name in names:
        assert name in metadata.topics
        assert sorted(metadata.topics[name].partitions) == [0, 1]
        assert metadata.topics[name].error is None

    again = admin.create_topics([NewTopic(names[0], num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as info:
        again[names[0]].result(WAIT_S)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    futures = admin.delete_topics(names, operation_timeout=10)
    for name in names:
        assert futures[name].result(WAIT_S) is None
    wait_until(lambda: not set(names) & set(admin.list_topics(timeout=WAIT_S).topics), what="topics deleted")

    missing = admin.delete_topics([names[0]])
    with pytest.raises(KafkaException) as info:
        missing[names[0]].result(WAIT_S)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_deleted_topic_recreated_starts_empty(module_broker):
    """Delete then re-create (auto-created by the producer): the old records are gone, offsets restart at 0."""
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    topic = unique_topic("ck-recreate")
    confluent_produce(module_broker.bootstrap, topic, sample_messages(5, binary=False))
    admin.delete_topics([topic])[topic].result(WAIT_S)
    wait_until(lambda: topic not in admin.list_topics(timeout=WAIT_S).topics, what="topic deleted")
    fresh = sample_messages(2, ts_base=1_650_000_000_000, binary=False)
    assert confluent_produce(module_broker.bootstrap, topic, fresh) == [0, 1]
    assert_same(confluent_consume(module_broker.bootstrap, topic, 2), fresh)
