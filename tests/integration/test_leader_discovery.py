"""KIP-951: Produce v10+ and Fetch v16+ name the current leader when they answer "not me".

On a two-broker cluster: at wire level, a produce or fetch sent to the follower is answered
NOT_LEADER_OR_FOLLOWER with the leader's id and epoch and its endpoint, and a fetch with an old
epoch FENCED_LEADER_EPOCH with the same; older versions carry nothing. Then librdkafka (2.x reads
the hints) keeps producing and consuming across a preferred-leader election that moves the
leadership between two live brokers, and its debug log shows it took the new leader from the
hint (METADATAUPDATE, which only KIP-951's tags feed) rather than from Metadata.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from strom.testing import Cluster
from tests.integration.clients import TS_BASE, WAIT_S, RawClient, wait_until


def _produce_body(topic: str, topic_id=None) -> dict:
    """Names the topic, and gives its id for v13 (KIP-516)."""
    batch = build_batch([NewRecord(b"v", key=b"k", timestamp=TS_BASE)])
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout": 5000,
        "topic_data": [{"name": topic, "topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}],
    }


def _fetch_body(topic_id, epoch: int = -1) -> dict:
    partition = {
        "partition": 0,
        "current_leader_epoch": epoch,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return {
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


def _address(cluster: Cluster, broker_id: int) -> str:
    found = cluster.admin.list_topics(timeout=WAIT_S).brokers[broker_id]
    return f"{found.host}:{found.port}"


def _state(cluster: Cluster, topic: str, address: str | None = None) -> tuple[int, int]:
    """The leader and epoch of ``topic``-0 as one broker (the first, unless named) sees them.

    Brokers learn a new topic from their own ZooKeeper watch, as Kafka's learn it from the
    controller's UpdateMetadata: a broker other than the one that answered CreateTopics may not
    know it yet, so this waits until the broker asked names a leader.
    """

    def ask() -> tuple[int, int] | None:
        with RawClient(address or cluster.bootstrap_servers.split(",")[0]) as client:
            found = client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics[0]
        if not found.partitions or found.partitions[0].leader_id < 0:
            return None
        return found.partitions[0].leader_id, found.partitions[0].leader_epoch

    return wait_until(ask, what=f"{address or 'the first broker'} to know a leader of {topic}")


def _elect_preferred(cluster: Cluster, topic: str, preferred: int) -> None:
    future = cluster.admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    future.result(WAIT_S)
    wait_until(lambda: _state(cluster, topic)[0] == preferred, what=f"{preferred} to lead {topic}")


def test_not_leader_answers_name_the_leader(tmp_path):
    with Cluster(tmp_path, size=2) as cluster:
        topic = cluster.create_topic("hinted", replication_factor=2)
        leader, epoch = _state(cluster, topic)
        follower = next(b for b in cluster.broker_ids if b != leader)
        host, port = _address(cluster, leader).rsplit(":", 1)
        assert _state(cluster, topic, _address(cluster, follower)) == (leader, epoch)
        with RawClient(_address(cluster, follower)) as client:
            topic_id = client.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]}).topics[0].topic_id
            for version in (10, 11, 12, 13):
                answer = client.request(ApiKey.PRODUCE, version, _produce_body(topic, topic_id))
                if version >= 13:
                    assert answer.responses[0].topic_id == topic_id
                partition = answer.responses[0].partition_responses[0]
                assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (leader, epoch)
                assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(leader, host, int(port))]
            old = client.request(ApiKey.PRODUCE, 9, _produce_body(topic)).responses[0].partition_responses[0]
            assert old.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # v9 has no room for a hint

            for version in (16, 17):
                answer = client.request(ApiKey.FETCH, version, _fetch_body(topic_id))
                partition = answer.responses[0].partitions[0]
                assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (leader, epoch)
                assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(leader, host, int(port))]
                # no watermarks from a replica that does not lead, as Kafka: librdkafka caches those of
                # every partition answer, so a follower's lagging one would set a consumer's back
                assert (partition.high_watermark, partition.last_stable_offset, partition.log_start_offset) == (
                    -1,
                    -1,
                    -1,
                )

        cluster.restart(leader)  # controlled shutdown hands the leadership over
        cluster.wait_for_isr(topic, WAIT_S)
        new_leader, new_epoch = _state(cluster, topic)
        assert new_leader == follower and new_epoch > epoch
        with RawClient(_address(cluster, new_leader)) as client:
            answer = client.request(ApiKey.FETCH, 16, _fetch_body(topic_id, epoch=epoch))  # a client's stale epoch
            partition = answer.responses[0].partitions[0]
            assert partition.error_code == ErrorCode.FENCED_LEADER_EPOCH
            assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
                new_leader,
                new_epoch,
            )
            assert [n.node_id for n in answer.node_endpoints] == [new_leader]
            ok = client.request(ApiKey.FETCH, 16, _fetch_body(topic_id, epoch=new_epoch))
            assert ok.responses[0].partitions[0].error_code == ErrorCode.NONE
            assert ok.node_endpoints == ()  # no hint where none is needed


class _Lines(logging.Handler):
    """librdkafka's log lines (delivered on the thread that polls the client, this one)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def matching(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]


def test_librdkafka_follows_the_hint_across_a_leader_change(tmp_path):
    with Cluster(tmp_path, size=2) as cluster:
        topic = "moving-leader"
        from confluent_kafka.admin import NewTopic

        ids = cluster.broker_ids
        cluster.admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[ids[0], ids[1]]])])[
            topic
        ].result(WAIT_S)
        cluster.wait_for_isr(topic, WAIT_S, replicas=2)
        cluster.restart(ids[0])  # the preferred leader hands over to the other broker, then comes back
        cluster.wait_for_isr(topic, WAIT_S, replicas=2)
        assert _state(cluster, topic)[0] == ids[1]

        lines = _Lines()
        logger = logging.getLogger(f"librdkafka-{topic}")
        logger.addHandler(lines)
        logger.setLevel(logging.DEBUG)
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "debug": "metadata",
            },
            logger=logger,
        )
        failures: list = []

        def delivered(err, msg) -> None:
            if err is not None:
                failures.append(err)

        sent = [b"m%d" % i for i in range(400)]
        for value in sent[:200]:
            producer.produce(topic, value, partition=0, on_delivery=delivered)
        assert producer.flush(WAIT_S) == 0
        _elect_preferred(cluster, topic, ids[0])  # both brokers stay up: only the answers say who leads
        for value in sent[200:]:
            producer.produce(topic, value, partition=0, on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(WAIT_S) == 0 and failures == []
        wait_until(
            lambda: lines.matching(f"{topic}") and lines.matching(f"updated with leader {ids[0]}"),
            what="librdkafka to take the leader from a produce answer",
        )

        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "leader-discovery",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            got: list[bytes] = []
            wait_until(
                lambda: (
                    got.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
                    or len(got) >= len(sent)
                ),
                what="the records",
            )
            assert got == sent  # in order, none lost, none twice (idempotence across the leader change)
        finally:
            consumer.close()
