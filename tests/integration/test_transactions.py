"""Transactions with real clients against a real strom broker (issue 10, "Real clients").

The transactional producers of confluent-kafka, kafka-python and aiokafka commit and abort
transactions over several partitions of two topics and commit consumer offsets inside them
(send_offsets_to_transaction); the consumers of all three (and kcat) read the result. A
read_committed consumer must get exactly the committed records, a read_uncommitted one every
data record, and neither may ever get a control record (a marker): each reader is compared,
partition by partition, with the (offset, value) list the producers' delivery reports give.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.group.support import FAST_GROUP, committed, create_topic, produce, unique
from tests.integration.clients import WAIT_S, kafka_python_subscribed, wait_until
from tests.integration.txn_support import (
    INPUTS,
    READERS,
    ConfluentTxnProducer,
    Rows,
    assert_reads,
    merge,
    offset_fetch,
    only,
    pending_offsets,
    read_confluent,
    txn_broker,  # noqa: F401 - fixture
    txn_id,
    wait_committed,
)

pytestmark = pytest.mark.timeout(120)


# -- 1 and 4: commit and abort over two topics; the three clients' consumers -------------------------


@dataclass
class History:
    """What the producers were told: every record's offset, and which ones were committed."""

    all: Rows = field(default_factory=dict)
    committed: Rows = field(default_factory=dict)


@pytest.fixture(scope="module")
def history(txn_broker) -> History:
    """Two confluent-kafka transactional producers over 3 + 2 partitions of two topics:

    P commits T1; then P's T2 and Q's T1 write interleaved batches into the same partitions and P
    aborts while Q commits (a reader must drop by producer id, not by offset range); then P
    commits T3, so every partition ends with committed data after the aborted records.
    """
    bootstrap = txn_broker.bootstrap
    orders = create_topic(bootstrap, unique("orders"), 3)
    payments = create_topic(bootstrap, unique("payments"), 2)
    tps = [(orders, p) for p in range(3)] + [(payments, p) for p in range(2)]
    p = ConfluentTxnProducer(bootstrap, txn_id("history-p"))
    q = ConfluentTxnProducer(bootstrap, txn_id("history-q"))
    p.init_transactions(WAIT_S)
    q.init_transactions(WAIT_S)

    p.begin_transaction()
    for topic, part in tps:
        for i in range(3):
            p.produce(topic, part, f"committed-1 {topic}/{part} #{i}".encode())
    p.commit_transaction(WAIT_S)

    p.begin_transaction()
    q.begin_transaction()
    for i in range(2):
        for topic, part in tps:
            p.produce(topic, part, f"aborted {topic}/{part} #{i}".encode())
            p.flush()
            q.produce(topic, part, f"committed-q {topic}/{part} #{i}".encode())
            q.flush()
    p.abort_transaction(WAIT_S)
    q.commit_transaction(WAIT_S)

    p.begin_transaction()
    for topic, part in tps:
        for i in range(2):
            p.produce(topic, part, f"committed-3 {topic}/{part} #{i}".encode())
    p.commit_transaction(WAIT_S)
    assert not p.errors and not q.errors, (p.errors, q.errors)

    everything = merge(p.delivered, q.delivered)
    history = History(
        everything, {tp: [(o, v) for o, v in rows if v.startswith(b"committed")] for tp, rows in everything.items()}
    )
    assert sorted(everything) == sorted(tps)
    for tp in tps:
        # 3 committed + 2 aborted + 2 of Q's + 2 committed per partition, and gaps where the markers are
        assert len(everything[tp]) == 9 and len(history.committed[tp]) == 7
        assert everything[tp][:3] == [(i, f"committed-1 {tp[0]}/{tp[1]} #{i}".encode()) for i in range(3)]
        assert everything[tp][3][0] == 4, "offset 3 is T1's commit marker"
    return history


@pytest.mark.parametrize("reader", list(READERS))
def test_read_committed_never_sees_aborted_records(txn_broker, history, reader):
    assert_reads(txn_broker.bootstrap, history.committed, "read_committed", reader)


@pytest.mark.parametrize("reader", list(READERS))
def test_read_uncommitted_sees_aborted_records_but_no_markers(txn_broker, history, reader):
    assert_reads(txn_broker.bootstrap, history.all, "read_uncommitted", reader)


