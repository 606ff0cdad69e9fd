"""A broker whose session expired registers again even if the link drops during the registration.

After a session expiry kazoo opens a new session and the broker creates its ephemeral
/brokers/ids/<id> again. If the connection drops while that create is on its way, kazoo
reconnects to the same (new) session and reports nothing more: a broker that tried once stayed
alive but unregistered for good, leading nothing and out of every ISR (issue 14). The tripwire
drops exactly that create and resets the link; the broker must be registered again, lead its
partitions and take records.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from strom.cluster import model
from strom.testing.nodes import ProcessNode
from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until
from tests.cluster.zk_tripwire import CREATE_OPS, ZkTripwire

TOPIC = "registered"


def test_a_registration_cut_off_after_a_session_expiry_is_retried(tmp_path, zookeeper):
    chroot = f"/rereg-{uuid.uuid4().hex[:8]}"
    registration = f"{chroot}{model.broker_path(1)}"
    zk = KazooClient(hosts=zookeeper, timeout=10)
    zk.start(timeout=30)
    zk.ensure_path(chroot)
    armed = threading.Event()  # the startup registration passes; the one after the expiry is dropped
    proxy = ZkTripwire(
        int(zookeeper.rsplit(":", 1)[1]),
        lambda op, path: armed.is_set() and op in CREATE_OPS and path == registration,
        lambda _: False,
    )
    node = ProcessNode(
        1,
        tmp_path / "broker-1",
        {"zookeeper.connect": proxy.address + chroot, "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)},
    )
    try:
        node.start()
        bootstrap = f"127.0.0.1:{node.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        assert zk.exists(registration)

        armed.set()
        proxy.blackhole()  # silent past the session timeout: ZooKeeper expires the session
        wait_until(lambda: not zk.exists(registration), SESSION_TIMEOUT_MS / 1000 + 20, "the session to expire")
        proxy.heal()
        wait_until(proxy.tripped.is_set, 30, "the broker's registration in its new session (dropped)")
        wait_until(lambda: zk.exists(registration), 20, "the broker registered again after the dropped create")

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        failed: list[object] = []
        for p in (0, 1):
            producer.produce(TOPIC, b"after-%d" % p, partition=p, on_delivery=lambda e, m: e and failed.append(e))
        assert producer.flush(60) == 0 and not failed, failed
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rereg", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got[message.partition()] = message.value()
        consumer.close()
        assert got == {0: b"after-0", 1: b"after-1"}
        assert "could not re-register broker 1" in node.log_path.read_text(errors="replace")
    except BaseException:
        print(node.log_tail(20000))
        raise
    finally:
        node.stop()
        proxy.close()
        zk.stop()
        zk.close()
