"""Transactions v2 (KIP-890 part 2) with raw requests: no client installed here negotiates it
(librdkafka, kafka-python and aiokafka stop at EndTxn v4 or below), so these tests speak as a
Kafka 4.x Java producer does once transaction.version 2 is finalized: InitProducerId, then
Produce v12 with no AddPartitionsToTxn (the write adds its partition), TxnOffsetCommit v5 with no
AddOffsetsToTxn, and EndTxn v5, whose answer carries the producer epoch bumped for the next
transaction. Read with confluent-kafka's read_committed consumer. The three-broker case, where the
coordinator is not the partition's leader, is in tests/cluster/test_transactions_v2_cluster.py.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient, unique_topic
from tests.integration.tv2_support import TxnProducer
from tests.integration.txn_support import TXN_BROKER, read_confluent, txn_id


@pytest.fixture(scope="module")
def tv2_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("tv2") / "data", TXN_BROKER) as process:
        yield process


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(WAIT_S)


def values(rows) -> dict[int, list[bytes]]:
    return {p: [v for _, v in items] for (_, p), items in rows.items()}


def test_commit_and_abort_bump_the_epoch_and_read_committed_sees_the_commits(tv2_broker):
    topic = unique_topic("tv2")
    create(tv2_broker.bootstrap, topic)
    producer = TxnProducer(tv2_broker.bootstrap, txn_id("tv2"))
    try:
        first_epoch = producer.epoch
        # no AddPartitionsToTxn: the writes add their partitions
        assert producer.produce(topic, 0, [b"c1-a", b"c1-b"])[0] == ErrorCode.NONE
        assert producer.produce(topic, 1, [b"c1-c"])[0] == ErrorCode.NONE
        committed = producer.end(commit=True)
        assert (committed.error_code, committed.producer_epoch) == (ErrorCode.NONE, first_epoch + 1)

        assert producer.produce(topic, 0, [b"a2-a"])[0] == ErrorCode.NONE  # epoch + 1, sequence 0
        aborted = producer.end(commit=False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.NONE, first_epoch + 2)

        assert producer.produce(topic, 1, [b"c3-a"])[0] == ErrorCode.NONE
        assert producer.end(commit=True).producer_epoch == first_epoch + 3
        # a retried EndTxn (its answer lost) with the epoch before the bump gets the same answer
        retried = producer.end(commit=True, epoch=first_epoch + 2)
        assert (retried.error_code, retried.producer_epoch) == (ErrorCode.NONE, first_epoch + 3)
        # aborting when nothing was added only bumps the epoch (transactions v2 allows it)
        assert producer.end(commit=False).producer_epoch == first_epoch + 4
        assert producer.end(commit=True).error_code == ErrorCode.INVALID_TXN_STATE  # nothing to commit
    finally:
        producer.close()
    want = {0: 3, 1: 2}
    committed_rows = read_confluent(tv2_broker.bootstrap, {(topic, 0): want[0], (topic, 1): want[1]}, "read_committed")
    assert values(committed_rows) == {0: [b"c1-a", b"c1-b"], 1: [b"c1-c", b"c3-a"]}
    everything = read_confluent(tv2_broker.bootstrap, {(topic, 0): 3, (topic, 1): 2}, "read_uncommitted")
    assert values(everything) == {0: [b"c1-a", b"c1-b", b"a2-a"], 1: [b"c1-c", b"c3-a"]}


def test_a_zombie_with_the_epoch_before_the_bump_is_fenced(tv2_broker):
    topic = unique_topic("tv2z")
    create(tv2_broker.bootstrap, topic)
    producer = TxnProducer(tv2_broker.bootstrap, txn_id("tv2z"))
    try:
        old = producer.epoch
        assert producer.produce(topic, 0, [b"ok"])[0] == ErrorCode.NONE
        assert producer.end(commit=True).error_code == ErrorCode.NONE
        producer.wait_markers()  # before them a late write of the old epoch still joins its own transaction
        # the zombie still has the old epoch: the partition it wrote saw the marker's new epoch,
        # the one it did not write asks the coordinator, which knows the new one
        zombie_sequences = dict(producer.sequences)
        producer.sequences = {(topic, 0): 1}
        assert producer.produce(topic, 0, [b"zombie"], epoch=old)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        producer.sequences = {}
        assert producer.produce(topic, 1, [b"zombie"], epoch=old)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        producer.sequences = zombie_sequences
        # its abort is no retry of the commit: fenced (a commit with the old epoch would be taken
        # for a retry whose answer was lost, and answered as the commit was, as Kafka does)
        assert producer.end(commit=False, epoch=old).error_code == ErrorCode.PRODUCER_FENCED
        # the live producer carries on
        assert producer.produce(topic, 1, [b"live"])[0] == ErrorCode.NONE
        assert producer.end(commit=True).error_code == ErrorCode.NONE
    finally:
        producer.close()
    rows = read_confluent(tv2_broker.bootstrap, {(topic, 0): 1, (topic, 1): 1}, "read_committed")
    assert values(rows) == {0: [b"ok"], 1: [b"live"]}


def test_a_timed_out_transaction_is_aborted_and_its_producer_carries_on(tv2_broker):
    """Transactions v2: the coordinator aborts a transaction past its timeout under the next epoch;
    the producer's writes of the old epoch are refused, and its abort is answered the new epoch
    (in transactions v1 the producer is fenced for good)."""
    topic = unique_topic("tv2t")
    create(tv2_broker.bootstrap, topic, 1)
    producer = TxnProducer(tv2_broker.bootstrap, txn_id("tv2t"), timeout_ms=1000)
    try:
        old = producer.epoch
        assert producer.produce(topic, 0, [b"timed-out"])[0] == ErrorCode.NONE
        producer.wait_markers()  # the coordinator's own abort, a second later
        assert producer.produce(topic, 0, [b"late"])[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        aborted = producer.end(commit=False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.NONE, old + 1)
        assert producer.produce(topic, 0, [b"next"])[0] == ErrorCode.NONE
        assert producer.end(commit=True).error_code == ErrorCode.NONE
    finally:
        producer.close()
    rows = read_confluent(tv2_broker.bootstrap, {(topic, 0): 1}, "read_committed")
    assert values(rows) == {0: [b"next"]}


def test_txn_offset_commit_v5_adds_the_group_partition_itself(tv2_broker):
    from confluent_kafka import Consumer

    topic = unique_topic("tv2o")
    create(tv2_broker.bootstrap, topic, 1)
    group = txn_id("tv2-group")
    producer = TxnProducer(tv2_broker.bootstrap, txn_id("tv2o"))
    try:
        assert producer.produce(topic, 0, [b"x"])[0] == ErrorCode.NONE
        assert producer.commit_offsets(group, topic, 7) == ErrorCode.NONE  # no AddOffsetsToTxn
        assert producer.end(commit=False).error_code == ErrorCode.NONE
        assert producer.commit_offsets(group, topic, 42) == ErrorCode.NONE
        assert producer.end(commit=True).error_code == ErrorCode.NONE
    finally:
        producer.close()
    consumer = Consumer({"bootstrap.servers": tv2_broker.bootstrap, "group.id": group})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
        assert committed.offset == 42  # the aborted 7 never counted
    finally:
        consumer.close()


def test_below_transaction_version_2_a_v12_write_must_be_added_first(tv2_broker):
    """Produce v12 adds its partition only where transaction.version 2 is finalized."""
    topic = unique_topic("tv1")
    create(tv2_broker.bootstrap, topic, 1)

    def set_level(level: int, upgrade_type: int) -> None:
        with RawClient(tv2_broker.bootstrap) as client:
            answer = client.request(
                ApiKey.UPDATE_FEATURES,
                2,
                {
                    "timeout": 5000,
                    "feature_updates": [
                        {"feature": "transaction.version", "max_version_level": level, "upgrade_type": upgrade_type}
                    ],
                },
            )
        assert answer.error_code == ErrorCode.NONE

    set_level(1, 2)
    try:
        producer = TxnProducer(tv2_broker.bootstrap, txn_id("tv1"))
        try:
            assert producer.produce(topic, 0, [b"unadded"])[0] == ErrorCode.INVALID_TXN_STATE
        finally:
            producer.close()
    finally:
        set_level(2, 1)