@pytest.fixture(scope="module", params=["none", "zstd"])
def interleaved(request, txn_broker) -> History:
    """Twelve rounds of two producers writing one-record batches alternately into both partitions of a
    topic, each round ending in a different mix of commits and aborts: many aborted transactions,
    overlapping committed ones, in compressed batches (markers are never compressed)."""
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique(f"interleaved-{request.param}"), 2)
    a = ConfluentTxnProducer(bootstrap, txn_id("interleaved-a"), **{"compression.type": request.param})
    b = ConfluentTxnProducer(bootstrap, txn_id("interleaved-b"), **{"compression.type": request.param})
    a.init_transactions(WAIT_S)
    b.init_transactions(WAIT_S)
    for round_ in range(12):
        outcome = {"a": round_ % 3 != 1, "b": round_ % 2 == 0}
        a.begin_transaction()
        b.begin_transaction()
        for i in range(3):
            for p in range(2):
                for name, producer in (("a", a), ("b", b)):
                    label = "commit" if outcome[name] else "abort"
                    producer.produce(topic, p, f"{label} {name} round {round_} #{i} ".encode() + b"x" * (40 * i))
                    producer.flush()
        for name, producer in (("a", a), ("b", b)):
            (producer.commit_transaction if outcome[name] else producer.abort_transaction)(WAIT_S)
    everything = merge(a.delivered, b.delivered)
    assert all(len(rows) == 72 for rows in everything.values())
    return History(everything, only(everything, b"commit"))


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_many_interleaved_transactions_small_fetches(txn_broker, interleaved, reader, isolation):
    expected = interleaved.committed if isolation == "read_committed" else interleaved.all
    assert_reads(txn_broker.bootstrap, expected, isolation, reader, small=True)


def test_read_committed_list_offsets_stops_at_an_open_transaction(txn_broker):
    """ListOffsets(latest) under read_committed answers the LSO: the first offset of the open transaction."""
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("lso"), 1)
    producer = ConfluentTxnProducer(bootstrap, txn_id("lso"))
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, 0, f"c{i}".encode())
    producer.commit_transaction(WAIT_S)  # offsets 0-2, marker 3
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, 0, f"open{i}".encode())
    producer.flush()  # offsets 4-5, still open

    def latest(isolation: str) -> tuple[int, int]:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": unique("unused"), "isolation.level": isolation}
        )
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)
        finally:
            consumer.close()

    assert latest("read_uncommitted") == (0, 6)
    assert latest("read_committed") == (0, 4)
    producer.commit_transaction(WAIT_S)
    wait_until(lambda: latest("read_committed") == (0, 7), what="the LSO to pass the commit marker")
    assert latest("read_uncommitted") == (0, 7)


# -- 2 and 3: the transactional producers of aiokafka and kafka-python ---------------------------------


def test_aiokafka_transactional_producer_commit_and_abort(txn_broker):
    from aiokafka import AIOKafkaProducer

    bootstrap = txn_broker.bootstrap
    topics = [create_topic(bootstrap, unique("aio-a"), 2), create_topic(bootstrap, unique("aio-b"), 2)]
    tps = [(t, p) for t in topics for p in range(2)]
    delivered: Rows = {}

    class Abort(Exception):
        pass

    async def send_all(producer, label: str) -> None:
        values = [(t, p, f"{label} {t}/{p} #{i}".encode()) for i in range(3) for t, p in tps]
        futures = [await producer.send(t, value, partition=p) for t, p, value in values]
        for meta, (_, _, value) in zip(await asyncio.gather(*futures), values):
            delivered.setdefault((meta.topic, meta.partition), []).append((meta.offset, value))

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=txn_id("aio"), request_timeout_ms=WAIT_S * 1000
        )
        await asyncio.wait_for(producer.start(), WAIT_S)
        try:
            async with producer.transaction():
                await send_all(producer, "committed-1")
            with pytest.raises(Abort):
                async with producer.transaction():
                    await send_all(producer, "aborted")  # acknowledged, so in the log before the abort
                    raise Abort()
            async with producer.transaction():
                await send_all(producer, "committed-2")
        finally:
            await asyncio.wait_for(producer.stop(), WAIT_S)

    asyncio.run(asyncio.wait_for(run(), 60))
    everything = merge(delivered)
    for tp in tps:
        offsets = [o for o, _ in everything[tp]]
        assert offsets == [0, 1, 2, 4, 5, 6, 8, 9, 10], f"{tp}: markers at 3 and 7, got {offsets}"
    assert_reads(bootstrap, only(everything, b"committed"), "read_committed")
    assert_reads(bootstrap, everything, "read_uncommitted")
    assert_reads(bootstrap, only(everything, b"committed"), "read_committed", "aiokafka")


