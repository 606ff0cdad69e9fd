"""A cluster with hundreds of partitions: creation, a record on every partition, and a kill -9.

The short, in-suite form of ``python -m strom.bench.partitions`` (10,000 partitions, outside CI).
What it guards is the metadata path at scale: a topic's partition states are created in
pipelined batches, a broker's death is answered with one batch of elections, and every broker
re-reads only the states that changed; a mistake there leaves partitions leaderless or a
broker's view stale, which a client notices as records it cannot write or read.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.conftest import SESSION_TIMEOUT_MS, create_topic, wait_until

TOPIC = "many"
PARTITIONS = 300


def leaders_seen_by(cluster, broker_id: int) -> dict[int, int]:
    """partition -> leader in one broker's Metadata answer (not ZooKeeper's), as a client sees it."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})
    topic = admin.list_topics(TOPIC, timeout=15).topics[TOPIC]
    return {p: meta.leader for p, meta in topic.partitions.items()}


def produce_one_per_partition(bootstrap: str, tag: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    failed: list[object] = []
    for p in range(PARTITIONS):
        producer.produce(TOPIC, tag + b"-%d" % p, partition=p, on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(60) == 0
    assert not failed, failed[:3]


def read_all(bootstrap: str, expected: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    found: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + 60
    count = 0
    while count < expected and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                found.setdefault(message.partition(), []).append(message.value())
                count += 1
    consumer.close()
    return found


def test_hundreds_of_partitions_survive_a_broker_kill(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    # every broker's own Metadata lists a leader for every partition
    for broker_id in cluster.brokers:
        wait_until(
            lambda b=broker_id: all(leader >= 0 for leader in leaders_seen_by(cluster, b).values()),
            30,
            f"broker {broker_id} to show a leader for each of {PARTITIONS} partitions",
        )
    produce_one_per_partition(cluster.bootstrap, b"before")

    victim = cluster.leader(TOPIC, 0)
    led_by_victim = [p for p, leader in leaders_seen_by(cluster, victim).items() if leader == victim]
    cluster.kill(victim)
    survivors = [b for b in cluster.brokers if b != victim]
    for broker_id in survivors:
        wait_until(
            lambda b=broker_id: all(
                leader >= 0 and leader != victim for leader in leaders_seen_by(cluster, b).values()
            ),
            SESSION_TIMEOUT_MS / 1000 + 30,
            f"broker {broker_id} to show live leaders for the {len(led_by_victim)} partitions {victim} led",
        )
    produce_one_per_partition(",".join(cluster.brokers[b].bootstrap for b in survivors), b"after")
    # The survivors took a new leader epoch for each of the ~100 partitions the victim led, their
    # checkpoints written off the event loop; a leader takes no append before its epoch is on disk,
    # so the "after" records acknowledged above prove that each leader's leader-epoch-checkpoint
    # ends with its epoch: starting at offset 1 (after "before") where the leader changed.
    for p in range(PARTITIONS):
        state = cluster.state(TOPIC, p)
        assert state is not None and state.leader in survivors
        text = (cluster.partition_dir(state.leader, TOPIC, p) / "leader-epoch-checkpoint").read_text()
        start = 1 if p in led_by_victim else 0
        assert text.splitlines()[-1] == f"{state.leader_epoch} {start}", (p, state, text)

    found = read_all(",".join(cluster.brokers[b].bootstrap for b in survivors), 2 * PARTITIONS)
    assert {p: values for p, values in found.items()} == {
        p: [b"before-%d" % p, b"after-%d" % p] for p in range(PARTITIONS)
    }
