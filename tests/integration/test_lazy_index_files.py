"""Index files are made on first need (issue 13): what a partition directory holds, and that reads
by offset and by timestamp (ListOffsets) keep working across clean restarts, kill -9 and lost
index files."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.clients import WAIT_S, confluent_consume, unique_topic

T0 = 1_700_000_000_000
LOG = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
TIME_INDEX = "00000000000000000000.timeindex"
EPOCHS = "leader-epoch-checkpoint"


def create_topic(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)])[
        topic
    ].result(WAIT_S)


def produce(bootstrap: str, topic: str, values: list[bytes], start: int, *, one_batch_each: bool = False) -> None:
    """Record ``start + i`` carries timestamp T0 + 1000 * (start + i)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0 if one_batch_each else 5})
    failed = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value,
            key=b"k%d" % (start + i),
            partition=0,
            timestamp=T0 + 1000 * (start + i),
            on_delivery=lambda err, msg: failed.append(err) if err is not None else None,
        )
        if one_batch_each:
            assert producer.flush(WAIT_S) == 0
    assert producer.flush(WAIT_S) == 0 and not failed, failed


def offset_for_time(bootstrap: str, topic: str, timestamp: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lazy-index", "enable.auto.commit": False})
    try:
        return consumer.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=WAIT_S)[0].offset
    finally:
        consumer.close()


def partition_files(broker, topic: str, partition: int = 0) -> set[str]:
    return set(os.listdir(broker.data_dir / f"{topic}-{partition}"))


def check_reads(bootstrap: str, topic: str, values: list[bytes], probes: list[int]) -> None:
    for offset in probes:
        got = confluent_consume(bootstrap, topic, len(values) - offset, offset=offset)
        assert [m.value for m in got] == values[offset:], offset
        assert offset_for_time(bootstrap, topic, T0 + 1000 * offset - 500) == offset
        assert offset_for_time(bootstrap, topic, T0 + 1000 * offset) == offset
    assert offset_for_time(bootstrap, topic, T0 + 1000 * len(values)) == -1  # after the last: the log end, -1


def test_a_new_partition_has_only_its_log_and_reads_survive_restart_and_kill_9(broker):
    topic = unique_topic("lazy")
    create_topic(broker.bootstrap, topic, 3)
    deadline = time.monotonic() + WAIT_S  # the leader epoch is written as the partition gets its leader
    while not all(EPOCHS in partition_files(broker, topic, p) for p in range(3)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in range(3):
        assert partition_files(broker, topic, p) == {LOG, EPOCHS}

    values = [b"small-%d" % i for i in range(5)]
    produce(broker.bootstrap, topic, values, 0)
    assert partition_files(broker, topic) == {LOG, EPOCHS}  # no index entry yet: no index file either
    check_reads(broker.bootstrap, topic, values, [0, 2, 4])

    assert broker.stop() == 0, broker.read_log()
    directory = broker.data_dir / f"{topic}-0"
    # a clean shutdown leaves Kafka's files for a segment with data: an empty .index, and the
    # .timeindex entry of the segment's largest timestamp
    assert (directory / INDEX).stat().st_size == 0
    assert (directory / TIME_INDEX).read_bytes() == (T0 + 4000).to_bytes(8, "big") + (4).to_bytes(4, "big")
    assert partition_files(broker, topic, 1) == {LOG, EPOCHS}  # nothing written: nothing made on shutdown either
    broker.start()
    check_reads(broker.bootstrap, topic, values, [0, 3])

    more = [b"more-%d" % i for i in range(5, 8)]
    produce(broker.bootstrap, topic, more, 5)
    broker.kill()
    broker.start()
    check_reads(broker.bootstrap, topic, values + more, [0, 4, 5, 7])


def test_lookups_in_the_middle_of_a_segment_with_index_entries(broker):
    topic = unique_topic("lazy-mid")
    create_topic(broker.bootstrap, topic, 1, **{"index.interval.bytes": "256"})
    values = [b"value-%03d-" % i + b"x" * 90 for i in range(60)]  # one batch each: ~170 bytes apart
    produce(broker.bootstrap, topic, values, 0, one_batch_each=True)
    directory = broker.data_dir / f"{topic}-0"
    assert {INDEX, TIME_INDEX} <= partition_files(broker, topic)
    probes = [1, 17, 30, 44, 59]
    check_reads(broker.bootstrap, topic, values, probes)

    broker.kill()  # the indexes stay preallocated, with a zero tail
    broker.start()
    check_reads(broker.bootstrap, topic, values, probes)

    assert broker.stop() == 0, broker.read_log()
    entries = (directory / INDEX).stat().st_size // 8
    assert entries > 10 and (directory / TIME_INDEX).stat().st_size >= 12 * entries
    os.unlink(directory / INDEX)  # lost index files are rebuilt from the .log
    os.unlink(directory / TIME_INDEX)
    broker.start()
    check_reads(broker.bootstrap, topic, values, probes)
    assert broker.stop() == 0, broker.read_log()
    assert (directory / INDEX).stat().st_size // 8 == entries
    broker.start()