def test_kafka_python_transactional_producer_commit_and_abort(txn_broker):
    from kafka import KafkaProducer

    bootstrap = txn_broker.bootstrap
    topics = [create_topic(bootstrap, unique("kp-a"), 2), create_topic(bootstrap, unique("kp-b"), 2)]
    tps = [(t, p) for t in topics for p in range(2)]
    delivered: Rows = {}
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id("kp"),
        request_timeout_ms=WAIT_S * 1000,
        max_block_ms=WAIT_S * 1000,
    )

    def send_all(label: str) -> None:
        sent = [
            (f"{label} {t}/{p} #{i}".encode(), producer.send(t, f"{label} {t}/{p} #{i}".encode(), partition=p))
            for i in range(3)
            for t, p in tps
        ]
        producer.flush(timeout=WAIT_S)
        for value, future in sent:
            meta = future.get(timeout=WAIT_S)
            delivered.setdefault((meta.topic, meta.partition), []).append((meta.offset, value))

    try:
        producer.init_transactions()
        producer.begin_transaction()
        send_all("committed-1")
        producer.commit_transaction()
        producer.begin_transaction()
        send_all("aborted")
        producer.abort_transaction()
        producer.begin_transaction()
        send_all("committed-2")
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    everything = merge(delivered)
    for tp in tps:
        assert [o for o, _ in everything[tp]] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    assert_reads(bootstrap, only(everything, b"committed"), "read_committed")
    assert_reads(bootstrap, everything, "read_uncommitted")
    assert_reads(bootstrap, only(everything, b"committed"), "read_committed", "kafka-python")


# -- send_offsets_to_transaction: consume-transform-produce ------------------------------------------


def expected_output(bootstrap: str, output: str, per_partition: dict[int, list[bytes]]) -> None:
    """read_committed readers of the output see each input record transformed exactly once, in order."""
    want = {(output, p): len(vs) for p, vs in per_partition.items()}
    for reader in READERS.values():
        got = reader(bootstrap, want, "read_committed")
        assert {p: [v for _, v in got[(output, p)]] for p in per_partition} == per_partition


def make_input(bootstrap: str, prefix: str) -> tuple[str, str, str]:
    source = create_topic(bootstrap, unique(f"{prefix}-in"), INPUTS)
    sink = create_topic(bootstrap, unique(f"{prefix}-out"), INPUTS)
    produce(bootstrap, source, [f"in-{i}".encode() for i in range(20)], partitions=INPUTS)  # 10 per partition
    return source, sink, unique(f"{prefix}-group")


def poll_confluent(consumer, count: int) -> list[Any]:
    out = []
    deadline = time.monotonic() + WAIT_S
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            out.append(msg)
    assert len(out) == count, f"consumed {len(out)} of {count}"
    return out


def by_partition(pairs: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(INPUTS)}
    for partition, value in pairs:
        out[partition].append(value)
    return out


def test_confluent_send_offsets_to_transaction(txn_broker):
    """Commit: output and offsets together. Abort: neither; the copier rewinds and does it again."""
    from confluent_kafka import Consumer

    bootstrap = txn_broker.bootstrap
    source, sink, group = make_input(bootstrap, "ck-ctp")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **FAST_GROUP,
        }
    )
    producer = ConfluentTxnProducer(bootstrap, txn_id("ck-ctp"))
    written: list[tuple[int, bytes]] = []

    def copy(messages, commit: bool, stable: dict[int, int]) -> None:
        producer.begin_transaction()
        for msg in messages:
            producer.produce(sink, msg.partition(), b"out:" + msg.value())
        producer.flush()
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), WAIT_S
        )
        pending_offsets(bootstrap, group, source, stable)
        if commit:
            producer.commit_transaction(WAIT_S)
            written.extend((m.partition(), m.value()) for m in messages)
        else:
            producer.abort_transaction(WAIT_S)

    try:
        consumer.subscribe([source])
        producer.init_transactions(WAIT_S)
        copy(poll_confluent(consumer, 20), True, {0: -1, 1: -1})
        wait_committed(bootstrap, group, source, {0: 10, 1: 10})

        produce(bootstrap, source, [f"in-{i}".encode() for i in range(20, 30)], partitions=INPUTS)
        batch = poll_confluent(consumer, 10)
        copy(batch, False, {0: 10, 1: 10})
        wait_until(
            lambda: offset_fetch(bootstrap, group, source, True) == {0: (0, 10), 1: (0, 10)},
            what="the aborted offsets to be dropped",
        )
        assert committed(bootstrap, group, source, INPUTS) == {0: 10, 1: 10}

        # what a copier does after an abort: back to the committed offsets, the same records again
        for tp in consumer.committed(consumer.assignment(), timeout=WAIT_S):
            consumer.seek(tp)
        again = poll_confluent(consumer, 10)
        assert sorted((m.partition(), m.offset(), m.value()) for m in again) == sorted(
            (m.partition(), m.offset(), m.value()) for m in batch
        )
        copy(again, True, {0: 10, 1: 10})
        wait_committed(bootstrap, group, source, {0: 15, 1: 15})
    finally:
        consumer.close()
        producer.flush()
    expected_output(bootstrap, sink, by_partition([(p, b"out:" + v) for p, v in written]))
    assert sorted(v for _, v in written) == sorted(f"in-{i}".encode() for i in range(30))
    # the aborted copies are in the log: a read_uncommitted reader gets 5 more per partition
    got = read_confluent(bootstrap, {(sink, p): 20 for p in range(INPUTS)}, "read_uncommitted")
    assert all(len(got[(sink, p)]) == 20 for p in range(INPUTS))


