"""Versions newer Kafka brokers added to APIs strom serves: ListTransactions v2 (KIP-1152: a
transactional id pattern, matched whole with RE2) and DescribeLogDirs v5 (KIP-1066: whether a dir is
cordoned, which no strom dir ever is)."""

from __future__ import annotations

from confluent_kafka import Producer

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.testing import Broker
from tests.integration.clients import WAIT_S, RawClient, wait_until


def _list(client: RawClient, version: int, pattern: str | None = None):
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    if pattern is not None:
        body["transactional_id_pattern"] = pattern
    return client.request(ApiKey.LIST_TRANSACTIONS, version, body)


def test_list_transactions_v2_filters_by_pattern_and_describe_log_dirs_v5(tmp_path):
    with Broker(tmp_path / "broker", {"transaction.state.log.replication.factor": "1"}) as broker:
        producers = []
        for transactional_id in ("orders-1", "orders-22", "payments-1"):
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id})
            producer.init_transactions(WAIT_S)
            producers.append(producer)
        with RawClient(broker.bootstrap_servers) as client:

            def ids(answer) -> list[str]:
                assert answer.error_code == ErrorCode.NONE
                return sorted(s.transactional_id for s in answer.transaction_states)

            every = ["orders-1", "orders-22", "payments-1"]
            assert ids(_list(client, 1)) == every
            assert ids(_list(client, 2)) == every  # null: no filter
            assert ids(_list(client, 2, "")) == every  # empty: no filter
            assert ids(_list(client, 2, r"orders-\d+")) == ["orders-1", "orders-22"]
            assert ids(_list(client, 2, "orders")) == []  # matched whole, as RE2/J's matches()
            assert ids(_list(client, 2, "(orders|payments)-1")) == ["orders-1", "payments-1"]
            refused = _list(client, 2, "orders-(")
            assert refused.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION and refused.transaction_states == ()
            assert _list(client, 2, r"(a)\1").error_code == ErrorCode.INVALID_REGULAR_EXPRESSION  # no RE2 syntax

            for version in (4, 5):
                answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
                assert answer.error_code == ErrorCode.NONE and len(answer.results) == 1
                result = answer.results[0]
                assert result.log_dir == str(broker.node.data_dir) and result.total_bytes > 0
                assert {t.name for t in result.topics} >= {"__transaction_state"}
                assert getattr(result, "is_cordoned", False) is False


def test_offset_commit_and_fetch_v10_name_topics_by_id(tmp_path):
    """KIP-848's topic-id versions: committed by id, read back by id and by name, unknown ids refused."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    with Broker(tmp_path / "broker") as broker:
        topic = broker.create_topic("by-id", partitions=2)
        stray = uuid.uuid4()
        with RawClient(broker.bootstrap_servers) as client:
            topic_id = client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics[0].topic_id

            def commit():
                return client.request(
                    ApiKey.OFFSET_COMMIT,
                    10,
                    {
                        "group_id": "g10",
                        "generation_id_or_member_epoch": -1,
                        "member_id": "",
                        "topics": [
                            {
                                "topic_id": topic_id,
                                "partitions": [
                                    {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"},
                                    {"partition_index": 1, "committed_offset": 7, "committed_metadata": None},
                                ],
                            },
                            {"topic_id": stray, "partitions": [{"partition_index": 0, "committed_offset": 1}]},
                        ],
                    },
                )

            retriable = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
            # as a client does: FindCoordinator first (its first use makes __consumer_offsets)
            client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g10"]})
            committed = wait_until(
                lambda: (answer := commit()).topics[0].partitions[0].error_code not in retriable and answer,
                what="the group coordinator",  # __consumer_offsets is made on first use
            )
            assert [
                (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics
            ] == [
                (topic_id, [(0, ErrorCode.NONE), (1, ErrorCode.NONE)]),
                (stray, [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
            ]

            def fetch(version: int, topics):
                body = {"groups": [{"group_id": "g10", "topics": topics}], "require_stable": False}
                group = client.request(ApiKey.OFFSET_FETCH, version, body).groups[0]
                assert group.error_code == ErrorCode.NONE
                return group.topics

            asked = fetch(
                10, [{"topic_id": topic_id, "partition_indexes": [0, 1]}, {"topic_id": stray, "partition_indexes": [3]}]
            )
            assert [
                (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                for t in asked
            ] == [
                (topic_id, [(0, 42, ErrorCode.NONE), (1, 7, ErrorCode.NONE)]),
                (stray, [(3, -1, ErrorCode.UNKNOWN_TOPIC_ID)]),
            ]
            every = fetch(10, None)
            assert [(t.topic_id, sorted(p.committed_offset for p in t.partitions)) for t in every] == [
                (topic_id, [7, 42])
            ]
            by_name = fetch(9, [{"name": topic, "partition_indexes": [0]}])
            assert [(t.name, t.partitions[0].committed_offset, t.partitions[0].metadata) for t in by_name] == [
                (topic, 42, "m")
            ]
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g10"})
        try:
            found = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=WAIT_S)
            assert [(tp.partition, tp.offset) for tp in found] == [(0, 42), (1, 7)]
        finally:
            consumer.close()
