"""Reading many partitions at once: what a consumer's fetch returns, and the index mappings behind it.

A fetch over many partitions full of small records used to come back as one response of up to
55 MiB. librdkafka stops fetching every partition for a second once more than 100,000 records
wait in its queue, so kcat read 64 or 512 partitions at half the speed of one. The broker now
caps a consumer's response at 8 MiB (``fetch.max.bytes``), and the rest comes with the next fetch.
"""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from strom.protocol.records import NewRecord, build_batch
from tests.integration.clients import RawClient, confluent_poll, raw_produce, raw_wait_for_topic, unique_topic

PARTITIONS = 12
RECORDS_PER_PARTITION = 4000
VALUE = b"v" * 200  # 12 partitions x ~0.85 MB: more than one 8 MiB response holds
CAP = 8 * 1024 * 1024


def _fetch_all(client: RawClient, topic: str) -> list:
    response = client.request(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 50 * 1024 * 1024,  # librdkafka's and the Java consumer's default
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                        for p in range(PARTITIONS)
                    ],
                }
            ],
        },
    )
    return list(response.responses[0].partitions)


def test_a_consumer_fetch_over_many_full_partitions_is_capped_and_nothing_is_lost(broker):
    topic = unique_topic("wide")
    with RawClient(broker.bootstrap, timeout=30) as client:
        client.request(
            19,
            4,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": PARTITIONS,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        raw_wait_for_topic(client, topic, PARTITIONS)
        half = RECORDS_PER_PARTITION // 2
        for p in range(PARTITIONS):
            # two batches: the second gets an index entry, which makes the (lazily created) index files
            for start in (0, half):
                batch = build_batch([NewRecord(VALUE, key=f"{p}-{i}".encode()) for i in range(start, start + half)])
                assert raw_produce(client, topic, batch, partition=p) == (0, start)

        answered = _fetch_all(client, topic)
        sizes = [len(bytes(part.records or b"")) for part in answered]
        assert all(int(part.error_code) == 0 for part in answered)
        assert all(part.high_watermark == RECORDS_PER_PARTITION for part in answered)
        assert 0 < sum(sizes) <= CAP, sizes  # Kafka's 55 MiB default would have returned all 12
        assert sizes[0] > 0 and sizes[-1] == 0, sizes  # the rest waits for the client's next fetch

        # the index mappings behind those reads are advised random: no readahead of their zero tails
        index_maps = _index_mapping_flags(broker.process.pid, topic)
        assert index_maps and all("rr" in flags for _, flags in index_maps), index_maps

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        consumed = confluent_poll(consumer, PARTITIONS * RECORDS_PER_PARTITION, timeout=60)
    finally:
        consumer.close()
    assert len(consumed) == PARTITIONS * RECORDS_PER_PARTITION
    assert {m.key for m in consumed} == {
        f"{p}-{i}".encode() for p in range(PARTITIONS) for i in range(RECORDS_PER_PARTITION)
    }


def _index_mapping_flags(pid: int, topic: str) -> list[tuple[str, list[str]]]:
    """VmFlags of the broker's mappings of this topic's .index and .timeindex files."""
    flags, current = [], None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", fields[0]):  # a mapping's first line
            path = fields[5] if len(fields) >= 6 else ""
            current = path if topic in path and path.endswith((".index", ".timeindex")) else None
        elif line.startswith("VmFlags:") and current is not None:
            flags.append((current, fields[1:]))
    return flags
