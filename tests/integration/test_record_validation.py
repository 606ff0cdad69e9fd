"""Record-level validation seen from real clients and raw Produce requests (KIP-467 record_errors).

A compacted topic refuses a batch that holds records without keys: the client learns exactly
which records were at fault and nothing of the batch reaches the log. Timestamp bounds (KIP-937),
max.message.bytes and compressed batches that disagree with their header are checked too.
"""

from __future__ import annotations

import datetime
import struct
import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import CRC_OFFSET, NewRecord, batch_crc, build_batch
from tests.integration.clients import (
    WAIT_S,
    RawClient,
    confluent_consume,
    module_broker,  # noqa: F401 - fixture
    produce_with_reports,
    unique_topic,
)

NO_KEY = "Compacted topic cannot accept message without key in topic partition {}-0"


def create_topic(broker, config: dict[str, str]) -> str:
    topic = unique_topic("rv")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(WAIT_S)
    return topic


def end_offset(broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rv-unused"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)[1]
    finally:
        consumer.close()


def produce_reports(broker, topic: str, keys: list[bytes | None], **config) -> list:
    """Produce one record per key; returns each record's delivery error (None: delivered)."""
    records = [(key, b"value-%d" % i) for i, key in enumerate(keys)]
    return produce_with_reports(broker.bootstrap, topic, records, **config)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_confluent_producer_fails_exactly_the_records_without_keys(module_broker, codec):
    """librdkafka's own test 0011, variation 0: one batch, every tenth record without a key."""
    topic = create_topic(module_broker, {"cleanup.policy": "compact"})
    keys = [None if i % 10 == 0 else b"key-%d" % i for i in range(100)]
    # flush() sends at once; the long linger keeps all 100 in one batch however slowly this loop runs
    # (with 2 s, a rehearsal under load once sent them in two batches)
    errors = produce_reports(
        module_broker, topic, keys, **{"linger.ms": 10_000, "batch.num.messages": 1000, "compression.type": codec}
    )
    codes = [err.code() for err in errors]
    assert [i for i, code in enumerate(codes) if code == KafkaError.INVALID_RECORD] == list(range(0, 100, 10))
    assert all(code == KafkaError._INVALID_DIFFERENT_RECORD for i, code in enumerate(codes) if i % 10)
    assert end_offset(module_broker, topic) == 0
    # the log is untouched: the next record is offset 0 and the only one a consumer reads
    assert produce_reports(module_broker, topic, [b"after"], **{"linger.ms": 0}) == [None]
    consumed = confluent_consume(module_broker.bootstrap, topic, 1)
    assert [(m.offset, m.key) for m in consumed] == [(0, b"after")]
    assert end_offset(module_broker, topic) == 1


def test_one_record_per_batch_only_the_keyless_ones_fail(module_broker):
    """Variation 1: each record its own batch, so the keyed ones are appended."""
    topic = create_topic(module_broker, {"cleanup.policy": "compact"})
    keys = [None if i % 10 == 0 else b"key-%d" % i for i in range(30)]
    errors = produce_reports(
        module_broker, topic, keys, **{"linger.ms": 0, "batch.num.messages": 1, "max.in.flight": 1}
    )
    assert [i for i, err in enumerate(errors) if err is not None] == [0, 10, 20]
    assert all(errors[i].code() == KafkaError.INVALID_RECORD for i in (0, 10, 20))
    consumed = confluent_consume(module_broker.bootstrap, topic, 27)
    assert [m.key for m in consumed] == [k for k in keys if k is not None]
    assert [m.offset for m in consumed] == list(range(27))


def test_kafka_python_producer_fails_exactly_the_records_without_keys(module_broker):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError
    from kafka.errors import KafkaError as KPKafkaError

    topic = create_topic(module_broker, {"cleanup.policy": "compact"})
    producer = KafkaProducer(
        bootstrap_servers=module_broker.bootstrap,
        linger_ms=2000,
        request_timeout_ms=WAIT_S * 1000,
        max_block_ms=WAIT_S * 1000,
    )
    try:
        futures = [
            producer.send(topic, value=b"v%d" % i, key=None if i % 5 == 0 else b"k%d" % i, partition=0)
            for i in range(10)
        ]
        producer.flush(timeout=WAIT_S)
        outcomes = []
        for future in futures:
            with pytest.raises(KPKafkaError) as failed:
                future.get(timeout=WAIT_S)
            outcomes.append(failed.value)
    finally:
        producer.close(timeout=5)
    for i, error in enumerate(outcomes):
        if i % 5 == 0:
            assert isinstance(error, InvalidRecordError) and NO_KEY.format(topic) in str(error)
        else:
            assert not isinstance(error, InvalidRecordError) and "invalid records" in str(error)
    assert end_offset(module_broker, topic) == 0


# -- raw Produce requests ------------------------------------------------------------------------


def produce_raw(broker, topic: str, batch: bytes, version: int):
    with RawClient(broker.bootstrap) as client:
        response = client.request(
            ApiKey.PRODUCE,
            version,
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


@pytest.mark.parametrize("version", [8, 9])
def test_produce_response_names_each_record_without_a_key(module_broker, version):
    topic = create_topic(module_broker, {"cleanup.policy": "compact"})
    batch = build_batch([NewRecord(b"v", key=k) for k in (b"a", None, b"b", None, None)], compression=1)
    partition = produce_raw(module_broker, topic, batch, version)
    message = NO_KEY.format(topic)
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, message),
        (3, message),
        (4, message),
    ]
    assert partition.error_message == (
        "One or more records have been rejected due to 3 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), RecordError(batchIndex=3, "
        f"message='{message}'), RecordError(batchIndex=4, message='{message}')]"
    )
    assert (partition.base_offset, partition.log_start_offset) == (-1, 0)
    assert end_offset(module_broker, topic) == 0


