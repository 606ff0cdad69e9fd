"""The offset store built from its collaborators alone (a real replica manager over logs in a
tmp dir, tests/replication/replicas.py), no broker: writes land in __consumer_offsets and replay."""

from __future__ import annotations

import asyncio

from strom.group import records as schema
from strom.group.offset_store import OFFSETS_TOPIC, OffsetStore
from strom.protocol.errors import ErrorCode
from strom.server.config import BrokerConfig
from tests.replication.replicas import make_replicas


def test_commits_are_written_to_the_groups_partition_and_replay_in_order(tmp_path):
    replicas = make_replicas(tmp_path)
    store = OffsetStore(
        replicas.manager, replicas.metadata, BrokerConfig.from_mapping({"offsets.topic.num.partitions": "7"})
    )
    assert store.num_partitions == 7  # the config's, until the topic exists
    replicas.lead(OFFSETS_TOPIC, partitions=3)
    assert store.num_partitions == 3  # then the topic's
    partition = store.partition_for("g")
    assert partition == schema.partition_for_group("g", 3)

    key = schema.encode_key(schema.OffsetKey("g", "orders", 0))
    entries = [
        (key, schema.encode_offset_value(schema.OffsetValue(41))),
        (key, schema.encode_offset_value(schema.OffsetValue(42))),
        (schema.encode_key(schema.GroupKey("g")), None),  # a tombstone
    ]
    appended: list[int] = []

    async def write() -> int:
        return await store.write(partition, entries, on_append=appended.append)

    assert asyncio.run(write()) == ErrorCode.NONE
    assert appended == [0]
    [batch] = OffsetStore.replay(replicas.manager.partitions[(OFFSETS_TOPIC, partition)])
    assert not batch.transactional and batch.marker is None
    assert [(k, None if v is None else schema.decode_offset_value(v).offset) for k, v in batch.records] == [
        (schema.OffsetKey("g", "orders", 0), 41),
        (schema.OffsetKey("g", "orders", 0), 42),
        (schema.GroupKey("g"), None),
    ]


def test_a_partition_this_broker_does_not_lead_is_not_coordinator(tmp_path):
    replicas = make_replicas(tmp_path)
    replicas.lead(OFFSETS_TOPIC, partitions=1)
    store = OffsetStore(replicas.manager, replicas.metadata, BrokerConfig.from_mapping({}))
    replicas.manager.fenced = True  # cut off from ZooKeeper: it leads nothing

    async def write() -> int:
        return await store.write(0, [(schema.encode_key(schema.GroupKey("g")), None)])

    assert asyncio.run(write()) == ErrorCode.NOT_COORDINATOR
