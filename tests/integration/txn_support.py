"""Helpers for the transaction tests with real clients: a broker set up for them, a confluent-kafka
transactional producer that remembers where its records landed, the read loops of four
clients (confluent-kafka, kafka-python, aiokafka, kcat), and the group-offset and DescribeTransactions
checks. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest

from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.group.support import committed, unique
from tests.integration.clients import WAIT_S, RawClient, kcat_consume, wait_until

# Small internal topics (their first use creates every partition) and a coordinator that looks
# for timed-out transactions five times a second, so that the timeout tests end in seconds.
TXN_BROKER = {
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}

# librdkafka's log (the fenced producers' fatal errors, reconnects after a broker stops) goes to
# logging, which pytest captures, rather than to stderr
LIBRDKAFKA_LOG = logging.getLogger("tests.integration.transactions.librdkafka")

TP = tuple[str, int]
Rows = dict[TP, list[tuple[int, bytes]]]


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("txn") / "data", TXN_BROKER) as process:
        yield process


def txn_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- a confluent-kafka transactional producer that remembers where each record landed --------------


class ConfluentTxnProducer:
    """librdkafka's transactional producer; ``delivered`` maps each partition to its (offset, value) reports."""

    def __init__(self, bootstrap: str, transactional_id: str, **config: Any):
        from confluent_kafka import Producer

        self.errors: list[Any] = []
        self.delivered: Rows = {}
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": transactional_id,
                "linger.ms": 5,
                "error_cb": self.errors.append,
                "logger": LIBRDKAFKA_LOG,
                **config,
            }
        )

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.delivered.setdefault((msg.topic(), msg.partition()), []).append((msg.offset(), msg.value()))

    def produce(self, topic: str, partition: int, value: bytes) -> None:
        self.producer.produce(topic, value, partition=partition, on_delivery=self._on_delivery)

    def flush(self) -> None:
        """Every record so far written to its partition: abort_transaction would purge unsent ones."""
        assert self.producer.flush(WAIT_S) == 0, "records not delivered"
        assert not self.errors, f"delivery errors: {self.errors[:3]}"

    def __getattr__(self, name: str):
        return getattr(self.producer, name)


def merge(*parts: Rows) -> Rows:
    out: Rows = {}
    for rows in parts:
        for tp, items in rows.items():
            out.setdefault(tp, []).extend(items)
    return {tp: sorted(items) for tp, items in out.items()}


def only(rows: Rows, prefix: bytes) -> Rows:
    return {tp: [(o, v) for o, v in items if v.startswith(prefix)] for tp, items in rows.items()}


# -- four clients' consumers ----------------------------------------------------------------------


# Small enough that a partition's transactions span many fetches: each response must list the
# aborted transactions overlapping its own range.
SMALL_FETCH_BYTES = 600


def read_confluent(bootstrap: str, want: dict[TP, int], isolation: str, small: bool = False) -> Rows:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("unused"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": False,
            **({"max.partition.fetch.bytes": SMALL_FETCH_BYTES} if small else {}),
        }
    )
    out: Rows = {tp: [] for tp in want}
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in want])
        deadline = time.monotonic() + WAIT_S
        while any(len(out[tp]) < n for tp, n in want.items()) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer error: {msg.error()}"
            out[(msg.topic(), msg.partition())].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def read_kafka_python(bootstrap: str, want: dict[TP, int], isolation: str, small: bool = False) -> Rows:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
        **({"max_partition_fetch_bytes": SMALL_FETCH_BYTES} if small else {}),
    )
    out: Rows = {tp: [] for tp in want}
    try:
        consumer.assign([TopicPartition(t, p) for t, p in want])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + WAIT_S
        while any(len(out[tp]) < n for tp, n in want.items()) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                out[(tp.topic, tp.partition)] += [(r.offset, r.value) for r in records]
    finally:
        consumer.close()
    return out


def read_aiokafka(bootstrap: str, want: dict[TP, int], isolation: str, small: bool = False) -> Rows:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> Rows:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=isolation,
            **({"max_partition_fetch_bytes": SMALL_FETCH_BYTES} if small else {}),
        )
        await asyncio.wait_for(consumer.start(), WAIT_S)
        out: Rows = {tp: [] for tp in want}
        try:
            consumer.assign([TopicPartition(t, p) for t, p in want])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + WAIT_S
            while any(len(out[tp]) < n for tp, n in want.items()) and time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    out[(tp.topic, tp.partition)] += [(r.offset, r.value) for r in records]
        finally:
            await asyncio.wait_for(consumer.stop(), WAIT_S)
        return out

    return asyncio.run(run())


