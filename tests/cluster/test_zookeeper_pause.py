"""ZooKeeper itself paused longer than the brokers' sessions: the cluster heals, shutdown is bounded.

Issue 14's first findings, as tests: after every session expired at once, the first group's
FindCoordinator must get an answer (not a dropped connection), and stopping a broker must end
within a bound even while ZooKeeper does not answer.
"""

from __future__ import annotations

import os
import signal
import time

from confluent_kafka import Consumer, Producer

from strom.cluster import zookeeper_server
from tests.cluster.conftest import SESSION_TIMEOUT_MS, Cluster, create_topic


def test_zookeeper_pause_then_groups_work_and_shutdown_is_bounded(tmp_path):
    zk_process, zk_port = zookeeper_server.start(str(tmp_path / "zookeeper"))
    cluster = Cluster(tmp_path / "cluster", f"127.0.0.1:{zk_port}", 3)
    try:
        cluster.start()
        create_topic(cluster, "paused", 3, 3, {"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all"})
        for i in range(30):
            producer.produce("paused", b"before-%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        os.kill(zk_process.pid, signal.SIGSTOP)
        try:
            time.sleep(SESSION_TIMEOUT_MS / 1000 + 4)  # every broker's session expires
        finally:
            os.kill(zk_process.pid, signal.SIGCONT)
        cluster.wait_registered(set(cluster.brokers), 60)
        cluster.wait_full_isr("paused", 60)
        # the first group after the storm: the offsets topic is created by whichever broker is asked
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "after-the-storm",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["paused"])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.commit(asynchronous=False)
        consumer.close()
        assert sorted(got) == sorted(b"before-%d" % i for i in range(30))
        # stopping a broker while ZooKeeper does not answer ends within a bound
        os.kill(zk_process.pid, signal.SIGSTOP)
        try:
            victim = cluster.brokers[1]
            started = time.monotonic()
            victim.process.send_signal(signal.SIGTERM)
            victim.process.wait(60)
            assert time.monotonic() - started < 45, victim.read_log()
        finally:
            os.kill(zk_process.pid, signal.SIGCONT)
    except BaseException:
        print(cluster.logs()[-20000:])
        raise
    finally:
        cluster.close()
        zookeeper_server.stop(zk_process)
