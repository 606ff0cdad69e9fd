"""Fencing, timeouts and the coordinator's view of transactions, with real clients against real
strom brokers (issue 10, "Fencing and timeouts"): a second producer with the same
transactional.id fences the first, a stalled transaction is aborted by the coordinator, a
partition refuses transactional data the coordinator does not know about (KIP-890 part 1),
DescribeTransactions/ListTransactions/DescribeProducers through an admin client, and the state
surviving a broker restart and expiring when idle.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from tests.broker_process import BrokerProcess
from tests.group.support import create_topic, unique
from tests.integration.clients import WAIT_S, RawClient, wait_until
from tests.integration.txn_support import (
    INPUTS,
    TXN_BROKER,
    ConfluentTxnProducer,
    assert_only_successor_visible,
    assert_reads,
    describe,
    merge,
    offset_fetch,
    only,
    txn_broker,  # noqa: F401 - fixture
    txn_id,
    wait_committed,
)

pytestmark = pytest.mark.timeout(120)


# -- 5: fencing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("next_call", ["produce", "commit"])
def test_confluent_second_producer_fences_the_first(txn_broker, next_call):
    from confluent_kafka import KafkaError, KafkaException

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("fence"), 2)
    tid = txn_id("fence")
    zombie = ConfluentTxnProducer(bootstrap, tid)
    zombie.init_transactions(WAIT_S)
    zombie.begin_transaction()
    for p in range(2):
        for i in range(3):
            zombie.produce(topic, p, f"zombie {p} #{i}".encode())
    zombie.flush()
    before = describe(bootstrap, tid)
    assert before.state == "Ongoing"

    successor = ConfluentTxnProducer(bootstrap, tid)
    successor.init_transactions(WAIT_S)  # fences the zombie and aborts its open transaction
    after = describe(bootstrap, tid)
    assert after.producer_id == before.producer_id and after.producer_epoch > before.producer_epoch
    assert after.state == "Empty"

    with pytest.raises(KafkaException) as failure:
        if next_call == "produce":
            zombie.produce(topic, 0, b"zombie after the fence")  # refused: INVALID_PRODUCER_EPOCH
        zombie.commit_transaction(WAIT_S)
    error = failure.value.args[0]
    assert error.code() == KafkaError._FENCED and error.fatal(), error
    with pytest.raises(KafkaException):  # fatal: nothing works any more, not even abort
        zombie.abort_transaction(WAIT_S)

    assert_only_successor_visible(bootstrap, topic, 2, zombie.delivered, successor)


def test_kafka_python_producer_is_fenced(txn_broker):
    from kafka import KafkaProducer
    from kafka.errors import ProducerFencedError

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("kp-fence"), 1)
    tid = txn_id("kp-fence")
    zombie = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=tid, request_timeout_ms=WAIT_S * 1000, max_block_ms=WAIT_S * 1000
    )
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        meta = zombie.send(topic, b"zombie", partition=0).get(timeout=WAIT_S)
        successor = ConfluentTxnProducer(bootstrap, tid)
        successor.init_transactions(WAIT_S)
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
    finally:
        zombie.close(timeout=5)
    assert_only_successor_visible(bootstrap, topic, 1, {(topic, 0): [(meta.offset, b"zombie")]}, successor)


def test_aiokafka_producer_is_fenced(txn_broker):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("aio-fence"), 1)
    tid = txn_id("aio-fence")
    successor = ConfluentTxnProducer(bootstrap, tid)

    async def run() -> int:
        zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, request_timeout_ms=WAIT_S * 1000)
        await asyncio.wait_for(zombie.start(), WAIT_S)
        try:
            await zombie.begin_transaction()
            meta = await (await zombie.send(topic, b"zombie", partition=0))
            await asyncio.to_thread(successor.init_transactions, WAIT_S)
            with pytest.raises(ProducerFenced):
                await zombie.commit_transaction()
            return meta.offset
        finally:
            await asyncio.wait_for(zombie.stop(), WAIT_S)

    offset = asyncio.run(asyncio.wait_for(run(), 60))
    assert_only_successor_visible(bootstrap, topic, 1, {(topic, 0): [(offset, b"zombie")]}, successor)


# -- 6: timeouts -----------------------------------------------------------------------------------


def test_stalled_transaction_is_aborted_and_its_producer_fenced(txn_broker):
    """transaction.timeout.ms=1000 and a producer that then does nothing: the coordinator aborts the
    transaction (checking every 200 ms here) under a bumped epoch; the data never becomes visible
    to read_committed, its offsets are never committed, and the producer's late commit fails."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    from kafka import KafkaAdminClient

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("stall"), 2)
    tid = txn_id("stall")
    stalled = ConfluentTxnProducer(bootstrap, tid, **{"transaction.timeout.ms": 1000})
    group = unique("stall-group")
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    # connected before the transaction starts, so that everything up to the first describe is quick
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=WAIT_S * 1000)
    admin.list_transactions()
    try:
        stalled.init_transactions(WAIT_S)
        stalled.begin_transaction()
        try:
            stalled.send_offsets_to_transaction(
                [TopicPartition(topic, p, 7) for p in range(2)], member.consumer_group_metadata(), WAIT_S
            )
        finally:
            member.close()
        for p in range(2):
            for i in range(3):
                stalled.produce(topic, p, f"stalled {p} #{i}".encode())
        stalled.flush()
        began = admin.describe_transactions([tid])[tid]
        assert (began.state, began.transaction_timeout_ms) == ("Ongoing", 1000)
        offsets_partitions = {tp for tp in began.topic_partitions if tp.topic == "__consumer_offsets"}
        assert began.topic_partitions - offsets_partitions == {_kp_tp(topic, 0), _kp_tp(topic, 1)}
        assert len(offsets_partitions) == 1

        # the stall: the producer makes no call while the coordinator times the transaction out
        aborted = wait_until(
            lambda: (d := admin.describe_transactions([tid])[tid]).state == "CompleteAbort" and d,
            interval=0.2,
            what="the coordinator to abort the timed-out transaction",
        )
    finally:
        admin.close()
    assert aborted.producer_epoch == began.producer_epoch + 1 and aborted.topic_partitions == set()
    # the abort marker in __consumer_offsets dropped the pending offsets
    wait_until(
        lambda: offset_fetch(bootstrap, group, topic, True) == {0: (0, -1), 1: (0, -1)},
        what="the timed-out transaction's offsets to be dropped",
    )

    with pytest.raises(KafkaException) as failure:
        stalled.commit_transaction(WAIT_S)
    error = failure.value.args[0]
    # librdkafka: EndTxn answered PRODUCER_FENCED (the epoch was bumped by the abort) is fatal
    assert error.code() == KafkaError._FENCED and error.fatal(), error

    successor = ConfluentTxnProducer(bootstrap, tid)
    successor.init_transactions(WAIT_S)
    assert_only_successor_visible(bootstrap, topic, 2, stalled.delivered, successor)