def read_kcat(bootstrap: str, want: dict[TP, int], isolation: str, small: bool = False) -> Rows:
    """Debian's kcat (librdkafka 2.0.2) to the end of each partition (-e), which under read_committed
    is the LSO: repeated until the commit markers have moved it far enough."""
    extra = ["-X", f"isolation.level={isolation}"]
    if small:
        extra += ["-X", f"max.partition.fetch.bytes={SMALL_FETCH_BYTES}"]
    out: Rows = {}
    for (topic, partition), count in want.items():

        def read():
            got = kcat_consume(bootstrap, topic, partition, "beginning", *extra)
            return got if len(got) >= count else None

        out[(topic, partition)] = [(m.offset, m.value) for m in wait_until(read, what=f"kcat {topic}/{partition}")]
    return out


READERS = {
    "confluent-kafka": read_confluent,
    "kafka-python": read_kafka_python,
    "aiokafka": read_aiokafka,
    "kcat": read_kcat,
}


def assert_reads(
    bootstrap: str, expected: Rows, isolation: str, reader: str = "confluent-kafka", small: bool = False
) -> None:
    """The reader gets exactly ``expected``: the same records at the same offsets, in order, and nothing else."""
    got = READERS[reader](bootstrap, {tp: len(rows) for tp, rows in expected.items()}, isolation, small)
    for tp in sorted(expected):
        assert got[tp] == expected[tp], f"{reader} {isolation} {tp}: got {got[tp]}, expected {expected[tp]}"


# -- group offsets ---------------------------------------------------------------------------------

INPUTS = 2  # partitions of the topics whose group offsets the tests commit


def offset_fetch(bootstrap: str, group: str, topic: str, require_stable: bool) -> dict[int, tuple[int, int]]:
    """OffsetFetch v7 as a read_committed consumer sends it: partition -> (error code, committed offset)."""
    with RawClient(bootstrap) as client:
        response = client.request(
            9,
            7,
            {
                "group_id": group,
                "require_stable": require_stable,
                "topics": [{"name": topic, "partition_indexes": list(range(INPUTS))}],
            },
        )
    assert int(response.error_code) == 0, response
    [entry] = response.topics
    return {p.partition_index: (int(p.error_code), p.committed_offset) for p in entry.partitions}


def pending_offsets(bootstrap: str, group: str, topic: str, stable: dict[int, int]) -> None:
    """While a transaction holds offsets for the group: require_stable gets UNSTABLE_OFFSET_COMMIT,
    a plain fetch the offsets committed before it (``stable``; -1 for none)."""
    unstable = ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert offset_fetch(bootstrap, group, topic, True) == {p: (unstable, -1) for p in range(INPUTS)}
    assert offset_fetch(bootstrap, group, topic, False) == {p: (0, stable[p]) for p in range(INPUTS)}


def wait_committed(bootstrap: str, group: str, topic: str, expected: dict[int, int]) -> None:
    """The group's offsets as confluent-kafka sees them, once the markers have made them stable."""
    wait_until(
        lambda: offset_fetch(bootstrap, group, topic, True) == {p: (0, o) for p, o in expected.items()},
        what=f"committed offsets {expected}",
    )
    assert committed(bootstrap, group, topic, INPUTS) == expected


# -- transactional ids ---------------------------------------------------------------------------


def describe(bootstrap: str, transactional_id: str):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        return admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()


def assert_only_successor_visible(
    bootstrap: str, topic: str, partitions: int, zombie: Rows, successor: ConfluentTxnProducer
) -> None:
    """The successor commits one record per partition: read_committed gets only those, read_uncommitted
    the zombie's records as well (they were written, then aborted)."""
    successor.begin_transaction()
    for p in range(partitions):
        successor.produce(topic, p, f"successor {p}".encode())
    successor.commit_transaction(WAIT_S)
    assert_reads(bootstrap, merge(successor.delivered), "read_committed")
    assert_reads(bootstrap, merge(zombie, successor.delivered), "read_uncommitted")
    for p in range(partitions):
        [(offset, _)] = successor.delivered[(topic, p)]
        zombie_offsets = [o for o, _ in zombie.get((topic, p), [])]
        # the zombie's records, the abort marker written when the successor fenced it, then the successor's
        assert offset == len(zombie_offsets) + 1 and zombie_offsets == list(range(len(zombie_offsets)))
