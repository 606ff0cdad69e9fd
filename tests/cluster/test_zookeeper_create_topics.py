"""ZooKeeper paused in the middle of a CreateTopics: an error code for the client, no half-made topic.

Issue 14's fault campaign once created a 10,000-partition topic while ZooKeeper lost its
connection, and the client's connection was dropped ("internal error"). A request must get a
Kafka error code with a message instead: REQUEST_TIMED_OUT (retriable) naming ZooKeeper. And
the topic is whole or absent: once ZooKeeper is back, a retry either creates it or answers
TOPIC_ALREADY_EXISTS, and then every partition has a leader and takes records.

ZooKeeper is stopped (SIGSTOP) exactly when the broker sends a chosen write of the creation (the
topic znode itself, or a batch of partition states half-way through), and resumed once the
client has its answer, so the pause does not depend on the machine's speed.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from strom.cluster import model, zookeeper_server
from strom.testing.nodes import ProcessNode
from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until
from tests.cluster.zk_tripwire import CREATE_OPS, MULTI, ZkTripwire, stop_process

TOPIC = "big"
PARTITIONS = 1000
SAMPLE = (0, 199, 200, 201, PARTITIONS - 1)  # around the batch of states the pause cut off


@pytest.fixture(scope="module")
def paused_zookeeper(tmp_path_factory):
    """A ZooKeeper of this module's own, since its tests stop it: (process, port)."""
    process, port = zookeeper_server.start(str(tmp_path_factory.mktemp("zookeeper")))
    try:
        yield process, port
    finally:
        os.kill(process.pid, signal.SIGCONT)
        zookeeper_server.stop(process)


def create(admin: AdminClient) -> None:
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], request_timeout=60)[TOPIC].result(timeout=90)


def leaders(admin: AdminClient) -> dict[int, int]:
    topic = admin.list_topics(TOPIC, timeout=15).topics[TOPIC]
    if topic.error is not None:
        return {}
    return {p: meta.leader for p, meta in topic.partitions.items()}


def produce_and_consume(bootstrap: str) -> dict[int, bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for p in SAMPLE:
        producer.produce(TOPIC, b"p%d" % p, partition=p, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0
    assert not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "created", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in SAMPLE])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    while len(got) < len(SAMPLE) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got[message.partition()] = message.value()
    consumer.close()
    return got


def topic_znode(chroot: str) -> Callable[[int, str], bool]:
    return lambda op, path: op in CREATE_OPS and path == f"{chroot}/brokers/topics/{TOPIC}"


def states_from_200(chroot: str) -> Callable[[int, str], bool]:
    return lambda op, path: op == MULTI and path == f"{chroot}/brokers/topics/{TOPIC}/partitions/200/state"


@pytest.mark.parametrize("where", [topic_znode, states_from_200], ids=["topic-znode", "partition-states"])
def test_create_topics_while_zookeeper_pauses_answers_an_error_then_the_topic_is_whole(
    tmp_path, paused_zookeeper, where
):
    zk_process, zk_port = paused_zookeeper
    chroot = f"/create-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=f"127.0.0.1:{zk_port}", timeout=10)
    zk.start(timeout=30)
    zk.ensure_path(chroot)
    proxy = ZkTripwire(zk_port, where(chroot), lambda _: stop_process(zk_process.pid))
    node = ProcessNode(
        1,
        tmp_path / "broker-1",
        {
            "zookeeper.connect": proxy.address + chroot,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": "30000",
        },
    )
    try:
        node.start()
        bootstrap = f"127.0.0.1:{node.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        with pytest.raises(KafkaException) as raised:
            create(admin)
        assert proxy.tripped.is_set()
        os.kill(zk_process.pid, signal.SIGCONT)
        error = raised.value.args[0]
        assert error.code() == KafkaError.REQUEST_TIMED_OUT, error
        assert "ZooKeeper did not answer while topic 'big' was being created" in error.str(), error
        assert node.alive, node.log_tail()

        # ZooKeeper is back: a retry creates the topic, or finds it made whole by the first try
        outcome = ""
        deadline = time.monotonic() + 40
        while not outcome:
            try:
                create(admin)
                outcome = "created"
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    outcome = "existed"
                elif code != KafkaError.REQUEST_TIMED_OUT or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # the broker's session is still coming back
        wait_until(
            lambda: (found := leaders(admin)) and len(found) == PARTITIONS and set(found.values()) == {1},
            40,
            f"a leader for each of the {PARTITIONS} partitions ({outcome})",
            interval_s=0.5,
        )
        states = [zk.exists(chroot + model.partition_state_path(TOPIC, p)) for p in range(PARTITIONS)]
        assert all(states), f"{states.count(None)} partitions without a state znode"
        assert produce_and_consume(bootstrap) == {p: b"p%d" % p for p in SAMPLE}
        assert "internal error" not in node.log_path.read_text(errors="replace")
    except BaseException:
        print(node.log_tail(20000))
        raise
    finally:
        os.kill(zk_process.pid, signal.SIGCONT)
        node.stop()
        proxy.close()
        zk.stop()
        zk.close()
