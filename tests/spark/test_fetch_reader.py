"""read_committed in the source's Fetch reader.

Against a real broker, with topics written by confluent-kafka's transactional producer: the
reader keeps exactly the records (offsets and values) that confluent-kafka's read_committed
consumer is given, from every start offset, and never reads past the last stable offset. Then
Kafka's filtering rule alone, on hand-built record sets with the aborted-transaction lists a
leader sends, for the cases a broker makes hard to stage.
"""

from __future__ import annotations

import collections

from strom.protocol.records import NewRecord, build_batch, build_control_batch, iter_batch_headers
from strom.spark.fetch_reader import AbortedFilter, PartitionReader
from strom.spark.options import SourceOptions
from tests.spark.conftest import (
    WAIT_S,
    consume_all,
    create_topic,
    fetch_path_read,
    latest_offsets,
    strom_reader,
    transactional_feed,
)


def open_transaction(bootstrap: str, topic: str, partitions: int, records: int):
    """A transactional producer left with an open transaction holding ``records`` records."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"open-{topic}", "linger.ms": 0})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(records):
        producer.produce(topic, b"open-%d" % i, partition=i % partitions)
    assert producer.flush(WAIT_S) == 0
    return producer


def test_read_committed_fetch_keeps_what_the_client_keeps_and_stops_at_the_lso(broker):
    create_topic(broker.bootstrap, "txn", 2)
    committed = transactional_feed(broker.bootstrap, "txn", 2, chunks=6, per_chunk=60)
    hanging = open_transaction(broker.bootstrap, "txn", 2, 20)
    try:
        lso = latest_offsets(broker.bootstrap, "txn", 2, read_committed=True)
        hw = latest_offsets(broker.bootstrap, "txn", 2, read_committed=False)
        assert all(lso[p] < hw[p] for p in range(2)), (lso, hw)
        client = consume_all(broker.bootstrap, "txn", 2, "read_committed")
        assert collections.Counter(v for _, _, v in client) == collections.Counter(committed)
        uncommitted = consume_all(broker.bootstrap, "txn", 2, "read_uncommitted")
        for p in range(2):
            mine = [(o, v) for q, o, v in client if q == p]
            # from every start offset, inside aborted and committed transactions and on markers
            for start in range(lso[p] + 1):
                assert fetch_path_read(broker.bootstrap, "txn", p, start, lso[p], "read_committed") == [
                    (o, v) for o, v in mine if o >= start
                ], start
            # read_uncommitted: aborted and open records too, never a marker
            assert fetch_path_read(broker.bootstrap, "txn", p, 0, hw[p], "read_uncommitted") == [
                (o, v) for q, o, v in uncommitted if q == p
            ]

        # the leader answers read_committed Fetch only below the LSO; the open transaction is above it
        opts = SourceOptions.parse(
            {
                "kafka.bootstrap.servers": broker.bootstrap,
                "subscribe": "txn",
                "kafka.isolation.level": "read_committed",
            },
            streaming=False,
        )
        reader = PartitionReader(opts, "txn", 0)
        try:
            assert reader.watermarks()[1] == lso[0]
            position = 0
            while position < lso[0]:
                fetched = reader.fetch(position)
                assert fetched.last_stable_offset == lso[0] and fetched.high_watermark == hw[0]
                headers = list(iter_batch_headers(fetched.records))
                assert headers and headers[-1].last_offset < lso[0]
                position = headers[-1].last_offset + 1
            at_lso = reader.fetch(lso[0])
            assert len(at_lso.records) == 0 and at_lso.stable_end == lso[0]
        finally:
            reader.close()
    finally:
        hanging.abort_transaction(WAIT_S)


def test_spark_source_reads_committed_records_only(spark, broker):
    create_topic(broker.bootstrap, "txn-spark", 2)
    committed = transactional_feed(broker.bootstrap, "txn-spark", 2, chunks=4, per_chunk=100)
    hanging = open_transaction(broker.bootstrap, "txn-spark", 2, 10)
    try:
        rows = (
            strom_reader(spark, broker.bootstrap, subscribe="txn-spark", **{"kafka.isolation.level": "read_committed"})
            .select("value")
            .collect()
        )
        assert collections.Counter(r.value for r in rows) == collections.Counter(committed)
        everything = strom_reader(spark, broker.bootstrap, subscribe="txn-spark").count()
        assert everything == 2 * 4 * 100 + 10  # read_uncommitted: aborted and open records, no marker
    finally:
        hanging.abort_transaction(WAIT_S)


class LogBuilder:
    """Batches laid out one after another at increasing offsets, as in a partition's log."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.next_offset = 0

    def data(self, *values: str, producer_id: int = -1, transactional: bool = False) -> int:
        first = self.next_offset
        self.parts.append(
            build_batch(
                [NewRecord(v.encode()) for v in values],
                base_offset=first,
                producer_id=producer_id,
                producer_epoch=0 if producer_id >= 0 else -1,
                base_sequence=0 if producer_id >= 0 else -1,
                transactional=transactional,
            )
        )
        self.next_offset += len(values)
        return first

    def marker(self, producer_id: int, commit: bool) -> int:
        first = self.next_offset
        batch = bytearray(build_control_batch(producer_id, 0, commit, coordinator_epoch=3))
        batch[0:8] = first.to_bytes(8, "big")  # base offset is outside the CRC, as the leader patches it
        self.parts.append(bytes(batch))
        self.next_offset += 1
        return first

    def records(self) -> memoryview:
        return memoryview(b"".join(self.parts))


