"""An idempotent batch refused by a broker that did not lead yet, and the batch behind it.

The fault campaign's case, built on purpose on a two-broker cluster with raw requests: a producer
sends its next batch to the follower (clients can learn a new leader before the leader does) and
is refused NOT_LEADER_OR_FOLLOWER; the follower then becomes leader, and the producer's following
batch arrives past the sequence its log expects. Kafka answers that OUT_OF_ORDER_SEQUENCE_NUMBER,
on which librdkafka bumps its producer epoch and can write other batches twice
(strom/server/refused_batches.py). strom answers it NOT_LEADER_OR_FOLLOWER, as the batch before
it, and the producer's resends land once each, in order.
"""

from __future__ import annotations

from confluent_kafka.admin import NewTopic

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from strom.testing import Cluster
from tests.integration.clients import LATEST, TS_BASE, WAIT_S, RawClient, raw_init_producer_id, raw_list_offsets
from tests.integration.test_leader_discovery import _address, _state


def _produce(address: str, topic: str, records: bytes) -> tuple[int, int, str | None]:
    """(error code, base offset, error message) of an acks=all produce to one broker."""
    with RawClient(address) as client:
        answer = client.request(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 10_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
            },
        )
    partition = answer.responses[0].partition_responses[0]
    return int(partition.error_code), partition.base_offset, partition.error_message


def test_the_batch_behind_one_refused_before_a_leader_change_is_refused_the_same_way(tmp_path):
    with Cluster(tmp_path, size=2) as cluster:
        first, second = cluster.broker_ids
        topic = "refused-then-led"
        new_topic = NewTopic(topic, num_partitions=1, replica_assignment=[[first, second]])
        cluster.admin.create_topics([new_topic])[topic].result(WAIT_S)
        cluster.wait_for_isr(topic, WAIT_S, replicas=2)
        assert _state(cluster, topic, _address(cluster, first))[0] == first
        with RawClient(_address(cluster, first)) as client:
            producer_id, epoch = raw_init_producer_id(client)

        def batch(first_sequence: int, n: int) -> bytes:
            records = [NewRecord(b"v%d" % (first_sequence + i), timestamp=TS_BASE) for i in range(n)]
            return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=first_sequence)

        assert _produce(_address(cluster, first), topic, batch(0, 3))[:2] == (ErrorCode.NONE, 0)
        follower = _address(cluster, second)
        assert _state(cluster, topic, follower)[0] == first
        assert _produce(follower, topic, batch(3, 2))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER

        cluster.restart(first)  # controlled shutdown hands the leadership to the follower
        assert _state(cluster, topic, follower)[0] == second
        error, _offset, message = _produce(follower, topic, batch(5, 1))
        assert error == ErrorCode.NOT_LEADER_OR_FOLLOWER, message
        assert "sequence 5 follows sequences 3..4" in message
        # once: the same batch again is out of order, as in Kafka
        assert _produce(follower, topic, batch(5, 1))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # the producer's resends, in order, land once each
        assert _produce(follower, topic, batch(3, 2))[:2] == (ErrorCode.NONE, 3)
        assert _produce(follower, topic, batch(5, 1))[:2] == (ErrorCode.NONE, 5)
        with RawClient(follower) as client:
            assert raw_list_offsets(client, topic, LATEST)[:2] == (0, 6)