def test_aiokafka_send_offsets_to_transaction(txn_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap = txn_broker.bootstrap
    source, sink, group = make_input(bootstrap, "aio-ctp")
    written: list[tuple[int, bytes]] = []

    class Abort(Exception):
        pass

    async def poll(consumer, count: int) -> list[Any]:
        out = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out.extend(records)
        assert len(out) == count, f"consumed {len(out)} of {count}"
        return out

    async def copy(producer, consumer, records, stable: dict[int, int]) -> None:
        futures = [await producer.send(sink, b"out:" + r.value, partition=r.partition) for r in records]
        await asyncio.gather(*futures)
        offsets = {tp: await consumer.position(tp) for tp in consumer.assignment()}
        await producer.send_offsets_to_transaction(offsets, group)
        await asyncio.to_thread(pending_offsets, bootstrap, group, source, stable)

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=txn_id("aio-ctp"), request_timeout_ms=WAIT_S * 1000
        )
        await asyncio.wait_for(consumer.start(), WAIT_S)
        await asyncio.wait_for(producer.start(), WAIT_S)
        try:
            records = await poll(consumer, 20)
            async with producer.transaction():
                await copy(producer, consumer, records, {0: -1, 1: -1})
            written.extend((r.partition, r.value) for r in records)
            await asyncio.to_thread(wait_committed, bootstrap, group, source, {0: 10, 1: 10})

            await asyncio.to_thread(produce, bootstrap, source, [f"in-{i}".encode() for i in range(20, 30)], INPUTS)
            records = await poll(consumer, 10)
            with pytest.raises(Abort):
                async with producer.transaction():
                    await copy(producer, consumer, records, {0: 10, 1: 10})
                    raise Abort()
            await asyncio.to_thread(
                wait_until,
                lambda: offset_fetch(bootstrap, group, source, True) == {0: (0, 10), 1: (0, 10)},
                WAIT_S,
                0.05,
                "the aborted offsets to go",
            )
            for tp in consumer.assignment():
                consumer.seek(tp, 10)
            again = await poll(consumer, 10)
            assert sorted((r.partition, r.offset, r.value) for r in again) == sorted(
                (r.partition, r.offset, r.value) for r in records
            )
            async with producer.transaction():
                await copy(producer, consumer, again, {0: 10, 1: 10})
            written.extend((r.partition, r.value) for r in again)
            await asyncio.to_thread(wait_committed, bootstrap, group, source, {0: 15, 1: 15})
        finally:
            await asyncio.wait_for(producer.stop(), WAIT_S)
            await asyncio.wait_for(consumer.stop(), WAIT_S)

    asyncio.run(asyncio.wait_for(run(), 90))
    expected_output(bootstrap, sink, by_partition([(p, b"out:" + v) for p, v in written]))
    assert sorted(v for _, v in written) == sorted(f"in-{i}".encode() for i in range(30))