def _kp_tp(topic: str, partition: int):
    from kafka import TopicPartition

    return TopicPartition(topic, partition)


def test_transaction_timeout_above_the_broker_maximum_is_refused(txn_broker):
    """transaction.max.timeout.ms is 900000 (Kafka's default): 900000 is accepted, 900001 refused."""
    from confluent_kafka import KafkaError, KafkaException

    bootstrap = txn_broker.bootstrap
    at_limit_id = txn_id("max-timeout")
    at_limit = ConfluentTxnProducer(bootstrap, at_limit_id, **{"transaction.timeout.ms": 900000})
    at_limit.init_transactions(WAIT_S)
    assert describe(bootstrap, at_limit_id).transaction_timeout_ms == 900000

    too_long = ConfluentTxnProducer(bootstrap, txn_id("too-long"), **{"transaction.timeout.ms": 900001})
    with pytest.raises(KafkaException) as failure:
        too_long.init_transactions(WAIT_S)
    error = failure.value.args[0]
    assert error.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT and error.fatal(), error


# -- 7: KIP-890 part 1, the partition leader verifies with the coordinator ---------------------------


def raw_until_ok(call, what: str):
    """Repeat a raw request while the broker answers a retriable coordinator error (as a client would)."""
    retriable = {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
    found = []

    def attempt():
        response = call()
        found.append(response)
        code = int(response.error_code)
        assert code == 0 or code in retriable, f"{what}: {ErrorCode(code).name} in {response}"
        return code == 0

    wait_until(attempt, what=what)
    return found[-1]


def txn_batch(values: list[bytes], producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    return build_batch(
        [NewRecord(v) for v in values],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=True,
    )


def raw_produce(client: RawClient, transactional_id: str, topic: str, batches: dict[int, bytes]) -> dict[int, tuple]:
    """One Produce v9 (acks=all) with a batch per partition: partition -> (error code, base offset)."""
    response = client.request(
        0,
        9,
        {
            "transactional_id": transactional_id,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": b} for p, b in batches.items()]}],
        },
    )
    [entry] = response.responses
    return {p.index: (int(p.error_code), p.base_offset) for p in entry.partition_responses}


def high_watermarks(client: RawClient, topic: str, partitions: int) -> list[int]:
    response = client.request(
        2,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1} for p in range(partitions)
                    ],
                }
            ],
        },
    )
    [entry] = response.topics
    return [p.offset for p in sorted(entry.partitions, key=lambda p: p.partition_index)]


