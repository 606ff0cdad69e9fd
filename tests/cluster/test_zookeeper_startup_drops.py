"""ZooKeeper dropping its connection in the middle of a broker's startup: retry, as Kafka does.

Issue 14's fault campaign restarted a broker while ZooKeeper dropped its connection, and the
broker exited with ``cannot start: ConnectionLoss``. Kafka's broker waits out such a drop for up
to zookeeper.connection.timeout.ms. Here the answer to one chosen startup request (the broker's
registration, the controller election, the first read of the topics) is lost while ZooKeeper does
carry it out, and ZooKeeper stays unreachable for a while: the broker must retry, accept its own
node already there, come up and serve; and, with ZooKeeper gone for longer than the timeout, exit
with a message naming the key.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from strom.testing.nodes import ProcessNode, wait_ready
from tests.cluster.conftest import SESSION_TIMEOUT_MS
from tests.cluster.zk_tripwire import CREATE_OPS, GET_CHILDREN_OPS, ZkTripwire

HOLD_S = 2.0  # ZooKeeper's answers lost this long: well within zookeeper.connection.timeout.ms below
TRIP_TIMEOUT_S = 30


def zk_client(zookeeper: str) -> KazooClient:
    client = KazooClient(hosts=zookeeper, timeout=10)
    client.start(timeout=30)
    return client


def broker(tmp_path, proxy: ZkTripwire, chroot: str, connection_timeout_ms: int) -> ProcessNode:
    return ProcessNode(
        1,
        tmp_path / "broker-1",
        {
            "zookeeper.connect": proxy.address + chroot,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": str(connection_timeout_ms),
            "offsets.topic.replication.factor": "1",
        },
    )


def produce_and_consume(bootstrap: str, topic: str) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=20)[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for i in range(5):
        producer.produce(topic, b"after-the-drop-%d" % i, partition=0, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0
    assert not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drops", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


def at(ops: frozenset[int], suffix: str) -> Callable[[int, str], bool]:
    return lambda op, path: op in ops and path.endswith(suffix)


def lose_answers(proxy: ZkTripwire) -> None:
    """The request goes through and ZooKeeper carries it out; its answer, and every later one, is lost."""
    proxy.blackhole("from_target")


@pytest.mark.parametrize(
    ("step", "match"),
    [
        ("registering broker 1", at(CREATE_OPS, "/brokers/ids/1")),
        ("electing the controller", at(CREATE_OPS, "/controller")),
        ("reading the cluster metadata", at(GET_CHILDREN_OPS, "/brokers/topics")),
    ],
    ids=["registration", "controller-election", "metadata-read"],
)
def test_a_startup_step_whose_answer_is_lost_is_retried_and_the_broker_serves(tmp_path, zookeeper, step, match):
    chroot = f"/drops-{uuid.uuid4().hex[:8]}"
    zk = zk_client(zookeeper)
    zk.ensure_path(chroot)
    proxy = ZkTripwire(int(zookeeper.rsplit(":", 1)[1]), match, lose_answers)
    node = broker(tmp_path, proxy, chroot, 20000)
    try:
        node.spawn()
        assert proxy.tripped.wait(TRIP_TIMEOUT_S), node.log_tail()
        time.sleep(HOLD_S)
        assert node.alive, node.log_tail()
        proxy.heal()  # the connection that lost the answer is reset; the next one gets through
        wait_ready([node], 30)
        log = node.log_path.read_text(errors="replace")
        assert f"ZooKeeper unavailable {step}" in log, log[-4000:]
        # the retried create found its own node and went on: registered, and the controller's
        # election finished (its epoch written once) rather than stopping at the node it had made
        assert zk.exists(f"{chroot}/brokers/ids/1")
        assert zk.get(f"{chroot}/controller_epoch")[0] == b"1"
        got = produce_and_consume(f"127.0.0.1:{node.port}", "after-drop")
        assert got == [b"after-the-drop-%d" % i for i in range(5)]
    finally:
        node.stop()
        proxy.close()
        zk.stop()
        zk.close()


def test_zookeeper_gone_longer_than_the_connection_timeout_ends_startup_naming_the_key(tmp_path, zookeeper):
    chroot = f"/drops-{uuid.uuid4().hex[:8]}"
    zk = zk_client(zookeeper)
    zk.ensure_path(chroot)
    zk.stop()
    zk.close()
    proxy = ZkTripwire(int(zookeeper.rsplit(":", 1)[1]), at(CREATE_OPS, "/brokers/ids/1"), lose_answers)
    node = broker(tmp_path, proxy, chroot, 2000)
    try:
        node.spawn()
        assert proxy.tripped.wait(TRIP_TIMEOUT_S), node.log_tail()
        proxy.close()  # ZooKeeper unreachable from now on: connections reset, new ones refused
        assert node.process is not None
        code = node.process.wait(60)
    finally:
        node.kill()
        proxy.close()
    output = node.log_tail()
    assert code == 1, output
    assert (
        f"strom server-start: cannot start: ZooKeeper at {proxy.address}{chroot} (zookeeper.connect) did not answer "
        "registering broker 1 for 2000 ms (zookeeper.connection.timeout.ms)"
    ) in output
    assert "ZooKeeper unavailable registering broker 1" in output
    assert "Traceback" not in output
