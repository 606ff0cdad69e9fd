"""A broker whose metadata reads or controller writes ZooKeeper does not answer keeps serving (issue 14).

A broker used to make these calls on its event loop, so a ZooKeeper that stopped answering just
then held every produce and fetch of that broker until kazoo gave the connection up, two thirds
of the session timeout later (20 s here):

* a metadata change fires a watch on every broker, and each re-reads the changed znodes; those
  reads are now made ahead on a thread of their own and applied on the loop once answered;
* the controller decides elections and ISR changes on the loop, and now writes them on a thread
  of its own, putting the answers into its cache when they come;
* a broker that finds the controller's office empty now stands for it on that thread too.

ZooKeeper is stopped exactly when the first such request reaches it (``zk_tripwire``), so the
tests do not depend on the machine's speed; the 10 s given to the writes is half of what the old
event loop was held.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from strom.cluster import model
from tests.cluster.conftest import Cluster, create_topic, wait_until
from tests.cluster.zk_tripwire import CREATE_OPS, MULTI, ZkTripwire

TOPIC = "paused-metadata"
GET_DATA = 4
SET_DATA = 5
SESSION_TIMEOUT_MS = 30_000  # kazoo gives a silent connection up after two thirds of it: 20 s
RETENTION_MS = "86400000"


class PausedCluster:
    """Three brokers through a tripwire that stops ZooKeeper at the first request ``match`` accepts
    once armed; a topic of three partitions, one led by each broker; a producer that knows them."""

    def __init__(self, tmp_path, zookeeper: tuple, match: Callable[[int, str], bool]):
        self.zk_process, zk_port = zookeeper
        self.armed = False
        self.proxy = ZkTripwire(
            zk_port, lambda op, path: self.armed and match(op, path), lambda _: self.pause_zookeeper()
        )
        self.cluster = Cluster(
            tmp_path / "cluster", self.proxy.address, 3, {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
        )
        try:
            self.cluster.start()
            create_topic(self.cluster, TOPIC, 3, 3)
            self.leaders = {p: self.cluster.leader(TOPIC, p) for p in range(3)}
            assert set(self.leaders.values()) == {0, 1, 2}, self.cluster.replicas(TOPIC)
        except BaseException:
            self.close()
            raise
        self.producer = Producer({"bootstrap.servers": self.cluster.bootstrap, "acks": "1", "linger.ms": 0})
        self.failed: list[object] = []
        self.sent: list[tuple[int, bytes]] = []

    def pause_zookeeper(self) -> None:
        os.kill(self.zk_process.pid, signal.SIGSTOP)

    def resume_zookeeper(self) -> None:
        os.kill(self.zk_process.pid, signal.SIGCONT)

    def produce(self, values: list[tuple[int, bytes]], timeout_s: float) -> int:
        """Values not acknowledged within ``timeout_s`` (0: all of them were)."""
        for partition, value in values:
            self.producer.produce(TOPIC, value, partition=partition, on_delivery=self._delivered)
        self.sent += values
        return self.producer.flush(timeout_s)

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failed.append(error)

    def read_all(self) -> list[tuple[int, bytes]]:
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": "r", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        read: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(read) < len(self.sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append((message.partition(), message.value()))
        consumer.close()
        return read

    def assert_all_read_in_order(self) -> None:
        read = self.read_all()
        for p in range(3):
            assert [v for q, v in read if q == p] == [v for q, v in self.sent if q == p], f"partition {p}"

    def close(self) -> None:
        self.resume_zookeeper()
        self.cluster.close()
        self.proxy.close()


def test_a_metadata_reload_zookeeper_does_not_answer_holds_no_request(tmp_path, paused_zookeeper):
    """A topic config change (written as Kafka's ZooKeeper-mode tools write it) makes every broker
    re-read it; ZooKeeper stops at the first read."""
    config_path = model.topic_config_path(TOPIC)
    paused = PausedCluster(tmp_path, paused_zookeeper, lambda op, path: op == GET_DATA and path.endswith(config_path))
    cluster = paused.cluster
    try:
        assert paused.produce([(p, b"before-%d" % p) for p in range(3)], 30) == 0 and not paused.failed
        paused.armed = True
        cluster.zk.set(config_path, model.topic_config_json({"retention.ms": RETENTION_MS}))
        try:
            wait_until(paused.proxy.tripped.is_set, 20, "a broker's read of the changed config (ZooKeeper stops there)")
            during = [(p, b"during-%d-%d" % (p, i)) for i in range(10) for p in range(3)]
            assert paused.produce(during, 10) == 0, "a broker held its produce requests while its reload waited"
            assert not paused.failed, paused.failed
        finally:
            paused.resume_zookeeper()

        def retention_seen() -> str | None:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
            configs = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
            return configs["retention.ms"].value

        wait_until(lambda: retention_seen() == RETENTION_MS, 30, "the new retention.ms")
        paused.assert_all_read_in_order()
        assert "fenced:" not in cluster.logs(), "a broker fenced itself: its event loop was held"
    except BaseException:
        print(cluster.logs()[-30000:])
        raise
    finally:
        paused.close()


@pytest.mark.parametrize("who", ["a follower", "the controller"])
def test_an_election_zookeeper_does_not_answer_holds_no_request(tmp_path, paused_zookeeper, who):
    """A broker shuts down cleanly. When it is a follower, the controller elects a leader for its
    partition and drops it from the ISRs, and ZooKeeper stops at the controller's first state
    write; when it is the controller, the others stand for the office, and ZooKeeper stops at
    the first create of /controller."""
    state_paths = tuple(model.partition_state_path(TOPIC, p) for p in range(3))
    if who == "a follower":
        match = lambda op, path: op in (SET_DATA, MULTI) and path.endswith(state_paths)  # noqa: E731
    else:
        match = lambda op, path: op in CREATE_OPS and path.endswith(model.CONTROLLER)  # noqa: E731
    paused = PausedCluster(tmp_path, paused_zookeeper, match)
    cluster = paused.cluster
    try:
        controller = cluster.controller()
        leaving = next(b for b in cluster.brokers if b != controller) if who == "a follower" else controller
        serving = [p for p, leader in paused.leaders.items() if leader != leaving]
        assert paused.produce([(p, b"before-%d" % p) for p in range(3)], 30) == 0 and not paused.failed
        cluster.wait_logs_equal(TOPIC, 30)  # acks=1: on every replica before its leader leaves, as in Kafka
        paused.armed = True
        cluster.brokers[leaving].process.send_signal(signal.SIGTERM)  # deregisters, then waits for the moves
        try:
            wait_until(paused.proxy.tripped.is_set, 20, "the election (ZooKeeper stops there)")
            during = [(p, b"during-%d-%d" % (p, i)) for i in range(10) for p in serving]
            assert paused.produce(during, 10) == 0, "a broker held its produce requests while its election waited"
            assert not paused.failed, paused.failed
        finally:
            paused.resume_zookeeper()
        cluster.brokers[leaving].stop()
        for p in range(3):
            wait_until(
                lambda p=p: (s := cluster.state(TOPIC, p)) is not None and s.leader >= 0 and leaving not in s.isr,
                30,
                f"{TOPIC}-{p} led without broker {leaving}",
            )
        after = [(p, b"after-%d" % p) for p in range(3)]
        assert paused.produce(after, 30) == 0 and not paused.failed
        paused.assert_all_read_in_order()
        for broker in cluster.brokers:
            if broker != leaving:
                assert f"broker {broker} fenced:" not in cluster.logs(), f"broker {broker}'s event loop was held"
    except BaseException:
        print(cluster.logs()[-30000:])
        raise
    finally:
        paused.close()
