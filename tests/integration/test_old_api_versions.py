"""The API versions Kafka 3.9 serves and Kafka 4 removed (KIP-896), with real old-protocol clients.

kafka-python pinned to ``api_version=(0, 10, 0)`` speaks Produce v2 / Fetch v2 (message format
magic 1), ``(0, 9)`` Produce v1 / Fetch v1 and ``(0, 8, 2)`` Produce v0 / Fetch v0 (magic 0): what
such a client writes is read back by itself and by confluent-kafka (v2 batches), and what
confluent-kafka writes (headers, zstd, transactions) is read by the old clients, down-converted.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.legacy.records import iter_messages
from strom.protocol.legacy.schema.index import KAFKA_RANGES
from tests.broker_process import BrokerProcess
from tests.integration.clients import (
    TS_BASE,
    WAIT_S,
    Msg,
    RawClient,
    confluent_consume,
    confluent_produce,
    unique_topic,
)

# Kafka 3.9.0's ApiVersions ranges (clients/src/main/resources/common/message/*Request.json at
# the 3.9 branch) for the APIs strom serves.
KAFKA_3_9 = {
    0: (0, 11),
    1: (0, 17),
    2: (0, 9),
    3: (0, 12),
    8: (0, 9),
    9: (0, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    17: (0, 1),
    18: (0, 4),
    19: (0, 7),
    20: (0, 6),
    21: (0, 2),
    22: (0, 5),
    23: (0, 4),
    24: (0, 5),
    25: (0, 4),
    26: (0, 4),
    27: (0, 1),
    28: (0, 4),
    29: (0, 3),
    30: (0, 3),
    31: (0, 3),
    32: (0, 4),
    33: (0, 2),
    34: (0, 2),
    35: (0, 4),
    36: (0, 2),
    37: (0, 3),
    38: (0, 3),
    39: (0, 2),
    40: (0, 2),
    41: (0, 3),
    42: (0, 2),
    43: (0, 2),
    44: (0, 1),
    45: (0, 0),
    46: (0, 0),
    47: (0, 0),
    48: (0, 1),
    49: (0, 1),
    50: (0, 0),
    51: (0, 0),
    55: (0, 2),
    56: (0, 3),
    57: (0, 1),
    58: (0, 0),
    60: (0, 1),
    61: (0, 0),
    64: (0, 0),
    65: (0, 0),
    66: (0, 1),
    67: (0, 0),
    68: (0, 0),
    69: (0, 0),
    71: (0, 0),
    72: (0, 0),
    74: (0, 0),
    75: (0, 0),
    80: (0, 0),
    81: (0, 0),
}
# Lowest versions strom still does not serve, and why (none today).
NOT_YET: dict[int, str] = {}


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("old-versions") / "data") as process:
        yield process


CLIENTS = {  # kafka-python's api_version -> (produce version, fetch version, magic)
    (0, 10, 0): (2, 2, 1),
    (0, 9): (1, 1, 0),
    (0, 8, 2): (0, 0, 0),
}


def messages(n: int, with_timestamps: bool) -> list[Msg]:
    out = []
    for i in range(n):
        key = None if i % 3 == 2 else f"key-{i}".encode()
        value = None if i == 4 else bytes([i, 0, 255]) + b"v" * (i * 300)
        out.append(Msg(key, value, (), TS_BASE + i * 1000 if with_timestamps else None))
    return out


def old_produce(bootstrap: str, topic: str, msgs: list[Msg], api_version: tuple, **config) -> list[int]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        linger_ms=20,
        request_timeout_ms=WAIT_S * 1000,
        max_block_ms=WAIT_S * 1000,
        retries=0,
        **config,
    )
    try:
        futures = [producer.send(topic, key=m.key, value=m.value, partition=0, timestamp_ms=m.timestamp) for m in msgs]
        producer.flush(timeout=WAIT_S)
        return [f.get(timeout=WAIT_S).offset for f in futures]
    finally:
        producer.close(timeout=5)


def old_consume(bootstrap: str, topic: str, count: int, api_version: tuple, offset: int = 0) -> list[Msg]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=WAIT_S * 1000 + 1000,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: list[Msg] = []
        for _ in range(int(WAIT_S / 0.2)):
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(Msg(r.key, r.value, tuple(r.headers or ()), r.timestamp, r.offset) for r in records)
            if len(out) >= count:
                break
        return out
    finally:
        consumer.close()


def test_api_versions_start_at_kafka_3_9s_lowest(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {k: KAFKA_RANGES[k] for k in KAFKA_3_9} == KAFKA_3_9  # the generated table agrees with this one
    for key, (low, _high) in KAFKA_3_9.items():
        if key in NOT_YET or key not in advertised:
            continue
        assert advertised[key][0] == low, (
            f"{ApiKey(key).name}: strom's lowest is v{advertised[key][0]}, Kafka 3.9's v{low}"
        )
    for key in advertised:
        assert key in KAFKA_3_9 or key > 81, f"{ApiKey(key).name} is advertised but not in Kafka 3.9's table"


@pytest.mark.parametrize("api_version", list(CLIENTS), ids=lambda v: ".".join(map(str, v)))
@pytest.mark.parametrize("codec", [None, "gzip", "snappy"])
def test_old_client_round_trip(shared_broker, api_version, codec):
    """Message sets in, v2 batches stored, message sets out: bytes, offsets and timestamps as Kafka 3.9 gives them."""
    topic = unique_topic("old")
    magic = CLIENTS[api_version][2]
    sent = messages(6, with_timestamps=magic == 1)
    assert old_produce(shared_broker.bootstrap, topic, sent, api_version, compression_type=codec) == list(range(6))
    assert old_produce(shared_broker.bootstrap, topic, sent[:2], api_version) == [6, 7]

    got = old_consume(shared_broker.bootstrap, topic, 8, api_version)
    assert [(m.offset, m.key, m.value) for m in got] == [(i, m.key, m.value) for i, m in enumerate(sent + sent[:2])]
    # magic 0 has no timestamps (kafka-python reports None); magic 1 keeps the producer's CreateTime
    assert [m.timestamp for m in got] == [m.timestamp if magic == 1 else None for m in sent + sent[:2]]

    modern = confluent_consume(shared_broker.bootstrap, topic, 8)
    assert [(m.offset, m.key, m.value) for m in modern] == [(m.offset, m.key, m.value) for m in got]
    # up-converted magic 0 records carry NoTimestamp (-1), as Kafka's LogValidator writes them
    assert [m.timestamp for m in modern] == [m.timestamp if magic == 1 else -1 for m in sent + sent[:2]]

    assert [m.offset for m in old_consume(shared_broker.bootstrap, topic, 3, api_version, offset=5)][:3] == [5, 6, 7]


@pytest.mark.parametrize("api_version", list(CLIENTS), ids=lambda v: ".".join(map(str, v)))
def test_old_client_reads_what_a_modern_client_wrote(shared_broker, api_version):
    """Down-conversion: zstd batches decompressed, headers dropped, transaction markers left out."""
    topic = unique_topic("new")
    sent = [Msg(b"k%d" % i, b"value-%d" % i * 40, (("h", b"x"),), TS_BASE + i) for i in range(5)]
    confluent_produce(shared_broker.bootstrap, topic, sent[:3], **{"compression.type": "zstd"})
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": unique_topic("tx")})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for m in sent[3:]:
        producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers), timestamp=m.timestamp, partition=0)
    producer.commit_transaction(WAIT_S)
    with_marker = confluent_consume(shared_broker.bootstrap, topic, 5)
    assert [m.offset for m in with_marker] == [0, 1, 2, 3, 4]  # offset 5 is the commit marker

    got = old_consume(shared_broker.bootstrap, topic, 5, api_version)
    assert [(m.offset, m.key, m.value, m.headers) for m in got] == [(i, m.key, m.value, ()) for i, m in enumerate(sent)]
    magic = CLIENTS[api_version][2]
    assert [m.timestamp for m in got] == [m.timestamp if magic == 1 else None for m in sent]


def _message(
    offset: int, key: bytes | None, value: bytes, magic: int = 1, timestamp: int = TS_BASE, corrupt: bool = False
) -> bytes:
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    crc = zlib.crc32(body) ^ (1 if corrupt else 0)
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(message)) + message


def _produce_raw(client: RawClient, topic: str, version: int, records: bytes):
    return client.request(
        ApiKey.PRODUCE,
        version,
        {
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )


def test_produce_v0_v2_and_list_offsets_v0_raw(shared_broker):
    topic = unique_topic("raw")
    with RawClient(shared_broker.bootstrap) as client:
        client.request(ApiKey.METADATA, 1, {"topics": [{"name": topic}]})  # auto-creates it
        for _ in range(int(WAIT_S / 0.1)):
            first = _produce_raw(client, topic, 2, _message(0, b"a", b"1") + _message(0, None, b"2"))
            if first.responses[0].partition_responses[0].error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                break
        answer = first.responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
        answer = _produce_raw(client, topic, 0, _message(0, b"c", b"3", magic=0)).responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 2)

        bad = _produce_raw(client, topic, 1, _message(0, b"d", b"4", corrupt=True)).responses[0].partition_responses[0]
        assert bad.error_code == ErrorCode.CORRUPT_MESSAGE
        truncated = _produce_raw(client, topic, 1, _message(0, b"d", b"4")[:-3]).responses[0].partition_responses[0]
        assert truncated.error_code == ErrorCode.CORRUPT_MESSAGE

        def offsets(timestamp: int, max_num: int = 1):
            response = client.request(
                ApiKey.LIST_OFFSETS,
                0,
                {
                    "replica_id": -1,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": 0, "timestamp": timestamp, "max_num_offsets": max_num}],
                        }
                    ],
                },
            )
            partition = response.topics[0].partitions[0]
            return partition.error_code, list(partition.old_style_offsets)

        assert offsets(-1) == (ErrorCode.NONE, [3])
        assert offsets(-2) == (ErrorCode.NONE, [0])
        assert offsets(-1, 10) == (ErrorCode.NONE, [3, 0])  # log end, then the one segment's base offset
        for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
            values = {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [{"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20}],
                    }
                ],
            }
            fetched = client.request(ApiKey.FETCH, version, values).responses[0].partitions[0]
            assert (fetched.error_code, fetched.high_watermark) == (ErrorCode.NONE, 3)
            got = [(m.offset, m.magic, m.key, m.value, m.timestamp) for m in iter_messages(bytes(fetched.records))]
            # offset 0 shares a batch with offset 1 but lies below the fetch offset: left out, as Kafka does
            assert got == [(1, magic, None, b"2", TS_BASE if magic else -1), (2, magic, b"c", b"3", -1)]
        missing = client.request(
            ApiKey.LIST_OFFSETS,
            0,
            {
                "replica_id": -1,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 7, "timestamp": -1, "max_num_offsets": 1}]}
                ],
            },
        )
        assert missing.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    assert [(m.offset, m.key, m.value, m.timestamp) for m in confluent_consume(shared_broker.bootstrap, topic, 3)] == [
        (0, b"a", b"1", TS_BASE),
        (1, None, b"2", TS_BASE),
        (2, b"c", b"3", -1),
    ]


def test_old_group_and_admin_versions_raw(shared_broker):
    """OffsetCommit v0/v1 and OffsetFetch v0, CreateTopics v0, DescribeConfigs v0 (is_default), DeleteTopics v0."""
    topic = unique_topic("adm")
    with RawClient(shared_broker.bootstrap) as client:
        created = client.request(
            ApiKey.CREATE_TOPICS,
            0,
            {
                "timeout_ms": 10_000,
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "retention.ms", "value": "3600000"}],
                    }
                ],
            },
        )
        assert created.topics[0].error_code == ErrorCode.NONE

        configs = client.request(
            ApiKey.DESCRIBE_CONFIGS,
            0,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": topic,
                        "configuration_keys": ["retention.ms", "cleanup.policy"],
                    }
                ]
            },
        )
        entries = {c.name: (c.value, c.is_default) for c in configs.results[0].configs}
        assert entries == {"retention.ms": ("3600000", False), "cleanup.policy": ("delete", True)}

        group = unique_topic("grp")
        commit0 = client.request(
            ApiKey.OFFSET_COMMIT,
            0,
            {
                "group_id": group,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"}],
                    }
                ],
            },
        )
        assert commit0.topics[0].partitions[0].error_code == ErrorCode.NONE
        commit1 = client.request(
            ApiKey.OFFSET_COMMIT,
            1,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 1,
                                "committed_offset": 9,
                                "commit_timestamp": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            },
        )
        assert commit1.topics[0].partitions[0].error_code == ErrorCode.NONE
        fetched = client.request(
            ApiKey.OFFSET_FETCH, 0, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
        )
        assert sorted((p.partition_index, p.committed_offset, p.error_code) for p in fetched.topics[0].partitions) == [
            (0, 5, ErrorCode.NONE),
            (1, 9, ErrorCode.NONE),
        ]

        deleted = client.request(ApiKey.DELETE_TOPICS, 0, {"topic_names": [topic], "timeout_ms": 10_000})
        assert deleted.responses[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 9)], ids=lambda v: ".".join(map(str, v)))
def test_old_consumer_commits_and_resumes(shared_broker, api_version):
    """(0, 8, 2): OffsetCommit v1 / OffsetFetch v1 without group membership; (0, 9): JoinGroup v0, OffsetCommit v2."""
    topic, group = unique_topic("commit"), unique_topic("g")
    confluent_produce(shared_broker.bootstrap, topic, [Msg(None, b"m%d" % i) for i in range(6)])
    config = {
        "bootstrap_servers": shared_broker.bootstrap,
        "api_version": api_version,
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "request_timeout_ms": WAIT_S * 1000 + 1000,
    }
    consumer = KafkaConsumer(**config)
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        got: list[int] = []
        for _ in range(int(WAIT_S / 0.2)):
            got.extend(r.offset for records in consumer.poll(timeout_ms=200).values() for r in records)
            if len(got) >= 4:
                break
        consumer.commit({tp: OffsetAndMetadata(4, "", -1)})
        assert consumer.committed(tp) == 4
    finally:
        consumer.close()
    consumer = KafkaConsumer(**config)
    try:
        consumer.assign([tp])
        assert consumer.committed(tp) == 4
        resumed: list[bytes] = []
        for _ in range(int(WAIT_S / 0.2)):
            resumed.extend(r.value for records in consumer.poll(timeout_ms=200).values() for r in records)
            if len(resumed) >= 2:
                break
        assert resumed == [b"m4", b"m5"]
    finally:
        consumer.close()
