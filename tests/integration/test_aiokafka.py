"""aiokafka against a real strom broker: produce, consume with manual assignment, admin."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from tests.integration.clients import (
    CODECS,
    WAIT_S,
    aiokafka_consume,
    aiokafka_produce,
    assert_same,
    module_broker,  # noqa: F401 - fixture
    sample_messages,
    unique_topic,
)


def run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(module_broker, codec, idempotent):
    topic = unique_topic(f"aio-{codec}")
    sent = sample_messages()

    async def scenario():
        offsets = await aiokafka_produce(
            module_broker.bootstrap,
            topic,
            sent,
            acks="all",
            compression_type=None if codec == "none" else codec,
            enable_idempotence=idempotent,
        )
        assert offsets == list(range(len(sent)))
        return await aiokafka_consume(module_broker.bootstrap, topic, len(sent))

    assert_same(run(scenario()), sent)


def test_consume_from_offset(module_broker):
    topic = unique_topic("aio-seek")
    sent = sample_messages(8)

    async def scenario():
        await aiokafka_produce(module_broker.bootstrap, topic, sent, linger_ms=50)
        return await aiokafka_consume(module_broker.bootstrap, topic, 3, offset=5)

    assert_same(run(scenario()), sent[5:], first_offset=5)


def test_admin_create_list_delete(module_broker):
    names = [unique_topic("aio-admin"), unique_topic("aio-admin")]

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=module_broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
        await admin.start()
        try:
            created = await admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=1) for n in names])
            assert [(t[0], t[1]) for t in created.topic_errors] == [(n, 0) for n in names]
            assert set(names) <= set(await admin.list_topics())

            again = await admin.create_topics([NewTopic(names[0], num_partitions=1, replication_factor=1)])
            assert again.topic_errors[0][1] == TopicAlreadyExistsError.errno

            deleted = await admin.delete_topics(names)
            assert sorted((t[0], t[1]) for t in deleted.topic_error_codes) == sorted((n, 0) for n in names)
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while set(names) & set(await admin.list_topics()):
                assert asyncio.get_running_loop().time() < deadline, "deleted topics still listed"
                await asyncio.sleep(0.1)
        finally:
            await admin.close()

    run(scenario())