def kept_values(records, aborted) -> list[str]:
    from strom.protocol.records import decode_batch_records

    keep = AbortedFilter(aborted)
    return [
        r.value.decode()
        for h in iter_batch_headers(records)
        if keep.keep(records, h)
        for r in decode_batch_records(records, h)
    ]


def test_aborted_batches_and_markers_are_dropped_interleaved_producers():
    log = LogBuilder()
    a_first = log.data("a1", producer_id=7, transactional=True)  # 7: committed later
    b_first = log.data("b1", "b2", producer_id=8, transactional=True)  # 8: aborted later
    log.data("plain")  # non-transactional
    log.data("a2", producer_id=7, transactional=True)
    log.data("b3", producer_id=8, transactional=True)
    log.marker(8, commit=False)
    log.marker(7, commit=True)
    log.data("idem", producer_id=8)  # idempotent, not transactional
    c_first = log.data("b4", producer_id=8, transactional=True)  # 8 again: a second, aborted txn
    log.data("a3", producer_id=7, transactional=True)
    log.marker(8, commit=False)
    log.marker(7, commit=False)  # 7's second txn aborted, unlisted
    assert a_first == 0
    aborted = [(8, b_first), (8, c_first)]
    assert kept_values(log.records(), aborted) == ["a1", "plain", "a2", "idem", "a3"]
    # read as read_uncommitted would (no list): everything but the markers
    assert kept_values(log.records(), []) == ["a1", "b1", "b2", "plain", "a2", "b3", "idem", "b4", "a3"]


def test_an_aborted_transaction_that_began_before_the_fetched_range():
    log = LogBuilder()
    log.next_offset = 100  # the fetch starts here; the transaction began at 90, before it
    log.data("x", producer_id=5, transactional=True)
    log.data("y", producer_id=6, transactional=True)
    log.marker(5, commit=False)
    log.data("z", producer_id=5, transactional=True)  # 5's next transaction: not aborted
    assert kept_values(log.records(), [(5, 90)]) == ["y", "z"]


def test_a_producer_whose_abort_marker_comes_in_a_later_fetch():
    log = LogBuilder()
    first = log.data("t1", "t2", producer_id=3, transactional=True)
    log.data("u", producer_id=4, transactional=True)
    log.data("t3", producer_id=3, transactional=True)
    assert kept_values(log.records(), [(3, first)]) == ["u"]
