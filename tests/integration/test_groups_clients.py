"""kafka-python and aiokafka group consumers: they join groups, share partitions and commit offsets
that confluent-kafka then reads back, so the group protocol does not depend on one client library.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.group.support import (
    WAIT_S,
    Member,
    committed,
    create_topic,
    poll_all,
    produce,
    unique,
    wait_until,
)
from tests.integration.clients import kafka_python_subscribed

pytestmark = pytest.mark.timeout(90)

FAST = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}


def test_kafka_python_group_consumer_commits(broker):
    topic = create_topic(broker.bootstrap, unique("kp"), 3)
    group = unique("g")
    produce(broker.bootstrap, topic, [f"kp{i}".encode() for i in range(30)], partitions=3)
    consumer = kafka_python_subscribed(
        [topic],
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        client_id="kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **FAST,
    )
    try:
        seen = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 30 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen += [r.value for r in records]
        assert sorted(seen) == sorted(f"kp{i}".encode() for i in range(30))
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
        consumer.commit()  # synchronous
    finally:
        consumer.close()
    assert committed(broker.bootstrap, group, topic, 3) == {0: 10, 1: 10, 2: 10}


def test_aiokafka_group_consumer_commits(broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    topic = create_topic(broker.bootstrap, unique("aio"), 3)
    group = unique("g")
    produce(broker.bootstrap, topic, [f"aio{i}".encode() for i in range(30)], partitions=3)

    async def consume():
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            client_id="aiokafka",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **FAST,
        )
        await consumer.start()
        try:
            seen = []
            deadline = time.monotonic() + WAIT_S
            while len(seen) < 30 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    seen += [r.value for r in records]
            assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
            await consumer.commit({TopicPartition(topic, 0): 4})  # explicit offsets
            await consumer.commit()  # then the positions, overriding partition 0
            await consumer.commit({TopicPartition(topic, 2): 6})
            return seen
        finally:
            await consumer.stop()

    seen = asyncio.run(asyncio.wait_for(consume(), 30))
    assert sorted(seen) == sorted(f"aio{i}".encode() for i in range(30))
    assert committed(broker.bootstrap, group, topic, 3) == {0: 10, 1: 10, 2: 6}


class KafkaPythonThread(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str):
        super().__init__(daemon=True)
        self.args = (bootstrap, group, topic)
        self.stop = threading.Event()
        self.assigned: set[int] = set()
        self.values: list[bytes] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        bootstrap, group, topic = self.args
        try:
            consumer = kafka_python_subscribed(
                [topic],
                bootstrap_servers=bootstrap,
                group_id=group,
                client_id="kafka-python",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                **FAST,
            )
            try:
                while not self.stop.is_set():
                    for records in consumer.poll(timeout_ms=100).values():
                        self.values += [r.value for r in records]
                        consumer.commit()
                    self.assigned = {tp.partition for tp in consumer.assignment()}
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


class AiokafkaThread(KafkaPythonThread):
    def run(self) -> None:
        try:
            asyncio.run(self._consume())
        except BaseException as exc:
            self.error = exc

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer

        bootstrap, group, topic = self.args
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="aiokafka",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **FAST,
        )
        await consumer.start()
        try:
            while not self.stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    self.values += [r.value for r in records]
                if batch:
                    await consumer.commit()
                self.assigned = {tp.partition for tp in consumer.assignment()}
        finally:
            await consumer.stop()


def test_three_client_libraries_share_one_group(broker):
    """confluent-kafka, kafka-python and aiokafka in one group: the broker picks the protocol they all
    support (roundrobin), each gets two of six partitions, and together they commit everything."""
    from confluent_kafka.admin import AdminClient

    topic = create_topic(broker.bootstrap, unique("mixed"), 6)
    group = unique("g")
    threads = [KafkaPythonThread(broker.bootstrap, group, topic), AiokafkaThread(broker.bootstrap, group, topic)]
    for thread in threads:
        thread.start()
    member = Member(broker.bootstrap, group, topic, "confluent")
    try:

        def settled() -> bool:
            owned = [member.owned] + [t.assigned for t in threads]
            assert not any(t.error for t in threads), [t.error for t in threads]
            return sorted(len(o) for o in owned) == [2, 2, 2] and set().union(*owned) == set(range(6))

        wait_until(settled, 25, what="a 2/2/2 split across three client libraries", tick=poll_all([member]))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        description = admin.describe_consumer_groups([group])[group].result(WAIT_S)
        assert description.partition_assignor == "roundrobin"
        assert sorted(m.client_id for m in description.members) == ["aiokafka", "confluent", "kafka-python"]

        values = [f"x{i}".encode() for i in range(120)]
        produce(broker.bootstrap, topic, values, partitions=6)

        def consumed() -> bool:
            return len(member.messages) + sum(len(t.values) for t in threads) >= len(values)

        wait_until(consumed, 20, what="all messages", tick=lambda: _consume_and_commit(member))
        got = [m.value() for m in member.messages] + [v for t in threads for v in t.values]
        assert sorted(got) == sorted(values)
        wait_until(
            lambda: committed(broker.bootstrap, group, topic, 6) == {p: 20 for p in range(6)},
            10,
            what="every partition committed",
            tick=lambda: _consume_and_commit(member),
        )
    finally:
        for thread in threads:
            thread.stop.set()
        for thread in threads:
            thread.join(15)
        member.close()
    assert not any(t.error for t in threads), [t.error for t in threads]


def _consume_and_commit(member: Member) -> None:
    msg = member.poll(0.05)
    if msg is not None:
        member.consumer.commit(message=msg, asynchronous=False)
