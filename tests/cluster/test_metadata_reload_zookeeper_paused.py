"""A broker whose metadata reload ZooKeeper does not answer keeps serving (issue 14).

A metadata change (here a topic's config, written as Kafka's ZooKeeper-mode tools write it) fires
a watch on every broker, and each re-reads the znode. Those reads ran on the broker's event loop,
so a ZooKeeper that stopped answering just then held every produce and fetch of every broker
until kazoo gave the connection up, two thirds of the session timeout later (20 s here). The reads
of a reload are now made ahead on a thread of their own and applied on the loop once answered.

ZooKeeper is stopped exactly when the first broker sends its read (``zk_tripwire``), so the test
does not depend on the machine's speed; the 10 s given to the writes is half of what the old
event loop was held.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from strom.cluster import model, zookeeper_server
from tests.cluster.conftest import Cluster, create_topic, wait_until
from tests.cluster.zk_tripwire import ZkTripwire

TOPIC = "reload-paused"
GET_DATA = 4
SESSION_TIMEOUT_MS = 30_000  # kazoo gives a silent connection up after two thirds of it: 20 s
RETENTION_MS = "86400000"


@pytest.fixture
def paused_zookeeper(tmp_path):
    """A ZooKeeper of the test's own, since it stops it: (process, port)."""
    process, port = zookeeper_server.start(str(tmp_path / "zookeeper"))
    try:
        yield process, port
    finally:
        os.kill(process.pid, signal.SIGCONT)
        zookeeper_server.stop(process)


def retention_seen(bootstrap: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
    return configs["retention.ms"].value


def test_a_metadata_reload_zookeeper_does_not_answer_holds_no_request(tmp_path, paused_zookeeper):
    zk_process, zk_port = paused_zookeeper
    config_path = model.topic_config_path(TOPIC)
    armed = False
    proxy = ZkTripwire(
        zk_port,
        lambda op, path: armed and op == GET_DATA and path.endswith(config_path),
        lambda _: os.kill(zk_process.pid, signal.SIGSTOP),
    )
    cluster = Cluster(tmp_path / "cluster", proxy.address, 3, {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    try:
        cluster.start()
        create_topic(cluster, TOPIC, 3, 3)
        assert {cluster.leader(TOPIC, p) for p in range(3)} == {0, 1, 2}, cluster.replicas(TOPIC)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1", "linger.ms": 0})
        failed: list[object] = []

        def produce(values: list[tuple[int, bytes]], timeout_s: float) -> int:
            for partition, value in values:
                producer.produce(TOPIC, value, partition=partition, on_delivery=lambda e, m: e and failed.append(e))
            return producer.flush(timeout_s)

        before = [(p, b"before-%d" % p) for p in range(3)]
        assert produce(before, 30) == 0 and not failed

        armed = True
        cluster.zk.set(config_path, model.topic_config_json({"retention.ms": RETENTION_MS}))
        try:
            wait_until(proxy.tripped.is_set, 20, "a broker's read of the changed config (ZooKeeper stops there)")
            # ZooKeeper is stopped with the reloads' reads unanswered: every leader still answers
            during = [(p, b"during-%d-%d" % (p, i)) for i in range(10) for p in range(3)]
            assert produce(during, 10) == 0, "a broker held its produce requests while its reload waited"
            assert not failed, failed
        finally:
            os.kill(zk_process.pid, signal.SIGCONT)
        wait_until(lambda: retention_seen(cluster.bootstrap) == RETENTION_MS, 30, "the new retention.ms")

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reload", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        read: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(read) < len(before) + len(during) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append((message.partition(), message.value()))
        consumer.close()
        for p in range(3):
            wanted = [value for partition, value in before + during if partition == p]
            assert [value for partition, value in read if partition == p] == wanted
        logs = cluster.logs()
        assert "fenced:" not in logs, "a broker fenced itself: its event loop was held"
    except BaseException:
        print(cluster.logs()[-30000:])
        raise
    finally:
        cluster.close()
        proxy.close()