def test_kafka_python_send_offsets_to_transaction(txn_broker):
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata

    bootstrap = txn_broker.bootstrap
    source, sink, group = make_input(bootstrap, "kp-ctp")
    written: list[tuple[int, bytes]] = []
    consumer = kafka_python_subscribed(
        [source],
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id("kp-ctp"),
        request_timeout_ms=WAIT_S * 1000,
        max_block_ms=WAIT_S * 1000,
    )

    def poll(count: int) -> list[Any]:
        out = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(records)
        assert len(out) == count, f"consumed {len(out)} of {count}"
        return out

    def copy(records, commit: bool, stable: dict[int, int]) -> None:
        producer.begin_transaction()
        futures = [producer.send(sink, b"out:" + r.value, partition=r.partition) for r in records]
        producer.flush(timeout=WAIT_S)
        for future in futures:
            future.get(timeout=WAIT_S)
        offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        pending_offsets(bootstrap, group, source, stable)
        if commit:
            producer.commit_transaction()
            written.extend((r.partition, r.value) for r in records)
        else:
            producer.abort_transaction()

    try:
        producer.init_transactions()
        copy(poll(20), True, {0: -1, 1: -1})
        wait_committed(bootstrap, group, source, {0: 10, 1: 10})
        produce(bootstrap, source, [f"in-{i}".encode() for i in range(20, 30)], partitions=INPUTS)
        records = poll(10)
        copy(records, False, {0: 10, 1: 10})
        wait_until(
            lambda: offset_fetch(bootstrap, group, source, True) == {0: (0, 10), 1: (0, 10)},
            what="the aborted offsets to be dropped",
        )
        for tp in consumer.assignment():
            consumer.seek(tp, 10)
        again = poll(10)
        assert sorted((r.partition, r.offset, r.value) for r in again) == sorted(
            (r.partition, r.offset, r.value) for r in records
        )
        copy(again, True, {0: 10, 1: 10})
        wait_committed(bootstrap, group, source, {0: 15, 1: 15})
    finally:
        producer.close(timeout=5)
        consumer.close()
    expected_output(bootstrap, sink, by_partition([(p, b"out:" + v) for p, v in written]))
    assert sorted(v for _, v in written) == sorted(f"in-{i}".encode() for i in range(30))


# -- more of what applications do -------------------------------------------------------------------


def test_transaction_with_only_offsets(txn_broker):
    """A copier whose batch was filtered out entirely still commits its input offsets: a transaction
    with no data, whose only partition is the group's __consumer_offsets partition."""
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("offsets-only"), INPUTS)
    group = unique("offsets-only-group")
    producer = ConfluentTxnProducer(bootstrap, txn_id("offsets-only"))
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.init_transactions(WAIT_S)
        for offsets, commit in (({0: 4, 1: 6}, True), ({0: 9, 1: 9}, False), ({0: 5, 1: 8}, True)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, p, o) for p, o in offsets.items()], member.consumer_group_metadata(), WAIT_S
            )
            (producer.commit_transaction if commit else producer.abort_transaction)(WAIT_S)
            if commit:
                wait_committed(bootstrap, group, topic, offsets)
            else:
                wait_until(
                    lambda: offset_fetch(bootstrap, group, topic, True) == {0: (0, 4), 1: (0, 6)},
                    what="the aborted offsets to be dropped",
                )
    finally:
        member.close()


@pytest.mark.parametrize("reader", ["confluent-kafka", "kafka-python"])
def test_read_committed_consumer_tails_live_transactions(txn_broker, reader):
    """A read_committed consumer already polling while transactions commit and abort: each committed
    transaction arrives once its marker is written, no aborted record ever does."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("tail"), 1)
    producer = ConfluentTxnProducer(bootstrap, txn_id("tail"))
    producer.init_transactions(WAIT_S)
    got: list[tuple[int, bytes]] = []
    if reader == "confluent-kafka":
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("unused"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

        def poll_once() -> None:
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
    else:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        consumer.assign([KpTopicPartition(topic, 0)])
        consumer.seek_to_beginning()

        def poll_once() -> None:
            for records in consumer.poll(timeout_ms=100).values():
                got.extend((r.offset, r.value) for r in records)

    committed_rows: list[tuple[int, bytes]] = []
    try:
        for round_ in range(8):
            commit = round_ % 3 != 2
            producer.begin_transaction()
            for i in range(3):
                producer.produce(topic, 0, f"{'commit' if commit else 'abort'} {round_} #{i}".encode())
            producer.flush()
            for _ in range(2):
                poll_once()  # the open transaction holds the consumer back at the LSO
            assert all(not v.startswith(f"commit {round_} ".encode()) for _, v in got)
            (producer.commit_transaction if commit else producer.abort_transaction)(WAIT_S)
            if commit:
                committed_rows = sorted(merge(only(producer.delivered, b"commit"))[(topic, 0)])
                deadline = time.monotonic() + WAIT_S
                while len(got) < len(committed_rows) and time.monotonic() < deadline:
                    poll_once()
                assert got == committed_rows
    finally:
        consumer.close()
    assert got == committed_rows and len(got) == 6 * 3
