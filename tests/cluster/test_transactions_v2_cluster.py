"""Transactions v2 (KIP-890 part 2) on three brokers and ZooKeeper, with raw requests (see
tests/integration/tv2_support.py): the partitions' leaders are not the coordinator, so each write
asks the coordinator on another broker to add its partition (AddPartitionsToTxn v5, verify_only
false); the group's offsets are committed by TxnOffsetCommit v5 alone; and the coordinator is
killed after EndTxn's answer, maybe before its markers: the new one loads the transaction with
its bumped epoch (a v1 __transaction_state record), finishes it, and the producer goes on with
the epoch it was answered.
"""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.cluster.conftest import SESSION_TIMEOUT_MS, create_topic
from tests.integration.clients import RawClient, wait_until
from tests.integration.tv2_support import TxnProducer
from tests.integration.txn_support import read_confluent, txn_id

OVERRIDES = {
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 15


def test_writes_add_their_partitions_across_brokers_and_survive_a_coordinator_kill(cluster_factory):
    cluster = cluster_factory(3, OVERRIDES)
    topic = "tv2-cluster"
    create_topic(cluster, topic, partitions=3, replication_factor=3)
    producer = TxnProducer(cluster.bootstrap, txn_id("tv2c"))
    group = txn_id("tv2c-group")
    try:
        coordinator = next(i for i, c in producer.clients.items() if c is producer.client)
        leaders = {p: producer.leader(topic, p) for p in range(3)}
        assert any(client is not producer.client for client in leaders.values()), "every leader is the coordinator"
        epoch = producer.epoch
        for p in range(3):
            assert producer.produce(topic, p, [b"c1-%d" % p])[0] == ErrorCode.NONE
        # TxnOffsetCommit v5 to the group's coordinator, which adds its partition itself
        assert producer.commit_offsets(group, topic, 5) == ErrorCode.NONE
        assert producer.end(commit=True).producer_epoch == epoch + 1
        producer.wait_markers()
        for p in range(3):
            assert producer.produce(topic, p, [b"a2-%d" % p])[0] == ErrorCode.NONE
        assert producer.end(commit=False).producer_epoch == epoch + 2
        producer.wait_markers()
        # a zombie of the first epoch on a partition it wrote and on one whose leader is elsewhere
        saved = producer.sequences
        producer.sequences = {}
        for p in range(3):
            assert producer.produce(topic, p, [b"zombie"], epoch=epoch)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        producer.sequences = saved

        for p in range(3):
            assert producer.produce(topic, p, [b"c3-%d" % p])[0] == ErrorCode.NONE
        answered = producer.end(commit=True)
        assert (answered.error_code, answered.producer_epoch) == (ErrorCode.NONE, epoch + 3)
        cluster.kill(coordinator)  # maybe before its markers: the next coordinator finishes them
        producer.client.close()
        del producer.clients[coordinator]
        survivors = [i for i in cluster.brokers if i != coordinator]
        producer.bootstrap.close()
        producer.bootstrap = RawClient(cluster.brokers[survivors[0]].bootstrap)

        def new_coordinator() -> bool:
            try:  # until FindCoordinator names a live broker
                producer.client = producer.coordinator(1, producer.transactional_id)
            except (AssertionError, OSError):
                producer.clients.pop(coordinator, None)
                return False
            return True

        wait_until(new_coordinator, FAILOVER_S, what="a new transaction coordinator")

        def next_transaction_started() -> bool:
            code = producer.produce(topic, survivor_partition, [b"c4"])[0]
            return code == ErrorCode.NONE

        survivor_partition = next(
            p
            for p in range(3)
            if producer.bootstrap.request(ApiKey.METADATA, 12, {"topics": [{"name": topic}]})
            .topics[0]
            .partitions[p]
            .leader_id
            in survivors
        )
        wait_until(next_transaction_started, FAILOVER_S, what="the next transaction's first write")
        assert producer.end(commit=True).producer_epoch == epoch + 4
    finally:
        producer.close()
    want = {(topic, p): 2 + (p == survivor_partition) for p in range(3)}
    rows = read_confluent(",".join(cluster.brokers[i].bootstrap for i in survivors), want, "read_committed")
    for p in range(3):
        expected = [b"c1-%d" % p, b"c3-%d" % p] + ([b"c4"] if p == survivor_partition else [])
        assert [v for _, v in rows[(topic, p)]] == expected
    consumer = Consumer(
        {"bootstrap.servers": ",".join(cluster.brokers[i].bootstrap for i in survivors), "group.id": group}
    )
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert committed.offset == 5
    finally:
        consumer.close()
