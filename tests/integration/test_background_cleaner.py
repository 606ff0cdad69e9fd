"""Compaction off the event loop while a producer writes and a consumer reads the live tail.

A real broker compacts a topic full of duplicate keys in its cleaner process (Kafka's cleaner
thread, ``log.cleaner.threads``) while confluent-kafka keeps producing to the same partition and
a consumer follows its end. Afterwards each key's latest value is still at the offset its
producer was told, the duplicates of the first phase are gone, and every record produced while
the cleaner ran was read by the consumer and is still in the log.

The cleaner processes start with the broker and end with it, also when it is killed. A broker
whose cleaner processes cannot start serves all the same, and says why.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from strom.testing import Broker
from tests.broker_process import BrokerProcess
from tests.integration.clients import EARLIEST, RawClient, raw_list_offsets
from tests.processes import alive, children_by_parent

TOPIC = "compacted"
OLD_KEYS = 200
OLD_ROUNDS = 60
BOUND_S = 30


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 2, "enable.idempotence": False})


def _produce_all(producer: Producer, items: list[tuple[bytes, bytes]], acked: dict[tuple[bytes, bytes], int]) -> None:
    def on_delivery(err, msg):
        assert err is None, err
        acked[(msg.key(), msg.value())] = msg.offset()

    for key, value in items:
        while True:
            try:
                producer.produce(TOPIC, value, key, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(BOUND_S) == 0


def _read(bootstrap: str, start: int, until: int, deadline: float) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, start)])
        found: list[tuple[int, bytes, bytes]] = []
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                if consumer.position([TopicPartition(TOPIC, 0)])[0].offset >= until:
                    break
                continue
            found.append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() + 1 >= until:
                break
        return found
    finally:
        consumer.close()


def test_background_compaction_keeps_latest_values_offsets_and_the_live_tail():
    overrides = {"log.cleaner.backoff.ms": "200", "log.cleaner.threads": "1"}
    with Broker(overrides=overrides) as broker:
        broker.create_topic(
            TOPIC,
            1,
            config={
                "cleanup.policy": "compact",
                "segment.bytes": "16384",
                "min.cleanable.dirty.ratio": "0.1",
                "delete.retention.ms": "86400000",
            },
        )
        deadline = time.monotonic() + BOUND_S
        acked: dict[tuple[bytes, bytes], int] = {}
        producer = _producer(broker.bootstrap_servers)
        _produce_all(
            producer,
            [(b"old-%d" % k, b"v%d-" % r + b"x" * 60) for r in range(OLD_ROUNDS) for k in range(OLD_KEYS)],
            acked,
        )
        live_start = max(acked.values()) + 1

        # The live tail: a consumer from the end of the first phase, while the producer goes on.
        tail: list[tuple[int, bytes, bytes]] = []
        stop_tail = threading.Event()

        def follow() -> None:
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "group.id": "tail",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 50,
                }
            )
            consumer.assign([TopicPartition(TOPIC, 0, live_start)])
            try:
                while not stop_tail.is_set() and time.monotonic() < deadline:
                    msg = consumer.poll(0.1)
                    if msg is not None and not msg.error():
                        tail.append((msg.offset(), msg.key(), msg.value()))
            finally:
                consumer.close()

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        live: list[tuple[bytes, bytes]] = []
        i = 0
        log_path = broker.log_path
        assert log_path is not None
        # produce until the cleaner has swapped at least one round in, then a little more
        while time.monotonic() < deadline:
            batch = [(b"live-%d" % n, b"live value %d" % n) for n in range(i, i + 200)]
            batch += [(b"hot-%d" % (n % 10), b"hot %d" % n) for n in range(i, i + 50)]
            live += batch
            _produce_all(producer, batch, acked)
            i += 200
            if "cleaned " in log_path.read_text(errors="replace") and i >= 2000:
                break
        _produce_all(producer, [(b"live-%d" % n, b"live value %d" % n) for n in range(i, i + 200)], acked)
        live += [(b"live-%d" % n, b"live value %d" % n) for n in range(i, i + 200)]
        end = max(acked.values()) + 1
        assert "cleaned " in log_path.read_text(errors="replace"), "the cleaner never finished a round"

        # the live tail saw every record produced while the cleaner ran, at the offsets acknowledged
        while time.monotonic() < deadline and (not tail or tail[-1][0] + 1 < end):
            time.sleep(0.1)
        stop_tail.set()
        follower.join(BOUND_S)
        # (a "hot-" value the cleaner removed before the consumer got to it is not owed to it)
        assert all(acked[(k, v)] == o for o, k, v in tail)
        assert {(k, v): o for o, k, v in tail if k.startswith(b"live-")} == {
            (k, v): acked[(k, v)] for k, v in live if k.startswith(b"live-")
        }

        # and the whole log: the first phase compacted to its latest values, offsets as acknowledged
        latest: dict[bytes, tuple[int, bytes]] = {}
        for (key, value), offset in acked.items():
            if key not in latest or latest[key][0] < offset:
                latest[key] = (offset, value)
        found: list[tuple[int, bytes, bytes]] = []
        while time.monotonic() < deadline:
            found = _read(broker.bootstrap_servers, OFFSET_BEGINNING, end, deadline)
            old = [r for r in found if r[1].startswith(b"old-")]
            if len(old) == OLD_KEYS:
                break
            time.sleep(0.3)  # a round may still be running over the first phase
        assert len([r for r in found if r[1].startswith(b"old-")]) == OLD_KEYS
        assert all(acked[(k, v)] == o for o, k, v in found)  # offsets preserved
        assert {k: (o, v) for o, k, v in found if latest[k][0] == o} == latest  # every key's latest survives
        assert {(k, v) for k, v in live if k.startswith(b"live-")} <= {(k, v) for _, k, v in found}
        # where the next round starts is in Kafka's cleaner-offset-checkpoint (written off the event loop)
        checkpoint = broker.dir / "data" / "cleaner-offset-checkpoint"
        while time.monotonic() < deadline and not checkpoint.exists():
            time.sleep(0.1)
        lines = checkpoint.read_text().split("\n")
        assert any(line.startswith(f"{TOPIC} 0 ") and int(line.split()[2]) > 0 for line in lines), lines
        producer.flush(5)


def _cleaner_processes(broker_pid: int) -> list[int]:
    """The broker's cleaner processes: its children that multiprocessing spawned."""
    found = []
    for pid in children_by_parent().get(broker_pid, []):
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue  # gone meanwhile
    return found


