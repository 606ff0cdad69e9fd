"""What the fuzzers found on the request path, as a client sees it, against a real broker process.

The inputs that found these stay in tests/fuzz/corpus/*/regressions (replayed by
test_corpus_replay.py); these tests check the behaviour a user notices.
"""

from __future__ import annotations

import struct
import time

import crc32c

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, NewRecord, build_batch
from tests.integration.clients import RawClient, confluent_consume, unique_topic


def test_create_topics_with_two_billion_partitions_is_refused_at_once(broker):
    """A 60-byte CreateTopics asking for 589,825 partitions held the broker for minutes (and past
    1 GB of memory). As Kafka's controller, a request may create at most 10,000 partitions."""
    topic = unique_topic("huge")
    with RawClient(broker.bootstrap, timeout=15) as client:
        started = time.monotonic()
        response = client.request(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {"name": topic, "num_partitions": 2**31 - 1, "replication_factor": 1},
                    {"name": topic + "-small", "num_partitions": 1, "replication_factor": 1},
                ],
                "timeout": 10_000,
            },
        )
        assert time.monotonic() - started < 10
        assert [t.error_code for t in response.topics] == [ErrorCode.POLICY_VIOLATION] * 2
        assert response.topics[0].error_message == "Excessively large number of partitions per request."
        created = client.request(
            ApiKey.CREATE_TOPICS,
            7,
            {"topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}], "timeout": 10_000},
        )
        assert created.topics[0].error_code == ErrorCode.NONE
        grown = client.request(
            ApiKey.CREATE_PARTITIONS,
            3,
            {"topics": [{"name": topic, "count": 4_128_000, "assignments": None}], "timeout": 10_000},
        )
        assert grown.results[0].error_code == ErrorCode.POLICY_VIOLATION
        metadata = client.request(
            ApiKey.METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
        assert len(metadata.topics[0].partitions) == 2


def _batch_with_inner_offset_deltas(deltas: list[int]) -> bytes:
    """An uncompressed batch whose records carry the given offset deltas (a buggy producer's)."""
    batch = bytearray(
        build_batch([NewRecord(b"value-%d" % i, timestamp=1_700_000_000_000 + i) for i in range(len(deltas))])
    )
    position = HEADER.size
    for delta in deltas:  # rewrite each record's offset delta (one byte after length, attributes, ts delta)
        length = batch[position] >> 1
        batch[position + 3] = delta << 1
        position += 1 + length
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def test_recompression_assigns_fresh_offsets_whatever_the_producer_wrote(broker):
    """On a topic with compression.type=gzip the broker recompresses; it kept the producer's inner
    offset deltas, and a batch claiming deltas 0 and 40 moved the log end to 41 (-19 for others)."""
    topic = unique_topic("recompress")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "gzip"})])[topic].result(15)
    batch = _batch_with_inner_offset_deltas([0, 40])
    name = topic.encode()
    body = (
        struct.pack(">hhi", -1, 1, 10_000)
        + struct.pack(">i", 1)
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">i", 1)
        + struct.pack(">ii", 0, len(batch))
        + batch
    )
    with RawClient(broker.bootstrap) as client:
        first = client.request(ApiKey.PRODUCE, 8, body).responses[0].partition_responses[0]
        second = client.request(ApiKey.PRODUCE, 8, body).responses[0].partition_responses[0]
        assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
        assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 2)
    consumed = confluent_consume(broker.bootstrap, topic, 4, **{"check.crcs": True})
    assert [(m.offset, m.value) for m in consumed] == [
        (0, b"value-0"),
        (1, b"value-1"),
        (2, b"value-0"),
        (3, b"value-1"),
    ]
