"""The campaign's clock faults: one broker's wall clock stepped hours forward or back, then stepped home.

What a stepped clock can break in a Kafka-like broker: sessions, producers or groups expired by
a jump forward (strom measures durations on the monotonic clock, so nothing may expire), a time
index that goes backwards after a jump back (each segment indexes only a new largest timestamp),
ListOffsets by timestamp answering the wrong offset once timestamps are not monotonic in the log,
and retention deleting segments that are not yet retention.ms old (retention counts from a
segment's largest timestamp, so a jump shorter than retention.ms deletes nothing).

So a run with clock faults makes the clock matter: its topic stamps records with the leader's
clock (LogAppendTime), rolls small segments, keeps them ``RETENTION_MS`` (longer than any jump)
and the brokers check retention every second. The jump goes through strom.clock's offset file;
healing sets the offset back to 0, which is a jump the other way. After the run, besides the
queue checker's verdict, ListOffsets by timestamp is asked about the stored timestamps around
every place where they go backwards, and must answer what Kafka defines: the first offset whose
timestamp is at least the one asked for.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from strom.chaos.faults import roles

if TYPE_CHECKING:
    from collections.abc import Callable

    from strom.chaos.cluster import ChaosCluster
    from strom.chaos.faults import Observer

CLOCK_FAULTS = ("clock-forward", "clock-backward")
HOUR_S = 3600.0
MAX_JUMP_S = 6 * HOUR_S
RETENTION_MS = 4 * int(MAX_JUMP_S * 1000)
TOPIC_CONFIG = {
    "message.timestamp.type": "LogAppendTime",
    "retention.ms": str(RETENTION_MS),
    "segment.bytes": str(128 * 1024),
}
BROKER_OVERRIDES = {"log.retention.check.interval.ms": "1000"}
PROBES_PER_PARTITION = 40


def draw_jump(rng: random.Random, kind: str) -> float:
    """Seconds to step the clock by: 1 to 6 hours, whole minutes, the sign by kind."""
    minutes = rng.randint(60, int(MAX_JUMP_S // 60))
    return minutes * 60.0 * (1 if kind == "clock-forward" else -1)


def inject(
    cluster: ChaosCluster, observer: Observer, kind: str, pick: int, jump_s: float, log: Callable[[str], None]
) -> str:
    """Step a broker's clock by ``jump_s``: partition 0's leader for an odd ``pick``, else a follower."""
    leader, followers = roles(observer, pick)
    target = leader if pick % 2 else followers[0]
    cluster.jump_clock(target, jump_s)
    role = "leader" if target == leader else "follower"
    return f"{role} {target}'s clock stepped {jump_s / HOUR_S:+.2f} h"


def read_timestamps(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0
) -> dict[int, list[tuple[int, int]]]:
    """(offset, timestamp) of every record of every partition, to the end as of now."""
    from confluent_kafka import Consumer, TopicPartition

    from strom.chaos.workload import _quiet_logger, log_end_offsets

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-clock-checker",
            "enable.auto.commit": False,
            "logger": _quiet_logger(),
        }
    )
    try:
        deadline = time.monotonic() + timeout_s
        ends = log_end_offsets(consumer, topic, partitions, deadline)
        got: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(2000, 0.5):
                partition, offset = message.partition(), message.offset()
                if message.error() is not None or partition is None or offset is None:
                    continue
                got[partition].append((offset, message.timestamp()[1]))
                if offset + 1 >= ends.get(partition, 1 << 62):
                    done.add(partition)
        if len(done) < partitions:
            raise RuntimeError(f"could not read partitions {sorted(set(range(partitions)) - done)} of {topic}")
        return got
    finally:
        consumer.close()


def probes(records: list[tuple[int, int]], rng: random.Random) -> list[int]:
    """Timestamps worth asking about: around every step back, the extremes, and a sample."""
    stamps = [ts for _, ts in records]
    chosen: set[int] = set()
    for before, after in zip(stamps, stamps[1:]):
        if after < before:  # a step back: ask just above, at and below both sides
            chosen.update((before - 1, before, before + 1, after - 1, after, after + 1))
    if stamps:
        chosen.update((min(stamps) - 1, max(stamps), max(stamps) + 1))
        chosen.update(rng.sample(stamps, min(len(stamps), 10)))
    ordered = sorted(chosen)
    if len(ordered) > PROBES_PER_PARTITION:
        ordered = sorted(rng.sample(ordered, PROBES_PER_PARTITION))
    return ordered


def check_list_offsets(bootstrap: str, topic: str, partitions: int, seed: int = 0) -> tuple[list[str], int, int]:
    """(anomalies, probes asked, steps back seen): ListOffsets by timestamp against the stored records."""
    from confluent_kafka import Consumer, TopicPartition

    from strom.chaos.workload import _quiet_logger

    stored = read_timestamps(bootstrap, topic, partitions)
    rng = random.Random(seed)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-clock-checker", "logger": _quiet_logger()})
    anomalies: list[str] = []
    asked = steps_back = 0
    try:
        for p in range(partitions):
            records = stored[p]
            steps_back += sum(1 for a, b in zip(records, records[1:]) if b[1] < a[1])
            for target in probes(records, rng):
                expected = next((offset for offset, ts in records if ts >= target), -1)
                answer = consumer.offsets_for_times([TopicPartition(topic, p, target)], timeout=10)[0]
                asked += 1
                if answer.error is not None or answer.offset != expected:
                    anomalies.append(
                        f"{topic}-{p}: ListOffsets(timestamp {target}) answered {answer.offset}"
                        f"{f' ({answer.error})' if answer.error else ''}, the first offset at or after it is {expected}"
                    )
    finally:
        consumer.close()
    return anomalies, asked, steps_back
