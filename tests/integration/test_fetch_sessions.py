"""Fetch sessions (KIP-227) on the wire: full, incremental, forgotten partitions, the session
errors and a full cache, spoken with strom's own codec to one real broker."""

from __future__ import annotations

import asyncio
import time
import uuid

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch, iter_records
from strom.replication.client import BrokerClient
from tests.broker_process import BrokerProcess

TOPIC = "sessions"


def _partition(index: int, offset: int) -> dict:
    return {
        "partition": index,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }


def _fetch(
    session_id: int,
    epoch: int,
    topics: dict | None = None,
    forgotten: dict | None = None,
    max_wait: int = 0,
    by_id: bool = False,
) -> dict:
    name = "topic_id" if by_id else "topic"
    return {
        "replica_id": -1,
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": 1 << 24,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {name: t, "partitions": [_partition(i, o) for i, o in ps.items()]} for t, ps in (topics or {}).items()
        ],
        "forgotten_topics_data": [{name: t, "partitions": ps} for t, ps in (forgotten or {}).items()],
        "rack_id": "",
    }


def _listed(response) -> dict:
    """{(topic or id, partition): ([values], high watermark)} of what a response lists."""
    listed = {}
    for topic in response.responses:
        key = getattr(topic, "topic", None) or topic.topic_id
        for data in topic.partitions:
            assert data.error_code == ErrorCode.NONE, data
            values = [r.value for r in iter_records(bytes(data.records))] if data.records else []
            listed[(key, data.partition_index)] = (values, data.high_watermark)
    return listed


async def _produce(client: BrokerClient, index: int, *values: bytes) -> None:
    batch = build_batch([NewRecord(v) for v in values])
    response = await client.request(
        ApiKey.PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": index, "records": batch}]}],
        },
    )
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def _scenario(port: int) -> None:
    client = BrokerClient("127.0.0.1", port, "session-test", timeout_s=20)
    other = BrokerClient("127.0.0.1", port, "session-test-2", timeout_s=20)
    try:
        created = await client.request(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {"name": TOPIC, "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout": 10000,
                "validate_only": False,
            },
        )
        assert created.topics[0].error_code == ErrorCode.NONE
        topic_id = created.topics[0].topic_id
        await _produce(client, 0, b"a0", b"a1")
        await _produce(client, 1, b"b0")

        # full fetch, epoch 0: a session, and everything asked for
        full = await client.request(ApiKey.FETCH, 12, _fetch(0, 0, {TOPIC: {0: 0, 1: 0}}))
        session = full.session_id
        assert session != 0
        assert _listed(full) == {(TOPIC, 0): ([b"a0", b"a1"], 2), (TOPIC, 1): ([b"b0"], 1)}

        # incremental: the client moves its offsets; nothing new, so nothing listed
        step = await client.request(ApiKey.FETCH, 12, _fetch(session, 1, {TOPIC: {0: 2, 1: 1}}))
        assert (step.error_code, step.session_id, _listed(step)) == (ErrorCode.NONE, session, {})

        # new data on one partition: only that one is listed, from the offset the session holds
        await _produce(client, 1, b"b1")
        step = await client.request(ApiKey.FETCH, 12, _fetch(session, 2))
        assert _listed(step) == {(TOPIC, 1): ([b"b1"], 2)}

        # add partition 2, forget partition 0: the newcomer is listed once, the forgotten one never
        step = await client.request(ApiKey.FETCH, 12, _fetch(session, 3, {TOPIC: {1: 2, 2: 0}}, {TOPIC: [0]}))
        assert _listed(step) == {(TOPIC, 2): ([], 0)}
        await _produce(client, 0, b"a2")
        step = await client.request(ApiKey.FETCH, 12, _fetch(session, 4))
        assert _listed(step) == {}

        # a long poll on the session is woken by an append to one of its partitions
        waiting = asyncio.ensure_future(client.request(ApiKey.FETCH, 12, _fetch(session, 5, max_wait=15000)))
        await asyncio.sleep(0.2)
        await _produce(other, 2, b"c0")
        step = await asyncio.wait_for(waiting, 20)
        assert _listed(step) == {(TOPIC, 2): ([b"c0"], 1)}

        # fetch.min.bytes out of reach: two appends wake the poll, it times out, and brings both
        wanting = _fetch(session, 6, {TOPIC: {2: 1}}, max_wait=1500)
        wanting["min_bytes"] = 1 << 20
        waiting = asyncio.ensure_future(client.request(ApiKey.FETCH, 12, wanting))
        await _produce(other, 2, b"c1")
        await asyncio.sleep(0.3)
        await _produce(other, 1, b"b2")
        step = await asyncio.wait_for(waiting, 20)
        assert _listed(step) == {(TOPIC, 1): ([b"b2"], 3), (TOPIC, 2): ([b"c1"], 2)}

        # a wrong epoch is refused and leaves the session as it was; an unknown id is not found
        bad = await client.request(ApiKey.FETCH, 12, _fetch(session, 99))
        assert (bad.error_code, bad.session_id, bad.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, ())
        step = await client.request(ApiKey.FETCH, 12, _fetch(session, 7, {TOPIC: {1: 3, 2: 2}}))
        assert step.error_code == ErrorCode.NONE and _listed(step) == {}
        missing = await client.request(ApiKey.FETCH, 12, _fetch(session ^ 0x5A5A, 1))
        assert missing.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and missing.responses == ()

        # the cache has one slot and its session is young: a second full fetch is served sessionless
        second = await other.request(ApiKey.FETCH, 12, _fetch(0, 0, {TOPIC: {0: 0}}))
        assert second.session_id == 0 and _listed(second) == {(TOPIC, 0): ([b"a0", b"a1", b"a2"], 3)}

        # closing (epoch -1) frees the slot; the closed session is gone
        closed = await client.request(ApiKey.FETCH, 12, _fetch(session, -1, {TOPIC: {2: 2}}))
        assert closed.error_code == ErrorCode.NONE and closed.session_id == 0
        gone = await client.request(ApiKey.FETCH, 12, _fetch(session, 8))
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        # topic ids (v13+): a session keyed by id lists partitions by id
        full = await other.request(ApiKey.FETCH, 13, _fetch(0, 0, {topic_id: {0: 3, 1: 3}}, by_id=True))
        by_id = full.session_id
        assert by_id != 0 and _listed(full) == {(topic_id, 0): ([], 3), (topic_id, 1): ([], 3)}
        await _produce(client, 0, b"a3")
        step = await other.request(ApiKey.FETCH, 17, _fetch(by_id, 1, by_id=True))
        assert _listed(step) == {(topic_id, 0): ([b"a3"], 4)}
        # a session made with ids cannot be continued by name
        mixed = await other.request(ApiKey.FETCH, 12, _fetch(by_id, 2))
        assert mixed.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        # an id nobody has is an error of that partition, in a sessionless fetch as in a session
        unknown = await other.request(ApiKey.FETCH, 13, _fetch(0, -1, {uuid.UUID(int=7): {0: 0}}, by_id=True))
        assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    finally:
        client.close()
        other.close()


