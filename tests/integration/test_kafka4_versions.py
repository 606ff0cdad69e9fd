"""The versions Kafka 4.0 and later added to APIs strom already served, each with what it changes.

ListOffsets v8-v11 (-4 earliest local, -5 latest tiered, -6 earliest pending upload), Metadata v13
(top-level error code), DescribeGroups v6 (GROUP_ID_NOT_FOUND, KIP-1043), FindCoordinator v6 (share
groups' key type), Produce v10-v12 and InitProducerId v5 (same wire as before), Fetch v18 (Kafka
4.1: a follower's high watermark in the request, which a consumer leaves unset), Produce v13 (Kafka
4.1: topics named by id). Every advertised version also round-trips a zero-valued request in
tests/integration/test_malformed.py.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from tests.broker_process import BrokerProcess
from tests.integration.clients import (
    TS_BASE,
    WAIT_S,
    Msg,
    RawClient,
    confluent_consume,
    confluent_produce,
    unique_topic,
    wait_until,
)

RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    overrides = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
    with BrokerProcess(tmp_path_factory.mktemp("kafka4") / "data", overrides) as process:
        yield process


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced: a collected client fails its futures
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(WAIT_S)


def test_list_offsets_earliest_local_and_latest_tiered(shared_broker):
    topic = unique_topic("lo")
    confluent_produce(shared_broker.bootstrap, topic, [Msg(None, b"v%d" % i, (), TS_BASE + i) for i in range(5)])
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 2)])[TopicPartition(topic, 0, 2)].result(WAIT_S)
    with RawClient(shared_broker.bootstrap) as client:
        for version in (8, 9, 10, 11):

            def offset(timestamp: int, version: int = version) -> tuple[int, int, int]:
                values = {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "timeout": 1000,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                        }
                    ],
                }
                p = client.request(ApiKey.LIST_OFFSETS, version, values).topics[0].partitions[0]
                return p.error_code, p.offset, p.timestamp

            assert offset(-2) == (ErrorCode.NONE, 2, -1)
            assert offset(-4) == (ErrorCode.NONE, 2, -1)  # every segment is local: the log start offset
            assert offset(-5) == (ErrorCode.NONE, -1, -1)  # nothing tiered, as Kafka answers without remote storage
            if version >= 11:
                assert offset(-6) == (ErrorCode.NONE, -1, -1)  # nothing pending upload (KIP-1023), as above
            assert offset(-1) == (ErrorCode.NONE, 5, -1)
            assert offset(-3) == (ErrorCode.NONE, 4, TS_BASE + 4)
            assert offset(TS_BASE + 3) == (ErrorCode.NONE, 3, TS_BASE + 3)


def test_metadata_v13_has_a_top_level_error_code(shared_broker):
    topic = unique_topic("md")
    create(shared_broker.bootstrap, topic, 2)
    with RawClient(shared_broker.bootstrap) as client:
        response = client.request(
            ApiKey.METADATA, 13, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
    assert response.error_code == ErrorCode.NONE
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [(topic, ErrorCode.NONE, 2)]


def test_describe_groups_v6_reports_groups_it_cannot_describe(shared_broker):
    topic, classic, new, missing = unique_topic("dg"), unique_topic("c"), unique_topic("n"), unique_topic("m")
    create(shared_broker.bootstrap, topic)
    committer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": classic})
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # an Empty classic group
    committer.close()
    with RawClient(shared_broker.bootstrap) as client:

        def join():
            answer = client.request(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                0,
                {
                    "group_id": new,
                    "member_id": "m1",
                    "member_epoch": 0,
                    "rebalance_timeout": 30000,
                    "subscribed_topic_names": [topic],
                    "topic_partitions": [],
                },
            )
            return answer if answer.error_code not in RETRIABLE else None

        assert wait_until(join, what="a consumer protocol member").error_code == ErrorCode.NONE

        def describe(version: int):
            body = {"groups": [classic, new, missing], "include_authorized_operations": False}
            groups = client.request(ApiKey.DESCRIBE_GROUPS, version, body).groups
            return [(g.group_id, g.error_code, g.group_state) for g in groups]

        assert describe(5) == [
            (classic, ErrorCode.NONE, "Empty"),
            (new, ErrorCode.NONE, "Dead"),
            (missing, ErrorCode.NONE, "Dead"),
        ]
        assert describe(6) == [
            (classic, ErrorCode.NONE, "Empty"),
            (new, ErrorCode.GROUP_ID_NOT_FOUND, "Dead"),
            (missing, ErrorCode.GROUP_ID_NOT_FOUND, "Dead"),
        ]
        body = {"groups": [new, missing], "include_authorized_operations": False}
        messages = [g.error_message for g in client.request(ApiKey.DESCRIBE_GROUPS, 6, body).groups]
        assert messages == [f"Group {new} is not a classic group.", f"Group {missing} not found."]


def test_find_coordinator_v6_refuses_share_groups(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        for version in (5, 6):
            keys = client.request(
                ApiKey.FIND_COORDINATOR, version, {"key_type": 0, "coordinator_keys": ["g1", "g2"]}
            ).coordinators
            assert [(c.key, c.error_code) for c in keys] == [("g1", ErrorCode.NONE), ("g2", ErrorCode.NONE)]
        share = client.request(ApiKey.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": ["s:t:0"]})
        assert share.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


def test_produce_v10_to_v12_and_fetch_v18(shared_broker):
    """The producer id comes from InitProducerId v5; what Produce v10-v12 wrote is read with Fetch v18."""
    topic = unique_topic("p12")
    create(shared_broker.bootstrap, topic)
    with RawClient(shared_broker.bootstrap) as client:
        init = client.request(
            ApiKey.INIT_PRODUCER_ID,
            5,
            {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
        )
        assert init.error_code == ErrorCode.NONE and init.producer_id >= 0
        offsets = []
        for sequence, version in enumerate((10, 11, 12)):
            batch = build_batch(
                [NewRecord(b"v%d" % version, key=b"k", timestamp=TS_BASE)],
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                base_sequence=sequence,
            )
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            }
            answer = client.request(ApiKey.PRODUCE, version, body).responses[0].partition_responses[0]
            assert answer.error_code == ErrorCode.NONE, (version, answer)
            offsets.append(answer.base_offset)
    assert offsets == [0, 1, 2]
    got = confluent_consume(shared_broker.bootstrap, topic, 3)
    assert [(m.offset, m.key, m.value) for m in got] == [(0, b"k", b"v10"), (1, b"k", b"v11"), (2, b"k", b"v12")]

    with RawClient(shared_broker.bootstrap) as client:
        topic_id = client.request(ApiKey.METADATA, 13, {"topics": [{"name": topic}]}).topics[0].topic_id
        for high_watermark in (2**63 - 1, -1, 1):  # unset, unknown, and a follower's value: all the same to strom
            partition = {
                "partition": 0,
                "current_leader_epoch": -1,
                "fetch_offset": 1,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
                "high_watermark": high_watermark,
            }
            body = {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic_id": topic_id, "partitions": [partition]}],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            fetched = client.request(ApiKey.FETCH, 18, body).responses[0].partitions[0]
            assert (fetched.error_code, fetched.high_watermark) == (ErrorCode.NONE, 3)
            assert b"v11" in bytes(fetched.records) and b"v12" in bytes(fetched.records)


def test_produce_v13_names_topics_by_id(shared_broker):
    """Kafka 4.1 (KIP-516): the request and the response carry topic ids; an unknown id is
    answered UNKNOWN_TOPIC_ID for each of its partitions, and the rest of the request is written."""
    topic = unique_topic("p13")
    create(shared_broker.bootstrap, topic, 2)
    unknown = uuid.uuid4()
    with RawClient(shared_broker.bootstrap) as client:
        topic_id = client.request(ApiKey.METADATA, 13, {"topics": [{"name": topic}]}).topics[0].topic_id

        def batch(value: bytes) -> bytes:
            return build_batch([NewRecord(value, timestamp=TS_BASE)])

        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [
                {
                    "topic_id": topic_id,
                    "partition_data": [{"index": 0, "records": batch(b"a")}, {"index": 1, "records": batch(b"b")}],
                },
                {"topic_id": unknown, "partition_data": [{"index": 0, "records": batch(b"lost")}]},
            ],
        }
        for acks in (-1, 1):
            answer = client.request(ApiKey.PRODUCE, 13, {**body, "acks": acks})
            got = {
                (t.topic_id, p.index): (p.error_code, p.base_offset)
                for t in answer.responses
                for p in t.partition_responses
            }
            offset = 0 if acks == -1 else 1
            assert got == {
                (topic_id, 0): (ErrorCode.NONE, offset),
                (topic_id, 1): (ErrorCode.NONE, offset),
                (unknown, 0): (ErrorCode.UNKNOWN_TOPIC_ID, -1),
            }
            unknown_answer = next(t for t in answer.responses if t.topic_id == unknown).partition_responses[0]
            assert unknown_answer.error_message == "this server does not host this topic ID"
    for partition, value in ((0, b"a"), (1, b"b")):
        got = confluent_consume(shared_broker.bootstrap, topic, 2, partition=partition)
        assert [m.value for m in got] == [value, value]