def test_transactional_produce_to_a_partition_the_transaction_did_not_add_is_refused(txn_broker):
    """A producer that skips AddPartitionsToTxn (a buggy client, or a zombie's late batch) cannot
    start or extend a transaction on a partition: the leader asks the coordinator (KIP-890 part 1),
    answers INVALID_TXN_STATE and appends nothing."""
    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("kip890"), 2)
    tid = txn_id("kip890")
    with RawClient(bootstrap) as client:
        found = raw_until_ok(
            lambda: client.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0],
            "the transaction coordinator",
        )
        assert (found.node_id, f"{found.host}:{found.port}") == (0, bootstrap)
        init = raw_until_ok(
            lambda: client.request(
                22, 4, {"transactional_id": tid, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}
            ),
            "InitProducerId",
        )
        pid, epoch = init.producer_id, init.producer_epoch

        # no transaction at all yet: refused on both partitions
        refused = raw_produce(client, tid, topic, {p: txn_batch([b"never"], pid, epoch, 0) for p in range(2)})
        assert refused == {0: (ErrorCode.INVALID_TXN_STATE, -1), 1: (ErrorCode.INVALID_TXN_STATE, -1)}
        assert high_watermarks(client, topic, 2) == [0, 0]

        # the transaction adds partition 0 only: one request, partition 0 appended, partition 1 refused
        added = client.request(
            24,
            3,
            {
                "v3_and_below_transactional_id": tid,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
            },
        )
        [result] = added.results_by_topic_v3_and_below
        assert [(r.partition_index, int(r.partition_error_code)) for r in result.results_by_partition] == [(0, 0)]
        mixed = raw_produce(
            client,
            tid,
            topic,
            {0: txn_batch([b"added-0", b"added-1"], pid, epoch, 0), 1: txn_batch([b"not-added"], pid, epoch, 0)},
        )
        assert mixed == {0: (0, 0), 1: (ErrorCode.INVALID_TXN_STATE, -1)}
        assert high_watermarks(client, topic, 2) == [2, 0]

        raw_until_ok(
            lambda: client.request(
                26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True}
            ),
            "EndTxn",
        )
    assert_reads(bootstrap, {(topic, 0): [(0, b"added-0"), (1, b"added-1")]}, "read_committed")
    with RawClient(bootstrap) as client:
        wait_until(lambda: high_watermarks(client, topic, 2) == [3, 0], what="the commit marker on partition 0")


# -- 8: DescribeTransactions, ListTransactions, DescribeProducers through an admin client --------------


