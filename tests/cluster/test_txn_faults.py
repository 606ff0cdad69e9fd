"""Exactly-once under faults: a transactional copier while leaders die, the copier included.

The shape of Kafka's transactions system test. A copier (tests/cluster/txn_copier.py) reads an
input topic with read_committed and writes each record to the same partition of an output
topic, committing its input offsets in the same transaction. Meanwhile the leaders of an input
partition, an output partition, the group's __consumer_offsets partition and the transactional
id's __transaction_state partition are killed with SIGKILL, and so is the copier itself. In the
end a read_committed consumer of the output must see every input record exactly once, in input
order per partition, and no record of an aborted transaction.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from strom.group.records import partition_for_group
from tests.cluster.conftest import SESSION_TIMEOUT_MS, create_topic, wait_until

SOURCE, TARGET = "copy-in", "copy-out"
PARTITIONS = 3
PER_PARTITION = 1500
GROUP, TXN_ID = "copier", "copier-txn"
STATE_PARTITIONS = 3
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 15
OVERRIDES = {
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
ROOT = Path(__file__).resolve().parents[2]


class Copier:
    """The copier process; restarted after each exit until it reports that it copied everything."""

    def __init__(self, bootstrap: str, log_path: Path):
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.txn_copier", self.bootstrap, SOURCE, TARGET, GROUP, TXN_ID, "240"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def progressed_since(self, before: int, bootstrap: str) -> bool:
        """Whether the copier committed more than ``before`` or finished; a copier that failed
        (it may, while the brokers it needs are being killed) is replaced, as a supervisor would."""
        code = self.process.poll()
        if code == 0:
            return True
        if code is not None:
            self.start()
        return committed_total(bootstrap) > before

    def run_to_end(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                code = self.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
            if code == 0:
                return
            self.start()  # a fenced or failed copier is replaced, as a supervisor would
        self.kill()
        raise AssertionError(f"the copier did not finish in {timeout_s}s:\n{self.log_path.read_text()[-4000:]}")


def fill_source(bootstrap: str) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            value = f"{p}:{i}".encode()
            expected[p].append(value)
            producer.produce(SOURCE, value, key=b"k%d" % i, partition=p)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return expected


def committed_total(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(SOURCE, p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(0, tp.offset) for tp in found)
    except Exception:
        return -1
    finally:
        consumer.close()


def read_committed_output(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verifier",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(TARGET, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    done: set[int] = set()
    deadline = time.monotonic() + 60
    while len(done) < PARTITIONS and time.monotonic() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error() is None:
                got[message.partition()].append(message.value())
            elif message.error().code() == message.error()._PARTITION_EOF:
                done.add(message.partition())
    consumer.close()
    assert len(done) == PARTITIONS, "the verifier did not reach the end of the output"
    return got


def kill_and_restart_leader(cluster, topic: str, partition: int, copier: Copier) -> None:
    """SIGKILL the partition's leader; restart it once the partition has a new leader and the copier moved on."""
    victim = cluster.leader(topic, partition)
    assert victim >= 0, f"{topic}-{partition} has no leader"
    before = committed_total(cluster.bootstrap)
    cluster.kill(victim)
    wait_until(
        lambda: (
            cluster.leader(topic, partition) not in (victim, -1)
            and cluster.leader(topic, partition) in cluster.registered()
        ),
        FAILOVER_S,
        f"a new leader for {topic}-{partition}",
    )
    wait_until(
        lambda: copier.progressed_since(before, cluster.bootstrap),
        60,
        f"copier progress after killing broker {victim}",
        interval_s=0.5,
    )
    cluster.restart(victim)


def test_transactional_copier_exactly_once_through_leader_and_copier_kills(cluster_factory, tmp_path):
    cluster = cluster_factory(3, OVERRIDES)
    for topic in (SOURCE, TARGET):
        create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    expected = fill_source(cluster.bootstrap)
    copier = Copier(cluster.bootstrap, tmp_path / "copier.log")
    copier.start()
    try:
        wait_until(lambda: committed_total(cluster.bootstrap) > 0, 60, "the copier's first commit", interval_s=0.5)
        wait_until(lambda: cluster.leader("__transaction_state", 0) >= 0, 20, "__transaction_state")
        kill_and_restart_leader(cluster, SOURCE, 0, copier)
        copier.kill()  # mid-stream, probably mid-transaction: the next instance fences and aborts it
        copier.start()
        kill_and_restart_leader(cluster, TARGET, 1, copier)
        kill_and_restart_leader(cluster, "__consumer_offsets", partition_for_group(GROUP, 3), copier)
        kill_and_restart_leader(cluster, "__transaction_state", partition_for_group(TXN_ID, STATE_PARTITIONS), copier)
        copier.kill()
        copier.start()
        copier.run_to_end(180)
        for topic in (SOURCE, TARGET):
            cluster.wait_full_isr(topic, 30)
        got = read_committed_output(cluster.bootstrap)
        for p in range(PARTITIONS):
            assert len(got[p]) == len(expected[p]), (
                f"partition {p}: {len(got[p])} records, expected {len(expected[p])} ({len(set(got[p]))} distinct)"
            )
            assert got[p] == expected[p], f"partition {p}: records out of order or changed"
        cluster.wait_logs_equal(TARGET, 30)
    except BaseException:
        print(cluster.logs()[-20000:])
        print((tmp_path / "copier.log").read_text()[-4000:] if (tmp_path / "copier.log").exists() else "")
        raise
    finally:
        copier.kill()
