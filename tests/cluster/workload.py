"""A continuous idempotent acks=all producer, and the checks that what it was told is true.

Values are ``<partition>:<sequence>`` with a per-partition sequence, so reading a partition back
shows order, gaps and duplicates at a glance. Every delivery report is recorded: acknowledged
(partition, offset, value) triples must all be found at exactly those offsets afterwards.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from strom.cli.client_props import watermark_offsets


class Workload:
    def __init__(
        self, bootstrap: str, topic: str, partitions: int, interval_s: float = 0.004, extra: dict | None = None
    ):
        self.topic = topic
        self.partitions = partitions
        self.interval_s = interval_s
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 500,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                **(extra or {}),
            }
        )
        self.lock = threading.Lock()
        self.acked: dict[int, list[tuple[int, str]]] = defaultdict(list)  # partition -> [(offset, value)]
        self.failed: list[tuple[str, str]] = []  # (value, error)
        self.sent = 0
        self._next = [0] * partitions
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def _on_delivery(self, err, msg) -> None:
        value = msg.value().decode()
        with self.lock:
            if err is None:
                self.acked[msg.partition()].append((msg.offset(), value))
            else:
                self.failed.append((value, err.name()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            partition = i % self.partitions
            value = f"{partition}:{self._next[partition]}"
            try:
                self.producer.produce(self.topic, value.encode(), partition=partition, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            self._next[partition] += 1
            self.sent += 1
            i += 1
            self.producer.poll(0)
            time.sleep(self.interval_s)

    def acked_count(self, partition: int | None = None) -> int:
        with self.lock:
            if partition is None:
                return sum(len(v) for v in self.acked.values())
            return len(self.acked[partition])

    def wait_progress(self, partitions, count: int, timeout_s: float) -> float:
        """Wait until each of ``partitions`` has ``count`` more acknowledgements; returns seconds taken."""
        start = time.monotonic()
        targets = {p: self.acked_count(p) + count for p in partitions}
        deadline = start + timeout_s
        while time.monotonic() < deadline:
            if all(self.acked_count(p) >= t for p, t in targets.items()):
                return time.monotonic() - start
            time.sleep(0.02)
        raise AssertionError(
            f"no acks=all progress on {sorted(partitions)} within {timeout_s}s "
            f"({ {p: self.acked_count(p) for p in partitions} } of {targets})"
        )

    def stop(self, flush_timeout_s: float = 60) -> None:
        self._stop.set()
        self._thread.join(10)
        remaining = self.producer.flush(flush_timeout_s)
        assert remaining == 0, f"{remaining} messages still undelivered after {flush_timeout_s}s"


def read_partition(
    bootstrap: str, topic: str, partition: int, timeout_s: float = 30, extra: dict | None = None
) -> list[tuple[int, str]]:
    """Every (offset, value) of a partition from offset 0 up to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
            **(extra or {}),
        }
    )
    try:
        _, high = watermark_offsets(consumer, TopicPartition(topic, partition), 10)
        consumer.assign([TopicPartition(topic, partition, 0)])
        found: list[tuple[int, str]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if found and found[-1][0] >= high - 1:
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if not found or found[-1][0] >= high - 1:
                        break
                    continue
                raise AssertionError(f"consumer error on {topic}-{partition}: {msg.error()}")
            found.append((msg.offset(), msg.value().decode()))
        else:
            raise AssertionError(f"read {len(found)} messages of {topic}-{partition} (HW {high}) in {timeout_s}s")
        return found
    finally:
        consumer.close()


def verify(bootstrap: str, workload: Workload, extra: dict | None = None) -> dict[int, list[tuple[int, str]]]:
    """Every acknowledged message is in the log exactly once, at its acknowledged offset, in order."""
    logs = {}
    for partition in range(workload.partitions):
        log = read_partition(bootstrap, workload.topic, partition, extra=extra)
        logs[partition] = log
        values = [v for _, v in log]
        assert len(values) == len(set(values)), f"duplicates in partition {partition}"
        sequences = [int(v.split(":")[1]) for v in values]
        assert all(v.startswith(f"{partition}:") for v in values)
        assert sequences == sorted(sequences), f"partition {partition} is out of order"
        at = dict(log)
        with workload.lock:
            acked = list(workload.acked[partition])
        lost = [(o, v) for o, v in acked if at.get(o) != v]
        assert not lost, f"partition {partition}: {len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
        acked_values = {v for _, v in acked}
        assert len(acked_values) == len(acked), f"partition {partition}: a message acknowledged twice"
    return logs