def test_full_incremental_forgotten_errors_and_a_full_cache(tmp_path):
    overrides = {"max.incremental.fetch.session.cache.slots": "1"}
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        asyncio.run(asyncio.wait_for(_scenario(broker.port), 120))


# -- real clients over 64 partitions ---------------------------------------------------------------
PARTITIONS = 64
PER_PARTITION = 40
WAIT_S = 60


def _produce_all(bootstrap: str, topic: str, first: int, count: int, partitions=range(PARTITIONS)) -> dict:
    """``count`` distinct values into each partition; returns {partition: [values]}."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    sent: dict[int, list[bytes]] = {}
    for p in partitions:
        for i in range(first, first + count):
            value = f"{p}:{i}:".encode() + bytes([i % 251]) * (i % 300)
            producer.produce(topic, value, partition=p)
            sent.setdefault(p, []).append(value)
        producer.poll(0)
    assert producer.flush(30) == 0
    return sent


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=10, request_timeout=15)
    for future in futures.values():
        future.result(timeout=20)


def _confluent_read(consumer, wanted: dict) -> dict:
    got: dict[int, list[bytes]] = {p: [] for p in wanted}
    missing = sum(len(v) for v in wanted.values())
    deadline = time.monotonic() + WAIT_S
    while missing > 0 and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.5):
            assert message.error() is None, message.error()
            got[message.partition()].append(message.value())
            missing -= 1
    return got


def _kafka_python_read(consumer, wanted: dict) -> dict:
    got: dict[int, list[bytes]] = {p: [] for p in wanted}
    missing = sum(len(v) for v in wanted.values())
    deadline = time.monotonic() + WAIT_S
    while missing > 0 and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=300, max_records=5000).items():
            got[tp.partition].extend(r.value for r in records)
            missing -= len(records)
    return got


def test_librdkafka_consumes_every_byte_of_64_partitions_then_what_follows(tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    with BrokerProcess(tmp_path / "data") as broker:
        topic = "c64"
        _create(broker.bootstrap, topic)
        sent = _produce_all(broker.bootstrap, topic, 0, PER_PARTITION)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "c64",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
            assert _confluent_read(consumer, sent) == sent
            # caught up, long-polling: appends to a few partitions reach it
            more = _produce_all(broker.bootstrap, topic, PER_PARTITION, 7, partitions=(3, 40, 63))
            assert _confluent_read(consumer, more) == more
        finally:
            consumer.close()


def test_kafka_python_session_consumes_every_byte_of_64_partitions_then_what_follows(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer, TopicPartition

    with BrokerProcess(tmp_path / "data") as broker:
        topic = "k64"
        _create(broker.bootstrap, topic)
        sent = _produce_all(broker.bootstrap, topic, 0, PER_PARTITION)
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            request_timeout_ms=30000,
        )
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            assert _kafka_python_read(consumer, sent) == sent
            more = _produce_all(broker.bootstrap, topic, PER_PARTITION, 7, partitions=(0, 31, 62))
            assert _kafka_python_read(consumer, more) == more
        finally:
            consumer.close()
