"""max.compaction.lag.ms (KIP-354) on a real broker, read back by confluent-kafka.

Two compacted topics with min.cleanable.dirty.ratio=0.99 get the same records: ten keys written
five times, twice. The first batch of duplicates is cleaned in both (nothing is clean yet, so the
dirty ratio is 1.0); the second only makes the ratio about 0.8, so only the topic whose records are
older than its max.compaction.lag.ms is compacted again. Records carry CreateTime timestamps in the
past, so the lag has passed without the test sleeping; the active segment of the lagged topic rolls
by max.compaction.lag.ms alone (the other rolls by segment.ms), as in Kafka.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from strom.testing import Broker

LAG_MS = 10_000
KEYS = 10
ROUNDS = 5
BOUND_S = 30
COMMON = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99", "delete.retention.ms": "86400000"}
TOPICS = {
    "lagged": {**COMMON, "max.compaction.lag.ms": str(LAG_MS)},
    "plain": {**COMMON, "segment.ms": str(LAG_MS)},
}


def _produce(producer: Producer, topic: str, items: list[tuple[bytes, bytes]], timestamp_ms: int) -> None:
    errors: list[object] = []
    for key, value in items:
        producer.produce(
            topic, value, key, partition=0, timestamp=timestamp_ms, on_delivery=lambda e, m: e and errors.append(e)
        )
    assert producer.flush(BOUND_S) == 0
    assert not errors, errors


def _read_all(bootstrap: str, topic: str, deadline: float) -> list[tuple[bytes, bytes]]:
    """Every (key, value) from the beginning up to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False, "fetch.wait.max.ms": 50}
    )
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=BOUND_S)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        found: list[tuple[bytes, bytes]] = []
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                found.append((msg.key(), msg.value()))
                if msg.offset() + 1 >= end:
                    return found
            elif consumer.position([TopicPartition(topic, 0)])[0].offset >= end:
                return found
        raise TimeoutError(f"{topic}: read {len(found)} records, not up to offset {end}, within {BOUND_S}s")
    finally:
        consumer.close()


def _wait_for(bootstrap: str, topic: str, expected: list[tuple[bytes, bytes]], deadline: float) -> None:
    found: list[tuple[bytes, bytes]] = []
    while time.monotonic() < deadline:
        found = _read_all(bootstrap, topic, deadline)
        if found == expected:
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} never compacted to {len(expected)} records; last read {len(found)}: {found[:12]}")


def _round(tag: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % k, b"%s-%d" % (tag, r)) for r in range(ROUNDS) for k in range(KEYS)]


def test_max_compaction_lag_compacts_below_the_dirty_ratio_and_only_where_set():
    with Broker(overrides={"log.cleaner.backoff.ms": "200"}) as broker:
        for topic, config in TOPICS.items():
            broker.create_topic(topic, 1, config=config)
        deadline = time.monotonic() + BOUND_S
        bootstrap = broker.bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        now = int(time.time() * 1000)
        latest_a = [(b"k%d" % k, b"a-%d" % (ROUNDS - 1)) for k in range(KEYS)]
        latest_b = [(b"k%d" % k, b"b-%d" % (ROUNDS - 1)) for k in range(KEYS)]
        for topic in TOPICS:
            _produce(producer, topic, _round(b"a"), now - 6 * LAG_MS)
            _produce(producer, topic, _round(b"b"), now - 3 * LAG_MS)  # its first batch rolls round a's segment
        for topic in TOPICS:  # both clean round a: the dirty ratio of a first cleaning is 1.0
            _wait_for(bootstrap, topic, latest_a + _round(b"b"), deadline)

        for topic in ("plain", "lagged"):  # rolls round b's segment: "plain" first, so no pass misses it
            _produce(producer, topic, [(b"end", b"")], now)
        _wait_for(bootstrap, "lagged", latest_b + [(b"end", b"")], deadline)

        # "plain" had the same cleaner passes (and, if it were eligible, the round after "lagged"'s);
        # its dirty ratio stays below 0.99 and it has no max.compaction.lag.ms: nothing more is cleaned
        settle = time.monotonic() + 2.0
        while time.monotonic() < min(settle, deadline):
            assert _read_all(bootstrap, "plain", deadline) == latest_a + _round(b"b") + [(b"end", b"")]
            time.sleep(0.2)
        log_path = broker.log_path
        assert log_path is not None
        assert "past max.compaction.lag.ms=10000" in log_path.read_text(errors="replace")
