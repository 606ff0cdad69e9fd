"""KIP-207: a new leader whose high watermark lags the start of its epoch answers OFFSET_NOT_AVAILABLE.

A leader learns the high watermark from its followers' fetches, so a broker that has just been
elected can hold a lower one than its log: its followers have not fetched from it yet, it learned
the old leader's last watermark one fetch late, or it was killed -9 and restarted from its last
checkpoint. Answering "latest" from it would hand consumers an offset that may be lower than the
one they were given before the election (the fault campaign's checker saw such watermarks behind
after elections, and a cluster restarted right after kill -9 answered a high watermark of 0 to
librdkafka's watermark query). Kafka answers OFFSET_NOT_AVAILABLE until the watermark reaches the
epoch's start offset; strom now does the same. librdkafka's watermark query hands that error to
the application (it asks again only where it resets an offset), which asks again.

The state is made on purpose here: one follower is stopped with SIGSTOP (it stays registered and
in the ISR, as replica.lag.time.max.ms and the session timeout are long), records are written
with acks=1 (so the watermark stays where the stopped follower left it), and the leader leaves
with a controlled shutdown, which hands the partition to the other follower at a new epoch.
"""

from __future__ import annotations

import os
import signal

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.cluster.conftest import wait_until
from tests.integration.clients import RawClient

TOPIC = "lagging"


def _list_latest(bootstrap: str, replica_id: int = -1) -> tuple[int, int]:
    with RawClient(bootstrap) as client:
        body = {
            "replica_id": replica_id,
            "isolation_level": 0,
            "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
            ],
        }
        found = client.request(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0]
    return found.error_code, found.offset


def _watermarks(consumer: Consumer) -> tuple[int, int] | None:
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.OFFSET_NOT_AVAILABLE, exc  # the only error while it catches up
        return None


def _produce(bootstrap: str, acks: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    errors: list = []
    for value in values:
        producer.produce(TOPIC, value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors, errors


def test_a_new_leader_refuses_latest_until_its_high_watermark_reaches_its_epoch(cluster_factory):
    cluster = cluster_factory(overrides={"replica.lag.time.max.ms": "60000", "zookeeper.session.timeout.ms": "30000"})
    controller = cluster.controller()
    others = [b for b in cluster.brokers if b != controller]
    leader, stopped, successor = others[0], others[1], controller  # the successor elects itself, on its own loop
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics(
        [
            NewTopic(
                TOPIC,
                num_partitions=1,
                replica_assignment=[[leader, successor, stopped]],
                config={"min.insync.replicas": "1"},
            )
        ]
    )[TOPIC].result(20)
    cluster.wait_full_isr(TOPIC, 20)
    assert cluster.leader(TOPIC, 0) == leader

    _produce(cluster.bootstrap, "all", [f"committed-{i}".encode() for i in range(10)])
    stopped_pid = cluster.brokers[stopped].process.pid
    os.kill(stopped_pid, signal.SIGSTOP)
    try:
        _produce(cluster.bootstrap, "1", [f"pending-{i}".encode() for i in range(50)])
        wait_until(lambda: cluster.log_end(successor, TOPIC, 0) == 60, 20, "the successor to hold all 60 records")
        assert _list_latest(cluster.brokers[leader].bootstrap) == (ErrorCode.NONE, 10)  # held at the stopped follower

        cluster.brokers[leader].stop()  # controlled shutdown: the successor leads at a new epoch
        wait_until(lambda: cluster.leader(TOPIC, 0) == successor, 20, "the successor to lead")
        successor_address = cluster.brokers[successor].bootstrap
        wait_until(
            lambda: _list_latest(successor_address)[0] != ErrorCode.NOT_LEADER_OR_FOLLOWER,
            20,
            "the successor to act as leader",
        )
        assert _list_latest(successor_address) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
        # a follower (or a tool sending a replica id) is answered as before
        assert _list_latest(successor_address, replica_id=stopped) == (ErrorCode.NONE, 10)

        # librdkafka's watermark query reports it as an error of its own, and an application
        # that asks again is answered once the stopped follower has fetched
        consumer = Consumer({"bootstrap.servers": successor_address, "group.id": "kip-207"})
        with pytest.raises(KafkaException) as refused:
            consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
        assert refused.value.args[0].code() == KafkaError.OFFSET_NOT_AVAILABLE
    finally:
        os.kill(stopped_pid, signal.SIGCONT)
    try:
        assert wait_until(lambda: _watermarks(consumer), 30, "the watermarks once the follower fetched") == (0, 60)
    finally:
        consumer.close()
    assert _list_latest(successor_address) == (ErrorCode.NONE, 60)
