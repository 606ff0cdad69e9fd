"""What survives a restart or a crash, duplicate produce requests, and where "latest" is."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from strom.protocol.compression import CompressionType
from strom.protocol.records import NewRecord, build_batch
from tests.integration.clients import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    WAIT_S,
    Msg,
    RawClient,
    aiokafka_produce,
    assert_same,
    confluent_consume,
    confluent_produce,
    from_confluent,
    kafka_python_poll,
    kafka_python_produce,
    module_broker,  # noqa: F401 - fixture (tests that need no restart share one broker)
    raw_init_producer_id,
    raw_list_offsets,
    raw_produce,
    raw_wait_for_topic,
    sample_messages,
    unique_topic,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's importlib.resources use

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
NOT_ENOUGH_REPLICAS = 19
UNKNOWN_TOPIC_OR_PARTITION = 3
NONE, GZIP, SNAPPY, LZ4, ZSTD = (int(c) for c in CompressionType)


def records(n: int, start: int = 0, ts: int = 1_690_000_000_000) -> list[NewRecord]:
    return [
        NewRecord(f"value-{start + i}".encode(), f"k{start + i}".encode(), [("h", b"x")], ts + start + i)
        for i in range(n)
    ]


# -- restart and crash ---------------------------------------------------------------------------


def test_clean_restart_keeps_every_acknowledged_message(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    multi = unique_topic("dur-multi")
    admin.create_topics([NewTopic(multi, num_partitions=3, replication_factor=1)])[multi].result(WAIT_S)
    single = unique_topic("dur-single")
    sent = sample_messages(30)
    offsets = []
    for codec, chunk in zip(["none", "gzip", "snappy", "lz4", "zstd"], [sent[i : i + 6] for i in range(0, 30, 6)]):
        offsets += confluent_produce(broker.bootstrap, single, chunk, **{"compression.type": codec, "acks": "all"})
    assert offsets == list(range(30))
    for p in range(3):
        confluent_produce(broker.bootstrap, multi, sent[: p + 1], partition=p, acks="all")

    assert broker.stop() == 0, broker.read_log()
    broker.start()  # same data dir, new port

    assert_same(confluent_consume(broker.bootstrap, single, 30), sent)
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=WAIT_S)
    assert sorted(metadata.topics[multi].partitions) == [0, 1, 2]
    for p in range(3):
        assert_same(confluent_consume(broker.bootstrap, multi, p + 1, partition=p), sent[: p + 1])
    # Appends continue where the log ended.
    more = sample_messages(3, ts_base=1_710_000_000_000)
    assert confluent_produce(broker.bootstrap, single, more) == [30, 31, 32]
    assert_same(confluent_consume(broker.bootstrap, single, 33), sent + more)


def test_kill_9_keeps_every_message_acknowledged_with_acks_all(broker):
    topic = unique_topic("dur-kill")
    acked: dict[int, Msg] = {}
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 3000,
            "compression.type": "lz4",
        }
    )

    def report(msg_meta):
        def on_delivery(err, msg):
            if err is None:
                acked[msg.offset()] = msg_meta

        return on_delivery

    sent = 0

    def send(n):
        nonlocal sent
        for _ in range(n):
            m = Msg(
                f"k{sent}".encode(),
                f"value {sent} ".encode() * 5,
                (("seq", str(sent).encode()),),
                1_700_000_000_000 + sent,
            )
            producer.produce(
                topic,
                m.value,
                m.key,
                partition=0,
                headers=list(m.headers),
                timestamp=m.timestamp,
                on_delivery=report(m),
            )
            sent += 1
        producer.poll(0)

    for _ in range(10):
        send(100)
        assert producer.flush(WAIT_S) == 0
    assert len(acked) == 1000
    # Keep producing and crash the broker while requests are in flight.
    send(500)
    deadline = time.monotonic() + WAIT_S
    while len(acked) < 1100 and time.monotonic() < deadline:
        producer.poll(0.001)
    broker.kill()
    producer.flush(10)  # in-flight messages fail (or were acknowledged just before the kill)

    broker.start()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)
    finally:
        consumer.close()
    assert low == 0
    assert high >= max(acked) + 1, f"high watermark {high} after restart, but offset {max(acked)} was acknowledged"
    got = confluent_consume(broker.bootstrap, topic, high)
    assert [m.offset for m in got] == list(range(high))  # dense, nothing torn
    for m in got:
        if m.offset in acked:
            want = acked[m.offset]
            assert (m.key, m.value, m.headers, m.timestamp) == (want.key, want.value, want.headers, want.timestamp)
    # Every record, acknowledged or not, appears once: the idempotent producer never duplicated one.
    assert len({m.key for m in got}) == len(got)


def test_torn_write_after_crash_is_truncated(broker):
    """A crash can leave half a batch at the end of the active segment; recovery drops it, keeps the rest."""
    topic = unique_topic("dur-torn")
    sent = sample_messages(8)
    confluent_produce(broker.bootstrap, topic, sent, acks="all")
    broker.kill()
    [segment] = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    partial = build_batch(records(5))[:40]
    with open(segment, "ab") as f:
        f.write(partial)
    broker.start()
    assert_same(confluent_consume(broker.bootstrap, topic, 8), sent)
    more = sample_messages(2, ts_base=1_720_000_000_000)
    assert confluent_produce(broker.bootstrap, topic, more) == [8, 9]
    assert_same(confluent_consume(broker.bootstrap, topic, 10), sent + more)


def test_torn_tail_after_a_clean_shutdown_is_truncated(broker):
    """A clean-shutdown marker does not vouch for the file: a batch cut after a clean stop must not
    hide what is appended next from a consumer that checks CRCs."""
    topic = unique_topic("dur-clean-torn")
    sent = sample_messages(8)
    confluent_produce(broker.bootstrap, topic, sent[:6], acks="all")
    confluent_produce(broker.bootstrap, topic, sent[6:], acks="all")  # the last batch: offsets 6 and 7
    assert broker.stop() == 0, broker.read_log()
    [segment] = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 30)  # into the last batch
    broker.start()
    more = sample_messages(1, ts_base=1_720_000_000_000)
    assert confluent_produce(broker.bootstrap, topic, more) == [6]
    got = confluent_consume(broker.bootstrap, topic, 7, **{"check.crcs": True})
    assert_same(got, sent[:6] + more)
    assert "damaged batch" in broker.log_path.read_text(errors="replace")


# -- idempotent produce: a retried request is deduplicated -------------------------------------------


@pytest.mark.parametrize("version", [3, 7, 9])
def test_retried_idempotent_batch_is_deduplicated_also_across_restart(broker, version):
    topic = unique_topic("dur-dedup")
    with RawClient(broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        producer_id, epoch = raw_init_producer_id(client)
        first = build_batch(records(3), producer_id=producer_id, producer_epoch=epoch, base_sequence=0)
        assert raw_produce(client, topic, first, version=version) == (0, 0)
        # The client did not see the response and retries the same bytes.
        assert raw_produce(client, topic, first, version=version) == (0, 0)
        assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 3)

    assert broker.stop() == 0
    broker.start()

    with RawClient(broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        assert raw_produce(client, topic, first, version=version) == (0, 0), "duplicate after restart"
        assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 3)
        second = build_batch(records(2, start=3), producer_id=producer_id, producer_epoch=epoch, base_sequence=3)
        assert raw_produce(client, topic, second, version=version) == (0, 3)
        assert raw_produce(client, topic, second, version=version) == (0, 3)
        assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 5)
    got = confluent_consume(broker.bootstrap, topic, 5)
    assert [(m.offset, m.value) for m in got] == [(i, f"value-{i}".encode()) for i in range(5)]


def test_retry_after_kill_9_is_deduplicated(broker):
    topic = unique_topic("dur-dedup-kill")
    with RawClient(broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        producer_id, epoch = raw_init_producer_id(client)
        batches = [
            build_batch(
                records(4, start=4 * i),
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=4 * i,
                compression=ZSTD,
            )
            for i in range(3)
        ]
        for i, batch in enumerate(batches):
            assert raw_produce(client, topic, batch) == (0, 4 * i)
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        assert raw_produce(client, topic, batches[-1]) == (0, 8)
        assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 12)


def test_sequence_gap_is_rejected(module_broker):
    topic = unique_topic("dur-gap")
    with RawClient(module_broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        producer_id, epoch = raw_init_producer_id(client)
        assert raw_produce(
            client, topic, build_batch(records(3), producer_id=producer_id, producer_epoch=epoch, base_sequence=0)
        ) == (0, 0)
        gap = build_batch(records(2, start=3), producer_id=producer_id, producer_epoch=epoch, base_sequence=10)
        error, _ = raw_produce(client, topic, gap)
        assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 3)


def test_the_batch_behind_a_refused_one_is_refused_the_same_way(module_broker):
    """A producer's first in-flight batch is refused unwritten (NOT_ENOUGH_REPLICAS), the ISR grows
    back, and the second arrives past the log's sequence. Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER,
    on which librdkafka bumps its producer epoch and can write other partitions' in-flight batches
    twice (librdkafka#4953); strom refuses it as the first, once, so the client resends both in order."""
    topic = unique_topic("dur-refused")
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)

    def min_insync_replicas(value: str) -> None:  # the one replica is too few for 2
        entry = ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("topic", topic, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(WAIT_S)

    with RawClient(module_broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        producer_id, epoch = raw_init_producer_id(client)

        def batch(first_sequence: int, n: int) -> bytes:
            return build_batch(
                records(n, start=first_sequence),
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=first_sequence,
            )

        assert raw_produce(client, topic, batch(0, 3)) == (0, 0)
        min_insync_replicas("2")
        assert raw_produce(client, topic, batch(3, 2)) == (NOT_ENOUGH_REPLICAS, -1)
        min_insync_replicas("1")

        error, message = _produce_error(client, topic, batch(5, 1))
        assert error == NOT_ENOUGH_REPLICAS, message
        assert "sequence 5 follows sequences 3..4" in message and "NOT_ENOUGH_REPLICAS" in message
        # refused in its turn: the next one in flight behind it is refused the same way
        error, message = _produce_error(client, topic, batch(6, 1))
        assert error == NOT_ENOUGH_REPLICAS and "sequence 6 follows sequences 5..5" in message, message
        # a refusal explains only the batch right after it: the same batch again is out of order, as in Kafka
        assert _produce_error(client, topic, batch(6, 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        # resent in order, each is written once
        assert raw_produce(client, topic, batch(3, 2)) == (0, 3)
        assert raw_produce(client, topic, batch(5, 1)) == (0, 5)
        assert raw_produce(client, topic, batch(6, 1)) == (0, 6)
        assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 7)

        # a batch that does not start right after a refused one is out of order
        assert raw_produce(client, topic, batch(7, 1), partition=1)[0] == UNKNOWN_TOPIC_OR_PARTITION
        assert _produce_error(client, topic, batch(9, 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER


def _produce_error(client: RawClient, topic: str, records: bytes) -> tuple[int, str | None]:
    response = client.request(
        0,
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    [part] = response.responses[0].partition_responses
    return int(part.error_code), part.error_message


# -- ListOffsets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 7])
def test_list_offsets_latest_after_multi_record_batches(module_broker, version):
    topic = unique_topic("dur-lo")
    with RawClient(module_broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        assert raw_list_offsets(client, topic, LATEST, version=version)[:2] == (0, 0)
        total = 0
        for size, codec in [(1, NONE), (5, GZIP), (10, SNAPPY), (3, LZ4), (7, ZSTD), (100, NONE)]:
            error, base = raw_produce(client, topic, build_batch(records(size, start=total), compression=codec))
            assert (error, base) == (0, total)
            total += size
            assert raw_list_offsets(client, topic, LATEST, version=version)[:2] == (0, total)
            assert raw_list_offsets(client, topic, EARLIEST, version=version)[:2] == (0, 0)
        # A timestamp inside the third batch finds that record, not its batch's first one.
        error, offset, ts = raw_list_offsets(client, topic, 1_690_000_000_000 + 8, version=version)
        assert (error, offset, ts) == (0, 8, 1_690_000_000_000 + 8)
    consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S) == (0, total)
    finally:
        consumer.close()


def test_list_offsets_max_timestamp(module_broker):
    """ListOffsets v7 timestamp -3 (KIP-734): the offset and timestamp of the record with the largest timestamp."""
    topic = unique_topic("dur-maxts")
    base = 1_690_000_000_000
    with RawClient(module_broker.bootstrap) as client:
        raw_wait_for_topic(client, topic)
        stamps = [[base + 5, base + 1], [base + 2, base + 90, base + 3], [base + 4]]
        offset = 0
        for batch_stamps in stamps:
            batch = [NewRecord(b"v", None, (), ts) for ts in batch_stamps]
            assert raw_produce(client, topic, build_batch(batch)) == (0, offset)
            offset += len(batch_stamps)
        assert raw_list_offsets(client, topic, MAX_TIMESTAMP) == (0, 3, base + 90)


# -- where "latest" is ----------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_consumer_at_latest_sees_only_new_messages(module_broker, client):
    topic = unique_topic("dur-latest")
    old = sample_messages(5)
    confluent_produce(module_broker.bootstrap, topic, old)
    new = sample_messages(4, ts_base=1_730_000_000_000)
    if client == "confluent":
        got = _confluent_latest(module_broker.bootstrap, topic, new)
    elif client == "kafka-python":
        got = _kafka_python_latest(module_broker.bootstrap, topic, new)
    else:
        got = asyncio.run(asyncio.wait_for(_aiokafka_latest(module_broker.bootstrap, topic, new), 60))
    assert_same(got, new, first_offset=5)


def _confluent_latest(bootstrap, topic, new):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        # The EOF event proves the end offset was resolved and fetched before anything new is produced.
        deadline = time.monotonic() + WAIT_S
        while True:
            assert time.monotonic() < deadline, "no partition EOF from the consumer"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is not None, f"consumer at OFFSET_END received old message at {msg.offset()}"
            if msg.error().code() == KafkaError._PARTITION_EOF:
                assert msg.offset() == 5
                break
        confluent_produce(bootstrap, topic, new)
        out = []
        while len(out) < len(new) and time.monotonic() < deadline + WAIT_S:
            msg = consumer.poll(0.2)
            if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert msg.error() is None, msg.error()
            out.append(from_confluent(msg))
        return out
    finally:
        consumer.close()


def _kafka_python_latest(bootstrap, topic, new):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="latest"
    )
    try:
        tp = KTopicPartition(topic, 0)
        consumer.assign([tp])
        assert consumer.position(tp, timeout_ms=WAIT_S * 1000) == 5  # resolved by auto.offset.reset=latest
        kafka_python_produce(bootstrap, topic, new)
        return kafka_python_poll(consumer, len(new))
    finally:
        consumer.close()


async def _aiokafka_latest(bootstrap, topic, new):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="latest"
    )
    await consumer.start()
    try:
        tp = ATopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 5
        await aiokafka_produce(bootstrap, topic, new)
        out = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < len(new) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(tp, timeout_ms=200)).values():
                out += [Msg(r.key, r.value, tuple(r.headers or ()), r.timestamp, r.offset) for r in batch]
        return out
    finally:
        await consumer.stop()
