"""The transactional copier (tests/cluster/txn_copier.py) when its group coordinator has left the cluster.

The state that stalled the copier kill test (test_txn_faults.py) for 60 s, made deterministic: a
transactional producer has the group coordinator cached, that broker is killed, its leaderships
move and it drops out of the brokers' Metadata, and librdkafka "decommissions" it. The next
send_offsets_to_transaction then waits for that broker, whatever its timeout, until some other
connection of the client goes up or down, which in a steady cluster is never
(confluentinc/librdkafka#5511, #5456). In the kill test the same state comes from a race: the
copier's last FindCoordinator before the Metadata refresh that drops the dead broker still named it.
The copier's bounded calls turn the hang into an exit its supervisor restarts.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from strom.group.records import partition_for_group
from tests.cluster.conftest import create_topic, wait_until
from tests.cluster.txn_copier import OVERSTAY_S, STUCK_EXIT

ROOT = Path(__file__).resolve().parents[2]
TXN_ID = "stranded"
STATE_PARTITIONS = 3
CALL_TIMEOUT_S = 3
OVERRIDES = {
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
# One transaction per line read from stdin, each committing the group's offset of t-PARTITION
# with the copier's bounded send_offsets_to_transaction. Metadata is refreshed every second, as the
# copier does (which is what drops a dead broker); the coordinator stays cached as long as a client
# with the default refresh interval keeps it (metadata.max.age.ms).
PRODUCER = """
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.cluster.txn_copier import bounded

bootstrap, txn_id, group, partition, timeout_s = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
common = {"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": 1000, "metadata.max.age.ms": 900000}
producer = Producer({**common, "transactional.id": txn_id})
consumer = Consumer({**common, "group.id": group, "enable.auto.commit": False})
producer.init_transactions(30)
offset = 0
while sys.stdin.readline():
    offset += 1
    producer.begin_transaction()
    producer.produce("t", b"x", partition=partition)
    offsets = [TopicPartition("t", partition, offset)]
    try:
        bounded(lambda: producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout_s), timeout_s)
        producer.commit_transaction(30)
        print("committed", offset, flush=True)
    except Exception as exc:  # a timeout: librdkafka kept its word
        print("failed", exc, flush=True)
"""


def _prepare(cluster) -> tuple[str, int, int]:
    """Make both internal topics; return a group whose coordinator is neither the transaction
    coordinator nor the leader of the partition written, that partition, and the coordinator."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g0"})

    def committed() -> bool:
        try:
            return bool(consumer.committed([TopicPartition("t", 0)], timeout=10))
        except KafkaException:  # the first FindCoordinator creates __consumer_offsets
            return False

    try:
        wait_until(committed, 60, "__consumer_offsets")
    finally:
        consumer.close()
    wait_until(lambda: all(cluster.leader("__consumer_offsets", p) >= 0 for p in range(3)), 30, "offsets leaders")
    Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TXN_ID}).init_transactions(60)
    txn_coordinator = cluster.leader("__transaction_state", partition_for_group(TXN_ID, STATE_PARTITIONS))
    for group in (f"g{i}" for i in range(100)):
        coordinator = cluster.leader("__consumer_offsets", partition_for_group(group, 3))
        if coordinator >= 0 and coordinator != txn_coordinator:
            partition = next(p for p in range(3) if cluster.leader("t", p) != coordinator)
            return group, partition, coordinator
    raise AssertionError("no group with its own coordinator")


def _lines(process: subprocess.Popen) -> queue.Queue:
    """The producer's lines of output, then ``exit CODE`` (read by a thread: every wait is bounded)."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put(f"exit {process.wait()}")

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next(lines: queue.Queue, timeout_s: float) -> str:
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return ""


def test_send_offsets_with_a_decommissioned_coordinator_never_blocks_past_its_bound(cluster_factory):
    cluster = cluster_factory(3, OVERRIDES)
    create_topic(cluster, "t", 3, 3, {"min.insync.replicas": "2"})
    group, partition, coordinator = _prepare(cluster)
    process = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, cluster.bootstrap, TXN_ID, group, str(partition), str(CALL_TIMEOUT_S)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    lines = _lines(process)
    try:
        process.stdin.write("\n")
        first = _next(lines, 60)
        assert first.startswith("committed"), first  # the coordinator is cached
        cluster.kill(coordinator)
        offsets_partition = partition_for_group(group, 3)
        wait_until(
            lambda: (
                coordinator not in cluster.registered()
                and cluster.leader("__consumer_offsets", offsets_partition) not in (coordinator, -1)
            ),
            30,
            f"broker {coordinator} gone and a new coordinator of {group}",
        )
        time.sleep(4)  # the producer's Metadata refreshes (every second) no longer list the dead broker
        process.stdin.write("\n")
        bound = CALL_TIMEOUT_S + OVERSTAY_S
        started = time.monotonic()
        outcome = _next(lines, bound + 30)
        if "did not return" in outcome:  # librdkafka 2.16: the watchdog's last word, then its exit
            outcome = _next(lines, 10)
        # a librdkafka with #5511 fixed commits (or times out) instead
        assert outcome.startswith(("committed", "failed", f"exit {STUCK_EXIT}")), (
            f"send_offsets_to_transaction still blocked {time.monotonic() - started:.0f}s after it began "
            f"(bound {bound:.0f}s): {outcome!r}"
        )
    finally:
        process.kill()
        process.wait(10)