def test_describe_and_list_transactions_with_kafka_python_admin(txn_broker):
    """confluent-kafka 2.16's AdminClient has no transaction calls; kafka-python's (3.x) has them all."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import TransactionListing, TransactionState
    from kafka.errors import TransactionalIdNotFoundError

    bootstrap = txn_broker.bootstrap
    topic = create_topic(bootstrap, unique("describe"), 2)
    tid = txn_id("describe")
    producer = ConfluentTxnProducer(bootstrap, tid, **{"transaction.timeout.ms": 45000})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, 0, b"first")
    producer.produce(topic, 1, b"second")
    producer.flush()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        before_ms = int(time.time() * 1000)
        ongoing = admin.describe_transactions([tid])[tid]
        assert ongoing.coordinator_id == 0 and ongoing.state == TransactionState.ONGOING
        assert ongoing.transaction_timeout_ms == 45000 and 0 < ongoing.transaction_start_time_ms <= before_ms
        assert ongoing.topic_partitions == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert ongoing.producer_id >= 0 and ongoing.producer_epoch >= 0

        mine = TransactionListing(tid, ongoing.producer_id, TransactionState.ONGOING)
        assert mine in admin.list_transactions(state_filters=["Ongoing"])[0]
        assert admin.list_transactions(producer_id_filters=[ongoing.producer_id]) == {0: [mine]}
        assert mine not in admin.list_transactions(state_filters=["CompleteCommit"])[0]

        [state] = admin.describe_producers([TopicPartition(topic, 1)])[TopicPartition(topic, 1)].active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence) == (
            ongoing.producer_id,
            ongoing.producer_epoch,
            0,
        )
        assert state.current_transaction_start_offset == 0

        producer.commit_transaction(WAIT_S)
        done = wait_until(
            lambda: (d := admin.describe_transactions([tid])[tid]).state == TransactionState.COMPLETE_COMMIT and d,
            what="CompleteCommit",
        )
        assert (done.producer_id, done.producer_epoch, done.topic_partitions) == (
            ongoing.producer_id,
            ongoing.producer_epoch,
            set(),
        )
        assert mine not in admin.list_transactions(state_filters=["Ongoing"])[0]
        assert (
            TransactionListing(tid, ongoing.producer_id, TransactionState.COMPLETE_COMMIT)
            in admin.list_transactions(state_filters=["CompleteCommit"])[0]
        )
        [state] = admin.describe_producers([TopicPartition(topic, 1)])[TopicPartition(topic, 1)].active_producers
        assert state.current_transaction_start_offset == -1

        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions([txn_id("never-used")])
    finally:
        admin.close()


# -- a broker restart: the coordinator reloads its state, the partitions their transactions ------------


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_transactions_survive_a_broker_restart(tmp_path, how):
    """Committed stays committed, aborted stays aborted (.txnindex, producer state) and a transaction
    open across the restart is committed by its producer afterwards (the coordinator loaded it
    from __transaction_state)."""
    from confluent_kafka import Consumer, TopicPartition

    from strom.testing import Broker

    with Broker(tmp_path / "broker", TXN_BROKER) as broker:
        bootstrap = broker.bootstrap_servers
        topic = create_topic(bootstrap, unique("restart"), 2)
        tid = txn_id("restart")
        producer = ConfluentTxnProducer(bootstrap, tid)
        producer.init_transactions(WAIT_S)
        for label, outcome in (("committed-1", True), ("aborted", False), ("committed-2", None)):
            producer.begin_transaction()
            for p in range(2):
                for i in range(2):
                    producer.produce(topic, p, f"{label} {p} #{i}".encode())
            producer.flush()
            if outcome is True:
                producer.commit_transaction(WAIT_S)
            elif outcome is False:
                producer.abort_transaction(WAIT_S)
        # the open transaction also holds a group's offsets (pending in __consumer_offsets)
        group = unique("restart-group")
        group_member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, p, 2 + p) for p in range(2)], group_member.consumer_group_metadata(), WAIT_S
            )
        finally:
            group_member.close()
        assert describe(bootstrap, tid).state == "Ongoing"
        unstable = {p: (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1) for p in range(INPUTS)}
        assert offset_fetch(bootstrap, group, topic, True) == unstable

        if how == "clean":
            broker.restart()
        else:
            broker.kill()
            broker.start()
        assert describe(bootstrap, tid).state == "Ongoing"
        assert offset_fetch(bootstrap, group, topic, True) == unstable
        producer.commit_transaction(WAIT_S)
        wait_committed(bootstrap, group, topic, {0: 2, 1: 3})

        everything = merge(producer.delivered)
        for p in range(2):
            assert [o for o, _ in everything[(topic, p)]] == [0, 1, 3, 4, 6, 7]
        for reader in ("confluent-kafka", "kafka-python"):
            assert_reads(bootstrap, only(everything, b"committed"), "read_committed", reader)
            assert_reads(bootstrap, everything, "read_uncommitted", reader)


def test_idle_transactional_id_expires(tmp_path):
    """transactional.id.expiration.ms: an id idle that long is forgotten (a tombstone in
    __transaction_state); the next init_transactions for it starts from scratch."""
    from kafka.errors import TransactionalIdNotFoundError

    overrides = {
        **TXN_BROKER,
        "transactional.id.expiration.ms": "2000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
    }
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        bootstrap = broker.bootstrap
        topic = create_topic(bootstrap, unique("expire"), 1)
        tid = txn_id("expire")
        producer = ConfluentTxnProducer(bootstrap, tid)
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.produce(topic, 0, b"before expiry")
        producer.commit_transaction(WAIT_S)
        first = describe(bootstrap, tid)

        def forgotten() -> bool:
            try:
                describe(bootstrap, tid)
            except TransactionalIdNotFoundError:
                return True
            return False

        wait_until(forgotten, interval=0.2, what="the idle transactional id to expire")
        broker.restart()  # the tombstone is what a reloading coordinator sees: the id stays forgotten
        bootstrap = broker.bootstrap
        assert forgotten()
        again = ConfluentTxnProducer(bootstrap, tid)
        again.init_transactions(WAIT_S)
        fresh = describe(bootstrap, tid)
        assert fresh.state == "Empty" and fresh.producer_epoch == 0 and fresh.producer_id != first.producer_id
        again.begin_transaction()
        again.produce(topic, 0, b"after expiry")
        again.commit_transaction(WAIT_S)
        assert_reads(bootstrap, merge(producer.delivered, again.delivered), "read_committed")