def test_cleaner_processes_start_with_the_broker_and_end_when_it_is_killed():
    with Broker(overrides={"log.cleaner.threads": "2"}) as broker:
        process = broker.node.process
        assert process is not None
        deadline = time.monotonic() + BOUND_S
        while len(cleaners := _cleaner_processes(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(cleaners) == 2, f"cleaner processes of a broker that has compacted nothing: {cleaners}"

        broker.kill()
        while any(alive(pid) for pid in cleaners) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in cleaners if alive(pid)], "cleaner processes outlived the killed broker"


class _BrokerWithFullDevShm(BrokerProcess):
    """A broker process in a mount namespace of its own whose /dev/shm is a full 4 KiB tmpfs,
    where multiprocessing cannot create the semaphores a cleaner process pool needs."""

    def command(self) -> list[str]:
        fill = 'mount -t tmpfs -o size=4k tmpfs /dev/shm && head -c 4096 /dev/zero > /dev/shm/fill && exec "$@"'
        return ["unshare", "--mount", "sh", "-c", fill, "sh", *super().command()]


def _retention_deletes_rolled_segments(bootstrap: str) -> None:
    """The broker's storage scheduler runs: retention removes the rolled segments of a topic."""
    topic = "retained"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})])[topic].result(BOUND_S)
    producer = _producer(bootstrap)
    for n in range(20):  # a batch each, about 1 KB: a segment each
        producer.produce(topic, b"%d " % n + b"x" * 1000, partition=0)
        assert producer.flush(BOUND_S) == 0
    retention = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[_set("retention.ms", "1")])
    for done in admin.incremental_alter_configs([retention]).values():
        done.result(BOUND_S)
    deadline = time.monotonic() + BOUND_S
    with RawClient(bootstrap) as client:
        while raw_list_offsets(client, topic, EARLIEST)[1] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert raw_list_offsets(client, topic, EARLIEST)[1] > 0, "no segment was deleted"


def test_a_broker_whose_cleaner_processes_cannot_start_serves_and_deletes_old_segments(tmp_path):
    with _BrokerWithFullDevShm(tmp_path / "data", {"log.retention.check.interval.ms": "200"}) as broker:
        _retention_deletes_rolled_segments(broker.bootstrap)
        log = broker.read_log()
        assert (
            "could not start the cleaner processes: [Errno 28] No space left on device "
            "(their semaphores are files in /dev/shm)" in log
        ), log
        assert broker.process is not None and broker.process.poll() is None


def test_a_broker_without_cleaner_threads_starts_no_cleaner_and_deletes_old_segments(tmp_path):
    overrides = {"log.cleaner.threads": "0", "log.retention.check.interval.ms": "200"}
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        assert broker.process is not None
        _retention_deletes_rolled_segments(broker.bootstrap)
        assert _cleaner_processes(broker.process.pid) == []


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
