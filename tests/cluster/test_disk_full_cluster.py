"""The leader's log dir fills up on a real three-broker cluster with ZooKeeper and a real client.

Kafka's rule for a failed log dir: its partitions stop being served from that broker, the
controller elects other in-sync replicas and drops the broker from the ISR, acknowledged data
stays, and the broker rejoins once the disk has room and it restarts. Here the leader's whole
log dir is a small tmpfs that a filler file fills up for real; freeing it is deleting the file.
"""

from __future__ import annotations

import errno
import os
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import Cluster, wait_until
from tests.cluster.workload import Workload, verify
from tests.cluster.zk_tripwire import ZkTripwire
from tests.small_disk import free_bytes, tmpfs

TOPIC = "diskfull"
# broker 0 is the preferred, so the first, leader of two partitions, and a follower of the third
ASSIGNMENT = [[0, 1, 2], [0, 2, 1], [1, 0, 2]]
MOVE_BOUND_S = 30
SET_DATA = 5  # ZooKeeper's setData op


def fill(directory, name: str = "filler") -> int:
    """Write a file until the filesystem refuses more (ENOSPC); returns its size."""
    written = 0
    chunk = b"\0" * 65536
    fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                written += os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return written
    finally:
        os.close(fd)


def create_topic_led_by_broker_0(cluster: Cluster) -> None:
    """TOPIC with ASSIGNMENT and min.insync.replicas=2, every ISR full: broker 0 leads partitions 0 and 1."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics(
        [
            NewTopic(
                TOPIC,
                num_partitions=len(ASSIGNMENT),
                replica_assignment=ASSIGNMENT,
                config={"min.insync.replicas": "2"},
            )
        ]
    )[TOPIC].result(20)
    cluster.wait_full_isr(TOPIC, 20)
    assert [cluster.leader(TOPIC, p) for p in range(3)] == [0, 0, 1]


def test_leader_log_dir_full_moves_leadership_and_loses_nothing(tmp_path, zookeeper):
    root = tmp_path / "cluster"
    with tmpfs(root / "broker-0", "16m") as broker0_dir:
        cluster = Cluster(root, zookeeper, 3)
        workload = None
        try:
            cluster.start()
            create_topic_led_by_broker_0(cluster)
            workload = Workload(cluster.bootstrap, TOPIC, 3).start()
            workload.wait_progress(range(3), 20, 20)

            filled = fill(broker0_dir)
            full_at = time.monotonic()
            wait_until(
                lambda: all(cluster.leader(TOPIC, p) in (1, 2) for p in range(2)) or None,
                MOVE_BOUND_S,
                "leadership to move off the broker whose log dir is full",
            )
            move_s = time.monotonic() - full_at
            # the whole dir is offline: the ISR of the partition it followed drops it too
            wait_until(lambda: 0 not in cluster.state(TOPIC, 2).isr, MOVE_BOUND_S, "the ISR of partition 2 to drop 0")
            states = [cluster.state(TOPIC, p) for p in range(3)]
            assert all(0 not in s.isr for s in states) and states[2].leader == 1, states
            assert cluster.alive(0), "the broker with the full disk exited"
            print(
                f"filled {filled} bytes; leaders {[s.leader for s in states]}, ISRs {[s.isr for s in states]} "
                f"{move_s:.2f}s after the disk filled"
            )

            log = cluster.brokers[0].read_log()
            named = [
                line for line in log.splitlines() if str(broker0_dir) in line and "No space left on device" in line
            ]
            assert len(named) == 1 and "offline" in named[0], log
            assert "Traceback" not in log, log

            # the idempotent acks=all producer goes on with the new leaders (ISR 2 = min.insync.replicas)
            workload.wait_progress(range(3), 200, 60)

            os.unlink(broker0_dir / "filler")
            assert free_bytes(broker0_dir) > 8 * 1024 * 1024
            assert cluster.brokers[0].stop() == 0, cluster.brokers[0].read_log()
            cluster.restart(0)
            cluster.wait_full_isr(TOPIC, 60)
            workload.wait_progress(range(3), 50, 30)
            workload.stop()
            assert not workload.failed, workload.failed[:5]
            verify(cluster.bootstrap, workload)
            cluster.wait_logs_equal(TOPIC, 30)
            print(f"{workload.acked_count()} acknowledged, 0 lost, 0 duplicated")
        except BaseException:
            print(cluster.logs()[-20000:])
            raise
        finally:
            if workload is not None:
                workload._stop.set()
            cluster.close()


def test_offline_replicas_reach_the_controller_when_zookeeper_drops_the_first_write(tmp_path, zookeeper):
    """The broker lists its offline replicas in its registration znode; the link to ZooKeeper drops
    exactly that write (``zk_tripwire``). It used to be tried once: the controller never heard, and
    the partitions stayed led by a broker answering KAFKA_STORAGE_ERROR. It is tried again."""
    root = tmp_path / "cluster"
    with tmpfs(root / "broker-0", "16m") as broker0_dir:
        armed = threading.Event()
        cluster: Cluster | None = None

        def broker0_registration(op: int, path: str) -> bool:
            return (
                armed.is_set() and cluster is not None and op == SET_DATA and path == cluster.chroot + "/brokers/ids/0"
            )

        proxy = ZkTripwire(int(zookeeper.rsplit(":", 1)[1]), broker0_registration, lambda _: False)
        cluster = Cluster(root, proxy.address, 3)
        try:
            cluster.start()
            create_topic_led_by_broker_0(cluster)
            armed.set()
            fill(broker0_dir)
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
            producer.produce(TOPIC, b"into-the-full-disk", partition=0)  # the append that finds the disk full
            wait_until(proxy.tripped.is_set, MOVE_BOUND_S, "broker 0's write of its offline replicas (dropped)")
            wait_until(
                lambda: all(cluster.leader(TOPIC, p) in (1, 2) for p in range(2)) or None,
                MOVE_BOUND_S,
                "leadership to move off the broker whose log dir is full, after the dropped write",
            )
            assert "could not publish" in cluster.brokers[0].read_log()
            failed: list[object] = []
            for p in range(3):
                producer.produce(TOPIC, b"after-%d" % p, partition=p, on_delivery=lambda e, m: e and failed.append(e))
            assert producer.flush(60) == 0 and not failed, failed
        except BaseException:
            print(cluster.logs()[-20000:])
            raise
        finally:
            cluster.close()
            proxy.close()
