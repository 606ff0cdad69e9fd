"""A leader whose ISR change ZooKeeper does not answer keeps serving (issue 14).

The leader writes an ISR change to the partition's state znode. It used to write it on the event
loop, so a ZooKeeper that stopped answering just then held every produce and fetch of that broker
until kazoo gave the connection up, two thirds of the session timeout later (20 s here), and the
broker fenced itself on waking as a process that had been stopped. The write now waits on a
thread of its own, the shrink stays pending, and the high watermark counts the follower until the
shrink is written: acks=1 is answered while ZooKeeper is stopped, acks=all once the shrink is
written, and nothing acknowledged is lost.

ZooKeeper is stopped exactly when the leader sends the ISR change (``zk_tripwire``), so the test
does not depend on the machine's speed; the 10 s given to the acks=1 writes is half of what the
old event loop was held.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.conftest import Cluster, create_topic, wait_until
from tests.cluster.zk_tripwire import ZkTripwire, stop_process

TOPIC = "isr-paused"
SET_DATA = 5
SESSION_TIMEOUT_MS = 30_000  # kazoo gives a silent connection up after two thirds of it: 20 s


def produce(bootstrap: str, values: list[bytes], acks: str, timeout_s: float) -> int:
    """Values not acknowledged within ``timeout_s`` (0: all of them were)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    failed: list[object] = []
    for value in values:
        producer.produce(TOPIC, value, partition=0, on_delivery=lambda e, m: e and failed.append(e))
    left = producer.flush(timeout_s)
    assert not failed, failed
    return left


def test_an_isr_shrink_zookeeper_does_not_answer_holds_no_request(tmp_path, paused_zookeeper):
    zk_process, zk_port = paused_zookeeper
    armed = threading.Event()
    proxy = ZkTripwire(
        zk_port,
        lambda op, path: (
            armed.is_set() and op == SET_DATA and path.endswith(f"/brokers/topics/{TOPIC}/partitions/0/state")
        ),
        lambda _: stop_process(zk_process.pid),
    )
    cluster = Cluster(
        tmp_path / "cluster",
        proxy.address,
        3,
        {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "replica.lag.time.max.ms": "1500"},
    )
    try:
        cluster.start()
        create_topic(cluster, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        assert produce(cluster.bootstrap, [b"before"], "all", 30) == 0
        leader = cluster.leader(TOPIC, 0)
        lagging, other = [b for b in cluster.brokers if b != leader]
        armed.set()
        os.kill(cluster.brokers[lagging].process.pid, signal.SIGSTOP)
        try:
            wait_until(proxy.tripped.is_set, 20, "the leader's ISR shrink (ZooKeeper stops there)")
            # ZooKeeper is stopped and the shrink unanswered: acks=1 is still answered
            during = [b"during-%d" % i for i in range(20)]
            assert produce(cluster.bootstrap, during, "1", 10) == 0
            os.kill(zk_process.pid, signal.SIGCONT)
            wait_until(
                lambda: sorted(cluster.state(TOPIC, 0).isr) == sorted([leader, other]),
                30,
                f"the ISR of {TOPIC}-0 without broker {lagging}",
            )
            assert produce(cluster.bootstrap, [b"after-shrink"], "all", 30) == 0
        finally:
            os.kill(zk_process.pid, signal.SIGCONT)
            os.kill(cluster.brokers[lagging].process.pid, signal.SIGCONT)
        cluster.wait_full_isr(TOPIC, 60)

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "isr", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(read) < 22 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value())
        consumer.close()
        assert read == [b"before", *during, b"after-shrink"]
        logs = cluster.logs()
        assert f"broker {leader} fenced:" not in logs, "the leader fenced itself: its event loop was held"
        assert cluster.wait_logs_equal(TOPIC, 30)
    except BaseException:
        print(cluster.logs()[-30000:])
        raise
    finally:
        cluster.close()
        proxy.close()
