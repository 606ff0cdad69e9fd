"""A transaction coordinator that stays the leader of its __transaction_state partition through a new
leader epoch finishes the transactions whose markers were still being written.

Found by the Iceberg chaos run (strom.chaos.iceberg, seed 5): a leader's clean restart removed it
from the ISR of the coordinator's state partition, which bumps that partition's leader epoch while
the coordinator keeps leading it. The markers of the commit just answered were still on their way
to the restarting broker; their writer saw "no longer the coordinator at this epoch" and stopped,
and nothing started them again, since only a change of leader reloads the partition. The
transaction stayed in PrepareCommit for good: its producer got CONCURRENT_TRANSACTIONS on every
later AddPartitionsToTxn until its messages timed out, and read_committed consumers (and the
Iceberg translation, which stops at the last stable offset) never saw the committed records.

Here the markers cannot be written for a while (the only replica of the topic's partition is
killed), the ISR of the state partition shrinks by the controlled shutdown of a follower (a new
leader epoch, the same leader), then the topic's broker comes back: the markers must be written.
"""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import create_topic, wait_until
from tests.integration.txn_support import read_confluent, txn_id

STATE = "__transaction_state"
OVERRIDES = {
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}


def test_markers_pending_across_a_new_leader_epoch_of_the_state_partition_are_written(cluster_factory):
    cluster = cluster_factory(3, OVERRIDES)
    create_topic(cluster, "warmup", partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id("bump")})
    producer.init_transactions(30)
    coordinator = cluster.leader(STATE, 0)
    topic_broker, follower = (b for b in cluster.brokers if b != coordinator)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("bump", num_partitions=1, replica_assignment=[[topic_broker]])])["bump"].result(30)
    wait_until(lambda: cluster.leader("bump", 0) == topic_broker, 20, "bump-0 led by its only replica")

    producer.begin_transaction()
    for i in range(10):
        producer.produce("bump", f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    cluster.kill(topic_broker)  # the markers for bump-0 cannot be written until it returns
    producer.commit_transaction(30)  # answered once PrepareCommit is written; the markers go on
    wait_until(lambda: cluster.leader("bump", 0) == -1, 20, "bump-0 offline")
    epoch = cluster.state(STATE, 0).leader_epoch

    cluster.brokers[follower].stop()  # controlled shutdown: out of the ISR, a new leader epoch
    state = wait_until(lambda: (s := cluster.state(STATE, 0)).leader_epoch > epoch and s, 20, "a new epoch")
    assert state.leader == coordinator, state  # the coordinator stays: no reload of its partition
    cluster.restart(follower)
    cluster.restart(topic_broker)
    wait_until(lambda: cluster.leader("bump", 0) == topic_broker, 30, "bump-0 back")

    # the commit's markers are written: read_committed sees the records, the producer goes on
    rows = read_confluent(cluster.bootstrap, {("bump", 0): 10}, "read_committed")[("bump", 0)]
    assert [value for _, value in rows] == [f"v{i}".encode() for i in range(10)]
    producer.begin_transaction()
    producer.produce("bump", b"after", partition=0)
    producer.commit_transaction(30)
    rows = read_confluent(cluster.bootstrap, {("bump", 0): 11}, "read_committed")[("bump", 0)]
    assert [value for _, value in rows][-1] == b"after"