def test_older_produce_versions_get_the_error_code_only(module_broker):
    topic = create_topic(module_broker, {"cleanup.policy": "compact"})
    partition = produce_raw(module_broker, topic, build_batch([NewRecord(b"v")]), 7)
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert end_offset(module_broker, topic) == 0


def test_timestamps_out_of_bounds_fail_with_invalid_timestamp(module_broker):
    topic = create_topic(
        module_broker, {"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "60000"}
    )
    now = int(time.time() * 1000)
    times = [now, now - 7_200_000, now + 600_000_000, now - 10_000]
    partition = produce_raw(module_broker, topic, build_batch([NewRecord(b"v", timestamp=t) for t in times]), 9)
    assert partition.error_code == ErrorCode.INVALID_TIMESTAMP
    assert partition.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in partition.record_errors] == [1, 2]
    assert partition.record_errors[0].batch_index_error_message.startswith(
        f"Timestamp {now - 7_200_000} of message with offset 1 is out of range. The timestamp should be within ["
    )
    assert end_offset(module_broker, topic) == 0
    ok = produce_raw(module_broker, topic, build_batch([NewRecord(b"v", timestamp=t) for t in (now, now - 10_000)]), 9)
    assert (ok.error_code, ok.base_offset, len(ok.record_errors)) == (0, 0, 0)


def test_max_message_bytes_per_batch(module_broker):
    batch = build_batch([NewRecord(b"x" * 1000)])
    topic = create_topic(module_broker, {"max.message.bytes": str(len(batch))})
    assert produce_raw(module_broker, topic, batch, 9).error_code == ErrorCode.NONE
    bigger = build_batch([NewRecord(b"x" * 1001)])
    refused = produce_raw(module_broker, topic, bigger, 9)
    assert refused.error_code == ErrorCode.MESSAGE_TOO_LARGE and len(refused.record_errors) == 0
    assert end_offset(module_broker, topic) == 1


def test_compressed_batch_that_disagrees_with_its_header(module_broker):
    topic = create_topic(module_broker, {})
    batch = bytearray(build_batch([NewRecord(b"v%d" % i) for i in range(3)], compression=4))
    struct.pack_into(">i", batch, 23, 3)  # lastOffsetDelta and count say 4 records
    struct.pack_into(">i", batch, 57, 4)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    partition = produce_raw(module_broker, topic, bytes(batch), 9)
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert partition.error_message == "Incorrect declared batch size, premature EOF reached"
    assert len(partition.record_errors) == 0
    assert end_offset(module_broker, topic) == 0
