"""Deleting a topic deletes the groups' committed offsets for it, as Kafka does.

A user notices this when a topic is re-created under the same name: the group must start from
auto.offset.reset, not from an offset into the log that was deleted. The offsets of the group's
other topics stay, and the removal survives a restart (it is written as tombstones).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess

WAIT_S = 30
OFFSET_INVALID = -1001  # librdkafka's "no committed offset"


def _create(admin: AdminClient, *topics: str) -> None:
    for future in admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1) for t in topics]).values():
        future.result(WAIT_S)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(WAIT_S) == 0


def _committed(bootstrap: str, group: str, topics: list[str]) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        result = consumer.committed([TopicPartition(t, 0) for t in topics], timeout=WAIT_S)
        return {tp.topic: tp.offset for tp in result}
    finally:
        consumer.close()


def _wait_committed(bootstrap: str, group: str, topics: list[str], expected: dict[str, int]) -> dict[str, int]:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = _committed(bootstrap, group, topics)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_deleting_a_topic_deletes_its_committed_offsets(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "doomed", "kept")
        _produce(broker.bootstrap, "doomed", 10)
        _produce(broker.bootstrap, "kept", 10)
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        committer.commit(offsets=[TopicPartition("doomed", 0, 7), TopicPartition("kept", 0, 4)], asynchronous=False)
        committer.close()
        assert _committed(broker.bootstrap, "g", ["doomed", "kept"]) == {"doomed": 7, "kept": 4}

        admin.delete_topics(["doomed"])["doomed"].result(WAIT_S)
        _create(admin, "doomed")  # same name, a new topic id and an empty log

        expected = {"doomed": OFFSET_INVALID, "kept": 4}
        assert _wait_committed(broker.bootstrap, "g", ["doomed", "kept"], expected) == expected

        # a consumer of the re-created topic starts from auto.offset.reset, not from offset 7
        _produce(broker.bootstrap, "doomed", 3)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["doomed"])
        values = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append((message.offset(), message.value()))
        consumer.close()
        assert values == [(0, b"doomed-0"), (1, b"doomed-1"), (2, b"doomed-2")]

        # the tombstones are in __consumer_offsets: a restart does not bring the old offset back
        broker.restart()
        assert _wait_committed(broker.bootstrap, "g", ["doomed", "kept"], expected) == expected
